"""pipeline-zero.test's check: a pipelined run with ZeRO-1/2 against the same
run with zero=0, or with ZeRO-3 against ZeRO-1's, from par-run's report
lines.

    pipeline_zero_check.py ZERO.out ZERO0.out
    pipeline_zero_check.py --zero3 M ZERO3.out ZERO1.out

- bytes: the dp gradient all-reduce (zero=0's all_reduce_start, the
  stages' updates) is replaced by a reduce_scatter of the gradients and an
  all_gather of the updated parameters, each half of it (a ring all-reduce
  is a reduce-scatter then an all-gather), so the bytes per step are equal;
- memory: every pipeline rank's stage state (parameters, gradient sums,
  optimizer state, update results) is smaller.

With --zero3 M (M micro-batches): the parameters are kept split like their
state and gathered where a stage uses them, so
- bytes: the gradient sums are reduce-scattered as with ZeRO-1, nothing is
  all-gathered after the update, and each of the M forwards gathers every
  parameter of the stage once and each of the M backwards at most once
  (only those it reads): on the reported rank, whose reduce_scatter RS
  moves (n-1)/n of its stage's parameter bytes, the all-gather bytes AG
  (all_gather_start and all_gather) lie in [M * RS, 2 M * RS];
- memory: every pipeline rank's stage state is smaller than ZeRO-1's.
Prints OK or FAIL (exit 1).
"""
import re
import sys


def report(path):
    text = open(path).read()
    m = re.search(r"bytes per step and rank: (\d+) \(([^)]*)\)", text)
    kinds = {k: int(v) for k, v in
             (x.strip().split(" ") for x in m.group(2).split(","))}
    state = [float(x) for x in
             re.findall(r"memory plan of pipeline rank \d+ .*?stage state "
                        r"([0-9.]+) MiB", text)]
    return int(m.group(1)), kinds, state


if sys.argv[1] == "--call-stage":
    # The module of FILE.mlir with a function that calls stage function
    # NAME (its arguments passed through): a bad input for zero=3.
    text = open(sys.argv[2]).read()
    name = sys.argv[3]
    header = re.search(r"func\.func @%s\((.*?)\) -> (.*?) \{\n" % name,
                       text).group(0)
    args = re.findall(r"(%arg\d+): (tensor<[^>]*>)", header)
    results = re.findall(r"tensor<[^>]*>",
                         header[header.rindex(") -> ") + 5:])
    caller = "  func.func @caller(%s) {\n    %%r:%d = func.call @%s(%s) : " \
             "(%s) -> (%s)\n    return\n  }\n" % (
                 ", ".join("%s: %s" % a for a in args), len(results), name,
                 ", ".join(a for a, _ in args),
                 ", ".join(t for _, t in args), ", ".join(results))
    end = text.rindex("}")
    print(text[:end] + caller + text[end:])
    sys.exit(0)

if sys.argv[1] == "--zero3":
    m = int(sys.argv[2])
    total, kinds, state = report(sys.argv[3])
    _, kinds1, state1 = report(sys.argv[4])
    rs = kinds.get("reduce_scatter", 0)
    ag = kinds.get("all_gather_start", 0) + kinds.get("all_gather", 0)
    ok_bytes = rs > 0 and m * rs <= ag <= 2 * m * rs and \
        "all_reduce_start" not in kinds
    ok_state = len(state) == len(state1) > 0 and \
        all(a < b for a, b in zip(state, state1))
    print("gathers per step %d for reduce_scatter %d and %d micro-batches "
          "(in [%d, %d]): %s" % (ag, rs, m, m * rs, 2 * m * rs,
                                 "OK" if ok_bytes else "FAIL"))
    print("stage state per pipeline rank (MiB) %s, zero=1's %s: %s" % (
        state, state1, "OK" if ok_state else "FAIL"))
    sys.exit(0 if ok_bytes and ok_state else 1)

total, kinds, state = report(sys.argv[1])
total0, kinds0, state0 = report(sys.argv[2])
reduce0 = kinds0.get("all_reduce_start", 0)
rs, ag = kinds.get("reduce_scatter", 0), kinds.get("all_gather", 0)
ok_bytes = total == total0 and reduce0 > 0 and rs == ag and \
    rs + ag == reduce0 and "all_reduce_start" not in kinds
ok_state = len(state) == len(state0) > 0 and \
    all(a < b for a, b in zip(state, state0))
print("bytes per step %d (reduce_scatter %d + all_gather %d), zero=0's %d "
      "(all_reduce_start %d): %s" % (total, rs, ag, total0, reduce0,
                                     "OK" if ok_bytes else "FAIL"))
print("stage state per pipeline rank (MiB) %s, zero=0's %s: %s" % (
    state, state0, "OK" if ok_state else "FAIL"))
sys.exit(0 if ok_bytes and ok_state else 1)
