#!/usr/bin/python3
"""Mixed-precision parity: par's bf16 GPT against PyTorch CPU autocast (issue 10).

mp_torch_parity.py GEN_TRANSFORMER PAR_OPT PAR_COMPILE PAR_RUN WORKDIR

The GPT of gen_transformer.py --gpt (2 layers, d_model 32, 4 heads, seq 16,
vocab 64, batch 8) is compiled three times with par-compile
--options="optimizer=sgd precision=P" (loss scaling: auto, i.e. none for
bf16): P = f32 on 1 rank, P = bf16 on 1 rank and on 4 (dp2 x tp2). The
gradient entry gpt_grad runs with par-run on the weights and batch of
gpt_torch_parity.py (written as .npy, --input); PyTorch (Debian's 1.13)
runs the same GPT (gpt_torch_parity.torch_loss) in f32 and under
torch.autocast("cpu", dtype=torch.bfloat16), parameters f32 in both.

The two policies differ. Autocast runs the matmul-like ops (mm, bmm) with
bf16 inputs and outputs, LayerNorm and softmax of a bf16 input in bf16, and
adds a bf16 and an f32 tensor in f32, so the residual stream stays f32. par
(par-mixed-precision) rounds every matmul input to bf16 and accumulates in
f32 (f32 result), stores every elementwise result in bf16 (residual adds,
GELU, the scaled and masked scores, the LayerNorm normalisation), and keeps
reductions and softmax in f32. Neither is exact; both must sit in the same
error band around the f32 result.

Errors (per tensor, relative Frobenius: ||a - b|| / ||b||, which measures the
accumulated rounding rather than one outlier entry):
  e_par = par-bf16 vs torch-f32, e_ac = autocast vs torch-f32, e_pa =
  par-bf16 vs autocast; for the loss |a - b| / |b|.

Tolerances, from bf16's unit roundoff u = 2^-8 (8 significand bits, round
to nearest: a rounding's relative error is at most u):
  * a path through the program (forward, then backward) passes R = 40
    roundings: the 2-layer GPT's forward rounds about 9 times per layer on
    the way from the embedding to the loss (LN output, q/k, scaled and
    masked scores, probabilities, context, residual add, LN output, GELU,
    residual add) plus the embedding and the final LN (2 x 9 + 2 = 20), the
    backward as many again. Modelled as a random walk of independent
    relative errors, uniform in [-u, u] (standard deviation u/sqrt(3)), the
    relative error after R roundings has standard deviation sqrt(R/3) u;
    a gradient vs f32 is checked against 3 standard deviations,
    tol_f32 = sqrt(3R) u = 0.043, and par vs autocast (two independent
    walks) against sqrt(2) times that, tol_ac = sqrt(6R) u = 0.061.
  * the loss is a mean over N = 128 tokens; the forward's R_f = 20
    roundings are independent between tokens, so the mean's relative error
    is checked against sqrt(3 R_f) u / sqrt(N) = 2.7e-3 (par vs f32 and
    autocast vs f32), sqrt(2) times that for par vs autocast.
  * band: over all 25 gradients together, e_par <= 3 e_ac (par rounds the
    residual stream and the elementwise results that autocast keeps f32:
    more roundings on a path, but not an order of magnitude more; an f32
    accumulation missing from a contraction would add sqrt(K) u per dot
    product of length K and show here).
Measured (this machine, 2026-12): per tensor e_par <= 1.8e-2, e_ac <= 1.5e-2,
e_pa <= 2.1e-2 (of 0.043 / 0.043 / 0.061); over all gradients e_par 1.1e-2,
e_ac 7.3e-3 (ratio 1.5); loss 4.2705 (f32), par 3.8e-5, autocast 1.1e-4 off.
A gradient 10% off fails every bound, one 5% off fails tol_f32; par in f32
passes the same bounds against autocast (it is the f32 result).

Prints one line per check and `N passed, M failed`; exits 1 on a failure.
"""
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch_parity as G  # noqa: E402

U = 2.0 ** -8          # bf16 unit roundoff
R = 40                 # roundings on a forward + backward path (see above)
R_F = 20               # roundings on a forward path
TOL_F32 = math.sqrt(3 * R) * U
TOL_AC = math.sqrt(6 * R) * U
BAND = 3.0


