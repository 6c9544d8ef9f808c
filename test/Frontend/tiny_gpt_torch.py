"""torch autograd reference for Inputs/tiny-gpt.mlir (torch-mlir-forms.test).

  tiny_gpt_torch.py gen DIR        writes arg0..arg12 .npy (random weights,
                                   tokens and targets in [0, 16))
  tiny_gpt_torch.py check DIR OUT  compares par-run's loss and gradients
                                   (OUT/result*.npy of tiny_grad) with torch
"""
import math, sys
import numpy as np
import torch
import torch.nn.functional as F

V, D, T, B = 16, 8, 8, 4
SHAPES = [(V, D), (T, D), (D,), (D,), (4 * D, D), (4 * D,), (D, 4 * D), (D,),
          (D,), (D,), (V, D)]


def forward(p, idx, tgt):
    wte, wpe, lnw, lnb, fcw, fcb, fc2w, fc2b, lnfw, lnfb, head = p
    x = wte[idx] + wpe[torch.arange(T)]
    a = F.layer_norm(x, (D,), lnw, lnb)
    x = x + torch.softmax(a @ a.transpose(-2, -1), dim=-1) @ a
    h = x @ fcw.T + fcb
    h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
    x = x + h @ fc2w.T + fc2b
    logits = F.layer_norm(x, (D,), lnfw, lnfb) @ head.T
    labels = F.pad(tgt[:, 1:], (0, 1), value=-100)
    return F.cross_entropy(logits.view(-1, V), labels.reshape(-1), ignore_index=-100)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "gen":
        r = np.random.default_rng(7)
        for i, s in enumerate(SHAPES):
            scale = 1.0 if len(s) == 1 and i in (2, 8) else 0.5
            base = 1.0 if i in (2, 8) else 0.0
            np.save(f"{d}/arg{i}.npy", (base + scale * r.standard_normal(s)).astype(np.float32))
        np.save(f"{d}/arg11.npy", r.integers(0, V, (B, T)).astype(np.int64))
        np.save(f"{d}/arg12.npy", r.integers(0, V, (B, T)).astype(np.int64))
        bad = r.integers(0, V, (B, T)).astype(np.int64)
        bad[2, 5] = V  # one token outside the vocabulary
        np.save(f"{d}/bad_tokens.npy", bad)
        return
    out = sys.argv[3]
    p = [torch.tensor(np.load(f"{d}/arg{i}.npy"), requires_grad=True) for i in range(len(SHAPES))]
    idx = torch.tensor(np.load(f"{d}/arg11.npy"))
    tgt = torch.tensor(np.load(f"{d}/arg12.npy"))
    loss = forward(p, idx, tgt)
    loss.backward()
    par_loss = float(np.load(f"{out}/result0.npy"))
    lrel = abs(par_loss - float(loss)) / abs(float(loss))
    worst = 0.0
    for i, t in enumerate(p):
        g = np.load(f"{out}/result{i + 1}.npy")
        ref = t.grad.numpy()
        worst = max(worst, float(np.abs(g - ref).max() / max(np.abs(ref).max(), 1e-30)))
    ok = lrel < 1e-5 and worst < 1e-5
    print(f"torch: loss rel error {lrel:.1e}, {len(p)} gradients max rel error {worst:.1e}: {'OK' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
