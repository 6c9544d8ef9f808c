#!/usr/bin/env python3
"""Mixed precision: communication bytes and CPU step time, f32 vs bf16 / f16.

One GPT (examples/gen_transformer.py --gpt) is compiled by par-compile with
--options="optimizer=adamw precision=P comm-report=true" for P = f32, bf16
(loss scaling auto = none) and f16 (auto = dynamic), once per mesh, and the
script prints, in one run:

  (a) communication per train step from the compiler's report
      (par-comm-report on gpt_grad + gpt_step: every collective with its
      axes, element type and ring-formula bytes per device), grouped by
      kind (op, axes, element type), with the ratio bf16 / f32 and
      f16 / f32 per kind and in total; next to it the bytes par-run's
      runtime statistics count (bytes sent per rank over --steps steps,
      divided by the steps), which must agree with the report;
  (b) CPU step time (par-run --steps N --loss-csv: the per-step seconds of
      rank 0, first --warmup steps dropped, median; rounds interleaved in
      ABBA order, best round kept), ratio bf16 / f32 and f16 / f32.
      Informational: a CPU has no fast bf16/f16 arithmetic here (the BLAS
      calls take f32, so 16-bit matmul inputs are widened; the generated
      loops convert at every load and store), so no speedup is expected.

Meshes: --meshes DPxTP list (default 2x2 on 4 ranks and 1x1 on one). Model
size: --layers/--batch/--seq/--dmodel/--heads/--vocab (default 2 layers,
batch 8, seq 32, d_model 64, 4 heads, vocab 96). Training data: README.md
windows (par-run --data), same --seed for every precision.

Exit status 0 unless a tool fails (then 1) or the report and the runtime
disagree on the bytes (then 1): the ratios themselves are not judged.

Example (from the repository root):
    python3 bench/bench_mixed_precision.py
    python3 bench/bench_mixed_precision.py --meshes 2x2 --steps 40 --rounds 3
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRECISIONS = ["f32", "bf16", "f16"]


def run(cmd, env=None):
    cmd = [str(c) for c in cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        sys.stderr.write(" ".join(map(str, cmd)) + "\n" + p.stdout[-3000:] + p.stderr[-3000:])
        sys.exit("bench_mixed_precision: %s failed" % os.path.basename(str(cmd[0])))
    return p.stdout


def parse_report(text):
    """{function: [(op, axes, elt, type, bytes)]} from par-comm-report."""
    out, fn = {}, None
    for line in text.splitlines():
        m = re.match(r"par-comm-report: @(\S+)", line)
        if m:
            fn = m.group(1)
            out.setdefault(fn, [])
            continue
        m = re.match(r"\s+(par\.\w+) axes=(\[[^\]]*\]) n=\d+ (\S+) (\S+): (\d+) bytes", line)
        if m and fn:
            out[fn].append((m.group(1), m.group(2), m.group(3), m.group(4), int(m.group(5))))
    return out


def per_step(report):
    """Collectives of one train step: the gradient's and the step's own."""
    return report.get("gpt_grad", []) + report.get("gpt_step", [])


def group(colls):
    g = OrderedDict()
    for op, axes, elt, _, b in colls:
        k = (op, axes)
        c = g.setdefault(k, {"n": 0, "bytes": 0, "elts": set()})
        c["n"] += 1
        c["bytes"] += b
        c["elts"].add(elt)
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--meshes", default="2x2,1x1")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--dmodel", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the artifacts in this folder")
    a = ap.parse_args()

    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-mp-"))
    work.mkdir(parents=True, exist_ok=True)
    binp = Path(a.bin)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    meshes = [tuple(int(x) for x in m.split("x")) for m in a.meshes.split(",")]
    size = ["--layers", a.layers, "--batch", a.batch, "--seq", a.seq, "--dmodel", a.dmodel,
            "--heads", a.heads, "--vocab", a.vocab]
    print("model    : gen_transformer.py --gpt %s" % " ".join(map(str, size)))
    print("compile  : par-compile --no-reference --options=\"optimizer=adamw precision=P "
          "comm-report=true\" (P = %s; loss-scale auto: none for bf16, dynamic for f16)"
          % ", ".join(PRECISIONS))
    print("run      : par-run -n DP*TP ART --entry gpt_step --data README.md --steps %d "
          "--seed %d --loss-csv; median step after %d warm-up steps, best of %d rounds (ABBA)"
          % (a.steps, a.seed, a.warmup, a.rounds))

    def build(job):
        dp, tp, p = job
        tag = "dp%dtp%d-%s" % (dp, tp, p)
        model = work / ("dp%dtp%d.mlir" % (dp, tp))
        art = work / tag
        rep = run([binp / "par-compile", model, "-o", art, "--no-reference",
                   "--options=optimizer=adamw precision=%s comm-report=true" % p])
        return tag, (art, parse_report(rep))

    for dp, tp in meshes:  # generate first (shared by the precisions)
        run(["/usr/bin/python3", REPO / "examples" / "gen_transformer.py", "--gpt"]
            + size + ["--dp", dp, "--tp", tp, "-o", work / ("dp%dtp%d.mlir" % (dp, tp))])
    with ThreadPoolExecutor(2) as pool:
        built = dict(pool.map(build, [(dp, tp, p) for dp, tp in meshes for p in PRECISIONS]))

    def train(art, ranks, tag, k):
        path = work / ("%s-%d.csv" % (tag, k))
        out = run([binp / "par-run", "-n", ranks, art, "--entry", "gpt_step", "--data",
                   REPO / "README.md", "--steps", a.steps, "--seed", a.seed,
                   "--loss-csv", path], env)
        secs = [float(r["seconds"]) for r in csv.DictReader(open(path))][a.warmup:]
        m = re.search(r"rank 0: [\d.]+ s, (\d+) bytes sent in (\d+) collectives", out)
        sent = int(m.group(1)) / a.steps if m else 0.0
        ncoll = int(m.group(2)) / a.steps if m else 0.0
        return statistics.median(secs), sent, ncoll

    bad = 0
    for dp, tp in meshes:
        ranks = dp * tp
        tags = {p: "dp%dtp%d-%s" % (dp, tp, p) for p in PRECISIONS}
        print("\n== mesh dp=%d tp=%d (%d rank%s) ==" % (dp, tp, ranks, "s" if ranks > 1 else ""))
        # (a) communication
        groups = {p: group(per_step(built[tags[p]][1])) for p in PRECISIONS}
        keys = list(groups["f32"].keys())
        for p in PRECISIONS[1:]:
            keys += [k for k in groups[p] if k not in keys]
        if keys:
            print("%-16s %-12s | %-22s | %-22s | %-22s | %7s %7s"
                  % ("collective", "axes", "f32: n, bytes, type", "bf16: n, bytes, type",
                     "f16: n, bytes, type", "bf16/32", "f16/32"))
            for k in keys:
                cells, b = [], {}
                for p in PRECISIONS:
                    c = groups[p].get(k, {"n": 0, "bytes": 0, "elts": set()})
                    b[p] = c["bytes"]
                    cells.append("%3d %9d %-8s" % (c["n"], c["bytes"], ",".join(sorted(c["elts"]))))
                ratio = lambda p: ("%7.3f" % (b[p] / b["f32"])) if b["f32"] else "    -  "
                print("%-16s %-12s | %s | %s | %s | %s %s"
                      % (k[0], k[1], cells[0], cells[1], cells[2], ratio("bf16"), ratio("f16")))
        tot = {p: sum(c["bytes"] for c in groups[p].values()) for p in PRECISIONS}
        # (b) time, and the runtime's byte count
        res = {p: [] for p in PRECISIONS}
        for k in range(a.rounds):
            order = PRECISIONS if k % 2 == 0 else PRECISIONS[::-1]
            for p in order:
                res[p].append(train(built[tags[p]][0], ranks, tags[p], k))
        best = {p: min(r[0] for r in res[p]) for p in PRECISIONS}
        sent = {p: res[p][0][1] for p in PRECISIONS}
        print("bytes per step per device, report : " + "   ".join(
            "%s %d" % (p, tot[p]) for p in PRECISIONS)
            + ("   bf16/f32 %.3f  f16/f32 %.3f" % (tot["bf16"] / tot["f32"], tot["f16"] / tot["f32"])
               if tot["f32"] else ""))
        print("bytes per step per rank, runtime  : " + "   ".join(
            "%s %.0f (%.0f collectives)" % (p, sent[p], res[p][0][2]) for p in PRECISIONS))
        for p in PRECISIONS:
            if abs(sent[p] - tot[p]) > 0.5:
                print("  MISMATCH %s: report %d, runtime %.1f bytes per step" % (p, tot[p], sent[p]))
                bad = 1
        print("step time (median, best round), ms: " + "   ".join(
            "%s %.2f" % (p, 1e3 * best[p]) for p in PRECISIONS)
            + "   bf16/f32 %.3f  f16/f32 %.3f" % (best["bf16"] / best["f32"], best["f16"] / best["f32"]))
        for p in PRECISIONS:
            print("  %s rounds: %s" % (p, ", ".join("%.2f" % (1e3 * r[0]) for r in res[p])))
    return bad


if __name__ == "__main__":
    sys.exit(main())
