"""The float64 reference of the training tests (train_vs_torch.py,
tp_families.py): the same module, initial weights, batch and AdamW
hyperparameters trained in torch in float64, so that par (f32) and torch
(f32) are each measured against the same near-exact trajectory.

- f64(): HF code casts to float32 explicitly (RMSNorm's
  hidden_states.to(torch.float32), eager attention's softmax(...,
  dtype=torch.float32), the rotary embedding's .float(), the loss's
  logits.float()); inside f64() those casts give float64, and train(...,
  torch.float64) checks on the first step that no op produced a float32
  (or lower) tensor.
- torch.optim.AdamW in f64 is the optimizer (par's computes its bias
  corrections 1 - beta^t in f64 as torch does in Python floats; in f32,
  from f32's 0.999, they had made every update 6.4e-6 smaller, which this
  reference exposed: OPT drifted 1.8e-2 from f64 in 20 steps on dp2 x tp2,
  6e-7 with the f64 corrections).
"""

import contextlib

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


@contextlib.contextmanager
def f64():
    to, flt, softmax = torch.Tensor.to, torch.Tensor.float, F.softmax

    def sub(a):
        return torch.float64 if a is torch.float32 else a

    def to64(self, *args, **kwargs):
        args = tuple(sub(a) for a in args)
        if "dtype" in kwargs:
            kwargs["dtype"] = sub(kwargs["dtype"])
        return to(self, *args, **kwargs)

    def softmax64(x, dim=None, _stacklevel=3, dtype=None):
        return softmax(x, dim=dim, dtype=sub(dtype))

    default = torch.get_default_dtype()
    torch.Tensor.to, torch.Tensor.float, F.softmax = to64, torch.Tensor.double, softmax64
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, F.softmax = to, flt, softmax
        torch.set_default_dtype(default)


class _LowPrecision(TorchDispatchMode):
    """Records the ops that produce a floating tensor narrower than f64."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(o, torch.Tensor) and o.is_floating_point() and \
                    o.dtype != torch.float64:
                self.ops.add(str(func))
        return out


def loss_of(m, xs, loss_fn):
    return loss_fn(m, *xs) if loss_fn else m(*xs)


def train(make, init, xs, loss_fn, steps, lr, betas, eps, wd, dtype=torch.float32):
    """Trains make() from the state dict init on the batch xs for `steps`
    torch.optim.AdamW steps in dtype. Returns (the losses, the first step's
    gradients by parameter name, the trained module)."""
    m = make()
    m.load_state_dict(init)
    m = m.to(dtype)
    if dtype == torch.float64:
        xs = tuple(x.double() if x.is_floating_point() else x for x in xs)
    opt = torch.optim.AdamW(m.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=wd)
    losses, grads = [], None
    with f64() if dtype == torch.float64 else contextlib.nullcontext():
        for step in range(steps):
            opt.zero_grad()
            watch = _LowPrecision() if dtype == torch.float64 and step == 0 \
                else contextlib.nullcontext()
            with watch:
                loss = loss_of(m, xs, loss_fn)
                loss.backward()
            if step == 0:
                if dtype == torch.float64 and watch.ops:
                    raise SystemExit("the f64 reference computed in lower precision: "
                                     + ", ".join(sorted(watch.ops)))
                grads = {n: p.grad.detach().clone() for n, p in m.named_parameters()}
            opt.step()
            losses.append(float(loss.detach()))
    return losses, grads, m


def relative(a, b):
    """Per-step |a - b| / |b| (inf when a step is missing; NaN stays NaN)."""
    if len(a) != len(b):
        return [float("inf")]
    return [abs(x - y) / abs(y) for x, y in zip(a, b)]


def worst(errs):
    # NaN-aware (Python's max() keeps whatever came first past a NaN).
    return float(np.max(errs))


def fmt(errs):
    return " ".join(f"{e:.1e}" for e in errs)


def gradient_error(r, got, grads):
    """par's first-step gradients `got` (the _grad entry's results, in
    r.param_names order) against a reference's `grads` (by torch parameter
    name): the largest difference relative to the largest gradient, and the
    largest gradient par gives a padding row of a table padded to a multiple
    of tp (r.padded: its real rows are torch's gradient, its padding rows
    get none, their logits being -inf). A segment of a fused parameter
    (r.slices) is compared with its slice of torch's gradient."""
    ref = []
    for n in r.param_names:
        if n in r.slices:
            of, dim, offset, size = r.slices[n]
            ref.append(grads[of].narrow(dim, offset, size))
        else:
            ref.append(grads[n])
    got = list(got)
    pad_grad = 0.0
    for k, n in enumerate(r.param_names):
        if n in r.padded:
            dim, rows, size = r.padded[n]
            pad_grad = max(pad_grad, float(np.abs(np.take(got[k], range(rows, size),
                                                          axis=dim)).max()))
            got[k] = np.take(got[k], range(rows), axis=dim)
    scale = max(float(g.abs().max()) for g in ref)
    err = max(float(np.abs(got[k].astype(np.float64) - g.double().numpy()).max())
              for k, g in enumerate(ref)) / scale
    return err, pad_grad
