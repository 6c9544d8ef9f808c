#!/usr/bin/env python3
"""Checks for the loss-scaling tests (loss-scale-storm.test,
loss-scale-underflow.test, mixed-precision.test). numpy only.

loss_scale_check.py regression DIR
    writes DIR/x.npy (32x8), DIR/y.npy = x @ w_true (32x4) and DIR/w0.npy
    (8x4, the starting weights), f32, from a fixed seed.
loss_scale_check.py zeros LABEL G.npy [G.npy ...]
    counts the gradient elements that are exactly 0.
loss_scale_check.py regression-grad DIR G.npy SCALE
    compares G / SCALE with the f64 gradient of 1e-9 * sum((x w0 - y)^2).
loss_scale_check.py same A.npy B.npy | differ A.npy B.npy
    bitwise comparison of two arrays (exit 1 if the claim is false).
loss_scale_check.py falls CSV FRACTION
    the mean loss of the last 5 steps is below FRACTION x the first 5.
loss_scale_check.py constant CSV
    every step's loss is bitwise the first step's.
loss_scale_check.py storm CSV INIT BACKOFF HYSTERESIS MIN_SKIPS
    the CSV of a run started at scale INIT: the first steps are skipped
    (at least MIN_SKIPS), the scale before step k+1 is the scale before
    step k times BACKOFF after a skipped step (once HYSTERESIS skips have
    been seen; unchanged before), then no step is skipped and the scale
    stays; the loss falls: the mean of the last 10 steps is below the mean
    of the first 5 taken steps and below 0.8 x the mean over the skipped
    steps (which all evaluate the untouched initial parameters).
loss_scale_check.py finite DIR
    every result*.npy in DIR holds only finite values.
loss_scale_check.py frozen PAR_RUN ARTIFACT RANKS DATA STEPS WORKDIR
    runs STEPS steps of ARTIFACT's loss-scaled train step from inputs
    written here (random parameters, random nonzero optimizer state, step
    number 3; the scale state at its par.init values), all of which must
    be skipped, and checks that every parameter and optimizer state result
    is bitwise the input it was fed from (the skipped steps changed
    nothing) and that the scale backed off STEPS times.
"""
import csv
import json
import os
import subprocess
import sys

import numpy as np


def load_csv(path):
    rows = list(csv.DictReader(open(path)))
    if not rows:
        sys.exit("%s: no steps" % path)
    return rows


def regression(d):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (32, 8)).astype(np.float32)
    w_true = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    w0 = rng.uniform(-0.5, 0.5, (8, 4)).astype(np.float32)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), (x @ w_true).astype(np.float32))
    np.save(os.path.join(d, "w0.npy"), w0)


def zeros(label, paths):
    z = n = 0
    big = 0.0
    for p in paths:
        g = np.load(p)
        z += int((g == 0).sum())
        n += g.size
        big = max(big, float(np.abs(g).max()))
    print("%s: %d of %d gradient elements exactly 0 (max |g| %.3g)" % (label, z, n, big))


def regression_grad(d, gpath, scale):
    x = np.load(os.path.join(d, "x.npy")).astype(np.float64)
    y = np.load(os.path.join(d, "y.npy")).astype(np.float64)
    w = np.load(os.path.join(d, "w0.npy")).astype(np.float64)
    ref = 1e-9 * 2 * x.T @ (x @ w - y)
    g = np.load(gpath).astype(np.float64) / scale
    err = np.abs(g - ref).max() / np.abs(ref).max()
    print("scaled gradient / scale vs f64: max |ref| %.3g, max rel error %.2e" % (np.abs(ref).max(), err))
    # f16 inputs and activations: each rounding is 2^-11 relative; the
    # products of a few of them stay within 1e-2.
    assert err < 1e-2, err


def same(a, b, want_same):
    x, y = np.load(a), np.load(b)
    eq = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
    print("%s vs %s: %s" % (os.path.basename(a), os.path.basename(b),
                            "bitwise equal" if eq else "differ"))
    if eq != want_same:
        sys.exit(1)


def falls(path, fraction):
    loss = [float(r["loss"]) for r in load_csv(path)]
    a, b = np.mean(loss[:5]), np.mean(loss[-5:])
    print("loss: first 5 steps %.4g, last 5 steps %.4g (ratio %.3f)" % (a, b, b / a))
    assert b < fraction * a


def constant(path):
    loss = [r["loss"] for r in load_csv(path)]
    print("loss: %d steps, %d distinct values" % (len(loss), len(set(loss))))
    assert len(set(loss)) == 1


