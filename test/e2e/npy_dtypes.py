"""Writes the inputs of dtypes.test (one .npy per element type) or checks
par-run's outputs against numpy: npy_dtypes.py write DIR | check DIR OUTDIR.

bf16 has no numpy dtype: par-run reads and writes it as its raw 16-bit
patterns ('<u2'), the top half of the f32 bit pattern."""
import os
import sys

import numpy as np

R = np.arange(12).reshape(4, 3)
INPUTS = {
    "a": (R * 0.25 - 1).astype("<f8"),
    "b": (R * 0.5 - 2).astype("<f2"),
    "c": (R * 1000 - 5000).astype("<i4"),
    "d": (R * 10 - 60).astype("i1"),
    "e": R % 3 == 0,
}


def bf16_bits(x):
    return (np.asarray(x, "<f4").view("<u4") >> 16).astype("<u2")


def bf16_value(bits):
    return (bits.astype("<u4") << 16).view("<f4")


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "write":
        for k, v in INPUTS.items():
            np.save(os.path.join(d, k + ".npy"), v)
        np.save(os.path.join(d, "g.npy"), bf16_bits(R * 0.5 - 2))
        return 0
    out = sys.argv[3]
    r = [np.load(os.path.join(out, f"result{i}.npy")) for i in range(6)]
    expect = [INPUTS["a"] * 2, INPUTS["b"] * 2, INPUTS["c"] * 2,
              (INPUTS["d"].astype(np.int16) * 2).astype("i1"), ~INPUTS["e"]]
    for i, (got, want) in enumerate(zip(r, expect)):
        print(f"result{i} {got.dtype.str} {got.shape} equal={np.array_equal(got, want) and got.dtype == want.dtype}")
    g = bf16_value(r[5])
    print(f"result5 {r[5].dtype.str} {r[5].shape} equal={np.array_equal(g, (R * 0.5 - 2) * 2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
