#!/usr/bin/env python3
"""Checks a par-optimizer train step against PyTorch's update formulas,
recomputed here in Python from the gradient par-autodiff returns.

optimcheck.py PAR_RUN ARTIFACT FWD PARAMS RANKS OPTIMIZER LR
  (momentum 0.9, AdamW betas 0.9/0.999, eps 1e-8, weight decay 0.01: the
   par-optimizer defaults)

Runs FWD's gradient and train step (its manifest roles) on the same f64 inputs (state too) and prints
`N passed, M failed` over every updated tensor.
"""
import json
import math
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradcheck  # noqa: E402  (npy helpers and par-run driver)


def main():
    par_run, artifact, fwd, params, ranks, opt, lr = sys.argv[1:8]
    gradcheck.PAR_RUN = par_run
    params = [int(p) for p in params.split(",")]
    lr = float(lr)
    mu, b1, b2, eps, wd = 0.9, 0.9, 0.999, 1e-8, 0.01
    manifest = json.load(open(os.path.join(artifact, "sharded.json")))
    # The step and the gradient by the roles the manifest records on FWD.
    roles = next(f for f in manifest["functions"] if f["name"] == fwd)["roles"]
    spec = next(f for f in manifest["functions"] if f["name"] == roles["step"])
    rng = random.Random(99)
    tmp = tempfile.mkdtemp()
    values, paths = [], {}
    for k, t in enumerate(spec["inputs"]):
        n = 1
        for d in t["global_shape"]:
            n *= d
        vals = [rng.uniform(-1, 1) for _ in range(n)]
        if opt == "adamw" and k == len(spec["inputs"]) - 1:
            vals = [3.0]  # the step number
        if opt == "adamw" and k >= len(spec["inputs"]) - 1 - len(params):
            vals = [abs(v) for v in vals]  # second moments are >= 0
        values.append(vals)
        paths[k] = os.path.join(tmp, "arg%d.npy" % k)
        gradcheck.write_npy(paths[k], t["global_shape"], vals)
    nfwd = len(spec["inputs"]) - {"sgd": 0, "momentum": 1, "adamw": 2}[opt] * len(params) - (opt == "adamw")
    grads = gradcheck.run(artifact, roles["grad"], ranks,
                          {k: paths[k] for k in range(nfwd)}, os.path.join(tmp, "g"))
    step = gradcheck.run(artifact, roles["step"], ranks, paths, os.path.join(tmp, "s"))
    expected = [grads[0]]
    news = {}
    for j, p in enumerate(params):
        pv, g = values[p], grads[1 + j]
        if opt == "sgd":
            expected.append([a - lr * b for a, b in zip(pv, g)])
        elif opt == "momentum":
            buf = [mu * s + b for s, b in zip(values[nfwd + j], g)]
            expected.append([a - lr * s for a, s in zip(pv, buf)])
            news.setdefault(0, []).append(buf)
        else:
            t = values[-1][0]
            m = [b1 * s + (1 - b1) * b for s, b in zip(values[nfwd + j], g)]
            v = [b2 * s + (1 - b2) * b * b for s, b in zip(values[nfwd + len(params) + j], g)]
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            expected.append([a - lr * wd * a - lr * (mm / bc1) / (math.sqrt(vv / bc2) + eps)
                             for a, mm, vv in zip(pv, m, v)])
            news.setdefault(0, []).append(m)
            news.setdefault(1, []).append(v)
    for k in sorted(news):
        expected.extend(news[k])
    if opt == "adamw":
        expected.append([values[-1][0] + 1])
    passed = failed = 0
    for i, (want, got) in enumerate(zip(expected, step)):
        err = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(want, got))
        ok = err <= 1e-12 and len(want) == len(got)
        passed += ok
        failed += not ok
        print("result%d: max rel error %.2e %s" % (i, err, "OK" if ok else "FAIL"))
    if len(expected) != len(step):
        failed += 1
        print("expected %d results, got %d" % (len(expected), len(step)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
