#!/usr/bin/env python3
"""par against its peers at the sizes users bring (issue 39), one run, ratios.

Rows (each side trains the same GPT: examples/gen_transformer.py --gpt, the
math of bench_train.py's PyTorch model; AdamW lr 1e-3, betas (0.9, 0.999),
eps 1e-8, weight decay 0.01):

  gpt2   GPT-2 124M's shape: 12 layers, d 768, 12 heads, S 256, batch 4,
         vocabulary 50,257 (the untied LM head makes it 163M parameters)
  small  4 layers, d 512, 8 heads, the same S, batch and vocabulary

  1 rank, --threads T (default 2): par-run -n 1 against PyTorch eager and
  torch.compile (inductor) in the frontend venv (torch.set_num_threads(T)),
  and JAX jit (--jax PYTHON: a venv with jax; JAX stays out of CI), all from
  the same weights and batch (.npy files par-run reads with --input);
  their losses are compared step by step with par's (relative).

  GEMMs (first; --no-gemm skips): par's GEMM GFLOP/s against torch.matmul's
  at GPT-2's five shapes, T threads, best of 20 each.

  8 ranks (--ranks8, gpt2 only): dp2 x tp2 x pp2 (2 stages, 1F1B over 4
  micro-batches, global batch 8), par-run -n 8 --pipeline on the same 2
  cores, against one PyTorch process (T threads) at the same global batch.

A side's step time is the median of its steps after the first --warmup
(default 2). Process start, compilation and the first steps are outside.
The verdicts are informational; the exit status is 1 only when something
fails to run.

usage (repository root; the frontend venv is scripts/install-frontend.sh's):
  python3 bench/bench_peers.py --torch ~/.cache/par/venv-*/bin/python \\
      [--jax ~/.cache/par/jax-venv/bin/python] [--rows gpt2,small] [--ranks8]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import bench_train as bt  # noqa: E402  (the GPT in PyTorch, inputs, build)

BIN = REPO / "build" / "bin"
ROWS = {
    "gpt2": {"layers": 12, "dmodel": 768, "heads": 12, "seq": 256, "vocab": 50257, "batch": 4},
    "small": {"layers": 4, "dmodel": 512, "heads": 8, "seq": 256, "vocab": 50257, "batch": 4},
}
TARGETS = {"compile": 0.9, "jax": 0.7, "ranks8": 1.5, "gemm": 0.9}
# (M, N, K) of GPT-2 124M's GEMMs at 1,024 tokens: the q/k/v/o projections,
# the MLP's two, the LM head; and one attention head's scores (S=256).
GEMMS = [(1024, 768, 768), (1024, 3072, 768), (1024, 768, 3072),
         (1024, 50257, 768), (256, 256, 64)]
MATMUL_MLIR = """func.func @mm(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) outs(%f : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""


def cfg_of(row):
    c = dict(ROWS[row])
    c.update({"ffn": 4 * c["dmodel"], "embedding": "gather", "embedding_flag": True})
    return c


def run(cmd, env=None, timeout=3600):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=env, timeout=timeout)
    if p.returncode != 0:
        raise bt.Failure("%s failed (%d):\n%s%s" % (" ".join(map(str, cmd[:4])), p.returncode,
                                                  p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def steady(times, warmup):
    rest = times[warmup:] or times[-1:]
    return statistics.median(rest)


# --------------------------------------------------------------------------
# Workers (run under the peer's interpreter)
# --------------------------------------------------------------------------

def worker_torch(args):
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    cfg = json.loads(args.cfg)
    work = Path(args.workdir)
    model = bt.torch_model(torch, cfg, bt.load_params(np, work, cfg["layers"]))
    if args.mode == "compile":
        model = torch.compile(model)
    tokens = torch.from_numpy(np.load(work / "tokens.npy"))
    targets = torch.from_numpy(np.load(work / "targets.npy"))
    times, losses = bt.train_loop(torch, model, tokens, targets, args.steps)
    print(json.dumps({"times": times, "losses": losses, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))
    return 0


def worker_gemm(args):
    """torch.matmul's best of 20 at each of GEMMS (f32, T threads)."""
    import torch
    torch.set_num_threads(args.threads)
    out = []
    for M, N, K in GEMMS:
        a, b = torch.randn(M, K), torch.randn(K, N)
        a @ b
        best = 1e9
        for _ in range(20):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        out.append(best)
    print(json.dumps({"seconds": out}))
    return 0


def gemms(args, root):
    """par's GEMM (a compiled one-matmul program, par-run --repeat 20: the
    program call alone, its zero fill included) against torch.matmul."""
    par = []
    for M, N, K in GEMMS:
        work = root / ("mm%dx%dx%d" % (M, N, K))
        work.mkdir(parents=True, exist_ok=True)
        (work / "mm.mlir").write_text(MATMUL_MLIR.format(M=M, N=N, K=K))
        run([BIN / "par-compile", work / "mm.mlir", "-o", work / "art", "--no-reference"])
        out = run([BIN / "par-run", "-n", 1, work / "art", "--repeat", 20, "--threads",
                   args.threads], env=thread_env(args.threads))
        par.append(float(re.search(r"rank 0: ([0-9.e+-]+) s", out).group(1)))
    torch = json.loads(run([args.torch, __file__, "--worker", "gemm", "--threads", args.threads],
                           env=thread_env(args.threads)).strip().splitlines()[-1])["seconds"]
    print("\n== GEMMs (f32, %d threads): par (par-run --repeat 20, best) vs torch.matmul (best of 20)"
          % args.threads)
    print("   %-18s %10s %10s %9s" % ("M x N x K", "par GF/s", "torch GF/s", "par/torch"))
    for (M, N, K), p, t in zip(GEMMS, par, torch):
        fl = 2.0 * M * N * K
        r = (fl / p) / (fl / t)
        print("   %-18s %10.0f %10.0f %9.2f %s" % ("%dx%dx%d" % (M, N, K), fl / p / 1e9,
                                                 fl / t / 1e9, r,
                                                 ">= %.1f %s" % (TARGETS["gemm"], "ok" if r >= TARGETS["gemm"] else "MISSED")))


def worker_jax(args):
    """The same GPT and AdamW in JAX (jit of the whole step)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true "
                          "intra_op_parallelism_threads=%d" % args.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np
    cfg = json.loads(args.cfg)
    work = Path(args.workdir)
    L, D, H = cfg["layers"], cfg["dmodel"], cfg["heads"]
    Dh = D // H
    names = bt.param_names(L)
    params = {n: jnp.asarray(np.load(work / ("%s.npy" % n))) for n in names}
    tokens = jnp.asarray(np.load(work / "tokens.npy"))
    targets = jnp.asarray(np.load(work / "targets.npy"))

    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + bt.LN_EPS) * g + b

    def loss_fn(p):
        B, S = tokens.shape
        h = p["wte"][tokens] + p["wpe"]
        mask = jnp.triu(jnp.ones((S, S), bool), 1)
        for l in range(L):
            w = lambda k: p["l%d_%s" % (l, k)]  # noqa: E731
            n1 = ln(h, w("ln1_g"), w("ln1_b"))
            split = lambda t: t.reshape(B, S, H, Dh).transpose(0, 2, 1, 3)  # noqa: E731
            q, k, v = split(n1 @ w("wq")), split(n1 @ w("wk")), split(n1 @ w("wv"))
            s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(Dh))
            s = jnp.where(mask, bt.MASK_VALUE, s)
            a = jax.nn.softmax(s, -1)
            h = h + (a @ v).transpose(0, 2, 1, 3).reshape(B, S, D) @ w("wo")
            n2 = ln(h, w("ln2_g"), w("ln2_b"))
            h = h + jax.nn.gelu(n2 @ w("w1"), approximate=True) @ w("w2")
        logits = ln(h, p["lnf_g"], p["lnf_b"]) @ p["whead"]
        lp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(lp, targets[..., None], -1).mean()

    b1, b2 = bt.BETAS

    @jax.jit
    def step(p, m, v, t):
        loss, g = jax.value_and_grad(loss_fn)(p)
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree.map(lambda p, m, v: p * (1 - bt.LR * bt.WD)
                         - bt.LR * (m / c1) / (jnp.sqrt(v / c2) + bt.EPS), p, m, v)
        return p, m, v, loss

    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    times, losses = [], []
    for s in range(1, args.steps + 1):
        t0 = time.perf_counter()
        params, m, v, loss = step(params, m, v, float(s))
        loss = float(loss.block_until_ready())
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    print(json.dumps({"times": times, "losses": losses, "jax": jax.__version__}))
    return 0


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def thread_env(threads):
    """T threads for every side, and nothing else forced: no
    OMP_WAIT_POLICY (bench_train.py's passive policy makes every OpenMP
    runtime sleep between parallel regions: par's GPT-2 step 2.97 -> 3.85
    s, and PyTorch's slower too), no binding policy (par-run binds its
    ranks itself)."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


def peer(python, kind, mode, cfg, work, steps, threads):
    env = thread_env(threads)
    out = run([python, __file__, "--worker", kind, "--mode", mode, "--cfg", json.dumps(cfg),
               "--workdir", work, "--steps", steps, "--threads", threads], env=env)
    return json.loads(out.strip().splitlines()[-1])


def par_steps(cmd, env=None):
    out = run(cmd, env=env)
    rows = bt.STEP_RE.findall(out)
    return {"times": [float(r[2]) for r in rows], "losses": [float(r[1]) for r in rows],
            "blas": (re.search(r"par-run: BLAS: (.*)", out) or [None, "?"])[1]}


def one_rank(row, args, root):
    import numpy as np
    cfg = cfg_of(row)
    work = root / row
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    model = bt.build(BIN, cfg, cfg["batch"], 1, work, False)
    names = bt.write_inputs(np, model, work, cfg, cfg["batch"], 0)
    # Tokens over the whole vocabulary (write_inputs' are characters).
    rng = np.random.default_rng(1)
    toks = rng.integers(0, cfg["vocab"], size=(cfg["batch"], cfg["seq"] + 1))
    np.save(work / "tokens.npy", toks[:, :-1].astype(np.int64))
    np.save(work / "targets.npy", toks[:, 1:].astype(np.int64))
    print("  %s: built in %.1f s" % (row, time.time() - t0), flush=True)
    res = {}
    res["par"] = par_steps([BIN / "par-run", "-n", 1, work / "art", "--entry", "gpt_step",
                            "--steps", args.steps, "--threads", args.threads]
                           + bt.par_inputs(work, names), env=thread_env(args.threads))
    res["eager"] = peer(args.torch, "torch", "eager", cfg, work, args.steps, args.threads)
    res["compile"] = peer(args.torch, "torch", "compile", cfg, work, args.steps, args.threads)
    if args.jax:
        res["jax"] = peer(args.jax, "jax", "jit", cfg, work, args.steps, args.threads)
    return res


def ranks8(args, root):
    cfg = cfg_of("gpt2")
    work = root / "ranks8"
    work.mkdir(parents=True, exist_ok=True)
    m, gb = 4, 8
    model = work / "model.mlir"
    run([sys.executable, bt.GEN, "--gpt", "--layers", cfg["layers"], "--batch", gb // m,
         "--seq", cfg["seq"], "--dmodel", cfg["dmodel"], "--heads", cfg["heads"],
         "--vocab", cfg["vocab"], "--dp", 2, "--tp", 2, "--pp", 2, "-o", model])
    run([BIN / "par-compile", model, "-o", work / "art", "--no-reference",
         "--options=optimizer=adamw lr=0.001 stages=2 micro-batches=%d" % m])
    res = {"par": par_steps([BIN / "par-run", "-n", 8, work / "art", "--pipeline",
                             "--data", bt.CORPUS, "--steps", args.steps8],
                            env=thread_env(1))}
    # One PyTorch process at the same global batch, from the same init scales.
    import numpy as np
    one = root / "ranks8-torch"
    one.mkdir(parents=True, exist_ok=True)
    c1 = dict(cfg, batch=gb)
    gen1 = one / "model.mlir"
    run([sys.executable, bt.GEN, "--gpt", "--layers", cfg["layers"], "--batch", gb,
         "--seq", cfg["seq"], "--dmodel", cfg["dmodel"], "--heads", cfg["heads"],
         "--vocab", cfg["vocab"], "--dp", 1, "--tp", 1, "-o", gen1])
    bt.write_inputs(np, gen1, one, c1, gb, 0)
    res["eager"] = peer(args.torch, "torch", "eager", c1, one, args.steps8, args.threads)
    return res


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch", required=False, help="python with torch 2.x (the frontend venv)")
    ap.add_argument("--jax", default=None, help="python with jax (optional)")
    ap.add_argument("--rows", default="gpt2,small")
    ap.add_argument("--ranks8", action="store_true", help="also dp2 x tp2 x pp2 on 8 ranks")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--steps8", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--no-gemm", action="store_true", help="skip the GEMM table")
    ap.add_argument("--worker", choices=["torch", "jax", "gemm"], help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--cfg", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "torch":
        return worker_torch(args)
    if args.worker == "jax":
        return worker_jax(args)
    if args.worker == "gemm":
        return worker_gemm(args)
    if not args.torch:
        import glob
        found = sorted(glob.glob(os.path.expanduser("~/.cache/par/venv-*/bin/python")))
        if not found:
            ap.error("--torch PYTHON (the frontend venv: scripts/install-frontend.sh)")
        args.torch = found[0]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="par-peers-"))
    status = 0
    try:
        if not args.no_gemm:
            gemms(args, root)
        for row in [r for r in args.rows.split(",") if r]:
            res = one_rank(row, args, root)
            c = ROWS[row]
            p = steady(res["par"]["times"], args.warmup)
            print("\n== %s (L=%d d=%d S=%d batch %d vocab %d), 1 rank, %d threads"
                  % (row, c["layers"], c["dmodel"], c["seq"], c["batch"], c["vocab"], args.threads))
            print("   par BLAS: %s" % res["par"]["blas"])
            print("   %-16s %9s %9s %8s %13s" % ("system", "step s", "par/x", "target", "max loss diff"))
            print("   %-16s %9.3f" % ("par", p))
            for key, label in (("eager", "torch eager"), ("compile", "torch.compile"), ("jax", "JAX jit")):
                if key not in res:
                    continue
                t = steady(res[key]["times"], args.warmup)
                diff = max(abs(a - b) / abs(b) for a, b in zip(res["par"]["losses"], res[key]["losses"]))
                tgt = TARGETS.get(key)
                verdict = "" if tgt is None else ("<= %.1f %s" % (tgt, "ok" if p / t <= tgt else "MISSED"))
                print("   %-16s %9.3f %9.2f %8s %13.1e" % (label, t, p / t, verdict, diff))
            print("   losses: par %s" % ", ".join("%.6f" % x for x in res["par"]["losses"]))
            print("           torch %s" % ", ".join("%.6f" % x for x in res["eager"]["losses"]))
        if args.ranks8:
            res = ranks8(args, root)
            p = steady(res["par"]["times"], 1)
            t = steady(res["eager"]["times"], 1)
            print("\n== gpt2 on 8 ranks dp2 x tp2 x pp2 (1F1B, 4 micro-batches, global batch 8) "
                  "vs one torch process (%d threads), same 2 cores" % args.threads)
            print("   par %.3f s, torch %.3f s: par/torch %.2f (target <= %.1f %s)"
                  % (p, t, p / t, TARGETS["ranks8"], "ok" if p / t <= TARGETS["ranks8"] else "MISSED"))
    except bt.Failure as e:
        print("bench_peers.py: error: %s" % e, file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
