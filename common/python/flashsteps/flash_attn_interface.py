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
for the varlen functions).

return_attn_probs=True returns (out, softmax_lse, S_dmask), as flash_attn does. softmax_lse is the
kernel's, float32 (batch, nheads, seqlen_q), or (nheads, total_q) for the varlen functions. S_dmask is
flashsteps.attention_probs's: the attention probabilities of the call, P = exp(S - softmax_lse) with its
scale, softcap, ALiBi, window and causal mask (bottom-right aligned), and negative where its dropout
mask dropped the entry (the sign bit is the mask the kernels applied: -0 too). It is float32, (batch,
nheads, seqlen_q, seqlen_k), or for the varlen functions (batch, nheads, max_seqlen_q, max_seqlen_k)
with sequence b's P in its top-left corner and zero past it, flash_attn's varlen layout. flash_attn's
own rounds the seqlen dimensions up to multiples of 128, is in q's dtype and is scaled by each tile's
running max rather than normalised; this one is exactly P, which a test can use as it is. It is for
tests and small problems: past 2^28 entries (batch·nheads·seqlen_q·seqlen_k, 1 GiB) the call is
refused with ValueError before it runs. It needs no autograd (it is marked non-differentiable); out
stays differentiable. The dropout mask is the one of seed 1, flashsteps.attention's default, in every
call here (flash_attn draws a new seed from PyTorch's generator each call; flashsteps.attention(...,
seed=) and attention_probs(..., seed=) take one).
"""
from . import _probs_shape, attention, attention_probs, attention_varlen, attention_with_kvcache

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"]


# The dropout seed of every call here: flashsteps.attention's default, passed on to both the forward
# and the probabilities so that S_dmask's signs are the mask the forward drew.
_SEED = 1


def _probs_room(q, k, cu_seqlens_q=None, max_seqlen_q=None, max_seqlen_k=None):
    """return_attn_probs=True past the limit: refused (ValueError) before the forward runs. What is no
    tensor is left to the forward's own refusal (TypeError)."""
    for t in (q, k):
        if not (hasattr(t, "shape") and hasattr(t, "dim")):
            return
    if cu_seqlens_q is not None and (max_seqlen_q is None or max_seqlen_k is None):
        return  # attention_probs finds them from the offsets, and checks then
    _probs_shape(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)


def _unpacked(t, count, name, dims):
    """count views of t along its packing dimension (the one of size count, before heads and head_dim)."""
    if t.dim() != dims or t.shape[-3] != count:
        want = "(batch, seqlen, " if dims == 5 else "(total, "
        raise ValueError(f"{name}: {want}{count}, heads, head_dim), got shape {tuple(t.shape)}")
    return [t.select(-3, i) for i in range(count)]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func: q (batch, seqlen_q, heads, head_dim), k and v (batch, seqlen_k, heads_k, head_dim).
    Returns out, or with return_attn_probs=True (out, softmax_lse, S_dmask): S_dmask float32 (batch, heads,
    seqlen_q, seqlen_k), the probabilities with the dropped entries negative (the module's docstring)."""
    if not return_attn_probs:
        return attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                         seed=_SEED)
    _probs_room(q, k)
    out, lse = attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                         return_lse=True, seed=_SEED)
    probs = attention_probs(q, k, lse, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, seed=_SEED)
    return out, lse, probs


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn_varlen_func: q (total_q, heads, head_dim), k and v (total_k, heads_k, head_dim), the
    sequences' int32 prefix sums cu_seqlens_q, cu_seqlens_k. block_table (paged K/V) is refused. With
    return_attn_probs=True (out, softmax_lse, S_dmask): softmax_lse (heads, total_q), S_dmask float32
    (batch, heads, max_seqlen_q, max_seqlen_k), sequence b's probabilities in S_dmask[b, :, :its queries,
    :its keys] and zero past them (the module's docstring)."""
    if block_table is not None:
        raise ValueError("block_table: a paged K/V cache is flash_attn_with_kvcache's here (step 10)")
    if not return_attn_probs:
        return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic, seed=_SEED)
    _probs_room(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    out, lse = attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                return_lse=True, seed=_SEED)
    probs = attention_probs(q, k, lse, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, seed=_SEED,
                            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                            max_seqlen_k=max_seqlen_k)
    return out, lse, probs


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
