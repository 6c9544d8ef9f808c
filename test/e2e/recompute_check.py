#!/usr/bin/env python3
"""Helpers of recompute.test (no numpy).

recompute_check.py tokens OUT ROWS COLS VOCAB
    writes an i64 .npy of ROWS x COLS token ids, (7 i + 3) mod VOCAB.
recompute_check.py same NAME A.csv B.csv ADIR BDIR
    checks that two runs are the same to the bit: every step's loss (par-run
    prints 9 significant digits, enough to tell any two f32 apart) and every
    gathered result (the parameters, the optimizer state) byte for byte.
recompute_check.py stash STASHED.prof RECOMPUTING.prof
    a pipeline rank's GEMM operations per step (as flops) when each
    backward runs on the residuals its forward kept and when it recomputes
    the forward: 4/3 exactly (two backward GEMMs per forward GEMM).
recompute_check.py halves SPLIT.prof[,...] WHOLE.prof[,...]
    a split backward's BI + BW (ZB-H1, ZB-V) against the whole backward B
    of the same stages (1F1B, interleaved), both on the residuals: the
    same GEMM operations per step (the sum of the profiles listed).
recompute_check.py flops NONE SEL FULL L D B S TP
    shows that recomputation ran: the GEMM operations per step and rank in
    par-run --profile's tables (calls x 2*batch*M*N*K of every matmul row)
    of the three policies. Recomputation redoes the forward ops whose
    values the backward reads. Full: every GEMM of each layer but its last
    (the MLP's down projection, whose output only joins the residual
    stream, the next layer's saved input): q, k, v and the output
    projection 8*T*d^2, the MLP's up projection 8*T*d^2, attention's two
    batched matmuls 4*B*S^2*d, so L*(16*T*d^2 + 4*B*S^2*d)/TP (T = B*S
    tokens of a dp rank). Selective: the attention cores' S x S scores
    (Korthikanti et al.), q k^T alone (the core's output p v is kept), so
    L*2*B*S^2*d/TP. Exact: both are counts.
"""
import re
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


def gemm_flops(path):
    total = 0
    for name, calls in re.findall(r"^  ((?:batch_)?matmul\S* [0-9x]+) \S+\s+([0-9.]+)\s", open(path).read(), re.M):
        dims = [int(x) for x in name.split()[1].split("x")]
        b, M, N, K = ([1] + dims) if len(dims) == 3 else dims
        total += float(calls) * 2 * b * M * N * K
    return total


def flops(none, sel, full, L, d, B, S, tp):
    L, d, B, S, tp = (int(x) for x in (L, d, B, S, tp))
    T = B * S
    base, fs, ff = gemm_flops(none), gemm_flops(sel), gemm_flops(full)
    want_full = L * (16 * T * d * d + 4 * B * S * S * d) // tp
    want_sel = L * 2 * B * S * S * d // tp
    print("recomputed GEMM flops per step: full %.0f (formula %d), selective %.0f (formula %d)"
          % (ff - base, want_full, fs - base, want_sel))
    ok = base > 0 and ff - base == want_full and fs - base == want_sel
    print("OK" if ok else "FAIL")
    sys.exit(0 if ok else 1)


def stash(stashed, recomputing):
    """A pipeline rank's GEMM operations per step when each backward runs
    on its forward's residuals and when it recomputes the forward first:
    every forward GEMM has two in the backward (dX and dW), so the backward
    that recomputes does 4/3 of the work, exactly."""
    a, b = gemm_flops(stashed), gemm_flops(recomputing)
    ok = a > 0 and 3 * b == 4 * a
    print("GEMM flops per step: stash %.0f, recompute %.0f, ratio %.4f (4/3: "
          "the forward's GEMMs once more): %s" % (a, b, b / a if a else 0,
                                                   "OK" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


def halves(split, whole):
    """BI and BW on the residuals (ZB-H1, ZB-V) against B of the same
    stages (1F1B, interleaved): the same GEMM operations per step (no op
    of the backward run twice)."""
    # Comma-separated profiles add up (several pipeline ranks: ZB-V and
    # interleaved place the stages differently).
    a = sum(gemm_flops(f) for f in split.split(","))
    b = sum(gemm_flops(f) for f in whole.split(","))
    ok = a > 0 and a == b
    print("GEMM flops per step: BI + BW %.0f, B %.0f: %s" %
          (a, b, "OK" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    {"tokens": tokens, "same": same, "flops": flops, "stash": stash,
     "halves": halves}[sys.argv[1]](*sys.argv[2:])
