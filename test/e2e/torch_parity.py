#!/usr/bin/python3
"""PyTorch parity for par-autodiff and par-optimizer (issue 4).

torch_parity.py PAR_OPT PAR_COMPILE PAR_RUN MODEL.mlir WORKDIR

MODEL is the two-layer MLP loss of autodiff-mlp.mlir in f32, sharded
dp x tp (4 ranks). The same weights and batch go to PyTorch (Debian's
python3-torch) and to par: the gradients must agree to 1e-4 relative, and
20 steps' loss trajectories to 1e-4 (SGD) and 1e-3 (AdamW) relative.
Prints one line per check and `N passed, M failed`.
"""
import csv
import os
import subprocess
import sys

import numpy as np
import torch


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout + p.stderr)
        sys.exit("torch_parity: %s failed" % os.path.basename(cmd[0]))
    return p.stdout


def main():
    par_opt, par_compile, par_run, model, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    w1 = (rng.uniform(-1, 1, (4, 16)) * 0.5).astype(np.float32)
    w2 = (rng.uniform(-1, 1, (16, 2)) * 0.5).astype(np.float32)
    t = rng.uniform(-1, 1, (8, 2)).astype(np.float32)
    inputs = []
    for k, a in enumerate((x, w1, w2, t)):
        path = os.path.join(work, "arg%d.npy" % k)
        np.save(path, a)
        inputs += ["--input", "arg%d=%s" % (k, path)]

    steps = 20
    # PyTorch.
    W1 = torch.tensor(w1, requires_grad=True)
    W2 = torch.tensor(w2, requires_grad=True)
    X, T = torch.tensor(x), torch.tensor(t)

    def loss_fn():
        return 0.5 * ((torch.tanh(X @ W1) @ W2 - T) ** 2).sum()

    loss = loss_fn()
    loss.backward()
    ref_grads = [W1.grad.numpy().copy(), W2.grad.numpy().copy()]

    def torch_trajectory(make_opt, clip=0.0, lam=None):
        with torch.no_grad():
            W1.copy_(torch.tensor(w1))
            W2.copy_(torch.tensor(w2))
        opt = make_opt([W1, W2])
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lam) if lam else None
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn()
            losses.append(loss.item())
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_([W1, W2], clip)
            opt.step()
            if sched:
                sched.step()
        return losses

    # par: gradients once, then each optimizer's trajectory.
    def par_trajectory(tag, flags):
        step_mlir = os.path.join(work, tag + ".mlir")
        art = os.path.join(work, tag)
        run([par_opt, model, "--par-autodiff", flags, "-o", step_mlir])
        run([par_compile, step_mlir, "-o", art])
        csv_path = os.path.join(work, tag + ".csv")
        run([par_run, "-n", "4", art, "--entry", "loss_step", "--steps", str(steps),
             "--loss-csv", csv_path] + inputs)
        return art, [float(r["loss"]) for r in csv.DictReader(open(csv_path))]

    art, sgd = par_trajectory("sgd", "--par-optimizer=optimizer=sgd lr=0.1")
    out = os.path.join(work, "grads")
    run([par_run, "-n", "4", art, "--entry", "loss_grad", "--output", out] + inputs)
    grads = [np.load(os.path.join(out, "result%d.npy" % k)) for k in (1, 2)]
    _, adamw = par_trajectory("adamw", "--par-optimizer=optimizer=adamw lr=0.01")
    _, clipped = par_trajectory("clip", "--par-optimizer=optimizer=sgd lr=0.1 clip-norm=0.5")
    ref_clipped = torch_trajectory(lambda p: torch.optim.SGD(p, lr=0.1), clip=0.5)
    _, cosine = par_trajectory(
        "cosine", "--par-optimizer=optimizer=adamw lr=0.02 schedule=cosine "
                  "warmup-steps=5 total-steps=20")

    def factor(t):  # the schedule of step t (1-based)
        if t <= 5:
            return t / 5
        return 0.5 * (1 + np.cos(np.pi * min(1.0, (t - 5) / 15)))
    ref_cosine = torch_trajectory(lambda p: torch.optim.AdamW(
        p, lr=0.02, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
        lam=lambda k: factor(k + 1))
    ref_sgd = torch_trajectory(lambda p: torch.optim.SGD(p, lr=0.1))
    ref_adamw = torch_trajectory(lambda p: torch.optim.AdamW(
        p, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01))

    passed = failed = 0

    def check(name, err, tol):
        nonlocal passed, failed
        ok = err <= tol
        passed += ok
        failed += not ok
        print("%s: max rel error %.2e (tolerance %.0e) %s" % (name, err, tol, "OK" if ok else "FAIL"))

    for k, (g, r) in enumerate(zip(grads, ref_grads)):
        check("grad w%d vs torch" % (k + 1), float(np.abs(g - r).max() / np.abs(r).max()), 1e-4)
    for name, mine, ref, tol in (("SGD", sgd, ref_sgd, 1e-4),
                                 ("AdamW", adamw, ref_adamw, 1e-3),
                                 ("SGD clip-norm 0.5", clipped, ref_clipped, 1e-4),
                                 ("AdamW warmup+cosine", cosine, ref_cosine, 1e-3)):
        # NaN-aware: Python's max() keeps whatever came first past a NaN.
        traj = float(np.max([abs(a - b) / abs(b) for a, b in zip(mine, ref)]))
        check("%d %s steps, loss trajectory vs torch (%.4g -> %.4g)"
              % (steps, name, ref[0], ref[-1]), traj, tol)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