def storm(path, init, backoff, hysteresis, min_skips):
    rows = load_csv(path)
    scale = [float(r["scale"]) for r in rows]
    skipped = [int(r["skipped"]) for r in rows]
    loss = [float(r["loss"]) for r in rows]
    n = 0
    while n < len(rows) and skipped[n]:
        n += 1
    assert n >= min_skips, "only %d leading skipped steps" % n
    assert not any(skipped[n:]), "a step after the storm was skipped"
    # The CSV prints 9 significant digits: equal to 1e-8 relative.
    def close(u, v):
        return abs(u - v) <= 1e-8 * abs(v)
    assert close(scale[0], init), scale[0]
    # The scale printed for step k is the one it ran with: after the j-th
    # skip (j >= hysteresis) the next step runs at backoff x the scale.
    for k in range(1, len(rows)):
        if k <= n:
            want = init * backoff ** max(0, k - hysteresis + 1)
        else:
            want = init * backoff ** max(0, n - hysteresis + 1)
        assert close(scale[k], want), "step %d: scale %g, expected %g" % (k + 1, scale[k], want)
    print("storm: %d steps skipped, scale %g -> %g, then %d steps taken at %g"
          % (n, init, scale[n], len(rows) - n, scale[-1]))
    initial = np.mean(loss[:n])
    first = np.mean(loss[n:n + 5])
    last = np.mean(loss[-10:])
    print("loss: skipped steps (initial parameters) %.4g, first 5 taken %.4g, last 10 %.4g"
          % (initial, first, last))
    assert last < first and last < 0.8 * initial


def finite(d):
    k = 0
    bad = []
    while os.path.exists(os.path.join(d, "result%d.npy" % k)):
        if not np.isfinite(np.load(os.path.join(d, "result%d.npy" % k))).all():
            bad.append(k)
        k += 1
    print("%d results, non-finite: %s" % (k, bad if bad else "none"))
    assert k > 0 and not bad


def frozen(par_run, artifact, ranks, data, steps, work):
    manifest = json.load(open(os.path.join(artifact, "sharded.json")))
    step = next(f for f in manifest["functions"] if "loss_scale" in f)
    ls = step["loss_scale"]
    fed = {r: a for r, a in step["feedback"]}
    scale_arg = fed[ls["scale"]]
    init_scale = float(step["inputs"][scale_arg]["init"].split(":")[1])
    # The scale state: the scale, and after it the good-step count and the
    # hysteresis tracker (results ls.scale, +1, +2); left to par.init.
    state_results = {ls["scale"], ls["scale"] + 1, ls["scale"] + 2}
    rng = np.random.default_rng(3)
    os.makedirs(work, exist_ok=True)
    args, given = [], {}
    for r, a in sorted(fed.items()):
        if r in state_results:
            continue
        t = step["inputs"][a]
        assert t["dtype"] == "f32", t
        shape = tuple(t["global_shape"])
        init = t.get("init", "")
        if init.startswith("uniform:"):
            s = float(init.split(":")[1])
            v = rng.uniform(-s, s, shape)
        elif init == "ones" and shape == ():
            v = np.array(3.0)  # AdamW's step number
        else:
            # Optimizer state (zeros at the start): nonzero, and >= 0 so
            # that it is a valid second moment too.
            v = rng.uniform(0.001, 0.01, shape)
        path = os.path.join(work, "arg%d.npy" % a)
        np.save(path, v.astype(np.float32))
        given[r] = path
        args += ["--input", "arg%d=%s" % (a, path)]
    out = os.path.join(work, "out")
    csv_path = os.path.join(work, "frozen.csv")
    cmd = [par_run, "-n", str(ranks), artifact, "--entry", step["name"],
           "--data", data, "--steps", str(steps), "--loss-csv", csv_path,
           "--output", out] + args
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("frozen: par-run failed")
    rows = load_csv(csv_path)
    assert len(rows) == steps and all(int(r["skipped"]) for r in rows), \
        "not every one of the %d steps was skipped" % steps
    changed = []
    for r, path in given.items():
        a = np.load(path)
        b = np.load(os.path.join(out, "result%d.npy" % r))
        if a.tobytes() != b.tobytes() or a.shape != b.shape:
            changed.append(r)
    final = float(np.load(os.path.join(out, "result%d.npy" % ls["scale"])))
    print("frozen: %d steps, all skipped; %d parameter and optimizer-state "
          "results bitwise equal to their inputs, %d changed; scale %g -> %g"
          % (steps, len(given) - len(changed), len(changed), init_scale, final))
    assert not changed
    assert final == init_scale * 0.5 ** steps, final


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "regression":
        regression(a[0])
    elif cmd == "zeros":
        zeros(a[0], a[1:])
    elif cmd == "regression-grad":
        regression_grad(a[0], a[1], float(a[2]))
    elif cmd in ("same", "differ"):
        same(a[0], a[1], cmd == "same")
    elif cmd == "falls":
        falls(a[0], float(a[1]))
    elif cmd == "constant":
        constant(a[0])
    elif cmd == "storm":
        storm(a[0], float(a[1]), float(a[2]), int(a[3]), int(a[4]))
    elif cmd == "finite":
        finite(a[0])
    elif cmd == "frozen":
        frozen(a[0], a[1], int(a[2]), a[3], int(a[4]), a[5])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
