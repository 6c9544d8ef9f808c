#!/usr/bin/env python3
"""par-plan against par's own measured runs on 8 CPU ranks (issue 29's second
validation): a GPT from examples/gen_transformer.py under several
configurations (dp, tp, pp, m, schedule, ZeRO, recomputation, sequence
parallelism), each priced by `par-plan --machine cpu-local --config ...`
(the machine file measured beforehand by par-calibrate-cpu, never fitted to
these runs) and then compiled with the options par-plan prints and trained
for --steps steps by par-run on 8 ranks; the measured step time is the
median of the per-step times after the first two. Prints predicted vs
measured step time and memory with the error per row.

usage: python3 bench/bench_plan_cpu.py [--steps 12] [--only N]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dmodel", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--only", type=int, default=0, help="the first N rows")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_plan_cpu.")
    print("GPT L=%d d=%d heads=%d S=%d global batch %d V=%d, 8 ranks, "
          "cpu-local" % (
        args.layers, args.dmodel, args.heads, args.seq, args.batch,
        args.vocab))
    print("| configuration | predicted s | measured s (median) | error | "
          "best step s | error | predicted MiB | measured MiB |")
    print("|---|---|---|---|---|---|---|---|")
    errors = []
    for i, (dp, tp, pp, rest) in enumerate(CONFIGS):
        if args.only and i >= args.only:
            break
        # par's model holds one micro-batch (over all dp ranks):
        # micro-batches=m makes a step of m of them, the global batch.
        m = int(re.search(r"m=(\d+)", rest).group(1))
        model = os.path.join(tmp, "gpt_dp%d_tp%d_pp%d_b%d.mlir" % (
            dp, tp, pp, args.batch // m))
        if not os.path.exists(model):
            run([sys.executable, GEN, "--gpt", "--layers", str(args.layers),
                 "--batch", str(args.batch // m), "--seq", str(args.seq),
                 "--dmodel", str(args.dmodel), "--heads", str(args.heads),
                 "--vocab", str(args.vocab), "--dp", str(dp), "--tp", str(tp),
                 "--pp", str(pp), "-o", model])
        config = "dp=%d tp=%d pp=%d %s" % (dp, tp, pp, rest)
        plan = run([os.path.join(BIN, "par-plan"), model, "--machine",
                    "cpu-local", "--gpus", "8", "--global-batch",
                    str(args.batch), "--config", config])
        m = re.search(r"predicted: step ([0-9.e+-]+) s, .* memory "
                      r"([0-9.e+-]+) GiB", plan)
        predicted, pmem = float(m.group(1)), float(m.group(2)) * 1024
        options = re.search(r'--options="([^"]*)"', plan).group(1)
        art = os.path.join(tmp, "art%d" % i)
        run([os.path.join(BIN, "par-compile"), model, "-o", art,
             "--no-reference", "--options=" + options + " lr=0.001"])
        csv = os.path.join(tmp, "loss%d.csv" % i)
        out = run([os.path.join(BIN, "par-run"), "-n", "8", art, "--data",
                   CORPUS, "--steps", str(args.steps), "--loss-csv", csv])
        seconds = [float(l.split(",")[2]) for l in open(csv).readlines()[1:]]
        steps = [b - a for a, b in zip(seconds, seconds[1:])][1:]
        measured = statistics.median(steps)
        mm = re.search(r"measured peak ([0-9.]+) MiB", out)
        mmem = float(mm.group(1)) if mm else float("nan")
        best = min(steps)
        err = (predicted - measured) / measured
        errb = (predicted - best) / best
        errors.append(abs(err))
        print("| %s | %.4f | %.4f | %+.0f%% | %.4f | %+.0f%% | %.2f | %.2f |" % (
            config, predicted, measured, 100 * err, best, 100 * errb, pmem,
            mmem), flush=True)
    print("\nmean |error| %.0f%%, max %.0f%%; rows within 15%%: %d of %d" % (
        100 * sum(errors) / len(errors), 100 * max(errors),
        sum(e <= 0.15 for e in errors), len(errors)))


if __name__ == "__main__":
    main()
