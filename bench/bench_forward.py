#!/usr/bin/env python3
"""Forward-pass benchmark: one transformer block compiled by par vs PyTorch.

For every configuration (batch, seq, dmodel, heads) this script

  1. generates a one-layer pre-LN transformer block with
     examples/gen_transformer.py (--layers 1 --dp 1 --tp 1, f32) and compiles
     it with par-compile (--no-reference);
  2. writes random inputs (the activation and every parameter) as .npy;
  3. times the compiled block with

         par-run -n 1 DIR --repeat K --input arg0=... --input arg12=...

     (par-run's "best of K" after one warm-up run), and, interleaved with it
     in the same invocation, a PyTorch implementation of the same block
     (written below to match the generated MLIR op for op, float32,
     torch.no_grad, best of K after one warm-up run) in a fresh worker
     process;
  4. checks numerical agreement once: par's result0.npy (par-run --output)
     against the PyTorch output on the same inputs, and both against a
     float64 evaluation of the same formulas.

Threads: every run of both sides gets OMP_NUM_THREADS=T, OPENBLAS_NUM_THREADS=T
(MKL_NUM_THREADS=T) and the PyTorch worker calls torch.set_num_threads(T);
T is 1, then 2 (see --threads). par-run's mpirun would bind the rank to one
core, which would make T=2 meaningless, so par-run runs with
OMPI_MCA_hwloc_base_binding_policy=none (the PyTorch worker is not bound
either). Both sides also get OMP_WAIT_POLICY=passive unless it is already
set (libgomp's spinning barriers collapse on a shared 2-core machine).
par-run also gets `--threads T` when its --help lists that option.
The rounds alternate par, torch / torch, par (ABBA).

Peers: "torch" is the op-for-op translation of the generated MLIR (the
ratio par/torch and its target, <= 1.0 (issue 16), refer to it); "torch-nn" is the
idiomatic PyTorch block (F.layer_norm, F.gelu(approximate="tanh"),
F.softmax), reported for information.

The verdicts are informational: the exit status is 0 unless something fails
to run (model generation, par-compile, par-run, the PyTorch worker) or
PyTorch/numpy are missing (then 1).

PyTorch: Debian's python3-torch lives in /usr/bin/python3. If the running
interpreter cannot import torch and numpy, the script re-executes itself
with /usr/bin/python3 (or --python).

Example (from the repository root):
    /usr/bin/python3 bench/bench_forward.py
    /usr/bin/python3 bench/bench_forward.py --configs 4x64x256x8 --threads 1 \\
        --repeat 50 --rounds 5 --keep /tmp/bf
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

REPO = Path(__file__).resolve().parent.parent
GEN = REPO / "examples" / "gen_transformer.py"
DEFAULT_BIN = REPO / "build" / "bin"
DEFAULT_PYTHON = "/usr/bin/python3"

RATIO_TARGET = 1.0      # par / torch(op-for-op), best times (issue 16)
LN_EPS = 1.0e-5         # examples/gen_transformer.py's LN_EPS
MASK_VALUE = -1.0e9     # its MASK_VALUE["f32"]
ACCURACY_LIMIT = 1e-3   # informational: max |par - torch| on O(1) outputs

PARAM_NAMES = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b",
               "w1", "w2", "lnf_g", "lnf_b"]


# ---------------------------------------------------------------------------
# Helpers shared by the driver and the worker
# ---------------------------------------------------------------------------

class Config:
    def __init__(self, text):
        try:
            self.b, self.s, self.d, self.h = (int(v) for v in text.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                "config must look like BATCHxSEQxDMODELxHEADS, e.g. 4x64x256x8: %r"
                % text)
        if self.d % self.h:
            raise argparse.ArgumentTypeError("dmodel must be divisible by heads: %r"
                                             % text)
        self.f = 4 * self.d

    @property
    def name(self):
        return "%dx%dx%dx%d" % (self.b, self.s, self.d, self.h)

    def label(self):
        return "b%d s%d d%d h%d" % (self.b, self.s, self.d, self.h)

    def shapes(self):
        """Argument shapes in gen_transformer.py's order (arg0 .. arg12)."""
        b, s, d, f = self.b, self.s, self.d, self.f
        return [("x", (b, s, d)), ("ln1_g", (d,)), ("ln1_b", (d,)),
                ("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)),
                ("ln2_g", (d,)), ("ln2_b", (d,)), ("w1", (d, f)),
                ("w2", (f, d)), ("lnf_g", (d,)), ("lnf_b", (d,))]

    def gflop(self):
        """Multiply-adds x 2 of the matmuls and the two attention contractions."""
        b, s, d, f = self.b, self.s, self.d, self.f
        macs = b * s * d * d * 4 + b * s * d * f * 2 + 2 * b * s * s * d
        return 2.0 * macs / 1e9


def thread_env(threads, base=None):
    env = dict(os.environ if base is None else base)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    # libgomp's default active spin-wait makes a 2-thread PyTorch run 20-40x
    # slower as soon as another process holds one of the cores (seen on this
    # 2-core machine); par itself uses no OpenMP, so this only affects torch.
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


# ---------------------------------------------------------------------------
# PyTorch side (runs in the worker process)
# ---------------------------------------------------------------------------

def torch_block_ops(torch, p, cfg):
    """The generated MLIR, op for op (see examples/gen_transformer.py).

    Every linalg op becomes one torch op (or two where torch has no fused
    equivalent: the mask generic is mul + masked_fill); transposes are
    materialized like linalg.transpose; reductions are plain sums.
    """
    b, s, d, h = cfg.b, cfg.s, cfg.d, cfg.h
    dh = d // h
    inv_d = 1.0 / d
    scale = 1.0 / (dh ** 0.5)
    mask = p["_mask"]

    def layer_norm(x, g, beta):
        xsum = x.sum(-1, keepdim=True)              # sum over D
        centered = x - xsum * inv_d                 # x - sum/D
        vsum = (centered * centered).sum(-1, keepdim=True)
        rstd = torch.rsqrt(vsum * inv_d + LN_EPS)
        return centered * rstd * g + beta

    x = p["x"]
    n1 = layer_norm(x, p["ln1_g"], p["ln1_b"])
    x2 = n1.reshape(b * s, d)                       # collapse_shape

    def heads(w):
        y = torch.matmul(x2, w)                     # linalg.matmul
        return y.reshape(b, s, h, dh).permute(0, 2, 1, 3).contiguous()

    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    scores = torch.matmul(q, k.transpose(-1, -2))   # generic (b,h,s,t,d)
    masked = (scores * scale).masked_fill_(mask, MASK_VALUE)
    probs = torch.softmax(masked, dim=-1)           # linalg.softmax
    ctx = torch.matmul(probs, v)                    # generic (b,h,s,t,d)
    merged = ctx.permute(0, 2, 1, 3).contiguous().reshape(b * s, d)
    attn = torch.matmul(merged, p["wo"]).reshape(b, s, d)
    hres = x + attn                                 # residual

    n2 = layer_norm(hres, p["ln2_g"], p["ln2_b"])
    hid = torch.matmul(n2.reshape(b * s, d), p["w1"])
    cube = hid * hid * hid                          # gelu body, tanh approx.
    inner = hid + cube * 0.044715
    th = torch.tanh(inner * 0.7978845608028654)
    gel = (hid * 0.5) * (th + 1.0)
    mlp = torch.matmul(gel, p["w2"]).reshape(b, s, d)
    hres = hres + mlp                               # residual
    return layer_norm(hres, p["lnf_g"], p["lnf_b"])


def torch_block_nn(torch, p, cfg):
    """The same block written the idiomatic PyTorch way (fused kernels)."""
    F = torch.nn.functional
    b, s, d, h = cfg.b, cfg.s, cfg.d, cfg.h
    dh = d // h
    x = p["x"]
    n1 = F.layer_norm(x, (d,), p["ln1_g"], p["ln1_b"], LN_EPS)
    x2 = n1.reshape(b * s, d)
    q = torch.matmul(x2, p["wq"]).view(b, s, h, dh).transpose(1, 2)
    k = torch.matmul(x2, p["wk"]).view(b, s, h, dh).transpose(1, 2)
    v = torch.matmul(x2, p["wv"]).view(b, s, h, dh).transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / (dh ** 0.5))
    probs = F.softmax(scores.masked_fill_(p["_mask"], MASK_VALUE), dim=-1)
    ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b * s, d)
    hres = x + torch.matmul(ctx, p["wo"]).view(b, s, d)
    n2 = F.layer_norm(hres, (d,), p["ln2_g"], p["ln2_b"], LN_EPS)
    gel = F.gelu(torch.matmul(n2.reshape(b * s, d), p["w1"]), approximate="tanh")
    hres = hres + torch.matmul(gel, p["w2"]).view(b, s, d)
    return F.layer_norm(hres, (d,), p["lnf_g"], p["lnf_b"], LN_EPS)


