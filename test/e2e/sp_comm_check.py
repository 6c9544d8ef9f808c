"""Checks sequence parallelism's communication against Megatron's formula.

Usage: sp_comm_check.py BASE.txt SP.txt LAYERS BATCH SEQ DMODEL DP TP

BASE.txt and SP.txt are par-comm-reports (`--par-spmd=report=true`) of the
same train step without and with sequence-parallel=true. Per layer and
micro-batch, Megatron tensor parallelism all-reduces 4 activations of
b*s*h elements (2 forward, 2 backward: 8*b*s*h*(t-1)/t per device,
docs/Formulas.md); sequence parallelism replaces each by a reduce_scatter
and an all_gather of (t-1)/t * b*s*h each, the same bytes, plus one
all_gather of the same size at each end of the split stream (the final
LayerNorm's output before the LM head, the embedding's gradient). In the
gradient function the position table's gradient is summed over the batch
from the sequence-split cotangent (each rank its rows, reduced over dp at
half the size) and its rows gathered over tp: one all_gather of s*h
elements more (unit_pos below), where Megatron gathers nothing more. As in
Megatron, the backward gathers the split LayerNorm outputs again for the
weight gradients of the projections that read them (2 per layer, and the
final LayerNorm's for the LM head's), tagged "(sequence-parallel
backward)": the forward's gathered copies are not kept for the backward.
Here b is the per-data-parallel-rank batch and the unit is 4-byte f32
elements.
"""

import re
import sys

LINE = re.compile(r'^\s+par\.(\w+) axes=\[(.*?)\] n=(\d+) \w+ .*: (\d+) bytes')


def sections(path):
    out, fn = {}, None
    for line in open(path):
        m = re.match(r'par-comm-report: @(\w+)', line)
        if m:
            fn = m.group(1)
            out[fn] = []
            continue
        m = LINE.match(line)
        if m and fn:
            kind = m.group(1)
            if '(sequence-parallel backward)' in line:
                kind += ' again'
            out[fn].append((kind, m.group(2), int(m.group(4))))
    return out


def tp_only(entries, kind):
    return [b for k, axes, b in entries if k == kind and axes == '"tp"']


def main():
    base, sp = sections(sys.argv[1]), sections(sys.argv[2])
    layers, batch, seq, dmodel, dp, tp = map(int, sys.argv[3:9])
    unit = (batch // dp) * seq * dmodel * 4 * (tp - 1) / tp  # bytes, f32
    unit_pos = seq * dmodel * 4 * (tp - 1) / tp  # the position table's rows
    ok = True
    for fn, passes in (("gpt", 2), ("gpt_grad", 4)):
        ar = tp_only(base[fn], "all_reduce")
        want_ar = layers * passes * 2 * unit
        rs = tp_only(sp[fn], "reduce_scatter")
        ag = tp_only(sp[fn], "all_gather")
        left = tp_only(sp[fn], "all_reduce") + tp_only(sp[fn], "bucket_all_reduce")
        ends = 1 if fn == "gpt" else 2
        again = tp_only(sp[fn], "all_gather again")
        pos = 0
        if fn == "gpt_grad" and unit_pos != unit and unit_pos in ag:
            ag.remove(unit_pos)
            pos = unit_pos
        want_pos = unit_pos if fn == "gpt_grad" else 0
        want_again = 0 if fn == "gpt" else 2 * layers + 1
        good = (pos == want_pos and len(again) == want_again and sum(again) == want_again * unit and
                sum(ar) == want_ar and len(ar) == layers * passes and
                not left and len(rs) == layers * passes and
                sum(rs) == layers * passes * unit and
                len(ag) == layers * passes + ends and
                sum(ag) == (layers * passes + ends) * unit)
        ok &= good
        print("@%s: tp all_reduce %d bytes (formula %d) -> reduce_scatter %d "
              "+ all_gather %d bytes (formula %d + %d at the ends) + %d "
              "gathered again for the backward (%d x %d) + %d of position "
              "rows (formula %d), %d all_reduces over tp left: %s" %
              (fn, sum(ar), want_ar, sum(rs), sum(ag), want_ar,
               ends * unit, sum(again), want_again, unit, pos, want_pos,
               len(left),
               "OK" if good else "FAIL"))
    sys.exit(0 if ok else 1)


main()
