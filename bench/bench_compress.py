#!/usr/bin/env python3
"""Gradient compression: bytes per step and CPU step time, compressed vs fp32.

One GPT train step (examples/gen_transformer.py --gpt, AdamW) is compiled by

    par-compile MODEL.mlir --options="optimizer=adamw lr=0.003 compress=M ..." -o ART

for M = none, int8, sign, topk (compress-ratio R = 0.01 and 0.001) at
dp = 2, 4, 8 (tp 1), and trained with

    par-run -n N ART --entry gpt_step --data README.md --steps K

The script prints, in one run:

  (1) bytes per step and rank (par-run's runtime counters: "bytes per step
      and rank: B (kernel b, ...) on rank r, the most of N ranks"), for
      every (method, dp):
        * the compressed run's measured bytes and the uncompressed run's
          (same dp, same run of this script), their ratio none/method for
          the whole step (gradients + the 4-byte loss all-reduce + anything
          else the step sends);
        * the gradient exchange alone: the fp32 ring all-reduce bytes of
          the same gradients (par-run's "fp32 ring all-reduce of the same
          gradients"), the measured exchange bytes (the all_to_all and
          all_gather kernels of the breakdown) and the ratio fp32/exchange;
        * the measured exchange against par-run's formula bytes
          (docs/RationaleCompression.md: int8 2(n-1)/n*P*(1+4/C), sign
          2(n-1)/n*P*(1/8+4/C), topk (n-1)*8k), which should be 1.00, and
          the ideal ratio (int8 4/(1+4/C), sign 4/(1/8+4/C), topk 1/(nR);
          ignoring padding).
  (2) step time on dp = --time-dp (default 8) CPU ranks: par-run --steps
      (--warmup + --time-steps) prints each step's seconds on rank 0; a run's
      time is the median after the warm-up steps, the best of --rounds runs
      (methods rotated between rounds so that drift in the machine's load
      spreads over all of them); ratio method/none. Informational only,
      no threshold is judged: on a small shared-memory machine the ranks
      share a few cores, a byte saved is a memcpy saved, the compression
      adds compute (scales, codes, top-k selection, error feedback), and
      the step time mostly reflects how the oversubscribed ranks are
      scheduled around the collectives; no network is modelled. The loss
      after the last step is printed too (compression is lossy; error
      feedback on unless --no-error-feedback).

Binaries: par-compile and par-run from --build DIR (default: the
repository's build/, i.e. build/bin), else from PATH.

Exit status 0 unless a tool fails or its output cannot be parsed (then 1);
the ratios themselves are not judged.

Example (from the repository root):
    python3 bench/bench_compress.py
    python3 bench/bench_compress.py --quick
    python3 bench/bench_compress.py --dps 2,8 --rounds 3 --keep /tmp/bc
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEN = REPO / "examples" / "gen_transformer.py"
CORPUS = REPO / "README.md"

# (label, compile options); "none" first: the baseline of every ratio.
METHODS = [
    ("none", ""),
    ("int8", "compress=int8"),
    ("sign", "compress=sign"),
    ("topk R=0.01", "compress=topk compress-ratio=0.01"),
    ("topk R=0.001", "compress=topk compress-ratio=0.001"),
]
DEFAULT_CHUNK = 512   # par-compress-gradients' default compress-chunk


class Failure(Exception):
    pass


def run(cmd, env=None, what=None, timeout=900, retry=False):
    """Runs cmd, returns its stdout; with retry a failure is retried once
    after 30 s (on a shared machine the binaries may be briefly missing
    while someone rebuilds them)."""
    cmd = [str(c) for c in cmd]
    what = what or os.path.basename(cmd[0])
    if retry:
        try:
            return run(cmd, env, what, timeout)
        except Failure as e:
            print("  %s failed, retrying in 30 s: %s"
                  % (what, str(e).strip().splitlines()[-1][:200]), flush=True)
            time.sleep(30)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("%s timed out: %s" % (what, " ".join(cmd)))
    except OSError as e:
        raise Failure("%s could not start: %s" % (what, e))
    if p.returncode != 0:
        raise Failure("%s failed (exit %d): %s\n%s%s" % (what, p.returncode, " ".join(cmd),
                                                          p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout + p.stderr


def par_env():
    """One thread per rank, OpenMPI's core binding off (8 ranks on 2 cores)."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    env.setdefault("OMP_WAIT_POLICY", "passive")
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    return env


