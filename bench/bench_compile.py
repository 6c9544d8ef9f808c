#!/usr/bin/env python3
"""Compile-time benchmark for par-opt on generated transformer stacks.

For every (layer count, mesh) configuration this script generates a model
with examples/gen_transformer.py, runs

    par-opt <flags> MODEL.mlir -o /dev/null

a few times and keeps the best wall-clock time.  It then reports:

  * the time per layer of every configuration;
  * layer scaling: t(96 layers) / t(48 layers), target <= 2.3 (i.e. roughly
    linear in program size);
  * mesh scaling: t(65536 devices) / t(8 devices) for the 48-layer model,
    target <= 1.1 (compile time should not depend on the mesh size).

With --gpt-step it times par-compile instead, on the GPT train step of
bench/bench_train.py (examples/gen_transformer.py --gpt, 2 layers, dmodel
128, 4 heads, seq 64, vocab 96; 1 rank with batch 8 and 8-rank data
parallel with batch 16):

    par-compile MODEL.mlir --options="optimizer=adamw lr=... " \
        -o ART --no-reference

(autodiff, the AdamW step, SPMD partitioning, lowering, LLVM's opt -O3 and
llc: what a user waits for).  With --base-bin-dir a baseline build's
par-compile (e.g. today's main, built in another worktree) compiles the
same models in the same run, interleaved in ABBA order, and the script
reports new / base (best wall-clock time; CPU time of the children too,
less sensitive to a shared machine's load), target <= 1.5 (issue 16).

With --depth (issue 25) it times par-compile, cold, on the GPT AdamW train
step against depth, in one run:

    python3 examples/gen_transformer.py --gpt --layers L --dmodel D --seq S \
        --heads D/64 --batch 4 --vocab 96 --dp 1 --tp 1 -o MODEL.mlir
    par-compile MODEL.mlir -o ART --no-reference --options="optimizer=adamw" \
        [--no-cache when its --help lists it] [-j N with --jobs N]

for L in {2, 4, 8, 12, 24} at D=768, S=256 (--layers, --dmodel, --seq), plus
the row L=4, D=512, S=128 (--extra; the issue's JAX comparison).  Per row
and build: wall time (best of --reps, default 1), CPU time and peak RSS
(os.wait4's ru_maxrss) of par-compile, and the artifact's step time
(`par-run -n 1 ART --entry gpt_step --steps K --threads T --data README.md`,
median of steps 2..K, each build's own par-run; --steps 0 skips it).  With
--base-bin-dir the baseline build compiles and runs the same models,
interleaved (ABBA over the rows), and new/base is reported for time, RSS
and step time (--base-max-layers N skips the baseline above N layers).
Peers, optional, on the same model and sizes: torch.compile (the frontend
venv's python, or --torch-python; first call of the compiled train step,
zero_grad + forward + backward + AdamW step, minus an eager step; inductor
caches cold unless --torch-cache user) and JAX jit (--jax-python; the same
step in one jit, first call minus the second); par/peer ratios.  Verdicts:
t(L=24)/t(L=2) <= 2; L=12 D=768 S=256 <= 15 s and <= 1 GB peak RSS; step
time new/base <= 1.05; par / JAX at L=4 D=512 S=128 <= 2.  A par-compile
past --timeout is recorded as timed out and the run goes on.

The PASS/FAIL verdicts are informational: the exit status is 0 unless
generation or a compiler fails (then 1, with the tool's stderr; --depth
prints what it measured before the failure).

Example:
    python3 bench/bench_compile.py
    python3 bench/bench_compile.py --par-opt build/bin/par-opt --flags "--par-spmd"
    # The GPT train step through par-compile, against a baseline build:
    python3 bench/bench_compile.py --gpt-step --base-bin-dir ../wt-base/build/bin
    # Compile time against depth (issue 25), against a baseline build, with
    # JAX as a peer (torch.compile from the frontend venv when installed):
    python3 bench/bench_compile.py --depth --base-bin-dir ../wt-base/build/bin \
        --base-max-layers 12 --jax-python /work/jax-venv/bin/python --json out.json
    # Harness self-test without par (plain MLIR, no sharding annotations):
    python3 bench/bench_compile.py --par-opt /usr/lib/llvm-22/bin/mlir-opt \\
        --flags "" --no-par

Standard library only.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEN = REPO / "examples" / "gen_transformer.py"

# Targets for the two scaling ratios (informational).
LAYER_RATIO_SLACK = 1.15  # t(L2)/t(L1) <= (L2/L1) * slack; 96/48 -> 2.3
MESH_RATIO_TARGET = 1.1
# --gpt-step: par-compile time of the GPT train step, new / base (issue 16).
GPT_RATIO_TARGET = 1.5
# bench_train.py's model and optimizer.
GPT_CFG = {"layers": 2, "dmodel": 128, "heads": 4, "seq": 64, "vocab": 96}
GPT_SETUPS = [("1 rank", 1, 8), ("8 ranks dp", 8, 16)]   # (label, dp, batch)
GPT_OPTIONS = ("optimizer=adamw lr=0.001 beta1=0.9 beta2=0.999 eps=1e-08 "
               "weight-decay=0.01")
# --depth (issue 25): the GPT AdamW train step at d=768, S=256 for these
# layer counts, plus the L=4, d=512, S=128 row (its JAX comparison).
DEPTH_LAYERS = [2, 4, 8, 12, 24]
DEPTH_DMODEL = 768
DEPTH_SEQ = 256
DEPTH_BATCH = 4          # gen_transformer.py's default batch
DEPTH_VOCAB = 96         # bench_train.py's; par-run's character tokenizer
DEPTH_EXTRA = "4x512x128"
DEPTH_OPTIONS = "optimizer=adamw"
# Issue 25's targets (informational).
FLAT_TARGET = 2.0        # t(L=24) / t(L=2), same width
GPT2_TARGET_S = 15.0     # L=12, d=768, S=256: par-compile seconds, cold
GPT2_TARGET_RSS_MB = 1000.0  # ... and peak RSS (1 GB)
STEP_SLACK = 1.05        # step time new / base
JAX_TARGET = 2.0         # par-compile / JAX jit compile, L=4 d=512 S=128


def parse_mesh(text):
    """'256x256' -> (256, 256) as (dp, tp)."""
    try:
        dp, tp = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("mesh must look like DPxTP, e.g. 2x4: %r"
                                         % text)
    return dp, tp


def parse_args(argv):
    # Let `--flags --par-spmd` work: argparse would otherwise take a value
    # starting with "-" for an option, so glue it into `--flags=--par-spmd`.
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):
        if a == "--flags":
            argv[i:i + 2] = ["--flags=" + argv[i + 1]]
            break
    ap = argparse.ArgumentParser(
        description="Benchmark par-opt compile time on transformer stacks.")
    ap.add_argument("--par-opt", default=str(REPO / "build" / "bin" / "par-opt"),
                    help="compiler binary (default: build/bin/par-opt)")
    ap.add_argument("--flags", default="--par-spmd",
                    help='pass flags, one shell-quoted string '
                         '(default: "--par-spmd"; "" for none)')
    ap.add_argument("--layers", default=None,
                    help="comma-separated layer counts (default 12,48,96; "
                         "--depth: 2,4,8,12,24)")
    ap.add_argument("--meshes", default="2x4,256x256",
                    help="comma-separated DPxTP meshes (default 2x4,256x256)")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions per configuration; best is kept (default 3; "
                         "--depth: 1)")
    # Model size: every dim divisible by 256 so the model fits dp=256, tp=256.
    ap.add_argument("--batch", type=int, default=None,
                    help="batch (default 256; --depth: %d)" % DEPTH_BATCH)
    ap.add_argument("--seq", type=int, default=None,
                    help="sequence length (default 128; --depth: %d)" % DEPTH_SEQ)
    ap.add_argument("--dmodel", type=int, default=None,
                    help="model width (default 1024; --depth: %d)" % DEPTH_DMODEL)
    ap.add_argument("--heads", type=int, default=None,
                    help="attention heads (default 256; --depth: dmodel/64)")
    ap.add_argument("--ffn", type=int, default=None,
                    help="MLP hidden size (default 4096; --depth: 4*dmodel)")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--no-par", action="store_true",
                    help="generate models without par annotations (to test the "
                         "harness with plain mlir-opt)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="per-run timeout in seconds (default 1800; --depth: a "
                         "par-compile that times out is recorded as such and the "
                         "run goes on)")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the generated models to DIR and keep them")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the raw results as JSON to FILE")
    ap.add_argument("--gpt-step", action="store_true",
                    help="time par-compile on bench_train.py's GPT train step "
                         "(1 rank and 8-rank dp) instead of par-opt on "
                         "transformer stacks")
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"),
                    help="--gpt-step, --depth: the build whose par-compile is "
                         "timed (default build/bin)")
    ap.add_argument("--base-bin-dir", metavar="DIR",
                    help="--gpt-step, --depth: a baseline build's bin directory; "
                         "its par-compile is timed in the same run (interleaved) "
                         "and new/base is reported (--gpt-step: target <= %.1f)"
                         % GPT_RATIO_TARGET)
    dg = ap.add_argument_group(
        "--depth (issue 25): par-compile time, peak RSS and step time of the GPT "
        "AdamW train step against depth")
    dg.add_argument("--depth", action="store_true",
                    help="par-compile (cold) on the GPT AdamW train step for each "
                         "layer count at one width, plus the --extra rows; peak "
                         "RSS, the artifact's step time, flatness in depth, "
                         "optional baseline and torch.compile / JAX peers")
    dg.add_argument("--vocab", type=int, default=DEPTH_VOCAB,
                    help="vocabulary (default %d: par-run's character tokenizer)"
                         % DEPTH_VOCAB)
    dg.add_argument("--extra", default=DEPTH_EXTRA,
                    help="additional LxDxS rows, comma-separated (default %s, the "
                         "issue's JAX comparison; 'none' for none)" % DEPTH_EXTRA)
    dg.add_argument("--base-max-layers", type=int, default=None, metavar="N",
                    help="skip the baseline for rows with more than N layers "
                         "(default: no limit)")
    dg.add_argument("--compile-options", default=DEPTH_OPTIONS,
                    help='par-compile --options (default "%s")' % DEPTH_OPTIONS)
    dg.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                    help="pass -j N to a par-compile whose --help lists -j "
                         "(default: none, the compiler's default)")
    dg.add_argument("--steps", type=int, default=4,
                    help="par-run --steps K for each artifact's step time "
                         "(median of steps 2..K; default 4; 0: no step time)")
    dg.add_argument("--step-rounds", type=int, default=1, metavar="R",
                    help="par-run runs per artifact, interleaved; the best "
                         "run's median is kept (default 1)")
    dg.add_argument("--threads", type=int, default=1,
                    help="threads of par-run (--threads) and of the torch "
                         "peer's eager steps (default 1)")
    dg.add_argument("--torch-python", default="auto", metavar="PYTHON",
                    help="python with torch >= 2 for the torch.compile peer: a "
                         "path, auto (default: the frontend venv of "
                         "scripts/install-frontend.sh when installed) or none")
    dg.add_argument("--torch-cache", choices=["cold", "user"], default="cold",
                    help="torch.compile's inductor cache: cold (default: a fresh "
                         "directory, every kernel built by the C++ compiler, as "
                         "par-compile --no-cache) or user (the user's directory: "
                         "kernels an earlier run built are reused); its FX graph "
                         "and AOT autograd caches are off either way")
    dg.add_argument("--jax-python", default=None, metavar="PYTHON",
                    help="python with jax for the JAX jit peer (default: none)")
    dg.add_argument("--peer-max-layers", type=int, default=None, metavar="N",
                    help="skip the peers for rows with more than N layers "
                         "(default: no limit)")
    args = ap.parse_args(argv)
    if args.base_bin_dir and not (args.gpt_step or args.depth):
        ap.error("--base-bin-dir needs --gpt-step or --depth")
    if args.gpt_step and args.depth:
        ap.error("--gpt-step and --depth are separate modes")
    if args.depth:
        defaults = {"layers": ",".join(map(str, DEPTH_LAYERS)), "reps": 1,
                    "batch": DEPTH_BATCH, "seq": DEPTH_SEQ, "dmodel": DEPTH_DMODEL}
    else:
        defaults = {"layers": "12,48,96", "reps": 3, "batch": 256, "seq": 128,
                    "dmodel": 1024, "heads": 256, "ffn": 4096}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    try:
        args.layer_list = sorted({int(v) for v in args.layers.split(",") if v})
    except ValueError:
        ap.error("--layers must be comma-separated integers: %r" % args.layers)
    args.mesh_list = [parse_mesh(m) for m in args.meshes.split(",") if m]
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    if args.depth:
        try:
            args.extra_list = [] if args.extra.strip().lower() in ("", "none") else \
                [tuple(int(x) for x in e.lower().split("x")) for e in args.extra.split(",")
                 if e]
        except ValueError:
            args.extra_list = None
        if args.extra_list is None or any(len(e) != 3 for e in args.extra_list):
            ap.error("--extra takes LxDxS rows, e.g. 4x512x128: %r" % args.extra)
        if args.step_rounds < 1:
            ap.error("--step-rounds must be >= 1")
        if args.steps < 0 or args.steps == 1:
            ap.error("--steps must be 0 (no step time) or >= 2 (the first step "
                     "is left out)")
    return args


def generate(args, layers, mesh, path):
    """Write the model for (layers, mesh) to `path` with gen_transformer.py."""
    dp, tp = mesh
    cmd = [sys.executable, str(GEN), "--layers", str(layers),
           "--batch", str(args.batch), "--seq", str(args.seq),
           "--dmodel", str(args.dmodel), "--heads", str(args.heads),
           "--ffn", str(args.ffn), "--dtype", args.dtype,
           "--dp", str(dp), "--tp", str(tp), "-o", str(path)]
    if args.no_par:
        cmd.append("--no-par")
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print("error: model generation failed: %s\n%s"
              % (shlex.join(cmd), res.stderr), file=sys.stderr)
        sys.exit(1)


def time_compile(args, path):
    """Run the compiler `reps` times on `path`; return the list of times."""
    cmd = [args.par_opt] + shlex.split(args.flags) + [str(path), "-o", os.devnull]
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        try:
            res = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True,
                                 timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print("error: timed out after %gs: %s" % (args.timeout, shlex.join(cmd)),
                  file=sys.stderr)
            sys.exit(1)
        elapsed = time.perf_counter() - start
        if res.returncode != 0:
            print("error: compiler failed (exit %d): %s\n%s"
                  % (res.returncode, shlex.join(cmd), res.stderr), file=sys.stderr)
            sys.exit(1)
        times.append(elapsed)
    return times


def verdict(ok):
    return "PASS" if ok else "FAIL"


def run_timed(cmd, timeout):
    """Runs cmd; returns (wall seconds, children's user + sys seconds)."""
    r0 = os.times()
    start = time.perf_counter()
    try:
        res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("error: timed out after %gs: %s" % (timeout, shlex.join(cmd)),
              file=sys.stderr)
        sys.exit(1)
    wall = time.perf_counter() - start
    r1 = os.times()
    if res.returncode != 0:
        print("error: compiler failed (exit %d): %s\n%s"
              % (res.returncode, shlex.join(cmd), res.stderr), file=sys.stderr)
        sys.exit(1)
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return wall, cpu


def gpt_step_main(args):
    """par-compile time of bench_train.py's GPT step, optionally against a
    baseline build (ABBA), with the ratio new / base."""
    builds = [("new", Path(args.bin_dir))]
    if args.base_bin_dir:
        builds.append(("base", Path(args.base_bin_dir)))
    for _, d in builds:
        tool = d / "par-compile"
        if not (tool.is_file() and os.access(tool, os.X_OK)):
            print("error: par-compile not found or not executable: %s" % tool,
                  file=sys.stderr)
            return 1
    c = GPT_CFG
    print("compiler : par-compile MODEL.mlir --options=\"%s\" -o ART --no-reference"
          % GPT_OPTIONS)
    for name, d in builds:
        print("  %-5s  : %s" % (name, d / "par-compile"))
    print("model    : GPT (examples/gen_transformer.py --gpt) layers=%d dmodel=%d "
          "heads=%d ffn=%d seq=%d vocab=%d, f32"
          % (c["layers"], c["dmodel"], c["heads"], 4 * c["dmodel"], c["seq"], c["vocab"]))
    print("reps     : best of %d%s" % (args.reps, ", new and base interleaved (ABBA)"
                                         if len(builds) > 1 else ""))
    try:
        load = os.getloadavg()
        print("load     : %.2f %.2f %.2f at the start" % load)
    except OSError:
        pass
    print()
    if args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="par-bench-gpt-")
        workdir = Path(tmp.name)
    rows = []
    try:
        models = {}
        for label, dp, batch in GPT_SETUPS:
            path = workdir / ("gpt_dp%d.mlir" % dp)
            cmd = [sys.executable, str(GEN), "--gpt", "--layers", str(c["layers"]),
                   "--batch", str(batch), "--seq", str(c["seq"]),
                   "--dmodel", str(c["dmodel"]), "--heads", str(c["heads"]),
                   "--vocab", str(c["vocab"]), "--dp", str(dp), "--tp", "1",
                   "-o", str(path)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print("error: model generation failed: %s\n%s"
                      % (shlex.join(cmd), res.stderr), file=sys.stderr)
                return 1
            models[dp] = path
        hdr = "%-12s %5s  %-5s %9s %9s %9s" % ("setup", "batch", "build", "best_s",
                                                 "median_s", "cpu_s")
        print(hdr)
        print("-" * len(hdr))
        for label, dp, batch in GPT_SETUPS:
            times = {name: [] for name, _ in builds}
            cpus = {name: [] for name, _ in builds}
            for r in range(args.reps):
                order = builds if r % 2 == 0 else list(reversed(builds))
                for name, d in order:
                    art = workdir / ("art_%s_dp%d" % (name, dp))
                    wall, cpu = run_timed(
                        [str(d / "par-compile"), str(models[dp]),
                         "--options=%s" % GPT_OPTIONS, "-o", str(art),
                         "--no-reference"], args.timeout)
                    times[name].append(wall)
                    cpus[name].append(cpu)
            row = {"label": label, "dp": dp, "batch": batch, "times_s": times,
                   "cpu_s": cpus}
            for name, _ in builds:
                row[name] = {"best_s": min(times[name]),
                             "median_s": statistics.median(times[name]),
                             "cpu_s": min(cpus[name])}
                print("%-12s %5d  %-5s %9.2f %9.2f %9.2f"
                      % (label, batch, name, row[name]["best_s"],
                         row[name]["median_s"], row[name]["cpu_s"]), flush=True)
            rows.append(row)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if len(builds) > 1:
        print()
        for row in rows:
            ratio = row["new"]["best_s"] / row["base"]["best_s"]
            cpu_ratio = row["new"]["cpu_s"] / row["base"]["cpu_s"]
            row["ratio"], row["cpu_ratio"] = ratio, cpu_ratio
            row["pass"] = ratio <= GPT_RATIO_TARGET
            print("compile time new/base, GPT step, %-10s: %.2f (cpu %.2f)  "
                  "(target <= %.1f)  %s"
                  % (row["label"], ratio, cpu_ratio, GPT_RATIO_TARGET,
                     verdict(row["pass"])))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"builds": {n: str(d) for n, d in builds},
                       "options": GPT_OPTIONS, "cfg": GPT_CFG, "rows": rows},
                      fh, indent=2)
    return 0


