#!/usr/bin/env python3
"""Writes a .npy file without numpy: make_npy.py OUT DTYPE DIM [DIM ...]
DTYPE is f4 or f8; values are 0.5 * (i % 7) - 1 for element i."""
import struct
import sys

out, dtype, dims = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
count = 1
for d in dims:
    count *= d
shape = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '<%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
fmt = "<%d%s" % (count, "f" if dtype == "f4" else "d")
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack(fmt, *[0.5 * (i % 7) - 1 for i in range(count)]))
