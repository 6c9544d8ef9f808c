"""Checks how par-plan prices par's pipeline (docs/Planning.md, "Pipeline")
from --explain outputs of one model:

  recompute FILE    pp > 1, 1F1B, recompute=none: every backward recomputes
                    its stage's forward, so the recompute phase equals the
                    forward phase;
  zbh1 FILE         ZB-H1: BI and BW each recompute the forward and BW the
                    input-gradient half: recompute = 2 forward + backward/2;
  shared A B        A with node.processors, B the same machine without:
                    the pipelined step of A is shorter (a rank runs faster
                    while the others wait), the phases other than the
                    bubble equal;
  stretch A B S     A on a machine with node.sync_stretch S, B the same
                    without: computation (forward, backward, optimizer) is
                    1 + S times B's;
  zero FILE         zero >= 1: par's per-tensor reduce-scatters and
                    all-gathers are all exposed (data-parallel comm = the
                    reduction in all);
and that the phases add up to the step in each file.
"""
import re
import sys

PHASES = ["forward", "backward", "recompute", "tensor-parallel comm",
          "pipeline bubble", "data-parallel comm", "zero-3 gathers",
          "optimizer"]


def phases(path):
    out = open(path).read()
    got = {}
    for name in PHASES + ["step"]:
        m = re.search(r"^  %s +(-?[0-9.e+-]+) s" % re.escape(name), out, re.M)
        got[name] = float(m.group(1))
    total = sum(got[p] for p in PHASES)
    if abs(total - got["step"]) > 1e-4 * got["step"]:  # 6 digits each
        sys.exit("%s: phases add up to %g, step %g" % (path, total,
                                                       got["step"]))
    return got


def close(a, b):
    return abs(a - b) <= 1e-4 * max(abs(a), abs(b))


mode = sys.argv[1]
if mode == "recompute":
    p = phases(sys.argv[2])
    ok = p["forward"] > 0 and close(p["recompute"], p["forward"])
    print("recompute / forward = %.4f: %s" % (p["recompute"] / p["forward"],
                                              "OK" if ok else "FAIL"))
elif mode == "zbh1":
    p = phases(sys.argv[2])
    want = 2 * p["forward"] + p["backward"] / 2
    ok = close(p["recompute"], want)
    print("recompute / (2 forward + backward / 2) = %.4f: %s" % (
        p["recompute"] / want, "OK" if ok else "FAIL"))
elif mode == "shared":
    a, b = phases(sys.argv[2]), phases(sys.argv[3])
    same = all(close(a[k], b[k]) for k in PHASES if k != "pipeline bubble")
    ok = same and a["step"] < b["step"]
    print("shared / dedicated step = %.3f, other phases equal: %s: %s" % (
        a["step"] / b["step"], same, "OK" if ok else "FAIL"))
elif mode == "stretch":
    a, b = phases(sys.argv[2]), phases(sys.argv[3])
    s = float(sys.argv[4])
    ratios = [a[k] / b[k] for k in ("forward", "backward", "optimizer")]
    ok = all(abs(r - (1 + s)) < 1e-4 for r in ratios)
    print("computation ratios %s: %s" % (
        " ".join("%.4f" % r for r in ratios), "OK" if ok else "FAIL"))
elif mode == "zero":
    out = open(sys.argv[2]).read()
    p = phases(sys.argv[2])
    total = float(re.search(r"data-parallel reduction in all ([0-9.e+-]+) s",
                            out).group(1))
    ok = total > 0 and close(p["data-parallel comm"], total)
    print("exposed / total = %.4f: %s" % (p["data-parallel comm"] / total,
                                          "OK" if ok else "FAIL"))
else:
    sys.exit("unknown mode " + mode)
