"""flash_attn's Python interface over the project's kernels: code written for FlashAttention can
import these names from here instead (`from flashsteps.flash_attn_interface import flash_attn_func`).

    flash_attn_func, flash_attn_varlen_func            flashsteps.attention, attention_varlen
    flash_attn_kvpacked_func, flash_attn_qkvpacked_func  the same on packed tensors, unpacked as views
    flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func
    flash_attn_with_kvcache                            flashsteps.attention_with_kvcache (step 10)

The packed forms take kv (batch, seqlen_k, 2, heads_k, head_dim) and qkv (batch, seqlen, 3, heads,
head_dim), or (total, 2 or 3, heads, head_dim) packed along the tokens: their q, k and v are views
of the one tensor (the kernels take those strides as they are, nothing is copied), and autograd sums
the gradients of the views back into it, as flash_attn's packed functions return them.
alibi_slopes are flash_attn's: float32 (nheads,) or (batch, nheads), a row per batch (per sequence
for the varlen functions). `return_attn_probs=True` is refused (ValueError) until the kernels can
return the probabilities.
"""
from . import attention, attention_varlen, attention_with_kvcache

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"]


def _no_probs(return_attn_probs):
    if return_attn_probs:
        raise ValueError("return_attn_probs=True: flashsteps does not return the attention probabilities yet")


def _unpacked(t, count, name, dims):
    """count views of t along its packing dimension (the one of size count, before heads and head_dim)."""
    if t.dim() != dims or t.shape[-3] != count:
        want = "(batch, seqlen, " if dims == 5 else "(total, "
        raise ValueError(f"{name}: {want}{count}, heads, head_dim), got shape {tuple(t.shape)}")
    return [t.select(-3, i) for i in range(count)]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func: q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, heads_k, head_dim).
    Returns out, or (out, softmax_lse) where flash_attn returns (out, softmax_lse, S_dmask)."""
    _no_probs(return_attn_probs)
    return attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn_varlen_func: q (total_q, heads, head_dim), k and v (total_k, heads_k, head_dim), the
    sequences' int32 prefix sums cu_seqlens_q, cu_seqlens_k. block_table (paged K/V) is refused."""
    _no_probs(return_attn_probs)
    if block_table is not None:
        raise ValueError("block_table: a paged K/V cache is flash_attn_with_kvcache's here (step 10)")
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                            softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """kv (batch, seqlen_k, 2, heads_k, head_dim): k = kv[:, :, 0], v = kv[:, :, 1], as views."""
    k, v = _unpacked(kv, 2, "kv", 5)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """qkv (batch, seqlen, 3, heads, head_dim): q, k, v its three views."""
    q, k, v = _unpacked(qkv, 3, "qkv", 5)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """kv (total_k, 2, heads_k, head_dim), packed sequences."""
    k, v = _unpacked(kv, 2, "kv", 4)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv (total, 3, heads, head_dim), packed sequences of one set of offsets."""
    q, k, v = _unpacked(qkv, 3, "qkv", 4)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p, softmax_scale,
                                  causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs)


flash_attn_with_kvcache = attention_with_kvcache
