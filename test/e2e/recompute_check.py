#!/usr/bin/env python3
"""Helpers of recompute.test (no numpy).

recompute_check.py tokens OUT ROWS COLS VOCAB
    writes an i64 .npy of ROWS x COLS token ids, (7 i + 3) mod VOCAB.
recompute_check.py same NAME A.csv B.csv ADIR BDIR
    checks that two runs are the same to the bit: every step's loss (par-run
    prints 9 significant digits, enough to tell any two f32 apart) and every
    gathered result (the parameters, the optimizer state) byte for byte.
"""
import csv
import os
import struct
import sys


def tokens(out, rows, cols, vocab):
    rows, cols, vocab = int(rows), int(cols), int(vocab)
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dq" % (rows * cols), *[(7 * i + 3) % vocab for i in range(rows * cols)]))


def same(name, a_csv, b_csv, a_dir, b_dir):
    la = [r["loss"] for r in csv.DictReader(open(a_csv))]
    lb = [r["loss"] for r in csv.DictReader(open(b_csv))]
    bad = [i + 1 for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    if len(la) != len(lb) or not la or bad:
        sys.exit("%s: losses differ (steps %s): %s vs %s" % (name, bad, la, lb))
    files = sorted(os.listdir(a_dir))
    diff = [f for f in files
            if open(os.path.join(a_dir, f), "rb").read() != open(os.path.join(b_dir, f), "rb").read()]
    if not files or diff or sorted(os.listdir(b_dir)) != files:
        sys.exit("%s: results differ: %s" % (name, diff or "different sets"))
    print("%s: %d steps, losses and %d results bit-identical" % (name, len(la), len(files)))


if __name__ == "__main__":
    {"tokens": tokens, "same": same}[sys.argv[1]](*sys.argv[2:])
