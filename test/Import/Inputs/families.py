"""Tiny random-initialised HF transformers models of the families whose
derived tensor-parallel plan test/Import checks (tp_families.py): each
factory returns (module, (input_ids, labels), loss_fn), built from a local
config (no download), dropout 0, eager attention. Sizes: vocabulary 96,
hidden 32, 4 heads (2 key/value heads where GQA), MLP 64, 2 layers,
sequence 16, so that tp=2 divides every head count and the vocabulary.
"""

import torch

VOCAB, SEQ, HIDDEN, HEADS, FFN, LAYERS = 96, 16, 32, 4, 64, 2


def batch(b, seed, vocab=VOCAB, seq=SEQ, pad=0):
    """Random token ids and labels; the pad token (pad_token_id, every
    family's Embedding padding_idx) is replaced by pad + 2 in the ids, as in
    sdpa_models.hf_batch: torch leaves the padding row out of the
    embedding's gradient and par does not (docs/Frontend.md, padding_idx
    under "Not yet"), which made Qwen2 and Gemma drift 1.8e-3 / 1.0e-3 from
    torch over 8 AdamW steps with 4 pad tokens in the batch."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (b, seq), generator=g)
    labels = torch.randint(0, vocab, (b, seq), generator=g)
    return ids.masked_fill(ids == pad, pad + 2), labels


def _causal(b, cfg_cls, model_cls, seed, **kw):
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                  intermediate_size=FFN, num_hidden_layers=LAYERS,
                  max_position_embeddings=SEQ, attn_implementation="eager",
                  bos_token_id=0, eos_token_id=0, pad_token_id=0)
    common.update(kw)
    cfg = cfg_cls(**common)
    return model_cls(cfg), batch(b, seed + 1), (
        lambda m, ids, labels: m(input_ids=ids, labels=labels).loss)


def llama(b=8, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    return _causal(b, LlamaConfig, LlamaForCausalLM, seed, num_key_value_heads=HEADS,
                   tie_word_embeddings=False)


def llama_gqa(b=8, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    return _causal(b, LlamaConfig, LlamaForCausalLM, seed, num_key_value_heads=2,
                   tie_word_embeddings=False)


def llama_mqa(b=8, seed=0):
    """One key/value head: tp=2 does not divide it, so k/v stay replicated."""
    from transformers import LlamaConfig, LlamaForCausalLM
    return _causal(b, LlamaConfig, LlamaForCausalLM, seed, num_key_value_heads=1,
                   tie_word_embeddings=False)


def mistral(b=8, seed=0):
    from transformers import MistralConfig, MistralForCausalLM
    return _causal(b, MistralConfig, MistralForCausalLM, seed, num_key_value_heads=2,
                   sliding_window=None, tie_word_embeddings=False)


def qwen2(b=8, seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return _causal(b, Qwen2Config, Qwen2ForCausalLM, seed, num_key_value_heads=2,
                   tie_word_embeddings=False, use_sliding_window=False)


def qwen3(b=8, seed=0):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return _causal(b, Qwen3Config, Qwen3ForCausalLM, seed, num_key_value_heads=2,
                   head_dim=HIDDEN // HEADS, tie_word_embeddings=False,
                   use_sliding_window=False)


def gemma(b=8, seed=0):
    """Gemma ties its LM head to the token embedding."""
    from transformers import GemmaConfig, GemmaForCausalLM
    return _causal(b, GemmaConfig, GemmaForCausalLM, seed, num_key_value_heads=2,
                   head_dim=HIDDEN // HEADS)


def phi3(b=8, seed=0):
    """Phi-3: fused qkv_proj and gate_up_proj."""
    from transformers import Phi3Config, Phi3ForCausalLM
    return _causal(b, Phi3Config, Phi3ForCausalLM, seed, num_key_value_heads=HEADS,
                   tie_word_embeddings=False, resid_pdrop=0.0, embd_pdrop=0.0,
                   attention_dropout=0.0)


def gpt_neox(b=8, seed=0):
    """GPT-NeoX: fused query_key_value laid out per head ([h, 3, d])."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    return _causal(b, GPTNeoXConfig, GPTNeoXForCausalLM, seed, tie_word_embeddings=False,
                   hidden_dropout=0.0, attention_dropout=0.0, rotary_pct=0.5)


def bert(b=8, seed=0):
    """BERT masked LM (tied decoder, post-LN, absolute positions)."""
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                     intermediate_size=FFN, num_hidden_layers=LAYERS,
                     max_position_embeddings=SEQ, type_vocab_size=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     attn_implementation="eager", pad_token_id=0)
    return BertForMaskedLM(cfg), batch(b, seed + 1), (
        lambda m, ids, labels: m(input_ids=ids, labels=labels).loss)


FAMILIES = ["llama", "llama_gqa", "mistral", "qwen2", "qwen3", "gemma", "phi3",
            "gpt_neox", "bert"]
