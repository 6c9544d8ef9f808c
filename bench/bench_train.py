#!/usr/bin/env python3
"""Train-step benchmark: a GPT train step compiled by par vs PyTorch.

Two measurements, each a ratio of per-step times taken in the same
invocation (par and PyTorch runs interleaved, best of several rounds):

  (a) 1 rank: par's `gpt_step` (forward + backward + AdamW, built with
      par-autodiff and par-optimizer) against the same GPT written in
      PyTorch, doing forward + backward + torch.optim.AdamW step, on the
      same batch.  Target (issue 16): par / torch <= 1.0, at T = 1 and
      T = 2 threads (--threads 1,2, the default).
  (b) 8 ranks, data parallel: the same model generated with --dp 8 --tp 1,
      run by `par-run -n 8` (8 MPI ranks) against PyTorch
      DistributedDataParallel with the gloo backend on 8 processes
      (torch.multiprocessing, MASTER_ADDR=127.0.0.1), same global batch.
      Target (issue 16): par / torch <= 1.0.  par's data-parallel
      gradients go in par-compile's default buckets (bucket-bytes, DDP's
      25 MiB), as DDP's do.

Model: examples/gen_transformer.py --gpt (token one-hot matmul embedding +
position embedding, pre-LN blocks with causal multi-head attention and a
tanh-GELU MLP, no biases, final LayerNorm, LM head, mean cross-entropy).
Default size: 2 layers, dmodel 128, 4 heads, ffn 512, seq 64, vocab 96,
batch 8 on 1 rank and global batch 16 (2 per rank) on 8 ranks.

The PyTorch model is the same math with the same parameter layout (weights
[in, out], x @ W), written idiomatically: the token embedding is what the
generator emits (--embedding gather, its default: a gather of wte's rows in
par, F.embedding in torch; --embedding onehot: a one-hot matmul on both
sides, F.one_hot(...).float() @ wte in torch; a generator without the
--embedding flag only has the one-hot form), F.layer_norm
(eps 1e-5), q.k^T * 1/sqrt(Dh) with masked_fill(-1e9) for the causal mask,
F.softmax, F.gelu(approximate="tanh"), F.cross_entropy (mean).  Both sides
start from the same weights (written as .npy from the generator's par.init
scales and given to par-run with --input) and train on the same fixed batch
(windows of the repository's README.md, par-run's character tokenizer), and
their loss trajectories are compared as a check that the same computation is
timed (AdamW; tolerance 1e-3 relative, as in test/e2e/torch-parity.test).

Optimizer: AdamW lr=1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
on every parameter, on both sides (par-optimizer's defaults except lr).

Timing: par-run --steps N prints each step's time on rank 0 (the call of the
compiled step, feedback copies excluded); PyTorch times zero_grad + forward +
backward + optimizer step of each step on rank 0.  The first --warmup steps
are dropped; a run's per-step time is the median of the rest; the best run
of --rounds interleaved rounds (ABBA order) is kept.  Compilation, process start-up,
MPI / process-group initialisation are outside the timed region.

Threads: (a) runs with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = T on both
sides and torch.set_num_threads(T) (T = --threads, default 1,2); par-run
also gets `--threads T` when its --help lists that option (a par-run
without it runs what OpenBLAS threads on its own);
(b) uses one thread per process on both sides.  OMP_WAIT_POLICY=passive and
OMPI_MCA_hwloc_base_binding_policy=none as in bench_forward.py.

PyTorch 2.x (informational): the eager PyTorch of the project's frontend
venv (scripts/install-frontend.sh; --torch2 PYTHON to name another, --torch2
none to skip) runs the same worker in the same rounds of (a), as a third
column (par / torch2); the verdict is against Debian's torch 1.13.

Allocations: when par-run's --help lists --alloc-stats, one extra untimed
run per setup (--steps --warmup+2 --alloc-stats) reports par-run's
allocation statistics (allocation calls per step).

Also (1 rank, T = first thread count) a breakdown: par-run --repeat on the
`gpt` (loss only) and `gpt_grad` (loss + gradients) entries against torch's
forward (no_grad) and forward + backward, to see where par's step time goes.

The verdicts are informational: the exit status is 0 unless something fails
to run (then 1).  PyTorch: Debian's python3-torch lives in /usr/bin/python3;
the script re-executes itself there when the running interpreter lacks
torch or numpy.

Example (from the repository root):
    /usr/bin/python3 bench/bench_train.py
    /usr/bin/python3 bench/bench_train.py --rounds 5 --steps 30 --keep /tmp/bt
"""

import argparse
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEN = REPO / "examples" / "gen_transformer.py"
DEFAULT_BIN = REPO / "build" / "bin"
DEFAULT_PYTHON = "/usr/bin/python3"
INSTALL_FRONTEND = REPO / "scripts" / "install-frontend.sh"
CORPUS = REPO / "README.md"