def find_tool(build, name):
    if build:
        for p in (Path(build) / "bin" / name, Path(build) / name):
            if p.is_file() and os.access(p, os.X_OK):
                return p
    w = shutil.which(name)
    if w:
        return Path(w)
    raise Failure("cannot find %s in %s/bin or on PATH (build par first, or pass --build DIR)"
                  % (name, build))


# ---------------------------------------------------------------------------
# par-run's output
# ---------------------------------------------------------------------------

BYTES_RE = re.compile(r"^par-run: bytes per step and rank: (\d+) \(([^)]*)\) on rank (\d+), "
                      r"the most of (\d+) ranks", re.M)
COMP_RE = re.compile(r"^par-run: compression (\w+): exchanges (\d+) bytes per step and rank "
                     r"\(formula\), fp32 ring all-reduce of the same gradients (\d+): "
                     r"([0-9.]+)x fewer; this step measured (\d+), without compression it "
                     r"would send (\d+)", re.M)
STEP_RE = re.compile(r"^step (\d+)/(\d+)\s+loss (\S+)\s+(\S+) s/step", re.M)


def parse_run(out, steps):
    m = BYTES_RE.search(out)
    if not m:
        raise Failure("no 'bytes per step and rank' line in par-run's output:\n" + out[-3000:])
    kernels = {}
    for part in m.group(2).split(","):
        name, b = part.split()
        kernels[name] = kernels.get(name, 0) + int(b)
    r = {"bytes": int(m.group(1)), "kernels": kernels, "rank": int(m.group(3)),
         "ranks": int(m.group(4))}
    c = COMP_RE.search(out)
    if c:
        r.update({"method": c.group(1), "formula": int(c.group(2)), "fp32": int(c.group(3)),
                  "fewer": float(c.group(4)), "measured": int(c.group(5)),
                  "without": int(c.group(6))})
    rows = STEP_RE.findall(out)
    if len(rows) != steps:
        raise Failure("expected %d step lines, found %d:\n%s" % (steps, len(rows), out[-3000:]))
    r["times"] = [float(x[3]) for x in rows]
    r["losses"] = [float(x[2]) for x in rows]
    return r


# ---------------------------------------------------------------------------
# Build and run
# ---------------------------------------------------------------------------

def gen_model(args, dp, path):
    run([sys.executable, GEN, "--gpt", "--layers", args.layers, "--batch", args.batch,
         "--seq", args.seq, "--dmodel", args.dmodel, "--heads", args.heads,
         "--vocab", args.vocab, "--dp", dp, "--tp", 1, "-o", path], what="gen_transformer.py")
    return path


def options_of(args, method_opts):
    opts = ["optimizer=adamw", "lr=%g" % args.lr]
    if method_opts:
        opts.append(method_opts)
    if "compress=" in method_opts:
        if args.chunk:
            opts.append("compress-chunk=%d" % args.chunk)
        if args.no_error_feedback:
            opts.append("error-feedback=false")
    if args.compile_options:
        opts.append(args.compile_options)
    return " ".join(opts)


def compile_art(tools, model, options, out):
    t0 = time.time()
    run([tools["par-compile"], model, "--options=" + options, "--no-reference", "-o", out],
        what="par-compile", retry=True)
    return time.time() - t0


def par_run(tools, art, ranks, steps):
    out = run([tools["par-run"], "-n", ranks, art, "--entry", "gpt_step", "--data", CORPUS,
               "--steps", steps], env=par_env(), what="par-run", retry=True)
    return parse_run(out, steps)