def fro(a, b):
    """||a - b|| / ||b|| (Frobenius); NaN anywhere makes it infinite."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    e = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    return float("inf") if math.isnan(e) else e


def build(cfg, tag, dp, tp, precision):
    model = os.path.join(G.WORK, tag + ".mlir")
    art = os.path.join(G.WORK, tag)
    cfg.generate(model, dp, tp)
    G.run([G.PAR_COMPILE, model, "-o", art, "--no-reference",
           "--options=optimizer=sgd precision=" + precision])
    return art


def autocast_grads(cfg, weights, tokens, targets):
    P = G.torch_params(weights)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = G.torch_loss(cfg, P, torch.tensor(tokens), torch.tensor(targets))
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in P]


def main():
    G.GEN, G.PAR_OPT, G.PAR_COMPILE, G.PAR_RUN, G.WORK = sys.argv[1:6]
    os.makedirs(G.WORK, exist_ok=True)
    torch.manual_seed(0)
    cfg = G.Config(layers=2, batch=8, seq=16, dmodel=32, heads=4, vocab=64, dtype="f32")
    n_tokens = cfg.batch * cfg.seq
    tol_loss = math.sqrt(3 * R_F) * U / math.sqrt(n_tokens)

    jobs = [("f32-1", 1, 1, "f32"), ("bf16-1", 1, 1, "bf16"), ("bf16-4", 2, 2, "bf16")]
    with ThreadPoolExecutor(2) as pool:
        futs = {tag: pool.submit(build, cfg, tag, dp, tp, p) for tag, dp, tp, p in jobs}
        arts = {tag: f.result() for tag, f in futs.items()}

    rng = np.random.default_rng(2024)
    weights = G.make_weights(cfg, rng)
    tokens, targets = G.make_batch(cfg, rng)
    inputs = G.write_inputs(cfg, tokens, targets, weights, "mp")
    names = [n for n, _ in weights]

    l32, g32 = G.torch_grads(cfg, weights, tokens, targets)
    lac, gac = autocast_grads(cfg, weights, tokens, targets)
    par = {"f32-1": G.par_outputs(arts["f32-1"], 1, "gpt_grad", inputs, "f32-1"),
           "bf16-1": G.par_outputs(arts["bf16-1"], 1, "gpt_grad", inputs, "bf16-1"),
           "bf16-4": G.par_outputs(arts["bf16-4"], 4, "gpt_grad", inputs, "bf16-4")}

    passed = failed = 0

    def check(name, err, tol):
        nonlocal passed, failed
        ok = err <= tol
        passed += ok
        failed += not ok
        print("%s: %.2e (bound %.2e) %s" % (name, err, tol, "OK" if ok else "FAIL"),
              flush=True)

    def worst(errs):
        k = int(np.argmax(errs))
        return errs[k], names[k]

    verbose = os.environ.get("MP_PARITY_VERBOSE")
    e_ac = [fro(a, g) for a, g in zip(gac, g32)]
    print("torch f32 loss %.7g, autocast bf16 %.7g; u = 2^-8, R = %d, R_f = %d, N = %d"
          % (l32, lac, R, R_F, n_tokens))
    check("loss, autocast bf16 vs f32", abs(lac - l32) / abs(l32), tol_loss)
    err, at = worst(e_ac)
    check("gradients, autocast bf16 vs f32 (worst %s)" % at, err, TOL_F32)
    glob = lambda gs: np.concatenate([np.asarray(g, np.float64).ravel() for g in gs])
    e_ac_all = fro(glob(gac), glob(g32))
    for tag, label in (("bf16-1", "par bf16 1 rank"), ("bf16-4", "par bf16 4 ranks dp2xtp2"),
                       ("f32-1", "par f32 1 rank")):
        res = par[tag]
        loss, grads = float(res[0]), res[1:]
        e_p = [fro(g, r) for g, r in zip(grads, g32)]
        e_pa = [fro(g, a) for g, a in zip(grads, gac)]
        if verbose:
            for n, x, y, z in zip(names, e_p, e_ac, e_pa):
                print("    %-9s vs f32 %.2e  autocast vs f32 %.2e  vs autocast %.2e" % (n, x, y, z))
        check("%s: loss %.7g vs f32" % (label, loss), abs(loss - l32) / abs(l32), tol_loss)
        check("%s: loss vs autocast" % label, abs(loss - lac) / abs(lac),
              math.sqrt(2) * tol_loss)
        err, at = worst(e_p)
        check("%s: gradients of all %d parameters vs f32 (worst %s)" % (label, len(names), at),
              err, TOL_F32)
        err, at = worst(e_pa)
        check("%s: gradients vs autocast bf16 (worst %s)" % (label, at), err, TOL_AC)
        e_all = fro(glob(grads), glob(g32))
        check("%s: all gradients vs f32 %.2e, autocast's %.2e: ratio" % (label, e_all, e_ac_all),
              e_all / e_ac_all, BAND)
    # The sharded bf16 program against the 1-rank one: same roundings, the
    # f32 sums in another order (tp partial sums, dp gradient sums).
    err, at = worst([fro(a, b) for a, b in zip(par["bf16-4"][1:], par["bf16-1"][1:])])
    check("par bf16 4 ranks vs 1 rank: gradients (worst %s)" % at, err, TOL_F32)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