TARGET_1 = 1.0          # (a) par / torch, 1 rank (issue 16), T = 1 and 2
TARGET_DP = 1.0         # (b) par / torch DDP, 8 ranks (issue 16)
LOSS_TOL = 1e-3         # relative, loss trajectories (AdamW)
LN_EPS = 1.0e-5
MASK_VALUE = -1.0e9
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01

LAYER_PARAMS = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b",
                "w1", "w2"]


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------

def thread_env(threads, base=None):
    env = dict(os.environ if base is None else base)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    return env


def param_names(layers):
    names = ["wte", "wpe"]
    for l in range(layers):
        names += ["l%d_%s" % (l, k) for k in LAYER_PARAMS]
    return names + ["lnf_g", "lnf_b", "whead"]


def char_token(c):
    """par-run's tokenizer: printable ASCII 32..126 -> 0..94, '\\n' -> 95,
    anything else -> 0."""
    if 32 <= c <= 126:
        return c - 32
    return 95 if c == 10 else 0


# ---------------------------------------------------------------------------
# PyTorch side (worker processes)
# ---------------------------------------------------------------------------

def torch_model(torch, cfg, params):
    """An nn.Module computing the GPT's mean cross-entropy, as
    examples/gen_transformer.py --gpt does."""
    import torch.nn.functional as F
    nn = torch.nn
    L, D, H, V = cfg["layers"], cfg["dmodel"], cfg["heads"], cfg["vocab"]
    Dh = D // H
    scale = 1.0 / math.sqrt(Dh)
    names = param_names(L)
    use_embedding = cfg.get("embedding") == "gather"

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.ParameterList(
                [nn.Parameter(torch.from_numpy(params[n]).clone()) for n in names])
            self.idx = {n: i for i, n in enumerate(names)}

        def w(self, name):
            return self.p[self.idx[name]]

        def forward(self, tokens, targets):
            B, S = tokens.shape
            if use_embedding:
                x = F.embedding(tokens, self.w("wte"))
            else:
                x = F.one_hot(tokens, V).to(torch.float32) @ self.w("wte")
            h = x + self.w("wpe")
            mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
            for l in range(L):
                w = lambda k: self.w("l%d_%s" % (l, k))  # noqa: E731
                n1 = F.layer_norm(h, (D,), w("ln1_g"), w("ln1_b"), LN_EPS)
                q = (n1 @ w("wq")).view(B, S, H, Dh).transpose(1, 2)
                k = (n1 @ w("wk")).view(B, S, H, Dh).transpose(1, 2)
                v = (n1 @ w("wv")).view(B, S, H, Dh).transpose(1, 2)
                s = (q @ k.transpose(-1, -2)) * scale
                s = s.masked_fill(mask, MASK_VALUE)
                p = F.softmax(s, dim=-1)
                ctx = (p @ v).transpose(1, 2).reshape(B, S, D)
                h = h + ctx @ w("wo")
                n2 = F.layer_norm(h, (D,), w("ln2_g"), w("ln2_b"), LN_EPS)
                h = h + F.gelu(n2 @ w("w1"), approximate="tanh") @ w("w2")
            hf = F.layer_norm(h, (D,), self.w("lnf_g"), self.w("lnf_b"), LN_EPS)
            logits = hf @ self.w("whead")
            return F.cross_entropy(logits.reshape(B * S, V), targets.reshape(B * S))

    return GPT()


def load_params(np, work, layers):
    return {n: np.load(work / ("%s.npy" % n)) for n in param_names(layers)}


def train_loop(torch, model, tokens, targets, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WD)
    times, losses = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return times, losses


def torch_blas_library():
    libs = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1]
                base = os.path.basename(path)
                if ("blas" in base or "mkl" in base) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    return libs


def worker_single(args):
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    cfg = json.loads(args.cfg)
    work = Path(args.workdir)
    model = torch_model(torch, cfg, load_params(np, work, cfg["layers"]))
    tokens = torch.from_numpy(np.load(work / "tokens.npy"))
    targets = torch.from_numpy(np.load(work / "targets.npy"))
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(),
           "blas": torch_blas_library()}
    out["times"], out["losses"] = train_loop(torch, model, tokens, targets, args.steps)
    if args.breakdown:
        # Forward only (no graph) and forward + backward, best of `steps`.
        fwd, fb = [], []
        with torch.no_grad():
            for _ in range(args.steps):
                t0 = time.perf_counter()
                model(tokens, targets).item()
                fwd.append(time.perf_counter() - t0)
        for _ in range(args.steps):
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            model(tokens, targets).backward()
            fb.append(time.perf_counter() - t0)
        out["forward"] = fwd
        out["grad"] = fb
    print(json.dumps(out))
    return 0


