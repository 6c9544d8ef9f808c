#!/usr/bin/env python3
"""Pipeline action costs and step times, printed as ratios (issue 41).

One GPT (gen_transformer.py --gpt --layers 4 --dmodel 128 --seq 64
--batch 8 --pp 2) split into 2 stages on 2 pipeline ranks, 8 micro-batches,
AdamW, trained with `par-run -n 2 --pipeline --trace` under

  1f1b          the default: each forward keeps the residuals its backward
                reads (par-pipeline-stash), B runs the backward only;
  1f1b-recompute  stash=false: B recomputes its stage's forward first;
  zbh1          ZB-H1, B split into BI (input gradient) and BW (weight
                gradients) on the residuals (BW on what BI saved);
  zbv           ZB-V: the model in 4 stages, two chunks per rank in a V
                (rank 0 holds stages 0 and 3), BI and BW as ZB-H1's;

and, on the same 2 ranks, the unpipelined step of the same program (every
rank the whole model on the whole batch: T1). From the last step's Chrome
trace it prints the mean F, B, BI and BW action times of each pipeline rank
and B/F, (BI+BW)/F; from the loss CSV the step time (the mean of the steps
after the first) against 1F1B's, and the pipelined step against the
analytic one, T1 / p x (1 + (p - 1) / m) (the 1F1B bubble).

Targets (issue 41): 1F1B B/F <= 2.3, ZB-H1 (BI+BW)/F <= 2.3 and its step
below 1F1B's, ZB-V's step at most ZB-H1's, the pipelined step within the
bubble + 10% (ratio <= 1.10). ZB-V's actions each cover one chunk (half a
stage), so its ratios compare with the others' but its times are halves.

Usage, from the repository root after the build:

    python3 bench/bench_pipeline.py [--steps N]
"""

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "build" / "bin"
P, M = 2, 8
GEN = ["--gpt", "--layers", "4", "--batch", "8", "--seq", "64", "--dmodel",
       "128", "--heads", "4", "--vocab", "96", "--dp", "1", "--tp", "1",
       "--pp", str(P)]
TRAIN = "optimizer=adamw lr=0.003 micro-batches=%d" % M
RUNS = {
    "1f1b": ("--par-pipeline-split=stages=%d" % P, "schedule=1f1b", ""),
    "1f1b-recompute": ("--par-pipeline-split=stages=%d" % P, "schedule=1f1b",
                       "stash=false"),
    "zbh1": ("--par-pipeline-split=stages=%d split-backward=true" % P,
             "schedule=zbh1", ""),
    "zbv": ("--par-pipeline-split=stages=%d split-backward=true" % (2 * P),
            "schedule=zbv virtual=2", ""),
}


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        sys.exit("bench_pipeline: %s failed" % Path(str(cmd[0])).name)
    return p.stdout


def step_seconds(path):
    """The mean step time after the first (the CSV's seconds are
    cumulative)."""
    rows = list(csv.DictReader(open(path)))
    t = [float(r["seconds"]) for r in rows]
    return (t[-1] - t[0]) / (len(t) - 1)


def action_means(path):
    """Per trace track (pipeline rank's first device): mean us by category."""
    events = json.load(open(path))["traceEvents"]
    by = {}
    for e in events:
        if e.get("ph") == "X":
            by.setdefault((e["tid"], e.get("cat")), []).append(e["dur"])
    tracks = sorted({t for t, _ in by})
    return [{cat: sum(v) / len(v) for (t, cat), v in by.items() if t == tid}
            for tid in tracks]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    env_steps = ["--steps", str(a.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        run([sys.executable, REPO / "examples" / "gen_transformer.py", *GEN,
             "-o", model])
        data = REPO / "test" / "Inputs" / "corpus.txt"
        res = {}
        for name, (split, sched, extra) in RUNS.items():
            ir = tmp / (name + ".mlir")
            run([BIN / "par-opt", model, split, "--par-autodiff",
                 "--par-optimizer=" + TRAIN,
                 "--par-pipeline-schedule=%s micro-batches=%d" % (sched, M),
                 "-o", ir])
            art = tmp / name
            run([BIN / "par-compile", ir, "-o", art, "--no-reference"] +
                (["--options=" + extra] if extra else []))
            trace, losses = tmp / (name + ".json"), tmp / (name + ".csv")
            run([BIN / "par-run", "-n", str(P), art, "--pipeline", "--data",
                 data, *env_steps, "--trace", trace, "--loss-csv", losses])
            res[name] = (action_means(trace), step_seconds(losses))
        # The unpipelined step of the same program on the same ranks.
        ir = tmp / "flat.mlir"
        run([BIN / "par-opt", model, "--par-autodiff",
             "--par-optimizer=" + TRAIN, "-o", ir])
        run([BIN / "par-compile", ir, "-o", tmp / "flat", "--no-reference"])
        run([BIN / "par-run", "-n", str(P), tmp / "flat", "--data", data,
             *env_steps, "--loss-csv", tmp / "flat.csv"])
        t1 = step_seconds(tmp / "flat.csv")
    print("model   : gen_transformer.py " + " ".join(GEN))
    print("training: par-opt ... --par-optimizer=\"%s\"; par-run -n %d ART "
          "--pipeline --steps %d --trace (last step's actions)" %
          (TRAIN, P, a.steps))
    print()
    print("%-16s %-5s %9s %9s %9s %9s %7s %10s" %
          ("run", "rank", "F us", "B us", "BI us", "BW us", "ratio", "step s"))
    for name, (ranks, step) in res.items():
        for r, c in enumerate(ranks):
            f = c.get("forward", 0)
            b, bi, bw = (c.get(k, 0) for k in
                         ("backward", "backward-input", "weight-gradient"))
            ratio = (b if b else bi + bw) / f if f else float("nan")
            print("%-16s %-5d %9.0f %9.0f %9.0f %9.0f %7.2f %10.4f" %
                  (name, r, f, b, bi, bw, ratio, step))
    print()
    one, rec, zb, zv = (res[k][1] for k in
                        ("1f1b", "1f1b-recompute", "zbh1", "zbv"))
    worst_bf = max((c["backward"] / c["forward"]) for c in res["1f1b"][0])
    worst_zb = max(((c.get("backward-input", 0) + c["weight-gradient"]) /
                    c["forward"]) for c in res["zbh1"][0])
    ideal = t1 / P * (1 + (P - 1) / M)
    print("1F1B B/F (worst rank)           %.2f (target <= 2.3)" % worst_bf)
    print("ZB-H1 (BI+BW)/F (worst rank)    %.2f (target <= 2.3)" % worst_zb)
    print("1F1B step / stash=false's       %.2f" % (one / rec))
    worst_zv = max(((c.get("backward-input", 0) + c["weight-gradient"]) /
                    c["forward"]) for c in res["zbv"][0])
    print("ZB-V (BI+BW)/F (worst rank)     %.2f" % worst_zv)
    print("ZB-H1 step / 1F1B's             %.2f (target < 1)" % (zb / one))
    print("ZB-V step / ZB-H1's             %.2f (target <= 1)" % (zv / zb))
    print("ZB-V step / 1F1B's              %.2f" % (zv / one))
    print("unpipelined step T1 on %d ranks  %.4f s; 1F1B's analytic step "
          "T1/p (1 + (p-1)/m) = %.4f s" % (P, t1, ideal))
    print("1F1B step / analytic            %.2f (target <= 1.10)" %
          (one / ideal))


if __name__ == "__main__":
    main()
