"""Models of issue 28's attention and scan tests (train_vs_torch.py), each a
factory (b, seed) -> (module, example_inputs, loss_fn or None, tp_plan or
None):

  sdpa        a GPT with F.scaled_dot_product_attention in three forms:
              block 0 is_causal=True, block 1 a boolean mask, block 2 an
              additive float mask (causal -inf plus an ALiBi-like slope
              per head), separate q/k/v projections (Megatron: q, k, v
              column-parallel, o row-parallel, so attention runs on the
              heads of each tp rank); and a float torch.cumsum (the
              embeddings' causal prefix mean) that the loss differentiates
  gpt2_sdpa   HF GPT2LMHeadModel with the library's default attention
              (sdpa)
  gpt2_vocab95  gpt2_sdpa with a vocabulary of 95, which tp=2 does not
              divide (GPT-2's real 50,257 does not either): par-import
              (vocab_divisible_by=128, its default) pads the tied table and
              head to 256 rows (128 x tp), vocabulary-parallel, the padded
              logits -inf
  opt_lm      HF OPTForCausalLM (default attention: sdpa; positions from the
              attention mask's cumsum)
  bart        HF BartForConditionalGeneration (encoder-decoder; default
              attention sdpa; labels -> shifted decoder inputs)

Tiny configurations, random initialisation, no network. OPT's and BART's
token embeddings have padding_idx = pad_token_id = 1, whose row torch leaves
out of the gradient and par does not (docs/Frontend.md, "Not yet"): their
batches hold no pad token (hf_batch), so that the comparison with torch
measures the rest. With the pad token in the batch the trajectories drift
apart by ~6e-4 (BART; 5e-6 with padding_idx off in torch).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ = 96, 32


class SdpaBlock(nn.Module):
    def __init__(self, d, heads, seq, mode):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.heads, self.mode = heads, mode
        causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        if mode == "bool":
            self.register_buffer("mask", causal, persistent=False)
        elif mode == "additive":
            slopes = torch.tensor([2.0 ** -(h + 1) for h in range(heads)])
            dist = (torch.arange(seq).view(1, seq) - torch.arange(seq).view(seq, 1)).float()
            bias = slopes.view(heads, 1, 1) * dist.view(1, seq, seq)
            self.register_buffer("mask", bias.masked_fill(~causal, float("-inf")),
                                 persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.heads
        y = self.ln1(x)
        q, k, v = (p(y).view(B, T, h, C // h).transpose(1, 2) for p in (self.q, self.k, self.v))
        if self.mode == "causal":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[..., :T, :T],
                                               scale=1.0 / math.sqrt(C // h))
        x = x + self.o(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class SdpaGPT(nn.Module):
    def __init__(self, vocab=VOCAB, d=64, heads=4, seq=SEQ):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([SdpaBlock(d, heads, seq, m)
                                     for m in ("causal", "bool", "additive")])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        e = self.wte(idx)
        # The embeddings' causal prefix mean: a float cumsum on the gradient's path.
        n = torch.arange(1, T + 1, dtype=e.dtype).view(1, T, 1)
        x = e + torch.cumsum(e, dim=1) / n + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def batch(b, seed, vocab=VOCAB, seq=SEQ):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, vocab, (b, seq), generator=g),
            torch.randint(0, vocab, (b, seq), generator=g))


def hf_batch(b, seed, pad=1):
    """batch() with the pad token replaced (padding_idx: no gradient in torch)."""
    ids, labels = batch(b, seed)
    return ids.masked_fill(ids == pad, pad + 2), labels.masked_fill(labels == pad, pad + 2)


# Megatron over separate q/k/v projections: each tp rank holds whole heads.
QKV_PLAN = {"*.q": "colwise", "*.k": "colwise", "*.v": "colwise", "*.o": "rowwise",
            "*.fc": "colwise", "*.fc2": "rowwise", "head": "colwise"}


def sdpa(b=8, seed=0):
    torch.manual_seed(seed)
    return SdpaGPT(), batch(b, seed + 1), None, QKV_PLAN


def _lm_loss(m, ids, labels):
    return m(input_ids=ids, labels=labels).loss


def gpt2_sdpa(b=8, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    m = GPT2LMHeadModel(cfg)
    assert m.config._attn_implementation == "sdpa", m.config._attn_implementation
    return m, batch(b, seed + 1), _lm_loss, None


def gpt2_vocab95(b=8, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=95, n_positions=SEQ, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg), batch(b, seed + 1, vocab=95), _lm_loss, None


HF_PLAN = {"*.q_proj": "colwise", "*.k_proj": "colwise", "*.v_proj": "colwise",
           "*.out_proj": "rowwise", "*.fc1": "colwise", "*.fc2": "rowwise"}


def opt_lm(b=8, seed=0):
    from transformers import OPTConfig, OPTForCausalLM
    torch.manual_seed(seed)
    cfg = OPTConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=128,
                    num_attention_heads=4, max_position_embeddings=SEQ,
                    word_embed_proj_dim=64, dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0, layerdrop=0.0, pad_token_id=1,
                    bos_token_id=0, eos_token_id=0)
    m = OPTForCausalLM(cfg)
    assert m.config._attn_implementation == "sdpa", m.config._attn_implementation
    return m, hf_batch(b, seed + 1), _lm_loss, HF_PLAN


def bart(b=8, seed=0):
    from transformers import BartConfig, BartForConditionalGeneration
    torch.manual_seed(seed)
    cfg = BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=4, decoder_attention_heads=4,
                     encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=SEQ,
                     dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                     encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                     pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2, forced_eos_token_id=None)
    m = BartForConditionalGeneration(cfg)
    assert m.config._attn_implementation == "sdpa", m.config._attn_implementation
    return m, hf_batch(b, seed + 1), _lm_loss, HF_PLAN