def ddp_proc(rank, world, port, args_dict, queue):
    import numpy as np
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cfg = args_dict["cfg"]
    work = Path(args_dict["workdir"])
    model = torch_model(torch, cfg, load_params(np, work, cfg["layers"]))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    tokens = np.load(work / "tokens.npy")
    targets = np.load(work / "targets.npy")
    per = tokens.shape[0] // world
    tk = torch.from_numpy(np.ascontiguousarray(tokens[rank * per:(rank + 1) * per]))
    tg = torch.from_numpy(np.ascontiguousarray(targets[rank * per:(rank + 1) * per]))
    dist.barrier()
    times, losses = train_loop(torch, ddp, tk, tg, args_dict["steps"])
    # Untimed: the global mean loss of every step (equal shards: mean of means).
    lt = torch.tensor(losses, dtype=torch.float64)
    dist.all_reduce(lt)
    if rank == 0:
        queue.put({"times": times, "losses": (lt / world).tolist(),
                   "torch": torch.__version__, "threads": torch.get_num_threads(),
                   "backend": dist.get_backend()})
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def worker_ddp(args):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    args_dict = {"cfg": json.loads(args.cfg), "workdir": args.workdir,
                 "steps": args.steps}
    mp.start_processes(ddp_proc, args=(args.ranks, free_port(), args_dict, queue),
                       nprocs=args.ranks, join=True, start_method="spawn")
    print(json.dumps(queue.get()))
    return 0


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def run(cmd, env=None, what=None, timeout=900, retry=False):
    """Runs cmd; with retry, a failure is retried once after 60 s (on a
    shared machine par's binaries may be briefly missing while someone
    rebuilds them)."""
    if retry:
        try:
            return run(cmd, env, what, timeout)
        except Failure as e:
            print("  %s failed, retrying in 60 s: %s"
                  % (what, str(e).strip().splitlines()[-1][:200]), flush=True)
            time.sleep(60)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("%s timed out: %s" % (what, " ".join(map(str, cmd))))
    except OSError as e:
        raise Failure("%s could not start: %s" % (what, e))
    if proc.returncode != 0:
        raise Failure("%s failed (exit %d): %s\n%s%s"
                      % (what or os.path.basename(str(cmd[0])), proc.returncode,
                         " ".join(map(str, cmd)), proc.stdout[-4000:],
                         proc.stderr[-4000:]))
    return proc.stdout


# par.init as an attribute (#par.init<uniform, 5.0e-02>, #par.init<ones>) or,
# from older generators, a string ("uniform:0.05", "ones").
INIT_RE = re.compile(r'%(\w+): tensor<([0-9x]+)xf32> \{par\.param, par\.init = '
                     r'(?:"([^"]+)"|#par\.init<(\w+)(?:, ([^>]+))?>)')


def write_inputs(np, model_mlir, work, cfg, batch, seed):
    """Initial weights from the generator's par.init scales, and one fixed
    batch of windows of CORPUS, as .npy."""
    rng = np.random.default_rng(seed)
    text = Path(model_mlir).read_text()
    found = {}
    for name, shape, old, kind, arg in INIT_RE.findall(text):
        init = old or (kind + (":" + arg if arg else ""))
        shape = [int(x) for x in shape.split("x")]
        if init == "ones":
            a = np.ones(shape)
        elif init == "zeros":
            a = np.zeros(shape)
        elif init.startswith("uniform:"):
            a = rng.uniform(-1, 1, size=shape) * float(init.split(":")[1])
        else:
            raise Failure("unknown par.init '%s' of %s" % (init, name))
        found[name] = np.ascontiguousarray(a, dtype=np.float32)
    names = param_names(cfg["layers"])
    if sorted(found) != sorted(names):
        raise Failure("unexpected parameters in %s: %s" % (model_mlir, sorted(found)))
    for n in names:
        np.save(work / ("%s.npy" % n), found[n])
    data = CORPUS.read_bytes()
    toks = np.array([char_token(c) for c in data], dtype=np.int64)
    seq = cfg["seq"]
    starts = rng.integers(0, len(toks) - seq - 1, size=batch)
    np.save(work / "tokens.npy", np.stack([toks[s:s + seq] for s in starts]))
    np.save(work / "targets.npy", np.stack([toks[s + 1:s + seq + 1] for s in starts]))
    return names


def build(bin_dir, cfg, batch, dp, work, keep_temps, compile_options=None):
    """Generates the GPT, builds its AdamW train step and compiles it;
    `compile_options`: par-compile --options (e.g. "bucket-bytes=0
    sink-reductions=false"), default none."""
    work.mkdir(parents=True, exist_ok=True)
    model = work / "model.mlir"
    run([sys.executable, str(GEN), "--gpt", "--layers", str(cfg["layers"]),
         "--batch", str(batch), "--seq", str(cfg["seq"]), "--dmodel", str(cfg["dmodel"]),
         "--heads", str(cfg["heads"]), "--vocab", str(cfg["vocab"]),
         "--dp", str(dp), "--tp", "1", "-o", str(model)]
        + (["--embedding", cfg["embedding"]] if cfg["embedding_flag"] else []),
        what="gen_transformer.py")
    step = work / "step.mlir"
    run([str(bin_dir / "par-opt"), str(model), "--par-autodiff",
         "--par-optimizer=optimizer=adamw lr=%g beta1=%g beta2=%g eps=%g weight-decay=%g"
         % (LR, BETAS[0], BETAS[1], EPS, WD), "-o", str(step)], what="par-opt", retry=True)
    cmd = [str(bin_dir / "par-compile"), str(step), "-o", str(work / "art"),
           "--no-reference"]
    if keep_temps:
        cmd.append("--keep-temps")
    if compile_options:
        cmd.append("--options=%s" % compile_options)
    run(cmd, what="par-compile", retry=True)
    return model


