"""Modules par-import or par-compile must refuse with a message (errors.test):
a forward returning logits (no scalar loss), a data-dependent shape, an op
torch-mlir leaves in its own dialect (torch.sort -> tm_tensor.sort), an op
par cannot differentiate (atan2), dropout in training mode, a frozen
parameter; attention's dropout_p, randn_like, topk (below notamodule)."""
import torch, torch.nn as nn
class Logits(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4)
    def forward(s, x): return s.fc(x)
def logits(): return Logits(), (torch.randn(8, 16),)
class Dyn(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4)
    def forward(s, x): y = s.fc(x); return y[y > 0].sum()
def dyn(): return Dyn(), (torch.randn(8, 16),)
class Sort(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4)
    def forward(s, x): return torch.sort(s.fc(x), dim=1).values[:, 0].sum()
def sort(): return Sort(), (torch.randn(8, 16),)
class Atan(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4)
    def forward(s, x): y = s.fc(x); return torch.atan2(y, y * y + 1).sum()
def atan(): return Atan(), (torch.randn(8, 16),)

class Drop(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4); s.drop = nn.Dropout(0.1)
    def forward(s, x): return s.drop(s.fc(x)).sum()
def dropout(): return Drop(), (torch.randn(8, 16),)
def frozen():
    m = Atan()
    m.fc.bias.requires_grad_(False)
    return m, (torch.randn(8, 16),)
def notamodule(): return 42
class SdpaDrop(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 16)
    def forward(s, x):
        q = s.fc(x).view(2, 4, 4, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.1).sum()
def sdpa_dropout(): return SdpaDrop(), (torch.randn(8, 16),)
class Noise(nn.Module):
    def __init__(s): super().__init__(); s.fc = nn.Linear(16, 4)
    def forward(s, x): y = s.fc(x); return (y + torch.randn_like(y)).sum()
def noise(): return Noise(), (torch.randn(8, 16),)
class TopK(nn.Module):
    def __init__(s): super().__init__(); s.gate = nn.Linear(16, 4)
    def forward(s, x): return torch.topk(s.gate(x), 2, dim=-1).values.sum()
def topk(): return TopK(), (torch.randn(8, 16),)
