"""Checks par-plan's figures for a GPT made by examples/gen_transformer.py
--gpt against formulas computed here from the model's sizes:

  GEMM FLOPs per sample (forward) = S * (L * (2*(4*d*d + 2*d*f) + 4*S*d)
                                         + 2*d*V)
  parameters = V*d (wte) + S*d (wpe) + L*(4*d*d + 2*d*f + 4*d) + 2*d
               + d*V (LM head)
  of which split over tp = L*(4*d*d + 2*d*f)
  memory (bf16 mixed precision, zero=0, pp=1): weights 2, gradients 4 and
  optimizer state 12 bytes per parameter on the device, the tp-split ones
  divided by tp;
  and that the phases add up to the predicted step.

usage: check_profile.py OUTPUT L d S V f tp
"""
import re
import sys

out = open(sys.argv[1]).read()
L, d, S, V, f, tp = (int(x) for x in sys.argv[2:8])
GiB = 1024.0 ** 3

gemm = S * (L * (2 * (4 * d * d + 2 * d * f) + 4 * S * d) + 2 * d * V)
params = V * d + S * d + L * (4 * d * d + 2 * d * f + 4 * d) + 2 * d + d * V
split = L * (4 * d * d + 2 * d * f)
device = params - split + split / tp


def number(pattern):
    m = re.search(pattern, out)
    assert m, "no match for %r in:\n%s" % (pattern, out)
    return float(m.group(1))


def close(name, got, want, rtol):
    ok = abs(got - want) <= rtol * abs(want)
    print("%s: par-plan %.6g, formula %.6g: %s" % (name, got, want,
                                                   "OK" if ok else "WRONG"))
    assert ok


close("GEMM FLOPs per sample", number(r"([0-9.e+]+) GEMM FLOPs per sample"),
      gemm, 1e-3)
close("parameters", number(r"([0-9.e+]+) parameters"), params, 1e-3)
close("tp-split parameters", number(r"\(([0-9.e+]+) split over tensor"),
      split, 1e-3)
close("weights GiB", number(r"weights\s+([0-9.e+-]+) GiB"), 2 * device / GiB,
      2e-3)
close("gradients GiB", number(r"gradients\s+([0-9.e+-]+) GiB"), 4 * device / GiB,
      2e-3)
close("optimizer GiB", number(r"optimizer state\s+([0-9.e+-]+) GiB"),
      12 * device / GiB, 2e-3)
phases = ["forward", "backward", "recompute", "tensor-parallel comm",
          "pipeline bubble", "data-parallel comm", "zero-3 gathers",
          "optimizer"]
total = sum(number(r"\n  %s\s+([0-9.e+-]+) s" % re.escape(p)) for p in phases)
close("sum of phases", total, number(r"predicted: step ([0-9.e+-]+) s"), 1e-4)
print("check_profile: OK")
