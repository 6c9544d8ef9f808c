#!/usr/bin/env python3
"""par-plan against par's own measured runs on 8 CPU ranks (issue 29's second
validation): a GPT from examples/gen_transformer.py under several
configurations (dp, tp, pp, m, schedule, ZeRO, recomputation, sequence
parallelism), each priced by `par-plan --machine M --config ...` (M:
cpu-local's file measured by par-calibrate-cpu right before the row's run,
never fitted to it) and then compiled with the options par-plan prints and trained
for --steps steps by par-run on 8 ranks; the measured step time is the
median of the per-step times after the first two. Prints predicted vs
measured step time and memory with the error per row.

usage: python3 bench/bench_plan_cpu.py [--steps 30] [--only N] [--rows I,J]
                                      [--machine FILE]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
GEN = os.path.join(ROOT, "examples", "gen_transformer.py")
CORPUS = os.path.join(ROOT, "test", "Inputs", "corpus.txt")

# dp, tp, pp, the rest of --config
CONFIGS = [
    (8, 1, 1, "m=1"),
    (4, 2, 1, "m=1"),
    (2, 4, 1, "m=1"),
    (2, 4, 1, "m=2"),
    (8, 1, 1, "m=1 zero=1"),
    (8, 1, 1, "m=1 zero=3"),
    (2, 4, 1, "m=1 recompute=full"),
    (2, 4, 1, "m=1 sequence-parallel=true"),
    (4, 1, 2, "m=4 schedule=1f1b"),
    (2, 2, 2, "m=4 schedule=1f1b"),
    (2, 2, 2, "m=4 schedule=zbh1"),
    (4, 1, 2, "m=4 v=2 schedule=interleaved"),
]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stdout[-3000:]))
    return r.stdout


def calibrate(tmp, i):
    """par-calibrate-cpu, a micro-benchmark (GEMM, vector loop, memcpy,
    MPI_Allreduce, the ranks' sharing of the cores) taken right before
    a row's run and never fitted to it: these machines differ from one
    session to the next (OpenBLAS picks its kernels by the CPU it
    finds) and their speed drifts within one by 20% (other tenants),
    so a calibration taken minutes earlier would price another
    machine."""
    path = os.path.join(tmp, "cpu-local%d.json" % i)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(["mpirun", "--oversubscribe", "-n", "8",
                        os.path.join(BIN, "par-calibrate-cpu")],
                       stdout=subprocess.PIPE, text=True, env=env,
                       check=True)
    open(path, "w").write(r.stdout)
    return path


def measure(tmp, args, config, machine, tag):
    """Prices `config` ("dp=.. tp=.. pp=.. m=.. ...") with par-plan on
    `machine`, compiles the GPT of `args` for its mesh with the options
    par-plan prints and trains it for args.steps steps on 8 ranks. Returns
    the predicted and measured step (the median of the per-step times after
    the first two, and the best) and memory."""
    dp, tp, pp, m = (int(re.search(r"\b%s=(\d+)" % k, config).group(1))
                     for k in ("dp", "tp", "pp", "m"))
    # par's model holds one micro-batch (over all dp ranks):
    # micro-batches=m makes a step of m of them, the global batch.
    model = os.path.join(tmp, "gpt_dp%d_tp%d_pp%d_b%d.mlir" % (
        dp, tp, pp, args.batch // m))
    if not os.path.exists(model):
        run([sys.executable, GEN, "--gpt", "--layers", str(args.layers),
             "--batch", str(args.batch // m), "--seq", str(args.seq),
             "--dmodel", str(args.dmodel), "--heads", str(args.heads),
             "--vocab", str(args.vocab), "--dp", str(dp), "--tp", str(tp),
             "--pp", str(pp), "-o", model])
    plan = run([os.path.join(BIN, "par-plan"), model, "--machine", machine,
                "--gpus", "8", "--global-batch", str(args.batch), "--config",
                config])
    got = re.search(r"predicted: step ([0-9.e+-]+) s, .* memory "
                    r"([0-9.e+-]+) GiB", plan)
    options = re.search(r'--options="([^"]*)"', plan).group(1)
    art = os.path.join(tmp, "art" + tag)
    run([os.path.join(BIN, "par-compile"), model, "-o", art,
         "--no-reference", "--options=" + options + " lr=0.001"])
    csv = os.path.join(tmp, "loss%s.csv" % tag)
    # pp > 1: the pipelined program (without --pipeline par-run trains the
    # artifact's unpipelined step, every pp rank alike).
    out = run([os.path.join(BIN, "par-run"), "-n", "8", art, "--data",
               CORPUS, "--steps", str(args.steps), "--loss-csv", csv] +
              (["--pipeline"] if pp > 1 else []))
    seconds = [float(l.split(",")[2]) for l in open(csv).readlines()[1:]]
    steps = [b - a for a, b in zip(seconds, seconds[1:])][1:]
    mm = re.search(r"measured peak ([0-9.]+) MiB", out)
    return {"predicted": float(got.group(1)),
            "predicted_mib": float(got.group(2)) * 1024,
            "measured": statistics.median(steps), "best": min(steps),
            "measured_mib": float(mm.group(1)) if mm else float("nan"),
            "options": options}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dmodel", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--only", type=int, default=0, help="the first N rows")
    ap.add_argument("--machine", default="",
                    help="a machine file for every row (default: "
                         "par-calibrate-cpu on 8 ranks before each row)")
    ap.add_argument("--rows", default="", help="only these rows (0-based, "
                    "comma-separated)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_plan_cpu.")
    print("GPT L=%d d=%d heads=%d S=%d global batch %d V=%d, 8 ranks, "
          "cpu-local" % (
        args.layers, args.dmodel, args.heads, args.seq, args.batch,
        args.vocab))
    print("| configuration | predicted s | measured s (median) | error | "
          "best step s | error | predicted MiB | measured MiB | "
          "calibrated GEMM GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = []
    for i, (dp, tp, pp, rest) in enumerate(CONFIGS):
        if args.only and i >= args.only:
            break
        if args.rows and str(i) not in args.rows.split(","):
            continue
        config = "dp=%d tp=%d pp=%d %s" % (dp, tp, pp, rest)
        machine = args.machine or calibrate(tmp, i)
        r = measure(tmp, args, config, machine, "%d" % i)
        predicted, measured, best = r["predicted"], r["measured"], r["best"]
        pmem, mmem = r["predicted_mib"], r["measured_mib"]
        err = (predicted - measured) / measured
        errb = (predicted - best) / best
        errors.append(abs(err))
        gemm = re.search(r'"f32": ([0-9.e+]+)', open(machine).read())
        print("| %s | %.4f | %.4f | %+.0f%% | %.4f | %+.0f%% | %.2f | %.2f "
              "| %.2f |" % (config, predicted, measured, 100 * err, best,
                            100 * errb, pmem, mmem,
                            float(gemm.group(1)) / 1e9 if gemm else 0),
              flush=True)
    print("\nmean |error| %.0f%%, max %.0f%%; rows within 15%%: %d of %d" % (
        100 * sum(errors) / len(errors), 100 * max(errors),
        sum(e <= 0.15 for e in errors), len(errors)))


if __name__ == "__main__":
    main()