STEP_RE = re.compile(r"^step (\d+)/\d+\s+loss (\S+)\s+(\S+) s/step", re.M)
BEST_RE = re.compile(r"rank 0: ([0-9.eE+-]+) s.*?\(best of (\d+); median ([0-9.eE+-]+) s\)")


def par_inputs(work, names):
    args = ["--input", "arg0=%s" % (work / "tokens.npy"),
            "--input", "arg1=%s" % (work / "targets.npy")]
    for i, n in enumerate(names):
        args += ["--input", "arg%d=%s" % (i + 2, work / ("%s.npy" % n))]
    return args


# par-run's optional flags, as its --help lists them (filled by main).
PAR_RUN_FEATURES = {"threads": False, "alloc_stats": False}


def detect_par_run(bin_dir):
    """Which optional flags this par-run has: --threads T (the rank's
    threads, BLAS and generated loops) and --alloc-stats."""
    try:
        proc = subprocess.run([str(bin_dir / "par-run"), "--help"],
                              capture_output=True, text=True, timeout=60)
        text = proc.stdout + proc.stderr
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    PAR_RUN_FEATURES["threads"] = re.search(r"--threads\b", text) is not None
    PAR_RUN_FEATURES["alloc_stats"] = re.search(r"--alloc-stats\b", text) is not None


def par_thread_args(threads):
    return ["--threads", str(threads)] if PAR_RUN_FEATURES["threads"] else []


def time_par_steps(bin_dir, work, names, ranks, steps, threads):
    cmd = [str(bin_dir / "par-run"), "-n", str(ranks), str(work / "art"),
           "--entry", "gpt_step", "--steps", str(steps)] + \
        par_thread_args(threads) + par_inputs(work, names)
    out = run(cmd, env=thread_env(threads), what="par-run", retry=True)
    rows = STEP_RE.findall(out)
    if len(rows) != steps:
        raise Failure("cannot parse par-run's step lines:\n" + out[-3000:])
    return {"times": [float(r[2]) for r in rows], "losses": [float(r[1]) for r in rows]}


def time_par_repeat(bin_dir, work, names, entry, repeat, threads, ranks=1):
    cmd = [str(bin_dir / "par-run"), "-n", str(ranks), str(work / "art"), "--entry", entry,
           "--repeat", str(repeat)] + par_thread_args(threads) + par_inputs(work, names)
    out = run(cmd, env=thread_env(threads), what="par-run", retry=True)
    m = BEST_RE.search(out)
    if not m:
        raise Failure("cannot parse par-run's output:\n" + out[-3000:])
    return {"best": float(m.group(1)), "median": float(m.group(3))}


ALLOC_NUM_RE = re.compile(r"([0-9][0-9.,]*)\s*(?:allocation calls|allocations|allocs|malloc calls|mallocs)"
                          r"[^\n]*?per step|per step[^\n0-9]*([0-9][0-9.,]*)", re.I)


def alloc_stats(bin_dir, work, names, ranks, steps, threads):
    """par-run --alloc-stats on a short untimed run: the lines it prints
    about allocations, and allocation calls per step when a line says so."""
    cmd = [str(bin_dir / "par-run"), "-n", str(ranks), str(work / "art"),
           "--entry", "gpt_step", "--steps", str(steps), "--alloc-stats"] + \
        par_thread_args(threads) + par_inputs(work, names)
    env = thread_env(threads)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failure("par-run --alloc-stats could not run: %s" % e)
    if proc.returncode != 0:
        raise Failure("par-run --alloc-stats failed (exit %d): %s\n%s%s"
                      % (proc.returncode, " ".join(cmd), proc.stdout[-3000:],
                         proc.stderr[-3000:]))
    lines = [l.strip() for l in (proc.stdout + proc.stderr).splitlines()
             if re.search(r"alloc", l, re.I)]
    per_step = hits = None
    for l in lines:
        # par-run: buffer pool (rank 0): X system allocations and Y pool
        # hits per step over steps 2..N; ...
        m = re.search(r"([0-9.]+) system allocations and ([0-9.]+) pool hits "
                      r"per step", l)
        if m:
            per_step, hits = float(m.group(1)), float(m.group(2))
            break
    return {"lines": lines, "per_step": per_step, "hits": hits}


