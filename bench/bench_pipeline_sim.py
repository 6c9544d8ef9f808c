#!/usr/bin/env python3
"""Pipeline schedules against theory (issue 5): runs par-pipeline-sim for
every schedule over a grid of p (pipeline ranks) and m (micro-batches) with
unit costs (T_F = 1, T_B = 2, or T_F = T_BI = T_BW = 1 for ZB-H1) and
prints the simulated bubble and first-stage peak activations next to the
published formulas (docs/Formulas.md):

  GPipe, 1F1B  bubble fraction (p-1)/(m+p-1)     peak m (GPipe), p (1F1B)
  interleaved  bubble ratio (p-1)/(v m)          peak ~ p + (p-1)/v
  ZB-H1        bubble ratio (p-1)/(3m)           peak p

Usage: bench/bench_pipeline_sim.py [--sim build/bin/par-pipeline-sim]
Exits 1 if the tool fails; prints a verdict per row otherwise.
"""
import argparse
import json
import subprocess
import sys


def run(sim, schedule, p, m, v):
    cmd = [sim, "--schedule", schedule, "-p", str(p), "-m", str(m), "--json"]
    if v > 1:
        cmd += ["-v", str(v)]
    if schedule == "zbh1":
        cmd += ["--tf", "1", "--tbi", "1", "--tbw", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench_pipeline_sim: %s failed:\n%s" % (" ".join(cmd), r.stderr))
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="build/bin/par-pipeline-sim")
    args = ap.parse_args()
    print("| schedule | p | m | v | bubble fraction (sim) | bubble ratio (sim) "
          "| formula | formula value | peak act. rank 0 | expected peak | match |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for schedule, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zbh1", 1)):
        for p in (2, 4, 8):
            for m in (8, 16, 32):
                if schedule == "interleaved" and m % p:
                    continue
                j = run(args.sim, schedule, p, m, v)
                e = j["expected"]
                uses_fraction = schedule in ("gpipe", "1f1b")
                formula = e["fraction_formula"] if uses_fraction else e["ratio_formula"]
                value = e["bubble_fraction"] if uses_fraction else e["bubble_ratio"]
                sim = j["bubble_fraction"] if uses_fraction else j["bubble_ratio"]
                ok = abs(sim - value) < 1e-9 and j["peak_activations"][0] == e["peak_rank0"]
                print("| %s | %d | %d | %d | %.4f | %.4f | %s | %.4f | %d | %d | %s |" % (
                    schedule, p, m, v, j["bubble_fraction"], j["bubble_ratio"], formula,
                    value, j["peak_activations"][0], e["peak_rank0"],
                    "yes" if ok else "no (%s)" % e.get("scope", "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
