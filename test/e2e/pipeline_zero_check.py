"""pipeline-zero.test's check: a pipelined run with ZeRO-1/2 against the same
run with zero=0, from par-run's report lines.

    pipeline_zero_check.py ZERO.out ZERO0.out

- bytes: the dp gradient all-reduce (zero=0's all_reduce_start, the
  stages' updates) is replaced by a reduce_scatter of the gradients and an
  all_gather of the updated parameters, each half of it (a ring all-reduce
  is a reduce-scatter then an all-gather), so the bytes per step are equal;
- memory: every pipeline rank's stage state (parameters, gradient sums,
  optimizer state, update results) is smaller.
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
