#!/usr/bin/env python3
"""ZeRO-3 prefetch benchmark (issue 27): the step time of zero=3 with the
parameter gathers started one group ahead (zero-prefetch=true, the
default) against the blocking gathers (zero-prefetch=false), on 8 CPU
ranks (dp=8, FSDP only).

GPT (examples/gen_transformer.py --gpt), AdamW, the same program with three
options: zero=1 (no parameter gathers at all: the floor), zero=3 blocking,
zero=3 prefetched. The runs alternate (rounds), each --steps steps; a run's
time is the median s/step after the first step, a configuration's the best
of its rounds' medians. The overlap is how much of the gathers' exposed time
prefetch hides:

    hidden = (t(zero=3 blocking) - t(zero=3 prefetch))
             / (t(zero=3 blocking) - t(zero=1))

(1: every gather hidden behind compute; 0: none; negative: prefetch costs
more than it hides). Also printed: par-run's gather bytes per step and rank
by kernel (all_gather = blocking, all_gather_start = prefetched), the
predicted and measured memory peaks, and whether the losses of the two
zero=3 programs are bitwise equal.

Usage: /usr/bin/python3 bench/bench_zero_prefetch.py [--build build]
           [--layers 4] [--dmodel 256] [--seq 64] [--batch 16] [--rounds 3]
           [--steps 6] [--quick]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = [
    ("zero=1", "zero=1"),
    ("zero=3 blocking", "zero=3 zero-prefetch=false"),
    ("zero=3 prefetch", "zero=3 zero-prefetch=true"),
]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("failed (%d): %s\n%s" %
                           (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    return r.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dmodel", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--quick", action="store_true",
                   help="L=2, d=64, S=32, 1 round: a smoke run")
    a = p.parse_args()
    if a.quick:
        a.layers, a.dmodel, a.seq, a.rounds = 2, 64, 32, 1
    bindir = os.path.join(os.path.abspath(a.build), "bin")
    corpus = os.path.join(ROOT, "test", "Inputs", "corpus.txt")
    with tempfile.TemporaryDirectory(prefix="par-bench-prefetch-") as tmp:
        model = os.path.join(tmp, "gpt.mlir")
        run([sys.executable, os.path.join(ROOT, "examples",
                                          "gen_transformer.py"),
             "--gpt", "--layers", str(a.layers), "--batch", str(a.batch),
             "--seq", str(a.seq), "--dmodel", str(a.dmodel), "--heads",
             str(a.heads), "--vocab", "96", "--dp", str(a.ranks), "--tp",
             "1", "-o", model])
        arts = {}
        for name, opts in CONFIGS:
            out = os.path.join(tmp, re.sub(r"[^a-z0-9]+", "_", name))
            run([os.path.join(bindir, "par-compile"), model, "-o", out,
                 "--no-reference",
                 "--options=optimizer=adamw lr=0.001 " + opts])
            arts[name] = out
        times = {name: [] for name, _ in CONFIGS}
        info, losses = {}, {}
        for rnd in range(a.rounds):
            for name, _ in CONFIGS:
                csv = os.path.join(tmp, "loss-%d.csv" % rnd)
                text = run([os.path.join(bindir, "par-run"), "-n",
                            str(a.ranks), arts[name], "--entry", "gpt_step",
                            "--data", corpus, "--steps", str(a.steps),
                            "--loss-csv", csv])
                steps = [float(x) for x in
                         re.findall(r"([0-9.]+) s/step", text)]
                times[name].append(statistics.median(steps[1:] or steps))
                by = re.search(r"bytes per step and rank: \d+ \(([^)]*)\)",
                               text)
                mem = re.search(r"memory \(rank \d+\): predicted ([0-9.]+) "
                                r"MiB, measured peak ([0-9.]+) MiB", text)
                info[name] = (by.group(1) if by else "-",
                              "%s / %s" % mem.groups() if mem else "-")
                losses[name] = [l.split(",")[1] for l in
                                open(csv).read().split()[1:]]
        print("GPT L=%d d=%d S=%d B=%d, AdamW, %d ranks (dp=%d), %d rounds "
              "x %d steps" % (a.layers, a.dmodel, a.seq, a.batch, a.ranks,
                              a.ranks, a.rounds, a.steps))
        best = {n: min(t) for n, t in times.items()}
        for name, _ in CONFIGS:
            print("  %-16s %.1f ms/step (rounds %s)  memory predicted/measured"
                  " %s MiB" % (name, 1e3 * best[name], " ".join(
                      "%.1f" % (1e3 * t) for t in times[name]),
                               info[name][1]))
            print("  %-16s bytes: %s" % ("", info[name][0]))
        floor, off, on = (best[n] for n, _ in CONFIGS)
        exposed = off - floor
        print("  prefetch vs blocking: %.3fx step time" % (on / off))
        if exposed > 0:
            print("  gathers' exposed time %.1f ms/step, hidden by prefetch: "
                  "%.0f%%" % (1e3 * exposed, 100 * (off - on) / exposed))
        else:
            print("  gathers' exposed time: none measurable (zero=3 blocking "
                  "is not slower than zero=1)")
        same = losses["zero=3 blocking"] == losses["zero=3 prefetch"]
        print("  losses prefetch vs blocking: %s" %
              ("bitwise equal" if same else "DIFFERENT"))


if __name__ == "__main__":
    main()
