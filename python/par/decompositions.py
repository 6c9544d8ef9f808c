"""par's entries in the decomposition table of the torch.export ->
torch-mlir step: ops whose torch or torch-mlir lowering par cannot take,
rewritten at the torch level into ops that lower to linalg, which
par-autodiff differentiates and par's sharding rules split.

  scaled_dot_product_attention,       matmul, scale, causal / boolean /
  _scaled_dot_product_flash_            additive mask, softmax, matmul
    attention_for_cpu                   (GQA: key/value heads repeated)
  cumsum                              a contraction with a triangular 0/1
                                        matrix (floats: a matmul; integers:
                                        a masked sum), instead of torch-mlir's
                                        tm_tensor.scan

Why SDPA needs its own entry: torch's decomposition of
_scaled_dot_product_flash_attention_for_cpu returns its output in an
(L, N, H, E)-contiguous layout, while the op's meta (what torch.export
traced the rest of the program against) returns `empty_like(query)`. A
model that reshapes the transposed output and then `view`s it (HF GPT2's
Conv1D: `x.view(-1, x.size(-1))`) traced fine at export (the reshape was a
view there), but in the re-trace under the decomposition the view fails:
"Cannot view a tensor with shape torch.Size([8, 32, 64]) and strides (64,
512, 1) as a tensor with shape (256, 64)" (issue 28). The decomposition
here keeps the invariant that the re-trace needs: the decomposed output has
the layout the op's meta gives it (flash for CPU: query's layout; the
top-level op: that of the backend torch picks for these inputs). Layouts
are a torch-side matter only: in MLIR the permute / contiguous / permute
is a pair of transposes of one value.

Dropout inside attention (dropout_p > 0) is refused before the
decomposition runs (frontend.py, with the user's line).
"""

from __future__ import annotations

import math
from typing import Dict

import torch

aten = torch.ops.aten


def _attention(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """softmax(q k^T * scale + mask) v, and the rows' logsumexp."""
    L, S, E = query.size(-2), key.size(-2), query.size(-1)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    hq, hk = query.size(-3) if query.dim() > 2 else 1, key.size(-3) if key.dim() > 2 else 1
    if hq != hk:
        # Grouped-query attention: query head h reads key/value head
        # h // (hq / hk), as torch's enable_gqa.
        torch._check(enable_gqa and hq % hk == 0,
                     lambda: f"{hq} query heads for {hk} key/value heads")
        key = key.repeat_interleave(hq // hk, dim=-3)
        value = value.repeat_interleave(hq // hk, dim=-3)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        rows = torch.arange(L, device=query.device)
        cols = torch.arange(S, device=query.device)
        causal = rows.unsqueeze(-1) >= cols.unsqueeze(0)
        scores = scores.masked_fill(causal.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), value)
    return out, lse


def _like_layout(out, ref):
    """`out` with `ref`'s memory layout (empty_like's preserve_format: dims
    ordered by decreasing stride), so that views the program took of the
    op's result stay valid in the re-trace."""
    if out.dim() != ref.dim() or ref.is_contiguous():
        return out.contiguous()
    order = sorted(range(ref.dim()), key=lambda d: (-ref.stride(d), d))
    inverse = [order.index(d) for d in range(ref.dim())]
    return out.permute(order).contiguous().permute(inverse)


def sdpa_flash_for_cpu(query, key, value, dropout_p=0.0, is_causal=False, *,
                       attn_mask=None, scale=None):
    torch._check(dropout_p == 0.0, lambda: f"dropout_p={dropout_p}")
    out, lse = _attention(query, key, value, attn_mask, is_causal, scale,
                          query.size(1) != key.size(1))
    # Meta: attention = empty_like(query), logsumexp [N, H, L].
    return _like_layout(out, query), lse


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
         scale=None, enable_gqa=False):
    torch._check(dropout_p == 0.0, lambda: f"dropout_p={dropout_p}")
    out, _ = _attention(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    # The layout of the kernel torch dispatches to on CPU: flash (query's
    # layout) where it applies, else the math path's matmul (contiguous).
    flash = query.dim() == 4 and key.dim() == 4 and value.dim() == 4 \
        and query.size(-1) == value.size(-1) and query.dtype in (
            torch.float32, torch.float64, torch.bfloat16, torch.float16) \
        and (attn_mask is None or not attn_mask.requires_grad)
    if flash:
        try:
            backend = torch._fused_sdp_choice(query, key, value, attn_mask, dropout_p,
                                              is_causal, scale=scale, enable_gqa=enable_gqa)
            flash = backend == 1  # SDPBackend.flash_attention
        except Exception:
            pass  # fake tensors without a choice kernel: flash's meta
    return _like_layout(out, query) if flash else out.contiguous()


def cumsum(x, dim, *, dtype=None):
    """y[..., i, ...] = sum_{j <= i} x[..., j, ...] as a contraction with the
    triangular matrix T[j, i] = (j <= i): linalg ops par differentiates (the
    adjoint is the contraction with T's transpose, a reversed cumsum) and
    shards (the non-scanned dims are parallel), where torch-mlir would emit
    tm_tensor.scan. O(n^2) in the scanned length n (positions, short
    sequences)."""
    if dtype is not None:
        x = x.to(dtype)
    elif not x.dtype.is_floating_point and not x.dtype.is_complex:
        x = x.to(torch.int64)  # torch: integral (and bool) inputs sum in int64
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    n = x.size(dim)
    idx = torch.arange(n, device=x.device)
    tri = idx.unsqueeze(-1) <= idx.unsqueeze(0)  # tri[j, i] = j <= i
    xm = x.movedim(dim, -1)
    if x.dtype.is_floating_point:
        y = torch.matmul(xm, tri.to(x.dtype))
    else:
        y = (xm.unsqueeze(-1) * tri.to(x.dtype)).sum(dim=-2)
    return y.movedim(-1, dim).contiguous()


def table() -> Dict:
    """torch-mlir's decomposition table with par's entries on top."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    t = dict(get_decomposition_table())
    t[aten.scaled_dot_product_attention.default] = sdpa
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        t[aten._scaled_dot_product_flash_attention_for_cpu.default] = sdpa_flash_for_cpu
    t[aten.cumsum.default] = cumsum
    return t


# Ops of the exported graph that take dropout_p (argument index), refused
# when it is not 0 (par has no random-number ops).
DROPOUT_ARG = {
    aten.scaled_dot_product_attention.default: (4, "dropout_p"),
}
if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
    DROPOUT_ARG[aten._scaled_dot_product_flash_attention_for_cpu.default] = (3, "dropout_p")
