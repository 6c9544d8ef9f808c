#!/usr/bin/python3
"""PyTorch parity for the GPT of gen_transformer.py --gpt (issue 4).

gpt_torch_parity.py GEN_TRANSFORMER PAR_OPT PAR_COMPILE PAR_RUN WORKDIR

A small GPT (2 layers, d_model 32, 4 heads, seq 16, vocab 64, batch 4) in
f32 is generated for three meshes: 1 rank (dp1 x tp1), 4 ranks (dp2 x tp2)
and 8 ranks (dp2 x tp4). The same weights and batch (written as .npy and fed
to par-run with --input) go to PyTorch (Debian's python3-torch), which runs
the same model: token embedding (one-hot matmul in torch: the same math as par's gather) + position embedding, pre-LN blocks
with causal multi-head attention (scores scaled by 1/sqrt(d_head), masked
with -1e9) and a tanh-approximated GELU MLP, final LayerNorm (eps 1e-5), LM
head, mean cross-entropy.

Checks (relative error of a tensor = max|par - ref| / max|ref|; of a loss
trajectory = max over steps of |par - ref| / |ref|):
  * every parameter's gradient (gpt_grad) vs torch autograd, <= 1e-4, on
    1, 4 and 8 ranks, and the sharded gradients vs the 1-rank ones;
  * 20 steps on a fixed batch: SGD (1e-4) and AdamW (1e-3) loss trajectories
    vs torch.optim.SGD / torch.optim.AdamW on 1 and 8 ranks, and 8 vs 1;
  * f64, a tiny GPT on 1 rank: par's gradient vs central finite differences
    of par's own loss (a few entries of every parameter), and vs torch's f64
    autograd.
Prints one line per check and `N passed, M failed`; exits 1 on a failure.
"""
import csv
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

GEN = PAR_OPT = PAR_COMPILE = PAR_RUN = WORK = None

LN_EPS = 1e-5
MASK = -1e9
PARAM_KEYS = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "w2"]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
        sys.exit("gpt_torch_parity: %s failed" % os.path.basename(cmd[0]))
    return p.stdout


class Config:
    def __init__(self, layers, batch, seq, dmodel, heads, vocab, dtype):
        self.layers, self.batch, self.seq = layers, batch, seq
        self.dmodel, self.heads, self.vocab = dmodel, heads, vocab
        self.ffn = 4 * dmodel
        self.dtype = dtype
        self.np_dtype = np.float32 if dtype == "f32" else np.float64
        self.torch_dtype = torch.float32 if dtype == "f32" else torch.float64

    def param_specs(self):
        """(name, shape, init) in the argument order of @gpt (args 2...)."""
        d, f, v, s, L = self.dmodel, self.ffn, self.vocab, self.seq, self.layers
        init = {"ln1_g": "ones", "ln1_b": "zeros", "ln2_g": "ones", "ln2_b": "zeros",
                "wq": d ** -0.5, "wk": d ** -0.5, "wv": d ** -0.5,
                "wo": (d * 2 * L) ** -0.5, "w1": d ** -0.5, "w2": (f * 2 * L) ** -0.5}
        shapes = {"ln1_g": [d], "ln1_b": [d], "wq": [d, d], "wk": [d, d],
                  "wv": [d, d], "wo": [d, d], "ln2_g": [d], "ln2_b": [d],
                  "w1": [d, f], "w2": [f, d]}
        specs = [("wte", [v, d], 0.05), ("wpe", [s, d], 0.02)]
        for l in range(L):
            specs += [("l%d_%s" % (l, k), shapes[k], init[k]) for k in PARAM_KEYS]
        specs += [("lnf_g", [d], "ones"), ("lnf_b", [d], "zeros"),
                  ("whead", [d, v], d ** -0.5)]
        return specs

    def generate(self, path, dp, tp):
        run(["/usr/bin/python3", GEN, "--gpt", "--layers", str(self.layers),
             "--batch", str(self.batch), "--seq", str(self.seq),
             "--dmodel", str(self.dmodel), "--heads", str(self.heads),
             "--vocab", str(self.vocab), "--dtype", self.dtype,
             "--dp", str(dp), "--tp", str(tp), "-o", path])


