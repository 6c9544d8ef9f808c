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

The PASS/FAIL verdicts are informational: the exit status is 0 unless
generation or a compiler fails (then 1, with the tool's stderr).

Example:
    python3 bench/bench_compile.py
    python3 bench/bench_compile.py --par-opt build/bin/par-opt --flags "--par-spmd"
    # The GPT train step through par-compile, against a baseline build:
    python3 bench/bench_compile.py --gpt-step --base-bin-dir ../wt-base/build/bin
    # Harness self-test without par (plain MLIR, no sharding annotations):
    python3 bench/bench_compile.py --par-opt /usr/lib/llvm-22/bin/mlir-opt \\
        --flags "" --no-par

Standard library only.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
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
    ap.add_argument("--layers", default="12,48,96",
                    help="comma-separated layer counts (default 12,48,96)")
    ap.add_argument("--meshes", default="2x4,256x256",
                    help="comma-separated DPxTP meshes (default 2x4,256x256)")
    ap.add_argument("--reps", type=int, default=3,
                    help="repetitions per configuration; best is kept (default 3)")
    # Model size: every dim divisible by 256 so the model fits dp=256, tp=256.
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dmodel", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--no-par", action="store_true",
                    help="generate models without par annotations (to test the "
                         "harness with plain mlir-opt)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="per-run timeout in seconds (default 1800)")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the generated models to DIR and keep them")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the raw results as JSON to FILE")
    ap.add_argument("--gpt-step", action="store_true",
                    help="time par-compile on bench_train.py's GPT train step "
                         "(1 rank and 8-rank dp) instead of par-opt on "
                         "transformer stacks")
    ap.add_argument("--bin-dir", default=str(REPO / "build" / "bin"),
                    help="--gpt-step: the build whose par-compile is timed "
                         "(default build/bin)")
    ap.add_argument("--base-bin-dir", metavar="DIR",
                    help="--gpt-step: a baseline build's bin directory; its "
                         "par-compile is timed in the same run (ABBA) and "
                         "new/base is reported (target <= %.1f)" % GPT_RATIO_TARGET)
    args = ap.parse_args(argv)
    if args.base_bin_dir and not args.gpt_step:
        ap.error("--base-bin-dir needs --gpt-step")
    args.layer_list = sorted({int(v) for v in args.layers.split(",") if v})
    args.mesh_list = [parse_mesh(m) for m in args.meshes.split(",") if m]
    if args.reps < 1:
        ap.error("--reps must be >= 1")
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


def main(argv=None):
    args = parse_args(argv)
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