def ideal_ratio(label, n, chunk):
    c = chunk or DEFAULT_CHUNK
    if label.startswith("int8"):
        return 4 / (1 + 4 / c)
    if label.startswith("sign"):
        return 4 / (1 / 8 + 4 / c)
    if label.startswith("topk"):
        return 1 / (n * float(label.split("=")[1]))
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"),
                    help="par's build directory (binaries in BUILD/bin; default the "
                         "repository's build/); PATH otherwise")
    ap.add_argument("--dps", default="2,4,8", help="data-parallel sizes (default 2,4,8)")
    ap.add_argument("--methods", default=",".join(m for m, _ in METHODS),
                    help="subset of: " + ", ".join(m for m, _ in METHODS))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16, help="global batch (divisible by every dp)")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--dmodel", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--chunk", type=int, default=0,
                    help="compress-chunk (default: the compiler's, %d)" % DEFAULT_CHUNK)
    ap.add_argument("--no-error-feedback", action="store_true",
                    help="compile with error-feedback=false")
    ap.add_argument("--compile-options", default="",
                    help="more par-compile --options for every build")
    ap.add_argument("--byte-steps", type=int, default=5,
                    help="steps of the bytes runs (default 5)")
    ap.add_argument("--time-dp", type=int, default=8,
                    help="ranks of the step-time runs (one of --dps; 0 skips (2); default 8)")
    ap.add_argument("--time-steps", type=int, default=30,
                    help="timed steps per run after the warm-up (default 30)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps (default 5)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="step-time runs per method, best kept (default 2)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel par-compile jobs (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="1 layer, dp 2 and 4, time on dp 4, 15 timed steps, 1 round")
    ap.add_argument("--keep", default=None, help="keep models and artifacts in this folder")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.layers = 1
        args.dps = "2,4"
        args.time_dp = 4 if args.time_dp else 0
        args.time_steps = 15
        args.warmup = 3
        args.rounds = 1

    dps = [int(x) for x in args.dps.split(",") if x]
    labels = [m.strip() for m in args.methods.split(",") if m.strip()]
    known = dict(METHODS)
    for m in labels:
        if m not in known:
            ap.error("unknown method %r (known: %s)" % (m, ", ".join(known)))
    if "none" not in labels:
        labels.insert(0, "none")
    labels = [m for m, _ in METHODS if m in labels]
    for n in dps:
        if args.batch % n:
            ap.error("--batch %d is not divisible by dp %d" % (args.batch, n))
    if args.time_dp and args.time_dp not in dps:
        ap.error("--time-dp %d is not in --dps" % args.time_dp)

    try:
        tools = {t: find_tool(args.build, t) for t in ("par-compile", "par-run")}
    except Failure as e:
        print("bench_compress.py: error: %s" % e, file=sys.stderr)
        return 1

    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="par-bench-compress-")
        work = Path(cleanup.name)

    t_start = time.time()
    results = {"bytes": {}, "time": {}, "compile_s": {}}
    try:
        # Models and artifacts (untimed for (2); compiled --jobs at a time).
        builds = []
        for n in dps:
            model = gen_model(args, n, work / ("gpt_dp%d.mlir" % n))
            for m in labels:
                art = work / ("art_dp%d_%s" % (n, re.sub(r"[^\w.]+", "_", m)))
                builds.append((n, m, model, art))

        def build(b):
            n, m, model, art = b
            s = compile_art(tools, model, options_of(args, known[m]), art)
            print("  compiled dp=%d %-12s %5.1f s" % (n, m, s), flush=True)
            return s

        print("compiling %d artifacts, %d at a time" % (len(builds), args.jobs), flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for b, s in zip(builds, pool.map(build, builds)):
                results["compile_s"]["dp%d %s" % (b[0], b[1])] = s
        arts = {(b[0], b[1]): b[3] for b in builds}

        # (1) bytes per step and rank.
        for n in dps:
            for m in labels:
                results["bytes"][(n, m)] = par_run(tools, arts[(n, m)], n, args.byte_steps)
            print("  bytes runs dp=%d done" % n, flush=True)

        # (2) step time on time_dp ranks, methods rotated between rounds.
        if args.time_dp:
            n = args.time_dp
            steps = args.warmup + args.time_steps
            per = {m: [] for m in labels}
            for r in range(args.rounds):
                order = labels[r % len(labels):] + labels[:r % len(labels)]
                if r % 2:
                    order = order[::-1]
                for m in order:
                    res = par_run(tools, arts[(n, m)], n, steps)
                    t = res["times"][args.warmup:]
                    per[m].append({"median": statistics.median(t), "min": min(t),
                                   "loss": res["losses"][-1]})
                print("  time round %d/%d done" % (r + 1, args.rounds), flush=True)
            for m in labels:
                best = min(per[m], key=lambda x: x["median"])
                results["time"][m] = {"median": best["median"], "min": best["min"],
                                      "loss": best["loss"],
                                      "rounds": [x["median"] for x in per[m]]}
    except Failure as e:
        print("bench_compress.py: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        if cleanup:
            cleanup.cleanup()

    # Report.
    print()
    print("model    : GPT (examples/gen_transformer.py --gpt) layers=%d batch=%d seq=%d "
          "dmodel=%d heads=%d vocab=%d, f32, tp=1"
          % (args.layers, args.batch, args.seq, args.dmodel, args.heads, args.vocab))
    print("compile  : %s MODEL --options=\"%s\" --no-reference"
          % (tools["par-compile"], options_of(args, "compress=M ...")))
    print("run      : %s -n N ART --entry gpt_step --data README.md --steps K"
          % tools["par-run"])
    print()
    print("== (1) bytes per step and rank (par-run, the busiest rank; %d steps)" % args.byte_steps)
    hdr = ("%-13s %3s %10s %10s %7s %10s %10s %10s %7s %7s %7s"
           % ("method", "dp", "step_B", "none_B", "step_x", "fp32_grad", "exch_B",
              "formula", "grad_x", "ideal_x", "meas/f"))
    print(hdr)
    print("-" * len(hdr))
    for n in dps:
        base = results["bytes"][(n, "none")]
        for m in labels:
            r = results["bytes"][(n, m)]
            if m == "none":
                print("%-13s %3d %10d %10d %7.2f %10s %10s %10s %7s %7s %7s"
                      % (m, n, r["bytes"], base["bytes"], 1.0, "-", "-", "-", "-", "-", "-"))
                continue
            if "formula" not in r:
                print("bench_compress.py: error: no compression line for %s at dp %d" % (m, n),
                      file=sys.stderr)
                return 1
            exch = r["kernels"].get("all_to_all", 0) + r["kernels"].get("all_gather", 0)
            r["exchange"] = exch
            ideal = ideal_ratio(m, n, args.chunk)
            print("%-13s %3d %10d %10d %7.2f %10d %10d %10d %7.2f %7.2f %7.2f"
                  % (m, n, r["bytes"], base["bytes"], base["bytes"] / r["bytes"], r["fp32"],
                     exch, r["formula"], r["fp32"] / exch, ideal, exch / r["formula"]))
    print()
    print("   step_B: measured bytes per step and rank; none_B: the uncompressed build's, same dp;")
    print("   step_x = none_B / step_B (whole step: gradients + 4 B loss all-reduce);")
    print("   fp32_grad: fp32 ring all-reduce bytes of the same gradients, 2(n-1)/n*4N (par-run);")
    print("   exch_B: measured all_to_all + all_gather bytes; formula: par-run's exchange formula;")
    print("   grad_x = fp32_grad / exch_B; ideal_x: int8 4/(1+4/C), sign 4/(1/8+4/C), topk 1/(nR)"
          " (no padding); meas/f = exch_B / formula")
    checks = []
    for n in dps:
        for m in labels:
            r = results["bytes"][(n, m)]
            if m != "none":
                checks.append(r["without"] == results["bytes"][(n, "none")]["bytes"])
    print("   par-run's 'without compression it would send' equals the uncompressed run's "
          "measured bytes: %d of %d" % (sum(checks), len(checks)))

    if results["time"]:
        n = args.time_dp
        base = results["time"]["none"]
        print()
        print("== (2) step time, dp=%d on %d CPU ranks (rank 0's s/step, median of steps %d..%d, "
              "best of %d runs; informational)" % (n, n, args.warmup + 1,
                                                  args.warmup + args.time_steps, args.rounds))
        hdr = ("%-13s %9s %9s %8s %9s  %s" % ("method", "ms/step", "min_ms", "vs none",
                                             "loss", "rounds (ms)"))
        print(hdr)
        print("-" * len(hdr))
        for m in labels:
            t = results["time"][m]
            print("%-13s %9.1f %9.1f %8.2f %9.4f  %s"
                  % (m, t["median"] * 1e3, t["min"] * 1e3, t["median"] / base["median"],
                     t["loss"], " ".join("%.1f" % (x * 1e3) for x in t["rounds"])))
        print()
        print("   vs none = ms/step / none's ms/step. Informational: %d ranks share %d cores over "
              "shared memory (no network);" % (n, os.cpu_count() or 0))
        print("   bytes are cheap here, compression adds compute, and the oversubscribed ranks' "
              "scheduling dominates.")
        print("   loss: after step %d of the best run (lr=%g; compression is lossy)"
              % (args.warmup + args.time_steps, args.lr))
    print()
    print("total %.0f s" % (time.time() - t_start))
    if args.json:
        out = {"args": vars(args),
               "bytes": {"dp%d %s" % k: v for k, v in results["bytes"].items()},
               "time": results["time"], "compile_s": results["compile_s"]}
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
