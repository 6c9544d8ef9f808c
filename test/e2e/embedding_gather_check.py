#!/usr/bin/env python3
"""Checks the gradient of a GPT with a gather embedding (gen_transformer.py
--gpt --embedding gather --dtype f64) against central finite differences of
its loss, on real ranks.

embedding_gather_check.py PAR_RUN ARTIFACT RANKS
  PAR_RUN   the par-run binary
  ARTIFACT  a par-compile output holding @gpt and @gpt_grad
  RANKS     how many ranks par-run uses (the artifact's mesh size)

Arguments: tokens and targets (i64 [B, S]), then the f64 parameters, wte
[V, D] first (V >= 8). Row 2 of wte is unused, row 3 used once, row 4 three
times (a row collecting several contributions); two tokens lie outside
[0, V) (-1 and V, which the lookup clamps to rows 0 and V-1 and then zeroes),
so rows 0, 2 and V-1 must get exactly no gradient. Checked: an entry of each
of those rows, two of wpe and one of three other parameters. Prints one line
per entry and `N passed, M failed`.
"""
import json
import os
import random
import struct
import sys
import tempfile

# par-run and .npy reading are gradcheck.py's (same directory).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradcheck  # noqa: E402
from gradcheck import run  # noqa: E402


def write_npy(path, shape, values, dtype):
    descr, fmt = {"f64": ("<f8", "d"), "i64": ("<i8", "q")}[dtype]
    shape_s = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_s)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def main():
    gradcheck.PAR_RUN, artifact, ranks = sys.argv[1:4]
    manifest = json.load(open(os.path.join(artifact, "sharded.json")))
    spec = next(f for f in manifest["functions"] if f["name"] == "gpt")
    shapes = [t["global_shape"] for t in spec["inputs"]]
    dtypes = [t["dtype"] for t in spec["inputs"]]
    assert dtypes[:2] == ["i64", "i64"] and all(d == "f64" for d in dtypes[2:]), dtypes
    (B, S), (V, D) = shapes[0], shapes[2]
    rng = random.Random(1234)
    tmp = tempfile.mkdtemp()

    # Tokens: id 2 unused, id 3 once, id 4 three times, -1 and V once each,
    # the others drawn from 5 .. V-2.
    unused, once, repeated = 2, 3, 4
    tokens = [rng.randrange(5, V - 1) for _ in range(B * S)]
    tokens[0], tokens[1], tokens[2] = -1, V, once
    tokens[3], tokens[B * S // 2], tokens[B * S - 1] = repeated, repeated, repeated
    targets = [rng.randrange(0, V) for _ in range(B * S)]

    values, paths = {}, {}
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        n = 1
        for d in shape:
            n *= d
        if k == 0:
            values[k] = tokens
        elif k == 1:
            values[k] = targets
        else:
            values[k] = [rng.uniform(-1, 1) for _ in range(n)]
        paths[k] = os.path.join(tmp, "arg%d.npy" % k)
        write_npy(paths[k], shape, values[k], dtype)
    grads = run(artifact, "gpt_grad", ranks, paths, os.path.join(tmp, "grad"))

    # (argument, element, what) to check.
    points = [(2, repeated * D + 1, "wte row %d (used 3 times)" % repeated),
              (2, once * D + D - 1, "wte row %d (used once)" % once),
              (2, unused * D, "wte row %d (unused)" % unused),
              (2, 0 * D + 2, "wte row 0 (only token -1, clamped)"),
              (2, (V - 1) * D + 3, "wte row %d (only token %d, clamped)" % (V - 1, V)),
              (3, 0, "wpe"), (3, S * D - 1, "wpe")]
    last = len(shapes) - 1
    for k in (4, 6, last):
        n = len(values[k])
        points.append((k, n // 3, "arg%d" % k))

    passed = failed = 0
    eps = 1e-5
    for k, e, what in points:
        g = grads[k - 1][e]  # Result 0 is the loss; result i is arg i+1's.
        losses = []
        for sign in (1, -1):
            v = list(values[k])
            v[e] += sign * eps
            path = os.path.join(tmp, "pert.npy")
            write_npy(path, shapes[k], v, "f64")
            inputs = dict(paths)
            inputs[k] = path
            losses.append(run(artifact, "gpt", ranks, inputs, os.path.join(tmp, "fwd"))[0][0])
        fd = (losses[0] - losses[1]) / (2 * eps)
        err = abs(fd - g) / max(abs(fd), abs(g), 1e-2)
        ok = err <= 1e-6
        if "clamped" in what or "unused" in what:
            ok = ok and g == 0.0
        passed += ok
        failed += not ok
        print("arg%d[%d] %s: autodiff %.10g finite difference %.10g rel error %.2e %s"
              % (k, e, what, g, fd, err, "OK" if ok else "FAIL"))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