def torch_blas_library():
    """The BLAS shared object this process has mapped (for the record)."""
    libs = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1]
                if "blas" in os.path.basename(path) or "mkl" in os.path.basename(path):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def worker_main(args):
    """--torch-worker: time the PyTorch block(s); print one JSON line."""
    import numpy as np
    import torch

    cfg = Config(args.config)
    torch.set_num_threads(args.threads)
    work = Path(args.workdir)
    arrays = [np.load(work / ("arg%d.npy" % i)) for i in range(len(cfg.shapes()))]

    def params(dtype):
        p = {name: torch.from_numpy(a).to(dtype)
             for (name, _), a in zip(cfg.shapes(), arrays)}
        # The causal mask: key t is in the future of query s (t > s).
        p["_mask"] = torch.ones(cfg.s, cfg.s, dtype=torch.bool).triu(1)
        return p

    p32 = params(torch.float32)
    variants = {"ops": torch_block_ops, "nn": torch_block_nn}
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__,
              "blas": torch_blas_library(), "variants": {}}
    with torch.no_grad():
        outs = {}
        for name in args.variants.split(","):
            fn = variants[name]
            out = fn(torch, p32, cfg)             # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                out = fn(torch, p32, cfg)
                times.append(time.perf_counter() - t0)
            outs[name] = out
            result["variants"][name] = {"best": min(times),
                                        "median": statistics.median(times)}
        if args.save_outputs:
            for name, out in outs.items():
                np.save(work / ("torch_%s.npy" % name), out.numpy())
            ref = torch_block_ops(torch, params(torch.float64), cfg)
            np.save(work / "ref_f64.npy", ref.numpy())
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

