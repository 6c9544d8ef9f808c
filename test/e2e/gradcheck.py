#!/usr/bin/env python3
"""Checks a par-autodiff gradient against central finite differences, in f64,
on real ranks.

gradcheck.py PAR_RUN ARTIFACT FWD GRAD PARAMS RANKS
  PAR_RUN   the par-run binary
  ARTIFACT  a par-compile output holding FWD (the loss) and GRAD (FWD_grad)
  PARAMS    comma-separated argument indices of the parameters, in order
  RANKS     how many ranks par-run uses (the artifact's mesh size)

Inputs are pseudo-random f64 tensors written as .npy; for a few elements of
each parameter the loss is evaluated at p +- eps by par-run. Prints one line
per checked element and `N passed, M failed`.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile


def write_npy(path, shape, values):
    shape_s = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % shape_s
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(values), *values))


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<H", data[8:10])
    body = data[10 + hlen:]
    return list(struct.unpack("<%dd" % (len(body) // 8), body))


PAR_RUN = "par-run"


def run(artifact, entry, ranks, inputs, outdir):
    cmd = [PAR_RUN, "-n", str(ranks), artifact, "--entry", entry, "--output", outdir]
    for k, path in inputs.items():
        cmd += ["--input", "arg%d=%s" % (k, path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("gradcheck: par-run failed")
    results = []
    k = 0
    while os.path.exists(os.path.join(outdir, "result%d.npy" % k)):
        results.append(read_npy(os.path.join(outdir, "result%d.npy" % k)))
        k += 1
    return results


def main():
    global PAR_RUN
    PAR_RUN, artifact, fwd, grad, params, ranks = sys.argv[1:7]
    params = [int(p) for p in params.split(",")]
    manifest = json.load(open(os.path.join(artifact, "sharded.json")))
    spec = next(f for f in manifest["functions"] if f["name"] == fwd)
    rng = random.Random(1234)
    tmp = tempfile.mkdtemp()
    values, paths = {}, {}
    for k, t in enumerate(spec["inputs"]):
        if t["dtype"] != "f64":
            sys.exit("gradcheck: inputs must be f64, arg%d is %s" % (k, t["dtype"]))
        n = 1
        for d in t["global_shape"]:
            n *= d
        values[k] = [rng.uniform(-1, 1) for _ in range(n)]
        paths[k] = os.path.join(tmp, "arg%d.npy" % k)
        write_npy(paths[k], t["global_shape"], values[k])
    grads = run(artifact, grad, ranks, paths, os.path.join(tmp, "grad"))
    passed = failed = 0
    eps = 1e-5
    for gi, p in enumerate(params):
        g = grads[1 + gi]
        n = len(values[p])
        for e in sorted({0, n // 3, (2 * n) // 3, n - 1}):
            losses = []
            for sign in (1, -1):
                v = list(values[p])
                v[e] += sign * eps
                path = os.path.join(tmp, "pert.npy")
                write_npy(path, spec["inputs"][p]["global_shape"], v)
                inputs = dict(paths)
                inputs[p] = path
                losses.append(run(artifact, fwd, ranks, inputs, os.path.join(tmp, "fwd"))[0][0])
            fd = (losses[0] - losses[1]) / (2 * eps)
            err = abs(fd - g[e]) / max(abs(fd), abs(g[e]), 1e-2)
            ok = err <= 1e-6
            passed += ok
            failed += not ok
            print("arg%d[%d]: autodiff %.10g finite difference %.10g rel error %.2e %s"
                  % (p, e, g[e], fd, err, "OK" if ok else "FAIL"))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
