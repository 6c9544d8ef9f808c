"""Checks ZeRO-3's communication and memory against the ZeRO paper, from
par-compile's reports (par-optimizer's `report=true` and the partitioned
program's `comm-report=true`), never from a clock.

  bytes Z1.txt Z3.txt      the data-parallel bytes per step of each (the
                           dp collectives of the gradient function and the
                           step, from the comm report): zero=3's reduce-
                           scatters equal zero=1's, its forward gathers
                           equal zero=1's parameter gathers, so the paper's
                           count (every parameter gathered again for the
                           backward: 3 psi vs 2 psi) is 1.5x exactly; par
                           gathers again only what the backward reads, so
                           the measured ratio is at most 1.5x and equals the
                           optimizer report's figure
  halved F32.txt MIXED.txt  zero=3's parameter gathers of an f32 compile and
                           of a mixed-precision one, in order: each gather
                           in the compute type moves half the bytes
  memory Z3.txt            the model state per rank (parameters +
                           gradients + optimizer state) against the paper's
                           (2 + 2 + 12) psi / N_d, psi the parameters per
                           rank without ZeRO (after tensor parallelism)
"""
import re
import sys


def dp_bytes(path):
    """Per kind ("reduce_scatter", "all_gather", "all_gather forward", ...):
    the bytes of the collectives over ["dp"] of the gradient function and
    the step, and the optimizer report's lines."""
    out = {}
    fn = None
    text = open(path).read()
    for line in text.splitlines():
        m = re.match(r"par-comm-report: @(\w+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r'\s+par\.(\w+) axes=\["dp"\] n=\d+ \S+ .*?(?:\(zero=3 (\w+)\))?: (\d+) bytes', line)
        if m and fn and (fn.endswith("_grad") or fn.endswith("_step")):
            kind = m.group(1) + (" " + m.group(2) if m.group(2) else "")
            # The loss's scalar all_reduce is the same in both.
            if kind == "all_reduce":
                continue
            out[kind] = out.get(kind, 0) + int(m.group(3))
    return out, text


def main():
    if sys.argv[1] == "bytes":
        z1, _ = dp_bytes(sys.argv[2])
        z3, text3 = dp_bytes(sys.argv[3])
        rs1, ag1 = z1["reduce_scatter"], z1["all_gather"]
        rs3 = z3["reduce_scatter"]
        fw, bw = z3["all_gather forward"], z3.get("all_gather backward", 0)
        assert "all_gather" not in z3, "zero=3 gathers a parameter outside its uses"
        assert rs3 == rs1, "reduce_scatter: zero=3 %d, zero=1 %d" % (rs3, rs1)
        assert fw == ag1, "forward gathers %d, zero=1's gathers %d" % (fw, ag1)
        paper = (rs3 + 2 * fw) / (rs1 + ag1)
        measured = (rs3 + fw + bw) / (rs1 + ag1)
        m = re.search(r"= (\d+) bytes, (\d+\.\d+)x zero=1's (\d+)", text3)
        assert m, "no zero=3 line in the optimizer report"
        assert int(m.group(1)) == rs3 + fw + bw, "report %s, comm report %d" % (m.group(1), rs3 + fw + bw)
        assert int(m.group(3)) == rs1 + ag1
        assert abs(paper - 1.5) < 1e-12 and measured <= 1.5 + 1e-12
        print("dp bytes per step: zero=1 %d (reduce_scatter %d + all_gather %d), "
              "zero=3 %d (reduce_scatter %d + all_gather forward %d + backward %d)"
              % (rs1 + ag1, rs1, ag1, rs3 + fw + bw, rs3, fw, bw))
        print("ratio: %.2fx as the paper counts (3 psi / 2 psi), %.2fx measured "
              "(only what the backward reads is gathered again)" % (paper, measured))
        return
    if sys.argv[1] == "halved":
        pat = re.compile(r'\s+par\.all_gather axes=\["dp"\] n=\d+ (\w+) .*\(zero=3 (\w+)\): (\d+) bytes')
        a = [pat.match(l) for l in open(sys.argv[2]).read().splitlines()]
        b = [pat.match(l) for l in open(sys.argv[3]).read().splitlines()]
        a, b = [m for m in a if m], [m for m in b if m]
        assert len(a) == len(b) and a, "%d and %d gathers" % (len(a), len(b))
        half = 0
        for x, y in zip(a, b):
            assert x.group(2) == y.group(2)
            if y.group(1) in ("bf16", "f16"):
                assert 2 * int(y.group(3)) == int(x.group(3)), x.group(0) + " / " + y.group(0)
                half += 1
            else:
                assert int(y.group(3)) == int(x.group(3))
        total_a = sum(int(m.group(3)) for m in a)
        total_b = sum(int(m.group(3)) for m in b)
        print("%d of %d parameter gathers in the compute type, at half the "
              "bytes: %d bytes instead of %d" % (half, len(a), total_b, total_a))
        return
    if sys.argv[1] == "memory":
        text = open(sys.argv[2]).read()
        # psi from the state lines: zero=0's state bytes are 2 x 4 psi (Adam).
        zero0 = int(re.search(r"optimizer state per rank: \d+ bytes \(zero=0: (\d+)", text).group(1))
        psi = zero0 // 8
        st = int(re.search(r"optimizer state per rank: (\d+) bytes", text).group(1))
        nd = zero0 / st
        m = re.search(r"model state per rank: parameters (\d+) \+ gradients (\d+) \+ optimizer state (\d+) = (\d+) bytes", text)
        p, g, s, total = map(int, m.groups())
        paper = (2 + 2 + 12) * psi / nd
        print("model state per rank: %d bytes (parameters %d + gradients %d + "
              "state %d); the paper's (2+2+12) psi/N_d = %.0f (psi %d, N_d %.0f): %.3f"
              % (total, p, g, s, paper, psi, nd, total / paper))
        assert abs(total / paper - 1) < 0.05
        return
    sys.exit("unknown command " + sys.argv[1])


main()