def make_weights(cfg, rng):
    """par's initialisers (par.init), with LayerNorm gains and biases
    perturbed so that their gradients are not special."""
    ws = []
    for name, shape, init in cfg.param_specs():
        if init == "ones":
            w = 1.0 + 0.1 * rng.uniform(-1, 1, shape)
        elif init == "zeros":
            w = 0.1 * rng.uniform(-1, 1, shape)
        else:
            w = init * rng.uniform(-1, 1, shape)
        ws.append((name, w.astype(cfg.np_dtype)))
    return ws


def make_batch(cfg, rng):
    """Tokens and next-token targets: windows of a random sequence."""
    seq = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq + 1)).astype(np.int64)
    return seq[:, :-1].copy(), seq[:, 1:].copy()


def write_inputs(cfg, tokens, targets, weights, tag):
    d = os.path.join(WORK, "in-" + tag)
    os.makedirs(d, exist_ok=True)
    flags = []
    for k, a in enumerate([tokens, targets] + [w for _, w in weights]):
        path = os.path.join(d, "arg%d.npy" % k)
        np.save(path, a)
        flags += ["--input", "arg%d=%s" % (k, path)]
    return flags


# -- PyTorch -----------------------------------------------------------------

def torch_loss(cfg, P, tokens, targets):
    """The GPT of gen_transformer.py --gpt. P: parameter tensors in order."""
    B, S, D, H, V = cfg.batch, cfg.seq, cfg.dmodel, cfg.heads, cfg.vocab
    dh = D // H
    it = iter(P)
    wte, wpe = next(it), next(it)
    onehot = F.one_hot(tokens, V).to(cfg.torch_dtype).reshape(B * S, V)
    h = (onehot @ wte).reshape(B, S, D) + wpe
    future = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    for _ in range(cfg.layers):
        g1, b1, wq, wk, wv, wo, g2, b2, w1, w2 = [next(it) for _ in PARAM_KEYS]
        x = F.layer_norm(h, (D,), g1, b1, eps=LN_EPS).reshape(B * S, D)
        q, k, v = [(x @ w).reshape(B, S, H, dh).transpose(1, 2) for w in (wq, wk, wv)]
        scores = (q @ k.transpose(-1, -2)) * (1.0 / dh ** 0.5)
        probs = torch.softmax(scores.masked_fill(future, MASK), dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B * S, D)
        h = h + (ctx @ wo).reshape(B, S, D)
        x = F.layer_norm(h, (D,), g2, b2, eps=LN_EPS).reshape(B * S, D)
        m = F.gelu(x @ w1, approximate="tanh") @ w2
        h = h + m.reshape(B, S, D)
    gf, bf, whead = next(it), next(it), next(it)
    x = F.layer_norm(h, (D,), gf, bf, eps=LN_EPS).reshape(B * S, D)
    return F.cross_entropy(x @ whead, targets.reshape(-1))


def torch_params(weights, dtype=None):
    return [torch.tensor(w, dtype=dtype).requires_grad_() for _, w in weights]


def torch_grads(cfg, weights, tokens, targets, dtype=None):
    P = torch_params(weights, dtype)
    loss = torch_loss(cfg, P, torch.tensor(tokens), torch.tensor(targets))
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in P]


def torch_trajectory(cfg, weights, tokens, targets, make_opt, steps):
    P = torch_params(weights)
    opt = make_opt(P)
    tk, tg = torch.tensor(tokens), torch.tensor(targets)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch_loss(cfg, P, tk, tg)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses


# -- par -----------------------------------------------------------------------

def build(cfg, tag, dp, tp, opt_flags):
    """Generate, differentiate (+ optimizer) and compile; returns the artifact."""
    model = os.path.join(WORK, tag + ".mlir")
    step = os.path.join(WORK, tag + ".step.mlir")
    art = os.path.join(WORK, tag)
    cfg.generate(model, dp, tp)
    cmd = [PAR_OPT, model, "--par-autodiff"]
    if opt_flags:
        cmd.append("--par-optimizer=" + opt_flags)
    run(cmd + ["-o", step])
    run([PAR_COMPILE, step, "-o", art, "--no-reference"])
    return art


def par_outputs(art, ranks, entry, inputs, tag):
    out = os.path.join(WORK, "out-" + tag)
    run([PAR_RUN, "-n", str(ranks), art, "--entry", entry, "--output", out] + inputs)
    k, res = 0, []
    while os.path.exists(os.path.join(out, "result%d.npy" % k)):
        res.append(np.load(os.path.join(out, "result%d.npy" % k)))
        k += 1
    return res


