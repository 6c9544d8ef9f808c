#!/usr/bin/env python3
"""Memory benchmark (issue 27): the compiler's memory plan against the
measured peak, and what each memory option saves and costs.

One invocation, GPT (examples/gen_transformer.py --gpt) L=4 layers,
d=512, 8 heads, S=128, vocabulary 96, global batch 8, AdamW, on 8 CPU ranks
(dp=2 x tp=4 unless a row says otherwise), in f32 and in bf16 mixed
precision (precision=bf16: f32 master weights), 2 steps per run:

  * per configuration: the plan's predicted peak per rank (par-compile,
    stored in the manifest) and par-run's measured peak (the largest rank's
    high-water mark of program buffers + session buffers), their relative
    error (target 10%), the plan's parts at the peak, the step time
    (median of the steps after the first) and its ratio to the baseline's;
  * activation memory per layer: (activations at L=4 - at L=2) / 2 from the
    plans (the difference cancels the embedding, LM head and loss), against
    Korthikanti et al. 2022's formulas adapted to par (see FORMULAS below);
  * ZeRO: the model state per rank (parameters + gradients + optimizer
    state, from zero=3's report) against (2+2+12)Psi/N_d, and the
    data-parallel bytes per step of zero=3 against zero=1's on a dp-only
    mesh (8 x 1), from par-run's byte counts (target 1.5x);
  * pipelines (first dtype): dp=2 x tp=2 x pp=2, 2 stages, GPipe and 1F1B
    with 4 and 8 micro-batches of --pp-batch sequences: par-run's predicted
    peak (the simulation of the rank's actions over the stage functions'
    plans, PipelineMemory.h) against the measured one, and the stage inputs
    each pipeline rank holds at once against the schedule's formula
    (RationalePipeline.md: GPipe m, 1F1B min(p - r, m)); 1F1B m=4 with
    zero=0, 1 and 3: the stage state per pipeline rank against zero=0's and
    the formula, and the bytes per step.

Usage: bench/bench_memory.py [--build build] [--quick] [--configs a,b]
                             [--pipelines yes|no|only] [--pp-batch N]
Prints one table per dtype; the numbers in bench/README.md come from it.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024.0 * 1024.0

# name -> (mesh (dp, tp), extra par-compile options)
CONFIGS = [
    ("baseline", (2, 4), ""),
    ("zero=1", (2, 4), "zero=1"),
    ("zero=2", (2, 4), "zero=2"),
    ("zero=3", (2, 4), "zero=3"),
    ("recompute=selective", (2, 4), "recompute=selective"),
    ("recompute=full", (2, 4), "recompute=full"),
    ("sequence-parallel", (2, 4), "sequence-parallel=true"),
    ("zero=3+selective+SP", (2, 4),
     "zero=3 recompute=selective sequence-parallel=true"),
]

# Korthikanti et al. 2022 count bytes per layer with 2-byte activations and
# dropout: sbh(34 + 5as/h) without parallelism. par's GPT has no dropout
# (which removes the masks, sbh + as^2b bytes, and the dropout outputs,
# sbh + 2as^2b bytes... as the paper counts them), so the adapted counts,
# in elements (bytes / 2 in the paper), are:
#   none:              sbh(16 + as/h)       (LN 2, QKV in 1, Q K 2, V 1,
#                                            proj in 1, MLP 9, softmax as/h)
#   tp (t):            sbh(4 + 12/t + as/(ht))
#   tp + SP:           sbh(16 + as/h) / t
#   selective + SP:    16 sbh / t
#   full:              sbh (the block's input)
# times the bytes per element of the saved activations (4 in f32; 2 for the
# bf16 compute copies under mixed precision).
def korthikanti(kind, s, b, h, a, t, bpe):
    sbh = s * b * h
    if kind == "none":
        return sbh * (16 + a * s / h) * bpe
    if kind == "tp":
        return sbh * (4 + 12.0 / t + a * s / (h * t)) * bpe
    if kind == "tp+sp":
        return sbh * (16 + a * s / h) / t * bpe
    if kind == "selective+sp":
        return 16 * sbh / t * bpe
    if kind == "full":
        return sbh * bpe
    raise ValueError(kind)


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("failed (%d): %s\n%s" %
                           (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    return r.stdout


class Bench:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.bin = os.path.join(os.path.abspath(args.build), "bin")
        self.corpus = os.path.join(ROOT, "test", "Inputs", "corpus.txt")

    def model(self, layers, dp, tp, pp=1, batch=None):
        batch = batch or self.args.batch
        path = os.path.join(self.tmp, "gpt-L%d-%dx%dx%d-b%d.mlir" % (
            layers, dp, tp, pp, batch))
        if not os.path.exists(path):
            a = self.args
            run([sys.executable, os.path.join(ROOT, "examples",
                                              "gen_transformer.py"),
                 "--gpt", "--layers", str(layers), "--batch", str(batch),
                 "--seq", str(a.seq), "--dmodel", str(a.dmodel), "--heads",
                 str(a.heads), "--vocab", "96", "--dp", str(dp), "--tp",
                 str(tp), "--pp", str(pp), "-o", path])
        return path

    def pipeline(self, schedule, m, zero=0):
        """A pipelined GPT (dp=2 x tp=2 x pp=2) trained for --steps: the
        memory line and every pipeline rank's plan (with zero > 0 also
        kept: self.text)."""
        a = self.args
        out = os.path.join(self.tmp, "pp-%s-m%d-z%d" % (schedule, m, zero))
        run([os.path.join(self.bin, "par-compile"),
             self.model(a.layers, 2, 2, 2, a.pp_batch), "-o", out,
             "--no-reference", "--options=optimizer=adamw lr=0.001 stages=2 "
             "schedule=%s micro-batches=%d zero=%d" % (schedule, m, zero)])
        text = self.text = run([os.path.join(self.bin, "par-run"), "-n", "8",
                                out, "--pipeline", "--data", self.corpus,
                                "--steps", str(a.steps)])
        line = re.search(r"memory \(rank (\d+)\): predicted ([0-9.]+) MiB, "
                         r"measured peak ([0-9.]+) MiB", text)
        plans = re.findall(r"memory plan of pipeline rank (\d+) \(\w+\): "
                           r"peak ([0-9.]+) MiB \(\d+ bytes\) in (\S+) = "
                           r".*?in flight ([0-9.]+) MiB .*most in flight "
                           r"([0-9.]+) MiB \((\d+) stage inputs\)", text)
        return (float(line.group(2)), float(line.group(3)),
                [(int(r), float(pk), at, float(held), float(most), int(n))
                 for r, pk, at, held, most, n in plans])

    def compile(self, name, layers, mesh, options, dtype):
        opts = "optimizer=adamw lr=0.001 " + options
        if dtype == "bf16":
            opts += " precision=bf16"
        out = os.path.join(self.tmp, "%s-%s-L%d" % (
            re.sub(r"[^a-z0-9]+", "_", name), dtype, layers))
        self.output = run([os.path.join(self.bin, "par-compile"),
                           self.model(layers, *mesh), "-o", out,
                           "--no-reference", "--options=" + opts.strip()])
        man = json.load(open(os.path.join(out, "sharded.json")))
        step = [f for f in man["functions"] if f["name"].endswith("_step")]
        return out, step[0]

    def train(self, art, entry):
        text = run([os.path.join(self.bin, "par-run"), "-n", "8", art,
                    "--entry", entry, "--data", self.corpus, "--steps",
                    str(self.args.steps)])
        m = re.search(r"memory \(rank (\d+)\): predicted ([0-9.]+|none)"
                      r"(?: MiB)?, measured peak ([0-9.]+) MiB", text)
        times = [float(x) for x in re.findall(r"([0-9.]+) s/step", text)]
        by = re.search(r"bytes per step and rank: (\d+)", text)
        return {
            "predicted": None if m.group(2) == "none" else float(m.group(2)),
            "measured": float(m.group(3)),
            "time": statistics.median(times[1:] if len(times) > 1 else times),
            "bytes": int(by.group(1)) if by else 0,
        }


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header])
              for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) for c, w in zip(r, widths))
    print(line(header))
    for r in rows:
        print(line(r))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dmodel", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--configs", default="",
                   help="comma-separated names (default: all)")
    p.add_argument("--pp-batch", type=int, default=4,
                   help="pipelines: sequences per micro-batch (global)")
    p.add_argument("--pipelines", default="yes",
                   choices=["yes", "no", "only"],
                   help="the pipelined configurations: run them, skip them, "
                   "or run only them")
    p.add_argument("--quick", action="store_true",
                   help="L=2, d=128, S=64: a smoke run of the script")
    args = p.parse_args()
    if args.quick:
        args.layers, args.dmodel, args.seq = 2, 128, 64
    wanted = set(args.configs.split(",")) if args.configs else None
    configs = [c for c in CONFIGS if not wanted or c[0] in wanted]
    if args.pipelines == "only":
        configs = []
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="par-bench-memory-") as tmp:
        b = Bench(args, tmp)
        for dtype in args.dtypes.split(","):
            print("\n== %s: GPT L=%d d=%d S=%d B=%d, 8 ranks ==" % (
                dtype, args.layers, args.dmodel, args.seq, args.batch))
            rows, base_time, acts = [], None, {}
            first = dtype == args.dtypes.split(",")[0]
            if args.pipelines == "only":
                if first:
                    worst = max(worst, pipeline_rows(b, args))
                continue
            for name, mesh, options in configs:
                try:
                    art, step = b.compile(name, args.layers, mesh, options,
                                          dtype)
                except RuntimeError as e:
                    rows.append([name, "-", "-", "-", "-", "-", "-",
                                 "not built: " + str(e).splitlines()[-1][:60]])
                    continue
                r = b.train(art, step["name"])
                plan = step["memory"]
                parts = plan["at_peak"]
                err = abs(r["predicted"] - r["measured"]) / r["measured"]
                worst = max(worst, err)
                if base_time is None:
                    base_time = r["time"]
                state = (parts["parameters"] + parts["gradients"] +
                         parts["optimizer_state"]) / MIB
                rows.append([name, "%.2f" % r["predicted"],
                             "%.2f" % r["measured"], "%.2f%%" % (100 * err),
                             "%.2f" % state,
                             "%.2f" % (plan["saved_activations"] / MIB),
                             "%.3f" % r["time"],
                             "%.2fx" % (r["time"] / base_time)])
                acts[name] = plan["saved_activations"]
            table(rows, ["config", "predicted MiB", "measured MiB", "error",
                         "state MiB", "saved act. MiB", "s/step",
                         "vs baseline"])
            layer_rows = per_layer(b, args, dtype, acts)
            if layer_rows:
                print("\nactivations per layer (plan, L=%d minus L=2, / %d) "
                      "vs Korthikanti adapted:" % (args.layers,
                                                   args.layers - 2))
                table(layer_rows, ["config", "par MiB", "formula MiB",
                                   "ratio"])
            zero_rows(b, args, dtype)
            if first and args.pipelines == "yes":
                worst = max(worst, pipeline_rows(b, args))
    print("\nworst predicted-vs-measured error: %.2f%% (target 10%%)" %
          (100 * worst))
    return 0 if worst <= 0.10 else 1


def pipeline_rows(b, args):
    """GPipe and 1F1B, 4 and 8 micro-batches, on pp=2: predicted (the
    largest rank's) vs measured, and per pipeline rank the plan's peak, where
    it falls and the stage inputs held at once (vs the schedule's formula).
    Returns the worst relative error."""
    worst, rows, p = 0.0, [], 2
    for schedule in ("gpipe", "1f1b"):
        for m in (4, 8):
            try:
                pred, meas, plans = b.pipeline(schedule, m)
            except RuntimeError as e:
                rows.append(["%s m=%d" % (schedule, m), "-", "-", "-",
                             "not run: " + str(e).splitlines()[-1][:60]])
                continue
            err = abs(pred - meas) / meas
            worst = max(worst, err)
            ranks = []
            for r, peak, at, held, most, n in plans:
                want = m if schedule == "gpipe" else min(p - r, m)
                ranks.append("r%d %.2f in %s, %d inputs (formula %d%s)" % (
                    r, peak, at, n, want, "" if n == want else " MISMATCH"))
            rows.append(["%s m=%d" % (schedule, m), "%.2f" % pred,
                         "%.2f" % meas, "%.2f%%" % (100 * err),
                         "; ".join(ranks)])
    print("\npipelines: dp=2 x tp=2 x pp=2, 2 stages, micro-batch %d "
          "sequences, AdamW:" % args.pp_batch)
    table(rows, ["schedule", "predicted MiB", "measured MiB", "error",
                 "per pipeline rank: plan peak MiB, where, stage inputs "
                 "held at once"])
    return max(worst, pipeline_zero_rows(b, args))


def pipeline_zero_rows(b, args):
    """1F1B, m=4, with zero=0, 1 and 3: predicted vs measured peak, each
    pipeline rank's stage state against zero=0's and against the formula
    (AdamW in f32, per parameter: 4 bytes of weights, 4 of gradient sums,
    8 of state; the sums stay whole in a pipeline, zero>=1 divides the
    state by dp, zero=3 the weights too), and the dp bytes per step.
    Returns the worst predicted-vs-measured error."""
    worst, rows, dp, m = 0.0, [], 2, 4
    base = None
    for zero in (0, 1, 3):
        try:
            pred, meas, _ = b.pipeline("1f1b", m, zero)
        except RuntimeError as e:
            rows.append(["zero=%d" % zero, "-", "-", "-", "-", "-",
                         "not run: " + str(e).splitlines()[-1][:60]])
            continue
        err = abs(pred - meas) / meas
        worst = max(worst, err)
        state = [float(x) for x in re.findall(
            r"memory plan of pipeline rank \d+ .*?stage state ([0-9.]+) MiB",
            b.text)]
        by = re.search(r"bytes per step and rank: (\d+) \(([^)]*)\)", b.text)
        base = base or state
        formula = (4.0 / (dp if zero == 3 else 1) + 4 +
                   8.0 / (dp if zero >= 1 else 1)) / 16
        rows.append(["zero=%d" % zero, "%.2f" % pred, "%.2f" % meas,
                     "%.2f%%" % (100 * err),
                     " / ".join("%.2f" % x for x in state),
                     " / ".join("%.3f" % (x / y) for x, y in zip(state, base))
                     + " (formula %.3f)" % formula,
                     "%s (%s)" % (by.group(1), by.group(2)) if by else "-"])
    print("\npipelines with ZeRO: 1f1b m=%d, dp=2 x tp=2 x pp=2:" % m)
    table(rows, ["zero", "predicted MiB", "measured MiB", "error",
                 "stage state MiB per pp rank", "vs zero=0",
                 "bytes per step and rank (the largest rank's)"])
    return worst


def per_layer(b, args, dtype, acts):
    """Activation bytes per layer from two depths, against the formulas."""
    if args.layers <= 2:
        return []
    s, bl, h, a, t = args.seq, args.batch // 2, args.dmodel, args.heads, 4
    bpe = 4 if dtype == "f32" else 2
    kinds = {"baseline": "tp", "sequence-parallel": "tp+sp",
             "recompute=full": "full",
             "zero=3+selective+SP": "selective+sp"}
    rows = []
    for name, mesh, options in CONFIGS:
        if name not in kinds or name not in acts:
            continue
        try:
            _, step = b.compile(name, 2, mesh, options, dtype)
        except RuntimeError:
            continue
        per = (acts[name] - step["memory"]["saved_activations"]) / (
            args.layers - 2)
        f = korthikanti(kinds[name], s, bl, h, a, t, bpe)
        rows.append([name, "%.2f" % (per / MIB), "%.2f" % (f / MIB),
                     "%.2f" % (per / f)])
    return rows


def zero_rows(b, args, dtype):
    """ZeRO on a dp-only mesh: state per rank and dp bytes, 3 vs 1."""
    got = {}
    for zero in (1, 3):
        try:
            art, step = b.compile("dp8-zero%d" % zero, args.layers, (8, 1),
                                  "zero=%d report=true" % zero, dtype)
        except RuntimeError as e:
            print("zero=%d on dp=8: not built (%s)" % (
                zero, str(e).splitlines()[-1][:80]))
            return
        r = b.train(art, step["name"])
        got[zero] = (step, r, b.output)
    # Psi: the parameters' global element count. The step's fed-back
    # inputs (no role) are the parameters followed by Adam's two moments
    # with the same shapes; one copy of each is the model state, and the
    # gradient a rank keeps (reduce-scattered, f32) is laid out like its
    # parameter shard.
    step3, r3, report3 = got[3]
    params, _ = _fed_back(step3)
    psi = sum(_count(t["global_shape"]) for t in params)
    nd = 8
    paper = 16.0 * psi / nd
    # par-optimizer's report: what a rank keeps of the parameters (f32
    # master shard), the gradients (reduce-scattered) and Adam's moments.
    m = re.search(r"model state per rank: parameters (\d+) \+ gradients "
                  r"(\d+) \+ optimizer state (\d+) = (\d+) bytes", report3)
    mine = int(m.group(4))
    print("\nZeRO on 8 x 1 (dp only), Psi = %d parameters:" % psi)
    print("  model state per rank (parameters %s + gradients %s + optimizer "
          "state %s bytes): %.3f MiB; (2+2+12) Psi / N_d = %.3f MiB; ratio "
          "%.3f" % (m.group(1), m.group(2), m.group(3), mine / MIB,
                    paper / MIB, mine / paper))
    print("  dp bytes per step and rank: zero=3 %d, zero=1 %d, ratio %.3f "
          "(paper: 1.5 when both move the same dtype)" % (
              r3["bytes"], got[1][1]["bytes"],
              r3["bytes"] / max(1, got[1][1]["bytes"])))


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _bytes(dtype):
    return {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4}[dtype]


def _fed_back(step):
    """The parameters and the optimizer state among a step's inputs."""
    fed = sorted({pair[1] for pair in step.get("feedback", [])})
    ins = [step["inputs"][i] for i in fed if "role" not in step["inputs"][i]]
    tensors = [t for t in ins if t["global_shape"]]
    n = len(tensors) // 3
    return tensors[:n], tensors[n:]


if __name__ == "__main__":
    sys.exit(main())
