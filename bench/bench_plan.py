#!/usr/bin/env python3
"""par-plan against Megatron's published weak-scaling table (ANCHORS.md;
Narayanan et al. 2021, arXiv 2104.04473, Table 1): 7 GPT configurations
from 1.7B on 32 A100s to 1T on 3072, vocabulary 51,200, sequence 2048,
fp16, activation recomputation.

For each row it generates the model with examples/gen_transformer.py (the
MLIR only: nothing is allocated), then asks par-plan on the `a100` machine
with the table's GPU count, tp, pp and global batch for
  * the paper's setting: --config "tp=.. pp=.. m=B/dp recompute=full
    schedule=1f1b precision=f16 grad-reduce=compute" (micro-batch 1, no
    sequence parallelism; the data-parallel gradients all-reduced in fp16,
    as Megatron does without --accumulate-allreduce-grads-in-fp32), full
    recomputation pipelined or not (par's pipelined forwards keep their
    residuals);
  * the best par-plan finds with tp and pp fixed (--tp --pp; any micro-batch,
    schedule, recomputation, sequence parallelism that fits).
and prints predicted vs published TFLOP/s per GPU with the error per row,
and par-plan's time per row (the bar: under a minute).

usage: python3 bench/bench_plan.py [--rows N] [--search]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, "build", "bin", "par-plan")
GEN = os.path.join(ROOT, "examples", "gen_transformer.py")

# params, heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU
TABLE = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def tflops(out):
    m = re.search(r"predicted: step ([0-9.e+-]+) s, ([0-9.e+-]+) TFLOP/s", out)
    return float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=len(TABLE))
    ap.add_argument("--search", action="store_true",
                    help="also the best configuration with tp, pp fixed")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_plan.")
    print("| model | GPUs | tp | pp | batch | published | par-plan (paper's "
          "setting) | error | plan s |%s" %
          (" best found | its configuration |" if args.search else ""))
    print("|---|---|---|---|---|---|---|---|---|%s" %
          ("---|---|" if args.search else ""))
    errors = []
    for name, heads, hidden, layers, tp, pp, gpus, batch, published in \
            TABLE[:args.rows]:
        model = os.path.join(tmp, name + ".mlir")
        run([sys.executable, GEN, "--gpt", "--layers", str(layers), "--batch",
             "8", "--seq", "2048", "--dmodel", str(hidden), "--heads",
             str(heads), "--vocab", "51200", "--dp", "1", "--tp", str(tp),
             "-o", model])
        dp = gpus // (tp * pp)
        # Megatron's full recomputation is recompute=full, pipelined or
        # not: par's pipelined forwards keep their residuals
        # (par-pipeline-stash, issue 41), so a stage's backward no longer
        # recomputes its forward by itself.
        config = ("tp=%d pp=%d m=%d recompute=full schedule=1f1b "
                  "precision=f16 grad-reduce=compute" % (tp, pp, batch // dp))
        start = time.time()
        out = run([PLAN, model, "--machine", "a100", "--gpus", str(gpus),
                   "--global-batch", str(batch), "--config", config])
        seconds = time.time() - start
        got = tflops(out)
        err = (got - published) / published
        errors.append(abs(err))
        row = "| %s | %d | %d | %d | %d | %d | %.1f | %+.1f%% | %.1f |" % (
            name, gpus, tp, pp, batch, published, got, 100 * err, seconds)
        fits = "does not fit" not in out
        row = row[:-1] + "%s |" % ("" if fits else " (does not fit)")
        if args.search:
            r = subprocess.run(
                [PLAN, model, "--machine", "a100", "--gpus", str(gpus),
                 "--global-batch", str(batch), "--tp", str(tp), "--pp",
                 str(pp), "--precision", "f16", "--top", "1"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0:
                best = tflops(r.stdout.split("best: ", 1)[1])
                opts = re.search(r'--options="([^"]*)"', r.stdout).group(1)
                row += " %.1f | %s |" % (best, opts)
            else:
                row += " - | %s |" % r.stdout.strip().splitlines()[-1]
        print(row, flush=True)
    print("\nmean |error| %.1f%%, max %.1f%%; rows within 10%%: %d of %d" % (
        100 * sum(errors) / len(errors), 100 * max(errors),
        sum(e <= 0.10 for e in errors), len(errors)))


if __name__ == "__main__":
    main()
