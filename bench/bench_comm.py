#!/usr/bin/env python3
"""Communication benchmark: par's collectives against the textbook optimum,
XLA's message count and PyTorch DDP, in one run.

  (1) Bytes per device per step of the GPT train step
      (examples/gen_transformer.py --gpt, AdamW) on dp x tp meshes, from
      par-comm-report (`par-opt --par-compile-pipeline="... comm-report=true"`)
      and from par-run's runtime counters ("bytes sent in K collectives"),
      against
          tp: L * 8*b*s*h*(t-1)/t elements per micro-batch (Megatron: 4
              all-reduces of the [b, s, h] activations per layer, b the
              local batch per data-parallel rank), 4 bytes each;
          dp: 2(n-1)/n * (the gradient bytes of the parameters a rank
              holds + 4 for the loss), once per step.
      The GPT's embeddings, final LayerNorm and LM head are replicated over
      tp (the generator shards only the blocks' q/k/v/o and MLP weights), so
      they add no tp reduction; the report lists none beyond the blocks.
      With sink-reductions=true and =false side by side; also with
      micro-batches=m (the dp part must stay one reduction per gradient per
      step) and pipelined (--pp 2, stages=2, 1f1b: per-stage functions
      @gpt_s<k>_fwd/_grad/_update, per step m x (fwd + grad) + update).
  (2) Messages per step of the one-block AdamW train step of ANCHORS.md
      (gen_transformer.py --layers 1 block + final LayerNorm, with a mean
      square loss added here; dp2 x tp4, batch 4 seq 16 dmodel 64 heads 4):
      XLA 5 messages, par 124,420 B before (= sink-reductions=false
      bucket-bytes=0) vs optimum 99,844 B.
  (3) 8-rank data-parallel step time vs PyTorch DDP/gloo
      (bench_train.py's model and harness), par with the default options and
      with "bucket-bytes=0 sink-reductions=false", interleaved rounds.
  (4) A step-time breakdown from par-run --trace of a pipelined 3D run
      (dp2 x tp2 x pp2, 8 ranks, 1f1b).

The verdicts are informational: exit 0 unless something fails to run (1).
Re-executes itself in /usr/bin/python3 (numpy, torch) when needed.

    /usr/bin/python3 bench/bench_comm.py [--quick]
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_train as bt  # noqa: E402

REPO = HERE.parent
GEN = REPO / "examples" / "gen_transformer.py"
Failure = bt.Failure
run = bt.run

# (1): the GPT of issue 11, 2 layers.
GPT = dict(layers=2, batch=8, seq=32, dmodel=64, heads=4, vocab=96)
# (2): the one-block model ANCHORS.md measured against XLA.
BLOCK = dict(layers=1, batch=4, seq=16, dmodel=64, heads=4)
XLA_MESSAGES = 5
BEFORE_BYTES = 124420
SUNK = "sink-reductions=true"
UNSUNK = "sink-reductions=false"


# ---------------------------------------------------------------------------
# Models and tools
# ---------------------------------------------------------------------------

def gen_gpt(path, dp, tp, pp=1, **kw):
    c = dict(GPT, **kw)
    cmd = [sys.executable, str(GEN), "--gpt"]
    for k in ("layers", "batch", "seq", "dmodel", "heads", "vocab"):
        cmd += ["--" + k, str(c[k])]
    cmd += ["--dp", str(dp), "--tp", str(tp), "-o", str(path)]
    if pp > 1:
        cmd += ["--pp", str(pp)]
    run(cmd, what="gen_transformer.py")
    return path


def gen_block_loss(path, dp, tp):
    """gen_transformer.py's @forward (pre-LN block + final LayerNorm) as
    @block(x, params...) -> mean(out^2), parameters marked par.param."""
    c = BLOCK
    cmd = [sys.executable, str(GEN), "--dp", str(dp), "--tp", str(tp)]
    for k in ("layers", "batch", "seq", "dmodel", "heads"):
        cmd += ["--" + k, str(c[k])]
    text = run(cmd, what="gen_transformer.py")
    out = []
    for ln in text.split("\n"):
        m = re.match(r"(\s+)(%l\w+): (tensor<[^>]+>)( \{(.*)\})?(,?)$", ln)
        if m:
            attrs = "par.param" + (", " + m.group(5) if m.group(5) else "")
            ln = "%s%s: %s {%s}%s" % (m.group(1), m.group(2), m.group(3), attrs, m.group(6))
        if re.match(r"\s+\) -> \(tensor<", ln):
            ln = "  ) -> tensor<f32> {"
        out.append(ln)
    text = "\n".join(out).replace("func.func @forward(", "func.func @block(")
    m = re.search(r"\n(\s+)return (%\w+) : (tensor<([0-9x]+)xf32>)\n", text)
    if not m:
        raise Failure("unexpected gen_transformer.py output (no return)")
    ind, v, ty = m.group(1), m.group(2), m.group(3)
    n = 1
    for x in m.group(4).split("x"):
        n *= int(x)
    loss = "\n".join(ind + l for l in [
        "%%lossc = arith.constant %.9e : f32" % (1.0 / n),
        "%lossz = arith.constant 0.0 : f32",
        "%losse = tensor.empty() : tensor<f32>",
        "%lossi = linalg.fill ins(%lossz : f32) outs(%losse : tensor<f32>) -> tensor<f32>",
        "%loss = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, "
        "affine_map<(d0, d1, d2) -> ()>], iterator_types = [\"reduction\", \"reduction\", \"reduction\"]}",
        "    ins(%s : %s) outs(%%lossi : tensor<f32>) {" % (v, ty),
        "^bb0(%a: f32, %acc: f32):",
        "    %sq = arith.mulf %a, %a : f32",
        "    %sc = arith.mulf %sq, %lossc : f32",
        "    %s = arith.addf %acc, %sc : f32",
        "    linalg.yield %s : f32",
        "} -> tensor<f32>",
        "return %loss : tensor<f32>"])
    text = text[:m.start()] + "\n" + loss + "\n" + text[m.end():]
    Path(path).write_text(text)
    return path


MESH_RE = re.compile(r'par\.mesh @mesh \[([^\]]*)\]')
PARAM_RE = re.compile(r"%(\w+): tensor<([0-9x]+)x(f32|f16|bf16)> \{par\.param([^\n]*)\}")


def params_of(model):
    """[(name, global bytes, local bytes)] of the first function's
    parameters, local = split by their par.sharding over the mesh."""
    text = Path(model).read_text()
    mesh = {a: int(n) for a, n in re.findall(r'"(\w+)"=(\d+)', MESH_RE.search(text).group(1))}
    first = text.split("func.func")[1]
    out = []
    for name, shape, ety, rest in PARAM_RE.findall(first):
        dims = [int(x) for x in shape.split("x")]
        elems = 1
        for d in dims:
            elems *= d
        local = elems
        m = re.search(r"#par\.sharding<@mesh, \[(.*)\]>", rest)
        if m:
            for axes in re.findall(r"\{([^}]*)\}", m.group(1)):
                for a in re.findall(r'"(\w+)"', axes):
                    local //= mesh[a]
        out.append((name, 4 * elems, 4 * local))
    return out, mesh


REPORT_FN = re.compile(r"^par-comm-report: @(\w+)$")
REPORT_OP = re.compile(r"^\s+(par\.\w+) axes=\[([^\]]*)\] n=(\d+) \S+ (.*): (\d+) bytes$")


def comm_report(bin_dir, model, options):
    """{function: [(op, axes, n, bytes)]} from par-comm-report."""
    cmd = [str(bin_dir / "par-opt"), str(model),
           "--par-compile-pipeline=optimizer=adamw comm-report=true " + options,
           "-o", os.devnull]
    text = run(cmd, what="par-opt", retry=True)
    fns, cur = {}, None
    for ln in text.splitlines():
        m = REPORT_FN.match(ln)
        if m:
            cur = fns.setdefault(m.group(1), [])
            continue
        m = REPORT_OP.match(ln)
        if m and cur is not None:
            axes = tuple(re.findall(r'"(\w+)"', m.group(2)))
            cur.append((m.group(1), axes, int(m.group(3)), int(m.group(5))))
    if not fns:
        raise Failure("no par-comm-report output from: %s" % " ".join(cmd))
    return fns


def tally(ops, times=1):
    """{'tp'/'dp'/other axes key: [bytes, messages]} of a list of ops."""
    t = {}
    for _, axes, _, b in ops:
        k = ",".join(axes)
        e = t.setdefault(k, [0, 0])
        e[0] += b * times
        e[1] += times
    return t


def merge(*ts):
    out = {}
    for t in ts:
        for k, (b, m) in t.items():
            e = out.setdefault(k, [0, 0])
            e[0] += b
            e[1] += m
    return out


STATS_RE = re.compile(r"rank (\d+): \S+ s, (\d+) bytes sent in (\d+) collectives")


def runtime_counts(bin_dir, art, entry, ranks):
    """(bytes, collectives) per rank of one call of `entry` (all ranks
    equal, else the largest)."""
    out = run([str(bin_dir / "par-run"), "-n", str(ranks), str(art), "--entry", entry],
              env=bt.thread_env(1), what="par-run", retry=True)
    rows = [(int(b), int(c)) for _, b, c in STATS_RE.findall(out)]
    if len(rows) != ranks:
        raise Failure("cannot parse par-run's statistics:\n" + out[-2000:])
    return max(rows)


def compile_art(bin_dir, model, options, out):
    run([str(bin_dir / "par-compile"), str(model), "--options=optimizer=adamw " + options,
         "--no-reference", "-o", str(out)], what="par-compile", retry=True)
    return out


# ---------------------------------------------------------------------------
# (1) Bytes per step vs Megatron + ring all-reduce
# ---------------------------------------------------------------------------

def tp_formula(layers, b_local, c, t, m=1, per_layer=8):
    """Megatron: per_layer*b*s*h*(t-1)/t elements per layer per micro-batch."""
    if t == 1:
        return 0
    return int(round(m * layers * per_layer * b_local * c["seq"] * c["dmodel"] * (t - 1) / t * 4))


def dp_formula(grad_bytes, n):
    return int(round(2 * (n - 1) / n * (grad_bytes + 4))) if n > 1 else 0


def part1(bin_dir, work, quick, results):
    print("== (1) bytes per device per step: GPT train step (AdamW), layers=%d batch=%d "
          "seq=%d dmodel=%d heads=%d vocab=%d, f32" % (GPT["layers"], GPT["batch"], GPT["seq"],
                                                       GPT["dmodel"], GPT["heads"], GPT["vocab"]),
          flush=True)
    print("   formula: tp = m*L*8*b*s*h*(t-1)/t * 4 B (b = local micro-batch; embeddings/LM head "
          "replicated over tp: no tp term),")
    print("            dp = 2(n-1)/n * (local gradient bytes + 4 B loss), once per step")
    rows = []
    configs = [(2, 2, 1), (2, 4, 1), (2, 2, 2), (2, 2, 4)]
    for dp, tp, m in configs:
        model = gen_gpt(work / ("gpt_dp%d_tp%d.mlir" % (dp, tp)), dp, tp)
        params, _ = params_of(model)
        grad = sum(p[2] for p in params)
        b_local = GPT["batch"] // dp
        f_tp = tp_formula(GPT["layers"], b_local, GPT, tp, m)
        f_dp = dp_formula(grad, dp)
        for sink in (SUNK, UNSUNK):
            opts = sink + ("" if m == 1 else " micro-batches=%d" % m)
            rep = comm_report(bin_dir, model, opts)
            callee = "gpt_grad_partial" if "gpt_grad_partial" in rep else "gpt_grad"
            t = merge(tally(rep.get("gpt_step", [])), tally(rep[callee], m))
            row = {"mesh": "dp%d x tp%d" % (dp, tp), "m": m, "sink": sink.split("=")[1],
                   "tp": t.get("tp", [0, 0]), "dp": t.get("dp", [0, 0]),
                   "f_tp": f_tp, "f_dp": f_dp, "ranks": dp * tp}
            row["total"] = sum(v[0] for v in t.values())
            row["msgs"] = sum(v[1] for v in t.values())
            if not (quick and m > 1):
                art = compile_art(bin_dir, model, opts,
                                  work / ("art_%d_%d_%d_%s" % (dp, tp, m, row["sink"])))
                row["rt"] = runtime_counts(bin_dir, art, "gpt_step", dp * tp)
            rows.append(row)
            print("   done %s m=%d %s" % (row["mesh"], m, sink), flush=True)
    # Pipelined: dp2 x tp2 x pp2, stages=2, 1f1b, m=4.
    m, dp, tp = 4, 2, 2
    model = gen_gpt(work / "gpt_3d.mlir", dp, tp, pp=2)
    params, _ = params_of(model)
    b_local = GPT["batch"] // dp
    prows = []
    for sink in (SUNK, UNSUNK):
        opts = "%s stages=2 schedule=1f1b micro-batches=%d" % (sink, m)
        rep = comm_report(bin_dir, model, opts)
        split = stage_split(bin_dir, model, opts)
        art = None
        if not quick or sink == SUNK:
            art = compile_art(bin_dir, model, opts, work / ("art_3d_%s" % sink.split("=")[1]))
            results.setdefault("art3d", art)
        owned = assign_stages(params, split)
        for s in range(2):
            fwd, grad, upd = ("gpt_s%d_fwd" % s, "gpt_s%d_grad" % s, "gpt_s%d_update" % s)
            t = merge(tally(rep[fwd], m), tally(rep[grad], m), tally(rep[upd]))
            L_s = sum(1 for n in owned[s] if n.endswith("_wq"))
            row = {"mesh": "dp2 x tp2 x pp2", "stage": s, "m": m, "sink": sink.split("=")[1],
                   "tp": t.get("tp", [0, 0]), "dp": t.get("dp", [0, 0]),
                   "f_tp": tp_formula(L_s, b_local, GPT, tp, m),
                   "f_tp_rc": tp_formula(L_s, b_local, GPT, tp, m, per_layer=12),
                   "f_dp": dp_formula(sum(p[2] for p in params if p[0] in owned[s]), dp),
                   "ranks": 8, "layers": L_s}
            row["total"] = sum(v[0] for v in t.values())
            row["msgs"] = sum(v[1] for v in t.values())
            row["dp_in_update"] = tally(rep[upd]).get("dp", [0, 0])
            if art:
                counts = [runtime_counts(bin_dir, art, e, 8) for e in (fwd, grad, upd)]
                row["rt"] = (m * (counts[0][0] + counts[1][0]) + counts[2][0],
                             m * (counts[0][1] + counts[1][1]) + counts[2][1])
            prows.append(row)
        print("   done 3D %s" % sink, flush=True)

    hdr = ("%-16s %2s %5s %10s %10s %6s %9s %9s %6s %10s %10s %6s %10s %6s %9s"
           % ("mesh", "m", "sink", "tp_B", "tp_formula", "ratio", "dp_B", "dp_formula",
              "ratio", "total_B", "formula", "ratio", "runtime_B", "ratio", "msgs rep/rt"))
    print()
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        form = r["f_tp"] + r["f_dp"]
        rt = r.get("rt")
        print("%-16s %2d %5s %10d %10d %6.2f %9d %9d %6.2f %10d %10d %6.2f %10s %6s %9s"
              % (r["mesh"], r["m"], r["sink"], r["tp"][0], r["f_tp"], r["tp"][0] / r["f_tp"],
                 r["dp"][0], r["f_dp"], r["dp"][0] / r["f_dp"], r["total"], form,
                 r["total"] / form, rt[0] if rt else "-",
                 "%.2f" % (rt[0] / form) if rt else "-",
                 "%d/%s" % (r["msgs"], rt[1] if rt else "-")))
    print()
    print("   per step: the step's own collectives + m x the gradient function's "
          "(gpt_grad, or gpt_grad_partial with sinking and m > 1); runtime = par-run -n N "
          "--entry gpt_step, one call")
    print("   dp messages per step (report): " + ", ".join(
        "%s m=%d sink=%s: %d" % (r["mesh"], r["m"], r["sink"], r["dp"][1]) for r in rows))
    print()
    print("   pipelined (stages=2, 1f1b, m=%d; per rank of each stage: m x (fwd + grad) + update;"
          " runtime = par-run -n 8 --entry of each stage function, one call each):" % m)
    hdr = ("%-6s %5s %3s %10s %10s %6s %12s %6s %9s %9s %6s %10s %6s %9s %12s"
           % ("stage", "sink", "L", "tp_B", "tp_formula", "ratio", "recompute_f", "ratio",
              "dp_B", "dp_formula", "ratio", "runtime_B", "ratio", "msgs rep/rt",
              "dp in update"))
    print(hdr)
    print("-" * len(hdr))
    for r in prows:
        form = r["f_tp"] + r["f_dp"]
        rt = r.get("rt")
        print("%-6d %5s %3d %10d %10d %6.2f %12d %6.2f %9d %9d %6.2f %10s %6s %9s %12s"
              % (r["stage"], r["sink"], r["layers"], r["tp"][0], r["f_tp"],
                 r["tp"][0] / r["f_tp"], r["f_tp_rc"], r["tp"][0] / r["f_tp_rc"],
                 r["dp"][0], r["f_dp"], r["dp"][0] / r["f_dp"], rt[0] if rt else "-",
                 "%.2f" % (rt[0] / (r["f_tp_rc"] + r["f_dp"])) if rt else "-",
                 "%d/%s" % (r["msgs"], rt[1] if rt else "-"),
                 "%d msg, %d B" % tuple(r["dp_in_update"][::-1])))
    print("   recompute_f = 12*b*s*h*(t-1)/t per layer per micro-batch: each stage backward "
          "re-runs its forward (activations = stage inputs), 2 more tp all-reduces per layer;"
          " runtime ratio is against recompute_f + dp_formula")
    results["part1"] = rows
    results["part1_pipe"] = prows


STAGE_RE = re.compile(r"stage (\d+): ops \S+, cost \S+, parameters (\d+) bytes")


def stage_split(bin_dir, model, opts):
    text = run([str(bin_dir / "par-opt"), str(model),
                "--par-compile-pipeline=optimizer=adamw report=true " + opts, "-o", os.devnull],
               what="par-opt", retry=True)
    return [int(b) for _, b in STAGE_RE.findall(text)]


def assign_stages(params, split):
    """Parameters in program order, cut where the report's per-stage global
    parameter bytes add up."""
    owned, s, acc = [set() for _ in split], 0, 0
    for name, gbytes, _ in params:
        if s < len(split) - 1 and acc >= split[s]:
            s, acc = s + 1, 0
        owned[s].add(name)
        acc += gbytes
    return owned


# ---------------------------------------------------------------------------
# (2) Messages per step: the one-block step of ANCHORS.md
# ---------------------------------------------------------------------------

def part2(bin_dir, work, quick, results):
    c = BLOCK
    print()
    print("== (2) messages per step: one pre-LN block + final LayerNorm, mean-square loss, "
          "AdamW, dp2 x tp4 (batch %d seq %d dmodel %d heads %d; gen_transformer.py --layers 1 "
          "+ loss)" % (c["batch"], c["seq"], c["dmodel"], c["heads"]), flush=True)
    model = gen_block_loss(work / "block.mlir", 2, 4)
    params, _ = params_of(model)
    grad = sum(p[2] for p in params)
    opt = tp_formula(1, c["batch"] // 2, c, 4) + dp_formula(grad, 2)
    rows = []
    for label, opts in (("before (sink-reductions=false bucket-bytes=0)",
                         "sink-reductions=false bucket-bytes=0"),
                        ("sink-reductions=false, buckets", "sink-reductions=false"),
                        ("now (defaults)", "")):
        rep = comm_report(bin_dir, model, opts)
        t = merge(tally(rep.get("block_step", [])), tally(rep["block_grad"]))
        row = {"label": label, "bytes": sum(v[0] for v in t.values()),
               "msgs": sum(v[1] for v in t.values()),
               "tp_msgs": t.get("tp", [0, 0])[1], "dp_msgs": t.get("dp", [0, 0])[1]}
        if opts == "" or not quick:
            art = compile_art(bin_dir, model, opts, work / ("art_block_%d" % len(rows)))
            row["rt"] = runtime_counts(bin_dir, art, "block_step", 8)
        rows.append(row)
    hdr = "%-46s %9s %8s %6s %6s %12s %8s %9s" % (
        "program", "bytes", "messages", "tp", "dp", "runtime B", "rt msgs", "bytes/opt")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        rt = r.get("rt")
        print("%-46s %9d %8d %6d %6d %12s %8s %9.3f" % (
            r["label"], r["bytes"], r["msgs"], r["tp_msgs"], r["dp_msgs"],
            rt[0] if rt else "-", rt[1] if rt else "-", r["bytes"] / opt))
    now = rows[-1]
    print("   optimum %d B (tp 4 x 1.5 x b*s*h*4 = %d, dp grads + loss = %d); "
          "ANCHORS: before %d B, XLA %d messages"
          % (opt, tp_formula(1, c["batch"] // 2, c, 4), dp_formula(grad, 2), BEFORE_BYTES,
             XLA_MESSAGES))
    print("   before matches ANCHORS' %d B: %s" % (BEFORE_BYTES,
                                                   "yes" if rows[0]["bytes"] == BEFORE_BYTES else "NO"))
    print("   now: %d messages (target <= %d) %s; %d bytes (target %d) %s"
          % (now["msgs"], XLA_MESSAGES, "MET" if now["msgs"] <= XLA_MESSAGES else "NOT MET",
             now["bytes"], opt, "MET" if now["bytes"] <= opt else "NOT MET"))
    results["part2"] = {"rows": rows, "optimum": opt}


# ---------------------------------------------------------------------------
# (3) 8-rank dp step time vs DDP
# ---------------------------------------------------------------------------

def part3(bin_dir, work, python, quick, rounds, results):
    import numpy as np
    ranks, batch, steps, warmup = 8, 16, 20, 3
    cfg = {"layers": 2, "dmodel": 128, "heads": 4, "seq": 64, "vocab": 96, "ffn": 512,
           "embedding": "gather", "embedding_flag": True}
    print()
    print("== (3) 8-rank data parallel step time vs PyTorch DDP/gloo (bench_train.py's GPT: "
          "layers 2 dmodel 128 heads 4 seq 64 vocab 96, global batch %d, AdamW, %d steps, "
          "median of steps %d..%d, best of %d interleaved rounds)"
          % (batch, steps, warmup + 1, steps, rounds), flush=True)
    variants = [("default", None), ("blocking", "bucket-bytes=0 sink-reductions=false")]
    dirs = {}
    for name, opts in variants:
        d = work / ("dp8_" + name)
        model = bt.build(bin_dir, cfg, batch, ranks, d, False, opts)
        names = bt.write_inputs(np, model, d, cfg, batch, 0)
        dirs[name] = d
    runs = {"default": [], "blocking": [], "ddp": []}
    order = ["default", "blocking", "ddp"]
    for r in range(rounds):
        seq = order if r % 2 == 0 else order[::-1]
        for k in seq:
            if k == "ddp":
                w = bt.time_torch(python, "ddp", cfg, dirs["default"], steps, 1, ranks=ranks)
                w.update(bt.steady(w["times"], warmup))
                runs[k].append(w)
            else:
                p = bt.time_par_steps(bin_dir, dirs[k], names, ranks, steps, 1)
                p.update(bt.steady(p["times"], warmup))
                runs[k].append(p)
        print("   round %d: par default %s, par blocking %s, DDP %s ms/step"
              % (r + 1, bt.ms(runs["default"][-1]["median"]),
                 bt.ms(runs["blocking"][-1]["median"]), bt.ms(runs["ddp"][-1]["median"])),
              flush=True)
    best = {k: min(v, key=lambda x: x["median"]) for k, v in runs.items()}
    tq = best["ddp"]["median"]
    hdr = "%-44s %9s %9s %8s %10s %9s %s" % ("setup", "ms/step", "min_ms", "vs DDP",
                                            "rnd_ratio", "loss_err", "target <= 1.0")
    print(hdr)
    print("-" * len(hdr))
    for k, label in (("default", "par, defaults (buckets, async, sinking)"),
                     ("blocking", "par, bucket-bytes=0 sink-reductions=false")):
        ratio = best[k]["median"] / tq
        rr = statistics.median(a["median"] / b["median"] for a, b in zip(runs[k], runs["ddp"]))
        err = max(abs(a - b) / abs(b) for a, b in zip(runs[k][0]["losses"], runs["ddp"][0]["losses"]))
        print("%-44s %9s %9s %8.2f %10.2f %9.1e %s" % (
            label, bt.ms(best[k]["median"]), bt.ms(best[k]["min"]), ratio, rr, err,
            "MET" if ratio <= 1.0 else "NOT MET"))
    print("%-44s %9s %9s" % ("PyTorch DDP (gloo)", bt.ms(tq), bt.ms(best["ddp"]["min"])))
    results["part3"] = {k: [x["median"] for x in v] for k, v in runs.items()}


# ---------------------------------------------------------------------------
# (4) Step-time breakdown from the trace
# ---------------------------------------------------------------------------

def part4(bin_dir, work, results):
    art = results.get("art3d")
    if art is None:
        model = gen_gpt(work / "gpt_3d.mlir", 2, 2, pp=2)
        art = compile_art(bin_dir, model, "stages=2 schedule=1f1b micro-batches=4",
                          work / "art_3d_trace")
    print()
    print("== (4) step-time breakdown from par-run --trace: GPT dp2 x tp2 x pp2 (8 ranks), "
          "stages=2, 1f1b, 4 micro-batches, defaults; the last of 3 steps", flush=True)
    trace = work / "trace.json"
    run([str(bin_dir / "par-run"), "-n", "8", str(art), "--pipeline", "--data",
         str(REPO / "README.md"), "--steps", "3", "--trace", str(trace)],
        env=bt.thread_env(1), what="par-run", retry=True)
    ev = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    cats = sorted({e["cat"] for e in ev})
    print("   trace categories: %s" % cats)
    hdr = "%-5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %7s" % (
        "rank", "step_ms", "compute", "coll_in", "send", "recv", "idle", "update", "upd_coll",
        "exposed", "bubble%")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for tid in sorted({e["tid"] for e in ev}):
        mine = [e for e in ev if e["tid"] == tid]
        top = [e for e in mine if e["cat"] != "collective"]
        nested = [e for e in mine if e["cat"] == "collective"]
        end = max(e["ts"] + e["dur"] for e in top)
        start = min(e["ts"] for e in top)
        by = {}
        for e in top:
            by[e["cat"]] = by.get(e["cat"], 0.0) + e["dur"]
        # Nested kernel records inside forward/backward actions (blocking
        # all-reduces); those inside send/recv actions are the p2p itself.
        inside = 0.0
        in_update = 0.0
        for k in nested:
            host = [e for e in top if e["ts"] <= k["ts"] + 1e-3 and
                    k["ts"] + k["dur"] <= e["ts"] + e["dur"] + 1e-3]
            if host and host[0]["cat"] in ("forward", "backward", "backward-input",
                                           "weight-gradient"):
                inside += k["dur"]
            elif host and host[0]["cat"] == "update":
                # The dp gradient bucket's start and its wait (the time the
                # update blocked on it), or blocking reductions.
                in_update += k["dur"]
        comp = sum(by.get(c, 0.0) for c in ("forward", "backward", "backward-input",
                                             "weight-gradient")) - inside
        r = {"rank": tid, "step": end - start, "compute": comp, "coll": inside,
             "send": by.get("send", 0.0), "recv": by.get("recv", 0.0),
             "idle": by.get("idle", 0.0), "update": by.get("update", 0.0),
             "upd_coll": in_update}
        r["exposed"] = r["coll"] + r["send"] + r["upd_coll"]
        r["bubble"] = r["recv"] + r["idle"]
        rows.append(r)
        print("%-5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.1f" % (
            tid, r["step"] / 1e3, r["compute"] / 1e3, r["coll"] / 1e3, r["send"] / 1e3,
            r["recv"] / 1e3, r["idle"] / 1e3, r["update"] / 1e3, r["upd_coll"] / 1e3,
            r["exposed"] / 1e3, 100 * r["bubble"] / r["step"]))
    print("   ms per rank. compute = forward/backward actions minus the collective kernels "
          "recorded inside them; coll_in = those kernels (blocking tp all-reduces and the "
          "per-micro-batch loss all-reduce: all exposed); send/recv = the pipeline's p2p "
          "actions (recv = waiting for the peer + transfer); idle = gaps between actions; "
          "upd_coll = the update's kernel records (the dp gradient bucket's start and the "
          "wait on it: time the update blocked); exposed = coll_in + send + upd_coll; "
          "bubble = recv + idle.")
    results["part4"] = rows


def ensure_numpy_torch(args, argv):
    """This interpreter if it has numpy and torch, else re-executes this
    script in /usr/bin/python3 (Debian's python3-torch)."""
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        return args.python or sys.executable
    except ImportError as e:
        other = args.python or bt.DEFAULT_PYTHON
        if os.environ.get("PAR_BENCH_REEXEC") or \
           os.path.realpath(other) == os.path.realpath(sys.executable) or \
           not os.path.exists(other):
            print("bench_comm.py: error: cannot import torch/numpy (%s); run it "
                  "with /usr/bin/python3" % e, file=sys.stderr)
            sys.exit(1)
        env = dict(os.environ, PAR_BENCH_REEXEC="1")
        os.execve(other, [other, str(Path(__file__).resolve())] + list(argv), env)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", default=str(bt.DEFAULT_BIN))
    ap.add_argument("--python", default=None)
    ap.add_argument("--quick", action="store_true",
                    help="runtime counters only where the report alone cannot stand "
                         "(m=1 rows), 2 rounds in (3)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds in (3) (default 3; --quick 2)")
    ap.add_argument("--parts", default="1,2,3,4")
    ap.add_argument("--keep", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    python = ensure_numpy_torch(args, argv)
    bin_dir = Path(args.bin_dir)
    for tool in ("par-opt", "par-compile", "par-run"):
        if not (bin_dir / tool).exists():
            print("bench_comm.py: error: cannot find %s in %s" % (tool, bin_dir), file=sys.stderr)
            return 1
    parts = {int(p) for p in args.parts.split(",") if p}
    rounds = args.rounds or (2 if args.quick else 3)
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="par-bench-comm-")
        work = Path(cleanup.name)
    results = {}
    t0 = time.time()
    try:
        if 1 in parts:
            part1(bin_dir, work, args.quick, results)
        if 2 in parts:
            part2(bin_dir, work, args.quick, results)
        if 3 in parts:
            part3(bin_dir, work, python, args.quick, rounds, results)
        if 4 in parts:
            part4(bin_dir, work, results)
    except Failure as e:
        print("bench_comm.py: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        if cleanup:
            cleanup.cleanup()
    print()
    print("total %.0f s" % (time.time() - t0))
    if args.json:
        results.pop("art3d", None)
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