def torch2_python(choice):
    """The PyTorch 2.x interpreter: `choice`, or (auto) the frontend venv's
    python when scripts/install-frontend.sh --check says it is complete;
    None for none."""
    if choice == "none":
        return None
    if choice and choice != "auto":
        return choice
    try:
        if subprocess.run(["bash", str(INSTALL_FRONTEND), "--check"],
                          capture_output=True, timeout=60).returncode != 0:
            return None
        venv = subprocess.run(["bash", str(INSTALL_FRONTEND), "--print-path"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    py = Path(venv) / "bin" / "python"
    return str(py) if py.exists() else None


def time_torch(python, mode, cfg, work, steps, threads, ranks=1, breakdown=False):
    cmd = [python, str(Path(__file__).resolve()), "--worker", mode,
           "--cfg", json.dumps(cfg), "--workdir", str(work), "--steps", str(steps),
           "--threads", str(threads), "--ranks", str(ranks)]
    if breakdown:
        cmd.append("--breakdown")
    out = run(cmd, env=thread_env(threads), what="PyTorch %s worker" % mode)
    return json.loads(out.strip().splitlines()[-1])


def steady(times, warmup):
    rest = times[warmup:] or times
    return {"median": statistics.median(rest), "min": min(rest)}


def ensure_numpy_torch(args, argv):
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        return args.python or sys.executable
    except ImportError as e:
        other = args.python or DEFAULT_PYTHON
        if os.environ.get("PAR_BENCH_REEXEC") or \
           os.path.realpath(other) == os.path.realpath(sys.executable) or \
           not os.path.exists(other):
            print("bench_train.py: error: cannot import torch/numpy (%s); run it "
                  "with /usr/bin/python3 (Debian's python3-torch)" % e, file=sys.stderr)
            sys.exit(1)
        env = dict(os.environ, PAR_BENCH_REEXEC="1")
        os.execve(other, [other, str(Path(__file__).resolve())] + list(argv), env)


def ms(t):
    return "%.1f" % (t * 1e3)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        description="Benchmark par's GPT train step against PyTorch (1 rank) "
                    "and PyTorch DDP/gloo (8 ranks).")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dmodel", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--batch", type=int, default=8, help="batch on 1 rank (default 8)")
    ap.add_argument("--dp-batch", type=int, default=16,
                    help="global batch on the data-parallel ranks (default 16)")
    ap.add_argument("--ranks", type=int, default=8,
                    help="data-parallel ranks (default 8; 0 skips part (b))")
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated thread counts for part (a) (default 1,2)")
    ap.add_argument("--steps", type=int, default=20, help="train steps per run (default 20)")
    ap.add_argument("--warmup", type=int, default=3,
                    help="leading steps left out of the statistics (default 3)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved par/torch runs per point; best kept (default 3)")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="skip the forward / gradient breakdown")
    ap.add_argument("--embedding", choices=["gather", "onehot"], default=None,
                    help="token embedding of both sides: a gather (par: the "
                         "generator's --embedding gather; torch: F.embedding) or "
                         "a one-hot matmul (both sides). Default: the "
                         "generator's default (gather), or onehot for a "
                         "generator without --embedding")
    ap.add_argument("--bin-dir", default=str(DEFAULT_BIN))
    ap.add_argument("--compile-options", default=None,
                    help='par-compile --options for par\'s side, e.g. '
                         '"bucket-bytes=0 sink-reductions=false" (default: none, '
                         'the compiler\'s defaults)')
    ap.add_argument("--python", default=None)
    ap.add_argument("--torch2", default="auto",
                    help="PyTorch 2.x interpreter for the informational third "
                         "column of part (a): a python path, auto (default: the "
                         "frontend venv of scripts/install-frontend.sh when "
                         "installed) or none")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", default=None, help="keep the work directory here")
    ap.add_argument("--keep-temps", action="store_true",
                    help="par-compile --keep-temps (with --keep)")
    ap.add_argument("--json", default=None, help="also write raw results here")
    # Worker mode (internal).
    ap.add_argument("--worker", choices=["single", "ddp"], help=argparse.SUPPRESS)
    ap.add_argument("--cfg", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    ap.add_argument("--breakdown", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker == "single":
        args.threads = int(args.threads)
        return worker_single(args)
    if args.worker == "ddp":
        return worker_ddp(args)

    python = ensure_numpy_torch(args, argv)
    import numpy as np

    threads = [int(t) for t in args.threads.split(",") if t]
    bin_dir = Path(args.bin_dir)
    for tool in ("par-opt", "par-compile", "par-run"):
        if not (bin_dir / tool).exists():
            print("bench_train.py: error: cannot find %s in %s" % (tool, bin_dir),
                  file=sys.stderr)
            return 1
    detect_par_run(bin_dir)
    python2 = torch2_python(args.torch2)
    if args.ranks and args.dp_batch % args.ranks:
        ap.error("--dp-batch must be divisible by --ranks")
    try:
        gen_help = run([sys.executable, str(GEN), "--help"], what="gen_transformer.py")
    except Failure as e:
        print("bench_train.py: error: %s" % e, file=sys.stderr)
        return 1
    has_embedding_flag = "--embedding" in gen_help
    embedding = args.embedding or ("gather" if has_embedding_flag else "onehot")
    if embedding == "gather" and not has_embedding_flag:
        ap.error("this gen_transformer.py has no --embedding gather")
    cfg = {"layers": args.layers, "dmodel": args.dmodel, "heads": args.heads,
           "seq": args.seq, "vocab": args.vocab, "ffn": 4 * args.dmodel,
           "embedding": embedding, "embedding_flag": has_embedding_flag}

    if args.keep:
        root = Path(args.keep)
        root.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="par-bench-train-")
        root = Path(cleanup.name)

    points = []   # one per row of the table
    breakdown = None
    info = {}
    try:
        # Preparation (untimed).
        setups = [("1 rank", 1, args.batch, root / "r1")]
        if args.ranks:
            setups.append(("%d ranks dp" % args.ranks, args.ranks, args.dp_batch,
                           root / ("r%d" % args.ranks)))
        for _, ranks, batch, work in setups:
            t0 = time.time()
            model = build(bin_dir, cfg, batch, ranks, work, args.keep_temps,
                          args.compile_options)
            names = write_inputs(np, model, work, cfg, batch, args.seed)
            print("  built %s (batch %d, %d ranks) in %.1f s"
                  % (work.name, batch, ranks, time.time() - t0), flush=True)

        # (a) 1 rank, per thread count; (b) data parallel. Interleaved rounds.
        plan = [(label, ranks, batch, work, t)
                for label, ranks, batch, work in setups[:1] for t in threads]
        if args.ranks:
            label, ranks, batch, work = setups[1]
            plan.append((label, ranks, batch, work, 1))
        for label, ranks, batch, work, t in plan:
            par_runs, torch_runs, torch2_runs = [], [], []
            with2 = python2 is not None and ranks == 1
            for r in range(args.rounds):
                def run_par():
                    return time_par_steps(bin_dir, work, names, ranks, args.steps, t)

                def run_torch():
                    if ranks == 1:
                        return time_torch(python, "single", cfg, work, args.steps, t)
                    return time_torch(python, "ddp", cfg, work, args.steps, 1, ranks=ranks)

                def run_torch2():
                    return time_torch(python2, "single", cfg, work, args.steps, t)
                # ABBA order over the rounds (par, torch[, torch2], then the
                # reverse), so that drift in the machine's load affects the
                # sides alike.
                order = ["par", "torch"] + (["torch2"] if with2 else [])
                if r % 2:
                    order.reverse()
                got = {}
                for side in order:
                    got[side] = {"par": run_par, "torch": run_torch,
                                 "torch2": run_torch2}[side]()
                p, w = got["par"], got["torch"]
                for key in ("torch", "torch2"):
                    if key in got and got[key]["threads"] != t:
                        raise Failure("PyTorch (%s) ran with %d threads, asked for %d"
                                      % (key, got[key]["threads"], t))
                info.update({k: w[k] for k in ("torch", "blas", "backend") if k in w})
                p.update(steady(p["times"], args.warmup))
                w.update(steady(w["times"], args.warmup))
                par_runs.append(p)
                torch_runs.append(w)
                extra = ""
                if "torch2" in got:
                    w2 = got["torch2"]
                    info.update({"torch2": w2["torch"], "torch2_blas": w2["blas"]})
                    w2.update(steady(w2["times"], args.warmup))
                    torch2_runs.append(w2)
                    extra = ", torch2 %s ms/step" % ms(w2["median"])
                print("  %s T=%d round %d: par %s ms/step, torch %s ms/step%s"
                      % (label, t, r + 1, ms(p["median"]), ms(w["median"]), extra),
                      flush=True)
            bp = min(par_runs, key=lambda x: x["median"])
            bt = min(torch_runs, key=lambda x: x["median"])
            loss_err = max(abs(a - b) / abs(b) for a, b in
                           zip(par_runs[0]["losses"], torch_runs[0]["losses"]))
            t2 = {}
            if torch2_runs:
                b2 = min(torch2_runs, key=lambda x: x["median"])
                t2 = {"torch2": b2["median"], "torch2_min": b2["min"],
                      "torch2_rounds": [x["median"] for x in torch2_runs],
                      "torch2_losses": torch2_runs[0]["losses"],
                      "loss_err2": max(abs(a - b) / abs(b) for a, b in
                                       zip(par_runs[0]["losses"],
                                           torch2_runs[0]["losses"]))}
            points.append({"label": label, "ranks": ranks, "batch": batch, "threads": t,
                           "par": bp["median"], "par_min": bp["min"],
                           "torch": bt["median"], "torch_min": bt["min"],
                           "par_rounds": [x["median"] for x in par_runs],
                           "torch_rounds": [x["median"] for x in torch_runs],
                           "par_losses": par_runs[0]["losses"],
                           "torch_losses": torch_runs[0]["losses"],
                           "loss_first": torch_runs[0]["losses"][0],
                           "loss_last": torch_runs[0]["losses"][-1],
                           "loss_err": loss_err,
                           "target": TARGET_1 if ranks == 1 else TARGET_DP, **t2})

        # Allocation calls per step (untimed; par-run --alloc-stats).
        allocs = []
        if PAR_RUN_FEATURES["alloc_stats"]:
            for label, ranks, batch, work in setups:
                a = alloc_stats(bin_dir, work, names, ranks, args.warmup + 2, threads[0])
                a.update({"label": label, "ranks": ranks, "threads": threads[0]})
                allocs.append(a)

        # Breakdown (1 rank, first thread count): loss only, loss + grads.
        if not args.no_breakdown:
            t = threads[0]
            work = setups[0][3]
            reps = max(5, args.steps // 2)
            bd = {"par_gpt": [], "par_grad": [], "par_step_rep": [], "torch_fwd": [],
                  "torch_grad": []}
            for r in range(args.rounds):
                bd["par_gpt"].append(time_par_repeat(bin_dir, work, names, "gpt", reps, t)["median"])
                bd["par_grad"].append(time_par_repeat(bin_dir, work, names, "gpt_grad", reps, t)["median"])
                # The step timed like the entries above (same inputs every
                # run), so that step - grad is the optimizer's share.
                bd["par_step_rep"].append(time_par_repeat(bin_dir, work, names, "gpt_step",
                                                          reps, t)["median"])
                w = time_torch(python, "single", cfg, work, reps, t, breakdown=True)
                bd["torch_fwd"].append(statistics.median(w["forward"][1:]))
                bd["torch_grad"].append(statistics.median(w["grad"][1:]))
            breakdown = {k: min(v) for k, v in bd.items()}
            breakdown["threads"] = t
            breakdown["par_step"] = points[0]["par"]
            breakdown["torch_step"] = points[0]["torch"]
            if args.ranks:
                # par alone on the data-parallel ranks: rank 0's median of
                # `reps` runs of each entry (best of the rounds).
                label, ranks, batch, work = setups[1]
                dp = {"gpt": [], "gpt_grad": [], "gpt_step": []}
                for r in range(args.rounds):
                    for e in dp:
                        dp[e].append(time_par_repeat(bin_dir, work, names, e, reps, 1,
                                                     ranks=ranks)["median"])
                breakdown["dp"] = {k: min(v) for k, v in dp.items()}
                breakdown["dp_ranks"] = ranks
                breakdown["dp_torch_step"] = points[-1]["torch"]
    except Failure as e:
        print("bench_train.py: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        if cleanup:
            cleanup.cleanup()

    # Report.
    print()
    print("model    : GPT (examples/gen_transformer.py --gpt) layers=%d dmodel=%d heads=%d "
          "ffn=%d seq=%d vocab=%d, f32"
          % (cfg["layers"], cfg["dmodel"], cfg["heads"], cfg["ffn"], cfg["seq"], cfg["vocab"]))
    print("optimizer: AdamW lr=%g betas=%s eps=%g weight_decay=%g (both sides)"
          % (LR, BETAS, EPS, WD))
    print("par      : %s -n N --entry gpt_step --steps %d%s (rank 0's per-step time)%s"
          % (bin_dir / "par-run", args.steps,
             " --threads T" if PAR_RUN_FEATURES["threads"] else
             " (no --threads in this par-run: threads from the environment only)",
             "; par-compile --options=\"%s\"" % args.compile_options
             if args.compile_options else "; par-compile defaults (buckets: bucket-bytes, "
             "DDP's 25 MiB)"))
    print("embedding: %s (par: gen_transformer.py --embedding %s; torch: %s)"
          % (embedding, embedding, "F.embedding" if embedding == "gather"
             else "F.one_hot(tokens).float() @ wte"))
    print("torch    : %s %s; BLAS %s; DDP backend %s"
          % (python, info.get("torch"),
             ", ".join(info.get("blas", [])) or "?", info.get("backend", "-")))
    if info.get("torch2"):
        print("torch2   : %s %s (informational); BLAS %s"
              % (python2, info["torch2"], ", ".join(info.get("torch2_blas", [])) or
                 "(linked in)"))
    print("timing   : median of steps %d..%d per run, best of %d interleaved runs (ABBA)"
          % (args.warmup + 1, args.steps, args.rounds))
    print()
    hdr = ("%-12s %5s %3s %9s %9s %9s %9s %10s %9s %8s %9s  %s"
           % ("setup", "batch", "T", "par_ms", "par_min", "torch_ms", "torch_min",
              "par/torch", "rnd_ratio", "target", "loss_err", "verdict"))
    print(hdr)
    print("-" * len(hdr))
    for pt in points:
        pt["ratio"] = pt["par"] / pt["torch"]
        pt["verdict"] = "PASS" if pt["ratio"] <= pt["target"] else "FAIL"
        pt["loss_ok"] = pt["loss_err"] <= LOSS_TOL
        pt["round_ratios"] = [a / b for a, b in zip(pt["par_rounds"], pt["torch_rounds"])]
        print("%-12s %5d %3d %9s %9s %9s %9s %10.2f %9.2f %8s %9.1e  %s"
              % (pt["label"], pt["batch"], pt["threads"], ms(pt["par"]), ms(pt["par_min"]),
                 ms(pt["torch"]), ms(pt["torch_min"]), pt["ratio"],
                 statistics.median(pt["round_ratios"]),
                 "<= %.1f" % pt["target"], pt["loss_err"], pt["verdict"]))
    print()
    print("par/torch = best par run / best torch run (the verdict); rnd_ratio = median "
          "over the rounds of par/torch within a round")
    rows2 = [pt for pt in points if "torch2" in pt]
    if rows2:
        print()
        print("PyTorch 2.x eager (informational, same rounds):")
        for pt in rows2:
            pt["ratio2"] = pt["par"] / pt["torch2"]
            print("  %-12s T=%d  torch2 %s ms (min %s)   par/torch2 %.2f   torch1.13/torch2 "
                  "%.2f   loss_err %.1e"
                  % (pt["label"], pt["threads"], ms(pt["torch2"]), ms(pt["torch2_min"]),
                     pt["ratio2"], pt["torch"] / pt["torch2"], pt["loss_err2"]))
    print()
    print("throughput (tokens/s, global):")
    for pt in points:
        toks = pt["batch"] * cfg["seq"]
        print("  %-12s T=%d  par %8.0f   torch %8.0f"
              % (pt["label"], pt["threads"], toks / pt["par"], toks / pt["torch"]))
    print()
    print("loss trajectories (same weights, same fixed batch, %d AdamW steps; "
          "max rel difference, tolerance %.0e):" % (args.steps, LOSS_TOL))
    for pt in points:
        print("  %-12s T=%d  torch %.4f -> %.4f   par vs torch %.1e  %s"
              % (pt["label"], pt["threads"], pt["loss_first"], pt["loss_last"],
                 pt["loss_err"], "OK" if pt["loss_ok"] else "MISMATCH"))
    if PAR_RUN_FEATURES["alloc_stats"]:
        print()
        print("allocations (par-run --alloc-stats, %d steps, untimed):" % (args.warmup + 2))
        for a in allocs:
            print("  %-12s T=%d  system allocations per step: %s "
                  "(allocations served by the pool: %s)"
                  % (a["label"], a["threads"],
                     "%g" % a["per_step"] if a["per_step"] is not None else "?",
                     "%g" % a["hits"] if a.get("hits") is not None else "?"))
            for l in a["lines"][:8]:
                print("      " + l)
    else:
        print()
        print("allocations: this par-run has no --alloc-stats")
    if breakdown:
        b = breakdown
        print()
        print("breakdown, 1 rank, T=%d (ms; par-run --repeat median / torch median, "
              "best of %d):" % (b["threads"], args.rounds))
        print("  %-34s %9s %9s %8s" % ("", "par", "torch", "ratio"))
        rows = [("forward + loss (gpt / no_grad)", b["par_gpt"], b["torch_fwd"]),
                ("forward + backward (gpt_grad)", b["par_grad"], b["torch_grad"]),
                ("backward only (difference)", b["par_grad"] - b["par_gpt"],
                 b["torch_grad"] - b["torch_fwd"]),
                ("optimizer (step - grad)", b["par_step_rep"] - b["par_grad"],
                 b["torch_step"] - b["torch_grad"]),
                ("full train step (--repeat)", b["par_step_rep"], b["torch_step"]),
                ("full train step (--steps)", b["par_step"], b["torch_step"])]
        for name, p, q in rows:
            print("  %-34s %9s %9s %8s" % (name, ms(p), ms(q),
                                           "%.2f" % (p / q) if q > 0 else "-"))
        if "dp" in b:
            d = b["dp"]
            print()
            print("breakdown, par on %d ranks (ms; rank 0, par-run --repeat median, best "
                  "of %d; torch DDP step for reference):" % (b["dp_ranks"], args.rounds))
            print("  %-34s %9s" % ("forward + loss (gpt)", ms(d["gpt"])))
            print("  %-34s %9s" % ("forward + backward (gpt_grad)", ms(d["gpt_grad"])))
            print("  %-34s %9s" % ("full train step (gpt_step)", ms(d["gpt_step"])))
            print("  %-34s %9s" % ("torch DDP full train step", ms(b["dp_torch_step"])))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cfg": cfg, "points": points, "breakdown": breakdown,
                       "allocs": allocs, "par_run_features": PAR_RUN_FEATURES,
                       "info": info, "steps": args.steps, "warmup": args.warmup,
                       "rounds": args.rounds}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