class Failure(Exception):
    pass


def run(cmd, env=None, what=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise Failure("%s failed (exit %d): %s\n%s%s"
                      % (what or os.path.basename(str(cmd[0])), proc.returncode,
                         " ".join(map(str, cmd)), proc.stdout, proc.stderr))
    return proc.stdout


def write_inputs(np, cfg, work, seed):
    """Inputs with realistic scales: x ~ U(-1,1), W ~ U(-1,1)/sqrt(fan_in),
    LN gains ~ 1 + U(-0.1,0.1), LN biases ~ U(-0.1,0.1)."""
    rng = np.random.default_rng(seed)
    for i, (name, shape) in enumerate(cfg.shapes()):
        u = rng.uniform(-1.0, 1.0, size=shape)
        if name.startswith("w"):
            a = u / np.sqrt(shape[0])
        elif name.endswith("_g"):
            a = 1.0 + 0.1 * u
        elif name.endswith("_b"):
            a = 0.1 * u
        else:
            a = u
        np.save(work / ("arg%d.npy" % i), np.ascontiguousarray(a, dtype=np.float32))


PAR_LINE = re.compile(r"rank 0: ([0-9.eE+-]+) s.*?\(best of (\d+); median ([0-9.eE+-]+) s\)")


PAR_RUN_THREADS = [False]   # par-run has --threads (set by main)


def detect_par_run_threads(bin_dir):
    try:
        proc = subprocess.run([str(bin_dir / "par-run"), "--help"],
                              capture_output=True, text=True, timeout=60)
        PAR_RUN_THREADS[0] = re.search(r"--threads\b", proc.stdout + proc.stderr) is not None
    except (OSError, subprocess.TimeoutExpired):
        PAR_RUN_THREADS[0] = False


def time_par(bin_dir, art, cfg, work, threads, repeat, output_dir=None):
    cmd = [str(bin_dir / "par-run"), "-n", "1", str(art), "--repeat", str(repeat)]
    if PAR_RUN_THREADS[0]:
        cmd += ["--threads", str(threads)]
    for i in range(len(cfg.shapes())):
        cmd += ["--input", "arg%d=%s" % (i, work / ("arg%d.npy" % i))]
    if output_dir:
        cmd += ["--output", str(output_dir)]
    env = thread_env(threads)
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    out = run(cmd, env=env, what="par-run")
    m = PAR_LINE.search(out)
    if not m:
        raise Failure("cannot parse par-run's output:\n" + out)
    return {"best": float(m.group(1)), "median": float(m.group(3))}


def time_torch(python, cfg, work, threads, repeat, variants, save_outputs):
    cmd = [python, str(Path(__file__).resolve()), "--torch-worker",
           "--config", cfg.name, "--workdir", str(work), "--threads", str(threads),
           "--repeat", str(repeat), "--variants", variants]
    if save_outputs:
        cmd.append("--save-outputs")
    out = run(cmd, env=thread_env(threads), what="PyTorch worker")
    return json.loads(out.strip().splitlines()[-1])


def ensure_numpy_torch(args, argv):
    """Re-exec with an interpreter that has torch and numpy if needed."""
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        return args.python or sys.executable
    except ImportError as e:
        other = args.python or DEFAULT_PYTHON
        if os.environ.get("PAR_BENCH_REEXEC") or \
           os.path.realpath(other) == os.path.realpath(sys.executable) or \
           not os.path.exists(other):
            print("bench_forward.py: error: cannot import torch/numpy (%s); run "
                  "it with an interpreter that has them, e.g. /usr/bin/python3 "
                  "(Debian's python3-torch)" % e, file=sys.stderr)
            sys.exit(1)
        env = dict(os.environ, PAR_BENCH_REEXEC="1")
        os.execve(other, [other, str(Path(__file__).resolve())] + list(argv), env)


def fmt_ms(t):
    return "%.2f" % (t * 1e3)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        description="Benchmark a par-compiled transformer block against PyTorch "
                    "on one rank.")
    ap.add_argument("--configs", default="4x64x256x8,8x128x512x8",
                    help="comma-separated BATCHxSEQxDMODELxHEADS "
                         "(default 4x64x256x8,8x128x512x8; ffn = 4*dmodel)")
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--repeat", type=int, default=20,
                    help="timed runs per measurement, after one warm-up (default 20)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved par/torch measurements per point; the "
                         "best is kept (default 3)")
    ap.add_argument("--bin-dir", default=str(DEFAULT_BIN),
                    help="directory of par-compile and par-run (default build/bin)")
    ap.add_argument("--python", default=None,
                    help="interpreter with torch+numpy (default: this one, else "
                         "/usr/bin/python3)")
    ap.add_argument("--seed", type=int, default=0, help="input seed")
    ap.add_argument("--keep", default=None,
                    help="keep models, artifacts (with --keep-temps: LLVM IR) "
                         "and inputs in this directory")
    ap.add_argument("--json", default=None, help="also write raw results here")
    # Worker mode (internal).
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    ap.add_argument("--variants", default="ops,nn", help=argparse.SUPPRESS)
    ap.add_argument("--save-outputs", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.torch_worker:
        args.threads = int(args.threads)
        return worker_main(args)

    python = ensure_numpy_torch(args, argv)
    import numpy as np

    try:
        configs = [Config(c) for c in args.configs.split(",") if c]
        threads = [int(t) for t in args.threads.split(",") if t]
    except (argparse.ArgumentTypeError, ValueError) as e:
        ap.error(str(e))
    bin_dir = Path(args.bin_dir)
    for tool in ("par-compile", "par-run"):
        if not (bin_dir / tool).exists():
            print("bench_forward.py: error: cannot find %s in %s (build par first)"
                  % (tool, bin_dir), file=sys.stderr)
            return 1
    detect_par_run_threads(bin_dir)

    if args.keep:
        root = Path(args.keep)
        root.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="par-bench-forward-")
        root = Path(cleanup.name)

    results = []
    try:
        # Preparation (untimed): models, artifacts, inputs.
        for cfg in configs:
            work = root / cfg.name
            work.mkdir(parents=True, exist_ok=True)
            model = work / "model.mlir"
            run([sys.executable, str(GEN), "--layers", "1", "--batch", str(cfg.b),
                 "--seq", str(cfg.s), "--dmodel", str(cfg.d), "--heads", str(cfg.h),
                 "--dp", "1", "--tp", "1", "-o", str(model)], what="gen_transformer.py")
            cmd = [str(bin_dir / "par-compile"), str(model), "-o", str(work / "art"),
                   "--no-reference"]
            if args.keep:
                cmd.append("--keep-temps")
            run(cmd, what="par-compile")
            write_inputs(np, cfg, work, args.seed)

        # Timing: for every point, `rounds` interleaved par / torch runs.
        info = {}
        for cfg in configs:
            work = root / cfg.name
            for t in threads:
                par_runs, ops_runs, nn_runs = [], [], []
                for r in range(args.rounds):
                    first = not par_runs and t == threads[0]

                    def run_par():
                        par_runs.append(time_par(bin_dir, work / "art", cfg, work, t,
                                                 args.repeat,
                                                 work / "par-out" if first else None))
                    # ABBA: par first in even rounds, torch first in odd ones.
                    if r % 2 == 0:
                        run_par()
                    w = time_torch(python, cfg, work, t, args.repeat, "ops,nn",
                                   save_outputs=first)
                    if r % 2 == 1:
                        run_par()
                    info = w
                    ops_runs.append(w["variants"]["ops"])
                    nn_runs.append(w["variants"]["nn"])
                    if w["threads"] != t:
                        raise Failure("PyTorch ran with %d threads, asked for %d"
                                      % (w["threads"], t))
                point = {"config": cfg.name, "threads": t, "gflop": cfg.gflop()}
                for key, runs in (("par", par_runs), ("torch", ops_runs),
                                  ("torch_nn", nn_runs)):
                    point[key] = {"best": min(x["best"] for x in runs),
                                  "median": statistics.median(x["median"] for x in runs),
                                  "rounds": runs}
                results.append(point)
                print("  measured %s threads=%d: par %s ms, torch %s ms"
                      % (cfg.label(), t, fmt_ms(point["par"]["best"]),
                         fmt_ms(point["torch"]["best"])), flush=True)

        # Accuracy, once per config (1st thread count, 1st round's outputs).
        accuracy = []
        for cfg in configs:
            work = root / cfg.name
            par_out = np.load(work / "par-out" / "result0.npy").astype(np.float64)
            t_ops = np.load(work / "torch_ops.npy").astype(np.float64)
            t_nn = np.load(work / "torch_nn.npy").astype(np.float64)
            ref = np.load(work / "ref_f64.npy")
            accuracy.append({
                "config": cfg.name,
                "par_vs_torch": float(np.max(np.abs(par_out - t_ops))),
                "par_vs_f64": float(np.max(np.abs(par_out - ref))),
                "torch_vs_f64": float(np.max(np.abs(t_ops - ref))),
                "torch_nn_vs_f64": float(np.max(np.abs(t_nn - ref))),
                "max_abs_output": float(np.max(np.abs(ref))),
            })
    except Failure as e:
        print("bench_forward.py: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        if cleanup:
            cleanup.cleanup()

    # Report.
    print()
    print("par      : %s (par-run -n 1 --repeat %d%s, best; mpirun binding off)"
          % (bin_dir / "par-run", args.repeat,
             " --threads T" if PAR_RUN_THREADS[0] else "; no --threads in this par-run"))
    print("torch    : %s %s, float32, no_grad, best of %d; BLAS %s"
          % (python, info.get("torch"), args.repeat,
             ", ".join(info.get("blas", [])) or "?"))
    print("threads  : OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = "
          "torch.set_num_threads = T; OMP_WAIT_POLICY=%s"
          % thread_env(1)["OMP_WAIT_POLICY"])
    print("rounds   : %d interleaved par/torch measurements per row (ABBA), best kept"
          % args.rounds)
    print("model    : 1 pre-LN block (examples/gen_transformer.py), f32, ffn=4*dmodel")
    print()
    hdr = ("%-18s %2s %8s %9s %9s %9s %9s %9s %10s  %s"
           % ("config", "T", "GFLOP", "par_ms", "par_med", "torch_ms", "torch_med",
              "nn_ms", "par/torch", "target <= %.1f" % RATIO_TARGET))
    print(hdr)
    print("-" * len(hdr))
    for pt in results:
        cfg = Config(pt["config"])
        ratio = pt["par"]["best"] / pt["torch"]["best"]
        pt["ratio"] = ratio
        pt["ratio_nn"] = pt["par"]["best"] / pt["torch_nn"]["best"]
        pt["verdict"] = "PASS" if ratio <= RATIO_TARGET else "FAIL"
        print("%-18s %2d %8.3f %9s %9s %9s %9s %9s %10.2f  %s"
              % (cfg.label(), pt["threads"], pt["gflop"], fmt_ms(pt["par"]["best"]),
                 fmt_ms(pt["par"]["median"]), fmt_ms(pt["torch"]["best"]),
                 fmt_ms(pt["torch"]["median"]), fmt_ms(pt["torch_nn"]["best"]),
                 ratio, pt["verdict"]))
    print()
    print("throughput (GFLOP/s, best times):")
    for pt in results:
        cfg = Config(pt["config"])
        print("  %-18s T=%d  par %6.1f   torch %6.1f   torch-nn %6.1f   "
              "par/torch-nn %.2f"
              % (cfg.label(), pt["threads"], pt["gflop"] / pt["par"]["best"],
                 pt["gflop"] / pt["torch"]["best"], pt["gflop"] / pt["torch_nn"]["best"],
                 pt["ratio_nn"]))
    print()
    print("accuracy (max abs error; same .npy inputs; f64 = the op-for-op "
          "formulas in float64):")
    for a in accuracy:
        cfg = Config(a["config"])
        ok = a["par_vs_torch"] <= ACCURACY_LIMIT
        a["verdict"] = "OK" if ok else "MISMATCH"
        print("  %-18s par vs torch %.3g   par vs f64 %.3g   torch vs f64 %.3g   "
              "torch-nn vs f64 %.3g   (|out| <= %.2f)  %s"
              % (cfg.label(), a["par_vs_torch"], a["par_vs_f64"], a["torch_vs_f64"],
                 a["torch_nn_vs_f64"], a["max_abs_output"], a["verdict"]))

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"repeat": args.repeat, "rounds": args.rounds,
                       "torch": info.get("torch"), "blas": info.get("blas"),
                       "results": results, "accuracy": accuracy}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
