"""Imports a PyTorch model with par.import_module, trains it with par on
real ranks and checks it against PyTorch training the same module:

  train_vs_torch.py MODEL RANKS DP TP PP WORK
  (MODEL: mlp, nanogpt, gpt2, or a factory of Inputs/sdpa_models.py: sdpa,
  gpt2_sdpa, opt_lm, bart, which also gives the tp plan)

1. par-import (par.import_module) writes the annotated MLIR and the module's
   initial weights (safetensors); par-compile builds the AdamW step (with
   PP > 1: stages=PP, 1F1B over 4 micro-batches);
2. par-run -n RANKS trains 20 steps on one fixed batch starting from those
   weights (--load-weights) and writes the trained weights (--save-weights);
3. torch.optim.AdamW trains the same module from the same weights on the
   same batch (the pipelined step's batch is its 4 micro-batches: the mean
   of their mean losses is the full batch's mean loss);
4. the loss trajectories agree to 1e-3 relative per step (f32: the
   sharded reductions and BLAS sum in other orders, and AdamW's
   1/(sqrt(v)+eps) amplifies a gradient's rounding by up to ~1/|g| in the
   first steps; the measured figure is printed);
5. the trained weights load into the torch module (load_state_dict,
   strict) and its loss on a new batch equals par's forward on it
   (par-run --entry MODEL --load-weights) to 1e-5 relative (f32 rounding
   of one forward).
Prints one OK/FAIL line per check and a summary.
"""

import csv
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "Inputs"))
import models  # noqa: E402
import par  # noqa: E402
import sdpa_models  # noqa: E402
import f64_reference as ref64  # noqa: E402

# Models whose attention must shard over heads under tp: no all_gather in
# the step's gradient (separate q/k/v projections, or a fused qkv that
# par-import splits per segment: nanoGPT's qkv, GPT2's c_attn).
NO_GATHER = {"sdpa", "opt_lm", "bart", "nanogpt", "gpt2", "gpt2_sdpa", "gpt2_vocab95"}
# Models whose step's tp all-reduces must be Megatron's formula exactly
# (tp_families.py's check: 4 per layer, the vocabulary-parallel embedding's
# and head's, the loss's row values), with no all_gather over tp anywhere.
MEGATRON = {"nanogpt", "gpt2", "gpt2_sdpa", "gpt2_vocab95"}
# Models whose first step's gradients are compared with torch autograd
# (1e-5 relative to the largest gradient: f32 sums in other orders; the
# trajectory alone hides a gradient error AdamW's normalisation shrinks
# and shows f32 noise it amplifies).
GRAD_CHECK = {"sdpa", "gpt2_sdpa", "opt_lm", "bart", "gpt2_vocab95"}
F64_TOL = 1e-5

STEPS = 20
LR, BETAS, EPS, WD = 0.003, (0.9, 0.999), 1e-8, 0.01
MICRO = 4

FAILED = []


def check(what, err, tol):
    ok = err <= tol
    print(f"{what}: {err:.3g} (tolerance {tol:g}) {'OK' if ok else 'FAIL'}")
    if not ok:
        FAILED.append(what)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("command failed: " + " ".join(cmd))
        print(r.stdout[-2000:])
        print(r.stderr[:3000])  # the first error, not the IR dump after it
        sys.exit(1)
    return r.stdout


def make(model, batch):
    if model == "mlp":
        m, x = models.mlp(b=batch)
        return m, x, None
    if model == "nanogpt":
        m, x = models.nanogpt(b=batch)
        return m, x, None
    if model == "gpt2":
        return models.gpt2(b=batch)
    if model in ("sdpa", "gpt2_sdpa", "opt_lm", "bart", "gpt2_vocab95"):
        return getattr(sdpa_models, model)(b=batch)[:3]
    raise SystemExit(f"unknown model {model}")


def loss_of(m, xs, loss_fn):
    out = loss_fn(m, *xs) if loss_fn else m(*xs)
    return out