def par_trajectory(art, ranks, inputs, steps, tag):
    path = os.path.join(WORK, tag + ".csv")
    run([PAR_RUN, "-n", str(ranks), art, "--entry", "gpt_step", "--steps", str(steps),
         "--loss-csv", path] + inputs)
    return [float(r["loss"]) for r in csv.DictReader(open(path))]


def rel(a, b):
    """max|a - b| / max|b| over a tensor."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def traj_rel(a, b):
    """max over steps of |a - b| / |b|; NaN or a missing step is infinite."""
    if len(a) != len(b):
        return float("inf")
    return worst(abs(x - y) / abs(y) for x, y in zip(a, b))


def worst(errs):
    """The largest error; a NaN anywhere makes it infinite (max() skips NaN)."""
    errs = np.asarray(list(errs), np.float64)
    return float("inf") if np.isnan(errs).any() else float(errs.max())


def main():
    global GEN, PAR_OPT, PAR_COMPILE, PAR_RUN, WORK
    GEN, PAR_OPT, PAR_COMPILE, PAR_RUN, WORK = sys.argv[1:6]
    os.makedirs(WORK, exist_ok=True)
    torch.manual_seed(0)
    steps = 20
    sgd_flags = "optimizer=sgd lr=0.5"
    adamw_flags = "optimizer=adamw lr=0.01 beta1=0.9 beta2=0.999 eps=1e-8 weight-decay=0.01"
    make_sgd = lambda p: torch.optim.SGD(p, lr=0.5)
    make_adamw = lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                             weight_decay=0.01)

    cfg = Config(layers=2, batch=4, seq=16, dmodel=32, heads=4, vocab=64, dtype="f32")
    tiny = Config(layers=2, batch=2, seq=4, dmodel=8, heads=2, vocab=8, dtype="f64")
    meshes = {1: (1, 1), 4: (2, 2), 8: (2, 4)}

    # Compile everything, two at a time (par-compile is the slow part).
    jobs = [("sgd1", cfg, 1, sgd_flags), ("sgd8", cfg, 8, sgd_flags),
            ("adamw1", cfg, 1, adamw_flags), ("adamw8", cfg, 8, adamw_flags),
            ("sgd4", cfg, 4, sgd_flags), ("tiny", tiny, 1, None)]
    with ThreadPoolExecutor(2) as pool:
        futs = {tag: pool.submit(build, c, tag, *meshes[r], flags)
                for tag, c, r, flags in jobs}
        arts = {tag: f.result() for tag, f in futs.items()}

    passed = failed = 0

    def check(name, err, tol):
        nonlocal passed, failed
        ok = err <= tol
        passed += ok
        failed += not ok
        print("%s: max rel error %.2e (tolerance %.0e) %s"
              % (name, err, tol, "OK" if ok else "FAIL"), flush=True)

    # 1. Gradients, f32, on 1, 4 and 8 ranks.
    rng = np.random.default_rng(2024)
    weights = make_weights(cfg, rng)
    tokens, targets = make_batch(cfg, rng)
    inputs = write_inputs(cfg, tokens, targets, weights, "f32")
    ref_loss, ref_grads = torch_grads(cfg, weights, tokens, targets)
    names = [n for n, _ in weights]
    par = {}
    for ranks in (1, 4, 8):
        res = par_outputs(arts["sgd%d" % ranks], ranks, "gpt_grad", inputs, "grad%d" % ranks)
        par[ranks] = res
        errs = [rel(g, r) for g, r in zip(res[1:], ref_grads)]
        bad = int(np.argmax(np.nan_to_num(errs, nan=np.inf)))
        check("%d rank(s) dp%dxtp%d: loss vs torch (%.6g)"
              % (ranks, *meshes[ranks], ref_loss), rel(res[0], ref_loss), 1e-4)
        check("%d rank(s) dp%dxtp%d: gradients of all %d parameters vs torch (worst %s)"
              % (ranks, *meshes[ranks], len(names), names[bad]), worst(errs), 1e-4)
        if os.environ.get("GPT_PARITY_VERBOSE"):
            for n, e in zip(names, errs):
                print("    %s %.2e" % (n, e))
    for ranks in (4, 8):
        errs = [rel(g, r) for g, r in zip(par[ranks][1:], par[1][1:])]
        check("%d ranks dp%dxtp%d: gradients vs the 1-rank run" % (ranks, *meshes[ranks]),
              worst(errs), 1e-4)

    # 2. 20 training steps on the fixed batch.
    for name, flags, make_opt, tol in (("SGD", sgd_flags, make_sgd, 1e-4),
                                       ("AdamW", adamw_flags, make_adamw, 1e-3)):
        ref = torch_trajectory(cfg, weights, tokens, targets, make_opt, steps)
        tag = name.lower()
        traj = {r: par_trajectory(arts["%s%d" % (tag, r)], r, inputs, steps,
                                  "%s%d" % (tag, r)) for r in (1, 8)}
        if name == "SGD":
            traj[4] = par_trajectory(arts["sgd4"], 4, inputs, steps, "sgd4")
        for r in sorted(traj):
            check("%d %s steps on %d rank(s) dp%dxtp%d: loss trajectory vs torch "
                  "(%.4g -> %.4g)" % (steps, name, r, *meshes[r], ref[0], ref[-1]),
                  traj_rel(traj[r], ref), tol)
        for r in sorted(traj):
            if r > 1:
                check("%d %s steps on %d ranks: loss trajectory vs the 1-rank run"
                      % (steps, name, r), traj_rel(traj[r], traj[1]), tol)

    # 3. f64: finite differences of par's loss, and torch's f64 autograd.
    rng = np.random.default_rng(99)
    tw = make_weights(tiny, rng)
    ttok, ttgt = make_batch(tiny, rng)
    tin = write_inputs(tiny, ttok, ttgt, tw, "f64")
    grads = par_outputs(arts["tiny"], 1, "gpt_grad", tin, "tiny-grad")[1:]
    _, tref = torch_grads(tiny, tw, ttok, ttgt, dtype=torch.float64)
    check("f64 tiny GPT: gradients of all %d parameters vs torch f64" % len(tw),
          worst(rel(g, r) for g, r in zip(grads, tref)), 1e-10)
    # Central differences of par's own f64 loss at the entry of largest
    # gradient of a subset of the parameters, two par-runs at a time.
    eps = 1e-5
    fd_params = ["wte", "wpe", "l0_ln1_g", "l0_wq", "l0_wk", "l0_wv", "l0_wo",
                 "l1_ln2_b", "l1_w1", "l1_w2", "lnf_g", "whead"]
    pdir = os.path.join(WORK, "in-fd")
    os.makedirs(pdir, exist_ok=True)

    def perturbed_loss(p, e, sign):
        name, w = tw[p]
        v = w.copy().reshape(-1)
        v[e] += sign * eps
        tag = "%s-%d-%s" % (name, e, "p" if sign > 0 else "m")
        path = os.path.join(pdir, tag + ".npy")
        np.save(path, v.reshape(w.shape))
        flags = tin + ["--input", "arg%d=%s" % (p + 2, path)]  # the last one wins
        return float(par_outputs(arts["tiny"], 1, "gpt", flags, "fd-" + tag)[0])

    points = []
    for p, (name, w) in enumerate(tw):
        if name in fd_params:
            points.append((p, int(np.argmax(np.abs(grads[p])))))
    with ThreadPoolExecutor(2) as pool:
        futs = [(p, e, pool.submit(perturbed_loss, p, e, 1), pool.submit(perturbed_loss, p, e, -1))
                for p, e in points]
        errs = []
        for p, e, plus, minus in futs:
            fd = (plus.result() - minus.result()) / (2 * eps)
            g = grads[p].reshape(-1)[e]
            err = abs(fd - g) / max(abs(fd), abs(g), 1e-2)
            errs.append(err)
            if os.environ.get("GPT_PARITY_VERBOSE"):
                print("    %s[%d]: autodiff %.12g finite difference %.12g rel %.2e"
                      % (tw[p][0], e, g, fd, err))
    # Relative error here: |fd - g| / max(|fd|, |g|, 1e-2), as gradcheck.py.
    check("f64 tiny GPT: gradient vs central finite differences of par's loss "
          "(eps %g) at %d entries, the largest of %d parameters"
          % (eps, len(points), len(points)), worst(errs), 1e-6)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
