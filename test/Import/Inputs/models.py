"""The PyTorch models of the frontend tests (and README's example), each a
factory returning (module, example_inputs): an MLP with a mean-squared-error
loss, a nanoGPT-style GPT (token + position embeddings, pre-LN blocks with a
fused qkv Linear and masked softmax attention, GELU MLP, LM head,
cross-entropy) and HF transformers' GPT2LMHeadModel (tiny config, random
init, no network; labels -> loss). Usable as `par-import models.py:nanogpt`.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ = 96, 32


class MLP(nn.Module):
    def __init__(self, d=16, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x, y):
        return F.mse_loss(self.fc2(F.gelu(self.fc1(x))), y)


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.heads
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        a = a.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        a = F.softmax(a, dim=-1)
        y = (a @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class NanoGPT(nn.Module):
    def __init__(self, vocab=VOCAB, d=64, heads=4, layers=2, seq=SEQ):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads, seq) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def batch(b, seed, vocab=VOCAB, seq=SEQ):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, vocab, (b, seq), generator=g),
            torch.randint(0, vocab, (b, seq), generator=g))


def mlp(b=8, seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    return MLP(), (torch.randn(b, 16, generator=g), torch.randn(b, 16, generator=g))


def nanogpt(b=8, seed=0):
    torch.manual_seed(seed)
    return NanoGPT(), batch(b, seed + 1)


class GPT2Loss(nn.Module):
    """GPT2LMHeadModel with labels: HF shifts them and returns .loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels).loss


def gpt2(b=8, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    return GPT2LMHeadModel(cfg), batch(b, seed + 1), (
        lambda m, ids, labels: m(input_ids=ids, labels=labels).loss)
