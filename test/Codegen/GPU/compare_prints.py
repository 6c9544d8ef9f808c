"""Compares two outputs of MLIR's printMemrefF32 value by value:
compare_prints.py A B RTOL. Every memref must have the same shape and every
value agree to RTOL relative (with RTOL as absolute floor near zero). A NaN
never agrees (not even with a NaN), an infinity only with the same one."""
import math
import re
import sys


def memrefs(path):
    text = open(path).read()
    parts = re.split(r"Unranked Memref base@ = 0x[0-9a-f]+ ", text)[1:]
    out = []
    for p in parts:
        head, _, body = p.partition("\n")
        nums = [float(v) for v in re.findall(r"-?(?:nan|inf|\d+(?:\.\d+)?(?:e[-+]?\d+)?)", body)]
        out.append((re.sub(r"offset = \d+ ", "", head), nums))
    return out


a, b, rtol = memrefs(sys.argv[1]), memrefs(sys.argv[2]), float(sys.argv[3])
if len(a) != len(b) or not a:
    sys.exit("different number of memrefs: %d vs %d" % (len(a), len(b)))
count = 0
for k, ((ha, va), (hb, vb)) in enumerate(zip(a, b)):
    if ha != hb or len(va) != len(vb):
        sys.exit("memref %d differs in shape: %s vs %s" % (k, ha, hb))
    for i, (x, y) in enumerate(zip(va, vb)):
        if not (math.isfinite(x) and math.isfinite(y)):
            if x != y:  # NaN != NaN; inf == inf
                sys.exit("memref %d value %d: %r vs %r (not finite)" % (k, i, x, y))
        elif abs(x - y) > rtol * max(abs(x), abs(y), 1.0):
            sys.exit("memref %d value %d: %r vs %r" % (k, i, x, y))
        count += 1
print("compared %d memrefs, %d values: ok" % (len(a), count))