def new_batch(model, xs, vocab=models.VOCAB):
    """Another batch of the same shapes (seeded differently)."""
    g = torch.Generator().manual_seed(1234)
    out = []
    for x in xs:
        if x.dtype.is_floating_point:
            out.append(torch.randn(x.shape, generator=g))
        else:
            out.append(torch.randint(0, vocab, x.shape, generator=g))
    return tuple(out)


def save_inputs(xs, work, tag, first_arg):
    flags = []
    for k, x in enumerate(xs):
        path = os.path.join(work, f"{tag}{k}.npy")
        np.save(path, x.numpy())
        flags += ["--input", f"arg{first_arg + k}={path}"]
    return flags


def megatron_check(model, m, r, report, xs, dp, tp):
    """The step's tp collectives against Megatron's formula (as in
    tp_families.py): no all_gather/all_to_all/reduce_scatter over tp, and
    the gradient function's tp all-reduce bytes between the layers' share
    and the whole formula (par may sum the loss's row values first)."""
    from par.frontend import _block_lists, _embedding_layers, parse_comm_report
    from tp_families import megatron_tp_bytes
    comm = parse_comm_report(report)
    tp_ops = [c for f in comm.values() for c in f if c["axes"] == ["tp"]]
    gathers = [c for c in tp_ops if c["kind"] in ("all_gather", "all_to_all", "reduce_scatter")]
    grad = comm.get(f"{model}_grad", [])
    got = sum(c["bytes"] for c in grad if c["axes"] == ["tp"] and
              c["kind"] in ("all_reduce", "bucket_all_reduce"))
    layers = len(_block_lists(m)[1])
    h = _embedding_layers(m)[0][1].embedding_dim
    roles = r.layer_roles.values()
    emb = any(v.kind == "embedding" and v.style == "vocab" for v in roles)
    head = any(v.kind != "embedding" and v.style == "vocab" for v in roles)
    n_big, want_big, n_small, want_small = megatron_tp_bytes(
        layers, xs[0].shape[0] // dp, xs[0].shape[1], h, tp, emb, head)
    want = want_big + want_small
    ok = want_big <= got <= want and not gathers
    print(f"{model}: tp bytes per step (gradient function): {got} (Megatron: {n_big} x b*s*h "
          f"+ {n_small} x b*s = {want}; {want - got} under it), {len(gathers)} "
          f"all_gather/all_to_all/reduce_scatter over tp {'OK' if ok else 'FAIL'}")
    if not ok:
        FAILED.append(f"{model}: tp bytes")


def main():
    model, ranks, dp, tp, pp, work = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
    par_opt, par_compile, par_run = (os.path.join(os.environ["PAR_BIN"], t)
                                     for t in ("par-opt", "par-compile", "par-run"))
    os.makedirs(work, exist_ok=True)
    micro = MICRO if pp > 1 else 1
    # The program's batch (one micro-batch when pipelined) and the step's.
    per_mb = 4 if pp > 1 else 8
    full = per_mb * micro
    _, xs, _ = make(model, full)
    m, xs_mb, loss_fn = make(model, per_mb)
    init = {k: v.detach().clone() for k, v in m.state_dict().items()}

    name = model
    mlir = os.path.join(work, f"{name}.mlir")
    weights = os.path.join(work, "init.safetensors")
    plan = getattr(sdpa_models, model)(b=per_mb)[3] if hasattr(sdpa_models, model) else None
    # (gpt2_vocab95: a vocabulary tp does not divide, padded by default to
    # be vocabulary-parallel.)
    r = par.import_module(m, xs_mb, loss_fn, name=name, output=mlir, weights=weights,
                          dp=dp, tp=tp, pp=pp, tp_plan=plan, par_opt=par_opt)
    print(f"imported @{name}: {len(r.param_names)} parameters, "
          f"{len(r.shardings)} sharded, {len(r.aliases)} tied, stage pins {bool(r.stages)}")

    options = (f"optimizer=adamw lr={LR} beta1={BETAS[0]} beta2={BETAS[1]} eps={EPS} "
               f"weight-decay={WD}")
    if pp > 1:
        options += f" stages={pp} micro-batches={micro} schedule=1f1b"
    art = os.path.join(work, "art")
    report = run([par_compile, mlir, "-o", art, "--no-reference",
                  f"--options={options} comm-report=true"])
    if model in MEGATRON and tp > 1:
        megatron_check(model, m, r, report, xs_mb, dp, tp)
    if model in NO_GATHER and tp > 1:
        # The gradient's communication: attention runs on each rank's heads
        # (pipelined: in every stage's gradient too, whose activations cross
        # the cut replicated).
        sections = {}
        for sec in report.split("par-comm-report: @")[1:]:
            head, _, body = sec.partition("\n")
            sections[head.strip()] = body.split("total:", 1)[0]
        fns = [f"{name}_grad"] + [f"{name}_s{k}_grad" for k in range(pp if pp > 1 else 0)]
        gathers = [f"{f}: " + l.strip() for f in fns for l in sections.get(f, "").splitlines()
                   if "all_gather" in l]
        missing = [f for f in fns if f not in sections]
        check(f"{model}: all_gathers in the gradient{'s' if pp > 1 else ''} under tp={tp} "
              f"{gathers}{' (no report for ' + str(missing) + ')' if missing else ''}",
              float(len(gathers) + len(missing)), 0)

    P = len(r.param_names)
    if model in GRAD_CHECK and pp == 1:
        # The first step's gradient of every parameter against torch
        # autograd on the same weights and batch (the artifact's _grad
        # entry: the loss, then the gradients in parameter order).
        gdir = os.path.join(work, "grad")
        run([par_run, "-n", str(ranks), art, "--entry", f"{name}_grad", "--load-weights",
             weights, "--output", gdir] + save_inputs(xs, work, "gbatch", P))
        # torch autograd in f64 (the reference) and in f32 (its own
        # distance to f64 printed: the figure par's is to be read against).
        hyper = (1, LR, BETAS, EPS, WD)
        g64 = ref64.train(lambda: make(model, per_mb)[0], init, xs, loss_fn, *hyper,
                          dtype=torch.float64)[1]
        g32 = ref64.train(lambda: make(model, per_mb)[0], init, xs, loss_fn, *hyper)[1]
        got = [np.load(os.path.join(gdir, f"result{k + 1}.npy"))
               for k in range(len(r.param_names))]
        err, pad_grad = ref64.gradient_error(r, got, g64)
        err32 = ref64.gradient_error(r, got, g32)[0]
        t32 = max(float((g32[n].double() - g).abs().max()) for n, g in g64.items()) / \
            max(float(g.abs().max()) for g in g64.values())
        check(f"{model}: first step's gradients ({len(r.param_names)} parameters) vs torch "
              f"autograd in f64, relative to the largest (torch f32's: {t32:.3g}; par vs torch "
              f"f32: {err32:.3g})",
              err, 1e-5)
        if r.padded:
            check(f"{model}: the padded vocabulary rows' gradients "
                  f"({', '.join(f'{n} {v[1]} -> {v[2]}' for n, v in r.padded.items())})",
                  pad_grad, 0)

    # par: 20 steps on the fixed batch.
    losses_csv = os.path.join(work, "loss.csv")
    trained = os.path.join(work, "trained.safetensors")
    cmd = [par_run, "-n", str(ranks), art, "--steps", str(STEPS), "--loss-csv", losses_csv,
           "--load-weights", weights, "--save-weights", trained]
    cmd += ["--pipeline"] if pp > 1 else ["--entry", f"{name}_step"]
    cmd += save_inputs(xs, work, "batch", P)
    run(cmd)
    par_losses = [float(row["loss"]) for row in csv.DictReader(open(losses_csv))]

    # torch: the same module, weights and batch, in f32 and in f64 (the
    # reference: Inputs/f64_reference.py).
    hyper = (STEPS, LR, BETAS, EPS, WD)
    mk = lambda: make(model, per_mb)[0]  # noqa: E731
    torch_losses, _, ref = ref64.train(mk, init, xs, loss_fn, *hyper)
    f64_losses = ref64.train(mk, init, xs, loss_fn, *hyper, dtype=torch.float64)[0]
    a = ref64.relative(torch_losses, f64_losses)
    b = ref64.relative(par_losses, f64_losses)
    c = ref64.relative(par_losses, torch_losses)
    print(f"{model}: per-step loss relative difference, torch f32 vs f64: {ref64.fmt(a)} "
          f"(max {ref64.worst(a):.3g})")
    print(f"{model}: per-step loss relative difference, par vs torch f64: {ref64.fmt(b)}")
    print(f"{model}: per-step loss relative difference, par vs torch f32: {ref64.fmt(c)} "
          f"(max {ref64.worst(c):.3g})")
    mesh = f"dp{dp}xtp{tp}" + (f"xpp{pp}" if pp > 1 else "")
    # 1e-5: par in f32 follows the f64 trajectory about as closely as torch
    # in f32 does (its own distance is printed above: up to 1e-6 here); a
    # wrong gradient or update is off by far more within 20 steps.
    check(f"{model} {STEPS} AdamW steps on {ranks} ranks {mesh}: loss trajectory vs torch "
          f"f64 ({f64_losses[0]:.4f} -> {f64_losses[-1]:.4f})", ref64.worst(b), F64_TOL)

    # The trained weights back in torch, and the next batch's loss.
    from safetensors.torch import load_file
    back = make(model, per_mb)[0]
    sd = load_file(trained)
    missing, unexpected = back.load_state_dict(sd, strict=False)
    # Buffers (constants of par's program, e.g. BART's final_logits_bias)
    # are not in par's weights and keep the module's values; a missing
    # parameter is a failure.
    buffers = {n for n, _ in back.named_buffers()}
    missing = [k for k in missing if k not in buffers]
    check(f"{model}: trained weights load into the torch module ({len(sd)} tensors; "
          f"missing parameters {list(missing)}, unexpected {list(unexpected)})",
          float(len(missing) + len(unexpected)), 0)
    if r.slices:
        # The fused parameters (split per segment in par's program) are
        # saved whole, under their own names, equal to torch's.
        fused = sorted({v[0] for v in r.slices.values()})
        mine = dict(ref.named_parameters())
        # Absolute: a third of one AdamW step (lr 3e-3); the biases start
        # at 0, so a relative figure would measure f32 noise on ~0.
        shapes = all(tuple(sd[n].shape) == tuple(mine[n].shape) for n in fused if n in sd)
        err = max(float((sd[n] - mine[n].detach()).abs().max()) if n in sd else float("inf")
                  for n in fused)
        show = next((n for n in fused if n.endswith("weight")), fused[0])
        check(f"{model}: --save-weights writes the {len(fused)} fused parameters whole "
              f"({show} {list(sd[show].shape) if show in sd else None}, shaped as "
              f"torch's: {shapes}), largest difference to the torch-trained ones",
              err if shapes else float("inf"), 1e-3)
    nb = new_batch(model, xs_mb, par.frontend._vocab_of(m) or models.VOCAB)
    with torch.no_grad():
        t_next = float(loss_of(back, nb, loss_fn))
        # The state par ends with is torch's after 20 steps too.
        t_ref = float(loss_of(ref, nb, loss_fn))
    out = os.path.join(work, "next")
    # The step artifact holds the forward too (one micro-batch when pipelined).
    run([par_run, "-n", str(ranks), art, "--entry", name, "--load-weights", trained,
         "--output", out] + save_inputs(nb, work, "next", P))
    p_next = float(np.load(os.path.join(out, "result0.npy")))
    check(f"{model}: next batch's loss, torch on par's trained weights ({t_next:.6f}) vs par",
          abs(p_next - t_next) / abs(t_next), 1e-5)
    check(f"{model}: next batch's loss, par-trained vs torch-trained weights",
          abs(t_next - t_ref) / abs(t_ref), 1e-4)
    print(f"{len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