# ---------------------------------------------------------------------------
# --depth (issue 25): compile time, peak RSS and step time against depth
# ---------------------------------------------------------------------------

class Failure(Exception):
    pass


STEP_RE = re.compile(r"^step (\d+)/\d+\s+loss (\S+)\s+(\S+) s/step", re.M)


def run_measured(cmd, timeout, env=None):
    """Runs cmd with its output in temporary files and reaps it with
    os.wait4: returns {wall_s, cpu_s (user + sys of the child and the
    children it waited for), maxrss_mb (peak RSS: ru_maxrss, KiB on Linux,
    the largest of the process and its waited-for descendants), rc,
    timed_out, out, err}.  A run past `timeout` seconds is killed (its
    process group) and reported as timed out."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
        except OSError as e:
            raise Failure("cannot start %s: %s" % (cmd[0], e))
        killed = []
        lock = threading.Lock()

        def kill():
            with lock:
                if proc.returncode is None:
                    killed.append(True)
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            with lock:
                timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                "maxrss_mb": ru.ru_maxrss / 1024.0, "rc": proc.returncode,
                "timed_out": bool(killed),
                "out": out.read().decode(errors="replace"),
                "err": err.read().decode(errors="replace")}


def tool_help(tool):
    try:
        res = subprocess.run([str(tool), "--help"], capture_output=True, text=True,
                             timeout=120)
        return res.stdout + res.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    return env


def frontend_python():
    """The frontend venv's python (scripts/install-frontend.sh), or None."""
    script = REPO / "scripts" / "install-frontend.sh"
    try:
        if subprocess.run(["bash", str(script), "--check"], capture_output=True,
                          timeout=60).returncode != 0:
            return None
        venv = subprocess.run(["bash", str(script), "--print-path"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    py = Path(venv) / "bin" / "python"
    return str(py) if py.exists() else None


# The torch.compile peer: bench_train.py's PyTorch GPT (the same math as
# gen_transformer.py --gpt, F.embedding for the gather), AdamW, one train
# step = zero_grad + forward + backward + optimizer step.  compile time =
# the first call of torch.compile(step) minus an eager step (the median of
# eager steps 2..4); a fresh inductor cache directory and no FX graph /
# AOT autograd cache, so the compile is cold.  Prints one JSON line.
TORCH_PEER = r'''
import json, math, os, sys, time
cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg["bench_dir"])
import numpy as np
import torch
import bench_train as bt
torch.set_num_threads(cfg["threads"])
L, D, S, V, B = cfg["layers"], cfg["dmodel"], cfg["seq"], cfg["vocab"], cfg["batch"]
F = cfg["ffn"]
rng = np.random.default_rng(0)
shapes = {"wte": (V, D), "wpe": (S, D), "lnf_g": (D,), "lnf_b": (D,), "whead": (D, V)}
for l in range(L):
    for k, shp in (("ln1_g", (D,)), ("ln1_b", (D,)), ("wq", (D, D)), ("wk", (D, D)),
                   ("wv", (D, D)), ("wo", (D, D)), ("ln2_g", (D,)), ("ln2_b", (D,)),
                   ("w1", (D, F)), ("w2", (F, D))):
        shapes["l%d_%s" % (l, k)] = shp
params = {}
for n in bt.param_names(L):
    if n.endswith("_g"):
        a = np.ones(shapes[n])
    elif n.endswith("_b"):
        a = np.zeros(shapes[n])
    else:
        a = rng.uniform(-1, 1, size=shapes[n]) * 0.02
    params[n] = np.ascontiguousarray(a, dtype=np.float32)
mcfg = {"layers": L, "dmodel": D, "heads": cfg["heads"], "vocab": V,
        "embedding": "gather"}
tokens = torch.from_numpy(rng.integers(0, V, size=(B, S)))
targets = torch.from_numpy(rng.integers(0, V, size=(B, S)))

def make():
    model = bt.torch_model(torch, mcfg, params)
    opt = torch.optim.AdamW(model.parameters(), lr=bt.LR, betas=bt.BETAS, eps=bt.EPS,
                            weight_decay=bt.WD)
    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        return loss
    return step

def timed(f):
    t0 = time.perf_counter()
    loss = f()
    loss.item()
    return time.perf_counter() - t0

eager = make()
eager_times = [timed(eager) for _ in range(4)]
eager_s = sorted(eager_times[1:])[1]
cstep = torch.compile(make())
first = timed(cstep)
second = [timed(cstep) for _ in range(3)]
print(json.dumps({"version": torch.__version__, "eager_step_s": eager_s,
                  "first_call_s": first, "compiled_step_s": sorted(second)[1],
                  "compile_s": first - eager_s}))
'''

# The JAX peer: the same GPT (gather embedding, pre-LN blocks, causal
# attention with a -1e9 mask, tanh GELU, final LayerNorm, LM head, mean
# cross-entropy) and AdamW (torch's: decoupled weight decay), the whole
# train step in one jax.jit; compile time = first call minus the second
# (the median of calls 2..4).  Prints one JSON line.
JAX_PEER = r'''
import json, math, sys, time
cfg = json.loads(sys.argv[1])
import numpy as np
import jax
import jax.numpy as jnp
for opt, val in (("jax_enable_compilation_cache", False),):
    try:
        jax.config.update(opt, val)
    except Exception:
        pass
L, D, S, V, B, H = (cfg[k] for k in ("layers", "dmodel", "seq", "vocab", "batch", "heads"))
F = cfg["ffn"]
Dh = D // H
LR, B1, B2, EPS, WD, LN_EPS = 1e-3, 0.9, 0.999, 1e-8, 0.01, 1e-5
rng = np.random.default_rng(0)
def u(*shape):
    return jnp.asarray(rng.uniform(-1, 1, size=shape).astype(np.float32) * 0.02)
params = {"wte": u(V, D), "wpe": u(S, D), "lnf_g": jnp.ones(D), "lnf_b": jnp.zeros(D),
          "whead": u(D, V),
          "layers": [{"ln1_g": jnp.ones(D), "ln1_b": jnp.zeros(D), "wq": u(D, D),
                      "wk": u(D, D), "wv": u(D, D), "wo": u(D, D),
                      "ln2_g": jnp.ones(D), "ln2_b": jnp.zeros(D),
                      "w1": u(D, F), "w2": u(F, D)} for _ in range(L)]}
tokens = jnp.asarray(rng.integers(0, V, size=(B, S)).astype(np.int32))
targets = jnp.asarray(rng.integers(0, V, size=(B, S)).astype(np.int32))

def ln(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + LN_EPS) * g + b

def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

def loss_fn(p, tokens, targets):
    h = p["wte"][tokens] + p["wpe"]
    mask = jnp.triu(jnp.ones((S, S), bool), 1)
    for w in p["layers"]:
        n1 = ln(h, w["ln1_g"], w["ln1_b"])
        q, k, v = ((n1 @ w[n]).reshape(B, S, H, Dh).transpose(0, 2, 1, 3)
                   for n in ("wq", "wk", "wv"))
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(Dh))
        s = jnp.where(mask, -1e9, s)
        a = jax.nn.softmax(s, axis=-1)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
        h = h + ctx @ w["wo"]
        n2 = ln(h, w["ln2_g"], w["ln2_b"])
        h = h + gelu(n2 @ w["w1"]) @ w["w2"]
    logits = ln(h, p["lnf_g"], p["lnf_b"]) @ p["whead"]
    lp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(lp, targets[..., None], axis=-1).mean()

@jax.jit
def step(p, m, v, t, tokens, targets):
    loss, g = jax.value_and_grad(loss_fn)(p, tokens, targets)
    t = t + 1
    m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    p = jax.tree_util.tree_map(
        lambda p, m, v: p * (1 - LR * WD) - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS),
        p, m, v)
    return p, m, v, t, loss

zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
state = (params, zeros, zeros, jnp.float32(0))
times = []
for _ in range(4):
    t0 = time.perf_counter()
    out = step(*state, tokens, targets)
    jax.block_until_ready(out)
    times.append(time.perf_counter() - t0)
    state = out[:4]
second = sorted(times[1:])[1]
print(json.dumps({"version": jax.__version__, "first_call_s": times[0],
                  "step_s": second, "compile_s": times[0] - second,
                  "loss": float(out[4])}))
'''


def run_peer(name, python, program, cfg, timeout, threads, torch_cache="cold"):
    """Runs a peer's inline program; returns its JSON, or {"error": ...}.
    torch_cache: cold (inductor's caches in a fresh directory: every kernel
    is generated and built by the C++ compiler) or user (the user's inductor
    cache directory: kernels whose source an earlier run built are reused;
    the FX graph and AOT autograd caches are off either way)."""
    with tempfile.TemporaryDirectory(prefix="par-bench-peer-") as cache:
        env = thread_env(threads)
        env.update({"TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"})
        if torch_cache == "cold":
            env.update({"TORCHINDUCTOR_CACHE_DIR": cache,
                        "TRITON_CACHE_DIR": os.path.join(cache, "triton")})
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        r = run_measured([python, "-c", program, json.dumps(cfg)], timeout, env=env)
    if r["timed_out"]:
        return {"error": "timed out after %gs" % timeout}
    if r["rc"] != 0:
        return {"error": "exit %d: %s" % (r["rc"], (r["err"] or r["out"])[-2000:])}
    try:
        return json.loads(r["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "cannot parse the output: %s" % (r["out"] + r["err"])[-2000:]}


def time_steps(args, bin_dir, art, info, data):
    """One par-run of `args.steps` train steps: per-step times (rank 0's
    "step i/K  loss X  T s/step" lines), their median and minimum over steps
    2..K, the losses, par-run's peak RSS."""
    cmd = [str(bin_dir / "par-run"), "-n", "1", str(art), "--entry", "gpt_step",
           "--steps", str(args.steps)]
    if info["run_threads"]:
        cmd += ["--threads", str(args.threads)]
    if data:
        cmd += ["--data", str(data)]
    m = run_measured(cmd, args.timeout, env=thread_env(args.threads))
    if m["timed_out"] or m["rc"] != 0:
        raise Failure("par-run %s: %s\n%s%s"
                      % ("timed out" if m["timed_out"] else "failed (exit %d)" % m["rc"],
                         shlex.join(cmd), m["out"][-3000:], m["err"][-3000:]))
    steps = STEP_RE.findall(m["out"] + m["err"])
    if len(steps) != args.steps:
        raise Failure("cannot parse par-run's step lines: %s\n%s"
                      % (shlex.join(cmd), (m["out"] + m["err"])[-3000:]))
    times = [float(x[2]) for x in steps]
    return {"times_s": times, "median_s": statistics.median(times[1:]),
            "min_s": min(times[1:]), "losses": [float(x[1]) for x in steps],
            "rss_mb": m["maxrss_mb"]}


def fmt(v, f="%.2f", none="-"):
    return none if v is None else f % v


def depth_main(args):
    """--depth: par-compile (cold) of the GPT AdamW train step against depth,
    its peak RSS, the artifact's step time, optionally against a baseline
    build and torch.compile / JAX jit peers (issue 25, part 5)."""
    builds = [("new", Path(args.bin_dir))]
    if args.base_bin_dir:
        builds.append(("base", Path(args.base_bin_dir)))
    info = {}
    for name, d in builds:
        for tool in ("par-compile", "par-run") if args.steps else ("par-compile",):
            if not (d / tool).is_file() or not os.access(d / tool, os.X_OK):
                print("error: %s not found or not executable in %s" % (tool, d),
                      file=sys.stderr)
                return 1
        text = tool_help(d / "par-compile")
        run_help = tool_help(d / "par-run") if args.steps else ""
        info[name] = {
            "bin_dir": str(d),
            "no_cache": "no-cache" in text,
            "jobs": re.search(r"^\s*-{1,2}j\b", text, re.M) is not None,
            "run_threads": re.search(r"--threads\b", run_help) is not None,
        }
    rows_cfg = [(l, args.dmodel, args.seq) for l in args.layer_list]
    rows_cfg += [e for e in args.extra_list if e not in rows_cfg]
    for l, d, s in rows_cfg:
        h = args.heads or d // 64
        if h < 1 or d % h:
            print("error: dmodel %d is not a multiple of %s heads (heads: dmodel/64 "
                  "unless --heads)" % (d, h), file=sys.stderr)
            return 1
    torch_py = None
    if args.torch_python and args.torch_python != "none":
        torch_py = frontend_python() if args.torch_python == "auto" else args.torch_python
    jax_py = args.jax_python if args.jax_python not in (None, "", "none") else None

    def compile_cmd(name, model, art):
        cmd = [str(Path(info[name]["bin_dir"]) / "par-compile"), str(model), "-o",
               str(art), "--no-reference", "--options=%s" % args.compile_options]
        if info[name]["no_cache"]:
            cmd.append("--no-cache")
        if args.jobs is not None and info[name]["jobs"]:
            cmd += ["-j", str(args.jobs)]
        return cmd

    print("par-compile MODEL.mlir -o ART --no-reference --options=\"%s\"%s, cold"
          % (args.compile_options, " -j %d" % args.jobs if args.jobs else ""))
    for name, _ in builds:
        i = info[name]
        print("  %-5s : %s/par-compile (%s%s)" % (
            name, i["bin_dir"],
            "--no-cache" if i["no_cache"] else "no compile cache option",
            "" if args.jobs is None else
            (", -j %d" % args.jobs if i["jobs"] else ", no -j")))
    if args.base_max_layers is not None and len(builds) > 1:
        print("  base only for rows with <= %d layers" % args.base_max_layers)
    print("model    : GPT (examples/gen_transformer.py --gpt --dp 1 --tp 1), f32, "
          "batch=%d vocab=%d heads=%s ffn=%s; AdamW train step"
          % (args.batch, args.vocab, args.heads or "dmodel/64",
             args.ffn or "4*dmodel"))
    print("rows     : L in {%s} at dmodel=%d seq=%d%s"
          % (", ".join(map(str, args.layer_list)), args.dmodel, args.seq,
             "; " + ", ".join("L=%d d=%d S=%d" % e for e in args.extra_list)
             if args.extra_list else ""))
    print("reps     : best of %d per build and row%s" % (
        args.reps, ", new and base interleaved (ABBA)" if len(builds) > 1 else ""))
    data = REPO / "README.md"
    use_data = args.vocab >= 96
    if args.steps:
        print("step     : par-run -n 1 ART --entry gpt_step --steps %d%s%s, median "
              "of steps 2..%d%s (each build's own par-run)"
              % (args.steps, " --threads %d" % args.threads,
                 " --data README.md" if use_data else " (generated tokens: vocab < 96)",
                 args.steps, ", best of %d interleaved runs" % args.step_rounds
                 if args.step_rounds > 1 else ""))
    else:
        print("step     : not measured (--steps 0)")
    print("peers    : torch.compile %s; JAX jit %s%s" % (
        "%s (inductor cache: %s)" % (torch_py, args.torch_cache) if torch_py else
        "(none: no frontend venv; scripts/install-frontend.sh)"
        if args.torch_python != "none" else "(none)",
        jax_py or "(none: --jax-python)",
        "; rows with <= %d layers" % args.peer_max_layers
        if args.peer_max_layers is not None and (torch_py or jax_py) else ""))
    try:
        print("load     : %.2f %.2f %.2f at the start" % os.getloadavg())
    except OSError:
        pass
    print(flush=True)

    if args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="par-bench-depth-")
        workdir = Path(tmp.name)
    rows = []
    peer_versions = {}
    failure = None
    hdr = "%3s %5s %4s  %-5s %9s %8s %8s %9s" % (
        "L", "d", "S", "build", "compile_s", "cpu_s", "rss_MB", "step_ms")
    print(hdr)
    print("-" * len(hdr), flush=True)
    try:
        for idx, (L, D, S) in enumerate(rows_cfg):
            H = args.heads or D // 64
            ffn = args.ffn or 4 * D
            tag = "L%d_d%d_S%d" % (L, D, S)
            model = workdir / ("gpt_%s.mlir" % tag)
            gen = [sys.executable, str(GEN), "--gpt", "--layers", str(L),
                   "--batch", str(args.batch), "--seq", str(S), "--dmodel", str(D),
                   "--heads", str(H), "--ffn", str(ffn), "--vocab", str(args.vocab),
                   "--dtype", args.dtype, "--dp", "1", "--tp", "1", "-o", str(model)]
            res = subprocess.run(gen, capture_output=True, text=True)
            if res.returncode != 0:
                raise Failure("model generation failed: %s\n%s"
                              % (shlex.join(gen), res.stderr))
            row = {"layers": L, "dmodel": D, "seq": S, "heads": H, "ffn": ffn,
                   "batch": args.batch, "vocab": args.vocab,
                   "model_mb": model.stat().st_size / 1e6}
            active = [b for b in builds if b[0] == "new" or args.base_max_layers is None
                      or L <= args.base_max_layers]
            for name, _ in builds:
                row[name] = {"skipped": True} if (name, _) not in active else \
                    {"runs": []}
            # Compile: ABBA over rows and reps.
            for r in range(args.reps):
                order = active if (idx + r) % 2 == 0 else list(reversed(active))
                for name, _ in order:
                    art = workdir / ("art_%s_%s" % (name, tag))
                    cmd = compile_cmd(name, model, art)
                    m = run_measured(cmd, args.timeout)
                    if m["timed_out"]:
                        row[name]["runs"].append({"timed_out": True,
                                                  "wall_s": m["wall_s"]})
                        print("  %s %s: par-compile timed out after %.0f s"
                              % (tag, name, m["wall_s"]), flush=True)
                        continue
                    if m["rc"] != 0:
                        raise Failure("par-compile (%s) failed (exit %d): %s\n%s%s"
                                      % (name, m["rc"], shlex.join(cmd),
                                         m["out"][-3000:], m["err"][-3000:]))
                    row[name]["runs"].append({k: m[k] for k in
                                              ("wall_s", "cpu_s", "maxrss_mb")})
                    row[name]["art"] = str(art)
            for name, _ in active:
                ok = [x for x in row[name]["runs"] if not x.get("timed_out")]
                b = row[name]
                b["timed_out"] = not ok
                if ok:
                    b["compile_s"] = min(x["wall_s"] for x in ok)
                    b["cpu_s"] = min(x["cpu_s"] for x in ok)
                    b["rss_mb"] = max(x["maxrss_mb"] for x in ok)
            # Step time of each artifact, interleaved (ABBA over rows and
            # rounds), each build's own par-run; the best round's median.
            if args.steps:
                for r in range(args.step_rounds):
                    order = active if (idx + r) % 2 == 0 else list(reversed(active))
                    for name, d in order:
                        if "art" not in row[name]:
                            continue
                        m = time_steps(args, d, row[name]["art"], info[name],
                                       data if use_data else None)
                        b = row[name]
                        b.setdefault("step_rounds", []).append(m)
                        if "step_s" not in b or m["median_s"] < b["step_s"]:
                            b["step_s"], b["step_min_s"] = m["median_s"], m["min_s"]
                            b["losses"] = m["losses"]
            if not args.keep:
                for name, _ in active:
                    if "art" in row[name]:
                        shutil.rmtree(row[name].pop("art"), ignore_errors=True)
            for name, _ in builds:
                b = row[name]
                if b.get("skipped"):
                    print("%3d %5d %4d  %-5s %9s" % (L, D, S, name, "skipped"),
                          flush=True)
                    continue
                print("%3d %5d %4d  %-5s %9s %8s %8s %9s" % (
                    L, D, S, name,
                    fmt(b.get("compile_s")) if not b["timed_out"]
                    else ">%.0f" % args.timeout,
                    fmt(b.get("cpu_s")), fmt(b.get("rss_mb"), "%.0f"),
                    fmt(b.get("step_s") and b["step_s"] * 1e3, "%.1f")), flush=True)
            # Peers on the same model.
            if args.peer_max_layers is None or L <= args.peer_max_layers:
                pcfg = {"layers": L, "dmodel": D, "seq": S, "heads": H, "ffn": ffn,
                        "batch": args.batch, "vocab": args.vocab,
                        "threads": args.threads, "bench_dir": str(REPO / "bench")}
                for pname, py, prog in (("torch", torch_py, TORCH_PEER),
                                        ("jax", jax_py, JAX_PEER)):
                    if not py:
                        continue
                    p = run_peer(pname, py, prog, pcfg, args.timeout, args.threads,
                                 args.torch_cache)
                    row[pname] = p
                    if "error" in p:
                        print("  %s peer failed: %s" % (pname, p["error"]), flush=True)
                        continue
                    peer_versions[pname] = p.get("version")
                    if pname == "torch":
                        print("  torch.compile %s: compile %.2f s (first call %.2f s "
                              "- eager step %.1f ms); compiled step %.1f ms"
                              % (p["version"], p["compile_s"], p["first_call_s"],
                                 p["eager_step_s"] * 1e3, p["compiled_step_s"] * 1e3),
                              flush=True)
                    else:
                        print("  JAX %s jit: compile %.2f s (first call %.2f s - "
                              "step %.1f ms)" % (p["version"], p["compile_s"],
                                                 p["first_call_s"], p["step_s"] * 1e3),
                              flush=True)
            rows.append(row)
    except Failure as e:
        failure = str(e)
    finally:
        if tmp is not None:
            tmp.cleanup()

    summary = depth_summary(args, rows, builds)
    if failure:
        print("\nerror: %s" % failure, file=sys.stderr)
        summary["error"] = failure
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"mode": "depth", "builds": info,
                       "options": args.compile_options,
                       "model": {"batch": args.batch, "vocab": args.vocab,
                                 "heads": args.heads or "dmodel/64",
                                 "ffn": args.ffn or "4*dmodel", "dtype": args.dtype},
                       "steps": args.steps, "threads": args.threads,
                       "reps": args.reps, "peers": peer_versions,
                       "torch_python": torch_py, "torch_cache": args.torch_cache,
                       "jax_python": jax_py,
                       "rows": rows, "summary": summary}, fh, indent=2)
    return 1 if failure else 0


def depth_summary(args, rows, builds):
    """The table of ratios and the issue's verdicts (informational)."""
    summary = {}
    if not rows:
        return summary
    base = len(builds) > 1
    print()
    hdr = "%3s %5s %4s  %9s %8s %9s" % ("L", "d", "S", "compile_s", "rss_MB", "step_ms")
    if base:
        hdr += " %9s %8s %9s %8s %8s" % ("base_s", "base_MB", "base_ms",
                                          "t_ratio", "rss_rat")
        hdr += " %8s" % "step_rat"
    hdr += " %8s %8s %9s %9s" % ("torch_s", "par/trch", "jax_s", "par/jax")
    print("summary (ratios: new/base and par/peer compile time)")
    print(hdr)
    print("-" * len(hdr))

    def ratio(a, b):
        return a / b if a is not None and b else None

    for row in rows:
        n, b = row["new"], row.get("base", {})
        ns, nr = n.get("compile_s"), n.get("rss_mb")
        nstep = n.get("step_s")
        line = "%3d %5d %4d  %9s %8s %9s" % (
            row["layers"], row["dmodel"], row["seq"],
            fmt(ns) if not n.get("timed_out") else "timeout", fmt(nr, "%.0f"),
            fmt(nstep and nstep * 1e3, "%.1f"))
        if base:
            bs, br, bstep = b.get("compile_s"), b.get("rss_mb"), b.get("step_s")
            row["ratio_time"] = ratio(ns, bs)
            row["ratio_rss"] = ratio(nr, br)
            row["ratio_step"] = ratio(nstep, bstep)
            row["ratio_step_min"] = ratio(n.get("step_min_s"), b.get("step_min_s"))
            if n.get("losses") and b.get("losses"):
                # Same data and seed: the loss trajectories should agree (the
                # same computation timed), up to reassociation.
                row["loss_diff"] = max(abs(x - y) / max(abs(y), 1e-30)
                                       for x, y in zip(n["losses"], b["losses"]))
            line += " %9s %8s %9s %8s %8s %8s" % (
                "skipped" if b.get("skipped") else
                ("timeout" if b.get("timed_out") else fmt(bs)),
                fmt(br, "%.0f"), fmt(bstep and bstep * 1e3, "%.1f"),
                fmt(row["ratio_time"], "%.3f"), fmt(row["ratio_rss"], "%.3f"),
                fmt(row["ratio_step"], "%.3f"))
        t = row.get("torch", {}).get("compile_s")
        j = row.get("jax", {}).get("compile_s")
        row["par_over_torch"] = ratio(ns, t)
        row["par_over_jax"] = ratio(ns, j)
        line += " %8s %8s %9s %9s" % (fmt(t), fmt(row["par_over_torch"]),
                                      fmt(j), fmt(row["par_over_jax"]))
        print(line)
    print()

    def find(L, D, S):
        for row in rows:
            if (row["layers"], row["dmodel"], row["seq"]) == (L, D, S):
                return row
        return None

    # Flat in depth: t(L=24) / t(L=2) at the sweep's width (else the
    # largest over the smallest layer count of the sweep).
    sweep = [r for r in rows if (r["dmodel"], r["seq"]) == (args.dmodel, args.seq)
             and r["layers"] in args.layer_list]
    lo = find(2, args.dmodel, args.seq) or (sweep[0] if sweep else None)
    hi = find(24, args.dmodel, args.seq) or (sweep[-1] if sweep else None)
    for name, _ in builds:
        if lo is None or hi is None or lo is hi:
            break
        a, b = hi[name].get("compile_s"), lo[name].get("compile_s")
        if a is None or b is None:
            continue
        r = a / b
        summary["flatness_%s" % name] = {"ratio": r, "target": FLAT_TARGET,
                                         "layers": [lo["layers"], hi["layers"]],
                                         "pass": r <= FLAT_TARGET}
        print("flat in depth (%s): t(L=%d)/t(L=%d) at d=%d S=%d: %.2f  (target <= %.0f)  %s"
              % (name, hi["layers"], lo["layers"], args.dmodel, args.seq, r,
                 FLAT_TARGET, verdict(r <= FLAT_TARGET)))
    g = find(12, 768, 256)
    if g is not None:
        for name, _ in builds:
            x = g[name]
            if x.get("skipped"):
                continue
            if x.get("timed_out"):
                summary["gpt2_small_%s" % name] = {"timed_out": True, "pass": False}
                print("GPT-2-small shape (%s), L=12 d=768 S=256: timed out  FAIL" % name)
                continue
            ok_t = x["compile_s"] <= GPT2_TARGET_S
            ok_m = x["rss_mb"] <= GPT2_TARGET_RSS_MB
            summary["gpt2_small_%s" % name] = {
                "compile_s": x["compile_s"], "rss_mb": x["rss_mb"],
                "target_s": GPT2_TARGET_S, "target_rss_mb": GPT2_TARGET_RSS_MB,
                "pass_time": ok_t, "pass_rss": ok_m}
            print("GPT-2-small shape (%s), L=12 d=768 S=256: par-compile %.1f s "
                  "(target <= %.0f) %s, peak RSS %.0f MB (target <= %.0f) %s"
                  % (name, x["compile_s"], GPT2_TARGET_S, verdict(ok_t), x["rss_mb"],
                     GPT2_TARGET_RSS_MB, verdict(ok_m)))
    if base:
        steps = [(r["layers"], r["dmodel"], r["seq"], r["ratio_step"],
                  r["ratio_step_min"]) for r in rows if r.get("ratio_step") is not None]
        if steps:
            worst = max(s[3] for s in steps)
            summary["step_ratio"] = {"rows": steps, "worst": worst,
                                     "target": STEP_SLACK, "pass": worst <= STEP_SLACK}
            print("step time new/base (median of steps; fastest step): %s; worst "
                  "median %.3f  (target <= %.2f)  %s"
                  % (", ".join("L=%d d=%d S=%d: %.3f; %.3f" % s for s in steps),
                     worst, STEP_SLACK, verdict(worst <= STEP_SLACK)))
        ld = [(r["layers"], r["dmodel"], r["seq"], r["loss_diff"]) for r in rows
              if r.get("loss_diff") is not None]
        if ld:
            summary["loss_diff"] = ld
            print("losses new vs base (same data, %d steps; max relative difference): %s"
                  % (args.steps, ", ".join("L=%d d=%d S=%d: %.1e" % x for x in ld)))
        tr = [(r["layers"], r["dmodel"], r["seq"], r["ratio_time"], r["ratio_rss"])
              for r in rows if r.get("ratio_time") is not None]
        if tr:
            summary["compile_ratio"] = tr
            print("compile time new/base: %s" % ", ".join(
                "L=%d d=%d S=%d: %.3f (RSS %.3f)" % t for t in tr))
    for L, D, S in args.extra_list:
        x = find(L, D, S)
        if x is not None and x.get("par_over_jax") is not None:
            r = x["par_over_jax"]
            summary["jax_L%d_d%d_S%d" % (L, D, S)] = {"ratio": r, "target": JAX_TARGET,
                                                      "pass": r <= JAX_TARGET}
            print("par-compile / JAX jit compile, L=%d d=%d S=%d: %.2f  (target <= %.0f)  %s"
                  % (L, D, S, r, JAX_TARGET, verdict(r <= JAX_TARGET)))
    for row in rows:
        if row.get("par_over_torch") is not None:
            summary.setdefault("par_over_torch", []).append(
                [row["layers"], row["dmodel"], row["seq"], row["par_over_torch"]])
        if row.get("par_over_jax") is not None:
            summary.setdefault("par_over_jax", []).append(
                [row["layers"], row["dmodel"], row["seq"], row["par_over_jax"]])
    try:
        print("load     : %.2f %.2f %.2f at the end" % os.getloadavg())
    except OSError:
        pass
    print("verdicts are informational (issue 25's targets)")
    return summary



def main(argv=None):
    args = parse_args(argv)
    if args.depth:
        return depth_main(args)
    if args.gpt_step:
        return gpt_step_main(args)
    if not (os.path.isfile(args.par_opt) and os.access(args.par_opt, os.X_OK)):
        print("error: compiler not found or not executable: %s\n"
              "(build par first, or pass --par-opt PATH)" % args.par_opt,
              file=sys.stderr)
        return 1

    print("compiler : %s %s" % (args.par_opt, args.flags))
    print("model    : batch=%d seq=%d dmodel=%d heads=%d ffn=%d dtype=%s%s"
          % (args.batch, args.seq, args.dmodel, args.heads, args.ffn, args.dtype,
             " (no par annotations)" if args.no_par else ""))
    print("reps     : best of %d" % args.reps)
    print()

    if args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="par-bench-")
        workdir = Path(tmp.name)

    # results[(layers, (dp, tp))] = {"best": s, "times": [...], ...}
    results = {}
    header = "%7s  %9s  %8s  %8s  %10s  %10s  %13s" % (
        "layers", "mesh", "devices", "size_MB", "best_s", "median_s", "ms_per_layer")
    configs = [(layers, mesh) for mesh in args.mesh_list
               for layers in args.layer_list]
    try:
        # Generate every model first so that a bad size fails fast.
        paths = {}
        for layers, mesh in configs:
            paths[(layers, mesh)] = workdir / ("transformer_L%d_dp%d_tp%d.mlir"
                                               % (layers, mesh[0], mesh[1]))
            generate(args, layers, mesh, paths[(layers, mesh)])

        print(header)
        print("-" * len(header))
        for layers, mesh in configs:
            path = paths[(layers, mesh)]
            times = time_compile(args, path)
            best = min(times)
            results[(layers, mesh)] = {
                "layers": layers, "dp": mesh[0], "tp": mesh[1],
                "devices": mesh[0] * mesh[1],
                "bytes": path.stat().st_size,
                "times_s": times, "best_s": best,
            }
            print("%7d  %9s  %8d  %8.2f  %10.3f  %10.3f  %13.2f" % (
                layers, "%dx%d" % mesh, mesh[0] * mesh[1],
                path.stat().st_size / 1e6, best, statistics.median(times),
                1000.0 * best / layers), flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print()

    summary = {}
    # Layer scaling: the two largest layer counts, on every mesh.
    if len(args.layer_list) >= 2:
        l1, l2 = args.layer_list[-2], args.layer_list[-1]
        target = (l2 / l1) * LAYER_RATIO_SLACK
        for mesh in args.mesh_list:
            ratio = results[(l2, mesh)]["best_s"] / results[(l1, mesh)]["best_s"]
            ok = ratio <= target
            summary["layer_ratio_%dx%d" % mesh] = {
                "ratio": ratio, "target": target, "pass": ok}
            print("layer scaling  t(%d)/t(%d) on %dx%d mesh: %.3f  (target <= %.2f)  %s"
                  % (l2, l1, mesh[0], mesh[1], ratio, target, verdict(ok)))
    # Mesh scaling: largest vs smallest mesh at the reference layer count
    # (48 when benchmarked, otherwise the second-largest count).
    if len(args.mesh_list) >= 2:
        ref_l = 48 if 48 in args.layer_list else args.layer_list[max(0, len(args.layer_list) - 2)]
        small = min(args.mesh_list, key=lambda m: m[0] * m[1])
        large = max(args.mesh_list, key=lambda m: m[0] * m[1])
        ratio = results[(ref_l, large)]["best_s"] / results[(ref_l, small)]["best_s"]
        ok = ratio <= MESH_RATIO_TARGET
        summary["mesh_ratio"] = {"ratio": ratio, "target": MESH_RATIO_TARGET,
                                 "pass": ok, "layers": ref_l}
        print("mesh scaling   t(%d devices)/t(%d devices), %d layers: %.3f  "
              "(target <= %.2f)  %s"
              % (large[0] * large[1], small[0] * small[1], ref_l, ratio,
                 MESH_RATIO_TARGET, verdict(ok)))

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"compiler": args.par_opt, "flags": args.flags,
                       "model": {"batch": args.batch, "seq": args.seq,
                                 "dmodel": args.dmodel, "heads": args.heads,
                                 "ffn": args.ffn, "dtype": args.dtype,
                                 "no_par": args.no_par},
                       "results": list(results.values()),
                       "summary": summary}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
