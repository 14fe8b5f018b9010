"""The kernels as PyTorch custom ops (torch.library, namespace `flashsteps`), which flashsteps.attention,
attention_varlen and attention_with_kvcache call. Imported with PyTorch only: flashsteps/__init__.py
imports this module at its own import where PyTorch is imported already, else at the first call
that passes PyTorch tensors, so that `import flashsteps` neither needs PyTorch nor spends the
seconds of importing it.

    torch.ops.flashsteps.attention_forward(q, k, v, ...)           -> (out, lse)
    torch.ops.flashsteps.attention_backward(dout, q, k, v, out, lse, ...) -> (dq, dk, dv)
    torch.ops.flashsteps.attention_with_kvcache(q, k_cache, v_cache, ...) -> (out, lse), the cache written
    torch.ops.flashsteps.attention_probs(q, k, lse, ...)            -> S_dmask, the probabilities of a forward

Why ops and not a plain autograd.Function: torch.compile sees an op as one node whose output it
knows from the fake implementations below (shapes, dtypes and strides, no kernel run), so
`torch.compile(model, fullgraph=True)` traces through attention with no graph break, forward and
backward (register_autograd wires attention_backward in). The fake outputs are made by the very
code that makes the real ones (torch.empty_like of q: q's strides where q is dense, else
contiguous), and the ops carry the tag needs_exact_strides, so that Inductor hands them their
inputs in the strides they were traced with and the real outputs keep the traced strides.

CUDA graphs: each op queues its kernels on PyTorch's current stream and nothing else. Its outputs
and the kernels' workspace (step 05's and 08's backward, step 04's forward, a decoding's split
partials) come from torch.empty, so from the graph's memory pool while one is captured
(torch.cuda.graph); no host synchronisation, no cudaMalloc. Outside a capture, the packed
sequences' offsets and a decoding's int32 tensors (lengths, block table, cache_batch_idx) are copied
back to be checked; while the stream is captured they are not (the host may not wait, and a graph
replays whatever they hold then): their values are the caller's word, as in flash_attn. What a
graph freezes: every Python number (causal, scales, windows, the dropout seed: a replay draws the
same dropout mask), the grid of packed sequences (max_seqlen_q/k where given, else every token),
a decoding's split count (num_splits where given, else the split rule on the cache's room), and
cache_seqlens where it is an int (as a CUDA int32 tensor, the replays read its new values).
Every tensor must be on the GPU before the capture: alibi_slopes, cu_seqlens, cache_seqlens,
block_table or cache_batch_idx given as a list or a CPU tensor are copied from the host (the
wrappers' torch.as_tensor), which a capture refuses.
"""
from typing import Optional, Tuple

import torch

from . import _flashsteps, _probs_shape

if not hasattr(torch.library, "custom_op"):
    raise ImportError(f"flashsteps: the kernels' PyTorch ops need PyTorch 2.4 or later (torch.library.custom_op); "
                      f"this is {torch.__version__}")

Tensor = torch.Tensor

# Inductor passes an op's inputs in the strides they were traced with (the fake outputs below, like
# q, then match the real ones). An older PyTorch without that tag gets the weaker one: the order of
# the strides kept.
_TAGS = (getattr(torch.Tag, "needs_exact_strides", torch.Tag.needs_fixed_stride_order),)


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream


def _allocator(device):
    """The workspace's allocator for the native calls: PyTorch's (a capture's pool under torch.cuda.graph)."""
    return lambda nbytes: torch.empty(nbytes, dtype=torch.uint8, device=device)


def _cuda(t, name):
    if not t.is_cuda:
        raise ValueError(f"{name}: expected a CUDA tensor; the CPU reference is flashsteps.reference")
    # The data without autograd's flag (DLPack exports no tensor that requires grad): the same memory.
    return t.detach()


def _plain(t):
    """An optional tensor argument as the native calls take it: without autograd's flag."""
    return None if t is None else t.detach()


def _seed(seed):
    # The schema's int is int64; the seed is the project's unsigned 64-bit one (flashsteps/__init__.py
    # passes it as the int64 of the same bits).
    return seed % 2**64


def _native_keywords(alibi_slopes, cu_seqlens_q, cu_seqlens_k, step, variant, causal, softmax_scale, window_left,
                     window_right, softcap, dropout_p, seed, max_seqlen_q, max_seqlen_k):
    return dict(step=step, variant=variant, causal=causal, softmax_scale=softmax_scale,
                window_size=(window_left, window_right), softcap=softcap, alibi_slopes=_plain(alibi_slopes),
                dropout_p=dropout_p, seed=_seed(seed), cu_seqlens_q=_plain(cu_seqlens_q),
                cu_seqlens_k=_plain(cu_seqlens_k),
                max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def _forward_outputs(q):
    """out like q (q's strides where q is dense, else contiguous) and lse float32 (batch, heads, seqlen_q),
    or (heads, total_q) for packed sequences: the real op's outputs and the fake's alike."""
    out = torch.empty_like(q)
    if q.dim() == 3:
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


@torch.library.custom_op("flashsteps::attention_forward", mutates_args=(), tags=_TAGS)
def attention_forward(q: Tensor, k: Tensor, v: Tensor, alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
                      cu_seqlens_k: Optional[Tensor], step: str, variant: str, causal: bool,
                      softmax_scale: Optional[float], window_left: int, window_right: int, softcap: float,
                      dropout_p: float, seed: int, max_seqlen_q: Optional[int],
                      max_seqlen_k: Optional[int]) -> Tuple[Tensor, Tensor]:
    """The forward of a step (04, 05 or 08) on q, k, v where they are: (out, lse)."""
    q, k, v = _cuda(q, "q"), _cuda(k, "k"), _cuda(v, "v")
    out, lse = _forward_outputs(q)
    with torch.cuda.device(q.device):
        _flashsteps._forward(q, k, v, out, lse, **_native_keywords(
            alibi_slopes, cu_seqlens_q, cu_seqlens_k, step, variant, causal, softmax_scale, window_left, window_right,
            softcap, dropout_p, seed, max_seqlen_q, max_seqlen_k), stream=_stream(q), workspace=_allocator(q.device))
    return out, lse


@attention_forward.register_fake
def _(q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, step, variant, causal, softmax_scale, window_left,
      window_right, softcap, dropout_p, seed, max_seqlen_q, max_seqlen_k):
    return _forward_outputs(q)


@torch.library.custom_op("flashsteps::attention_backward", mutates_args=(), tags=_TAGS)
def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                       step: str, variant: str, causal: bool, softmax_scale: Optional[float], window_left: int,
                       window_right: int, softcap: float, dropout_p: float, seed: int, max_seqlen_q: Optional[int],
                       max_seqlen_k: Optional[int]) -> Tuple[Tensor, Tensor, Tensor]:
    """The backward of step 05 or 08: (dq, dk, dv), like q, k and v."""
    q, k, v, out, lse, dout = (_cuda(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v"), (out, "out"), (lse, "lse"),
                                                        (dout, "dout")))
    if dout.stride(-1) != 1:  # the kernels read head_dim contiguous
        dout = dout.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    with torch.cuda.device(q.device):
        _flashsteps._backward(q, k, v, out, lse, dout, dq, dk, dv, **_native_keywords(
            alibi_slopes, cu_seqlens_q, cu_seqlens_k, step, variant, causal, softmax_scale, window_left, window_right,
            softcap, dropout_p, seed, max_seqlen_q, max_seqlen_k), stream=_stream(q), workspace=_allocator(q.device))
    return dq, dk, dv


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, *settings):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k = inputs[:6]
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    ctx.settings = inputs[6:]  # step, variant, causal, ..., max_seqlen_k: Python values
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    if ctx.settings[0] == "04":
        raise RuntimeError("flashsteps.attention: step 04 has no backward; use step='05' or '08'")
    dq, dk, dv = backward_op(dout, q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k, *ctx.settings)
    return (dq, dk, dv) + (None,) * (3 + len(ctx.settings))  # none for the slopes, the offsets and the settings


attention_forward.register_autograd(_backward, setup_context=_setup_context)


def _decode_outputs(q):
    """out (batch, seqlen_q, heads, head_dim) contiguous like q, lse float32 (batch, heads, seqlen_q)."""
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


# k_cache and v_cache are written in place where k and v are given (the append); one schema, so
# declared as mutated in any case.
@torch.library.custom_op("flashsteps::attention_with_kvcache", mutates_args=("k_cache", "v_cache"), tags=_TAGS)
def attention_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor], v: Optional[Tensor],
                           cache_seqlens: Optional[Tensor], cache_len: Optional[int], block_table: Optional[Tensor],
                           cache_batch_idx: Optional[Tensor], rotary_cos: Optional[Tensor],
                           rotary_sin: Optional[Tensor], rotary_interleaved: bool, softmax_scale: Optional[float],
                           causal: bool, window_left: int, window_right: int, softcap: float,
                           alibi_slopes: Optional[Tensor], num_splits: int) -> Tuple[Tensor, Tensor]:
    """Step 10's decoding: (out, lse); with k and v, their rows appended into k_cache and v_cache in place.
    cache_seqlens (batch) int32 or cache_len (one length for all, or None: the whole cache)."""
    q, k_cache, v_cache = _cuda(q, "q"), _cuda(k_cache, "k_cache"), _cuda(v_cache, "v_cache")
    out, lse = _decode_outputs(q)
    with torch.cuda.device(q.device):
        _flashsteps._decode(q, k_cache, v_cache, out, lse, k=_plain(k), v=_plain(v),
                            cache_seqlens=_plain(cache_seqlens) if cache_seqlens is not None else cache_len,
                            block_table=_plain(block_table), cache_batch_idx=_plain(cache_batch_idx),
                            rotary_cos=_plain(rotary_cos), rotary_sin=_plain(rotary_sin),
                            rotary_interleaved=rotary_interleaved, softmax_scale=softmax_scale, causal=causal,
                            window_size=(window_left, window_right), softcap=softcap,
                            alibi_slopes=_plain(alibi_slopes), num_splits=num_splits, stream=_stream(q),
                            workspace=_allocator(q.device))
    return out, lse


@attention_with_kvcache.register_fake
def _(q, k_cache, v_cache, *rest):
    return _decode_outputs(q)


def _probs_output(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k):
    """S_dmask float32 (batch, heads, seqlen_q, seqlen_k), or for packed sequences (sequences, heads,
    max_seqlen_q, max_seqlen_k): the real op's output and the fake's alike, refused (ValueError) past
    2^28 entries before anything is allocated (flashsteps._probs_shape)."""
    return torch.empty(_probs_shape(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k), dtype=torch.float32,
                       device=q.device)


@torch.library.custom_op("flashsteps::attention_probs", mutates_args=(), tags=_TAGS)
def attention_probs(q: Tensor, k: Tensor, lse: Tensor, alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
                    cu_seqlens_k: Optional[Tensor], causal: bool, softmax_scale: Optional[float], window_left: int,
                    window_right: int, softcap: float, dropout_p: float, seed: int, max_seqlen_q: Optional[int],
                    max_seqlen_k: Optional[int]) -> Tensor:
    """The attention probabilities of the forward that returned lse for q, k with these settings (common/attn_probs.cuh):
    float32, P = exp(S - lse), negative where the dropout mask dropped the entry. Not differentiable."""
    q, k, lse = _cuda(q, "q"), _cuda(k, "k"), _cuda(lse, "lse")
    out = _probs_output(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    with torch.cuda.device(q.device):
        _flashsteps._probs(q, k, lse, out, causal=causal, softmax_scale=softmax_scale,
                           window_size=(window_left, window_right), softcap=softcap, alibi_slopes=_plain(alibi_slopes),
                           dropout_p=dropout_p, seed=_seed(seed), cu_seqlens_q=_plain(cu_seqlens_q),
                           cu_seqlens_k=_plain(cu_seqlens_k), stream=_stream(q))
    return out


@attention_probs.register_fake
def _(q, k, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale, window_left, window_right, softcap,
      dropout_p, seed, max_seqlen_q, max_seqlen_k):
    return _probs_output(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)


# S_dmask is no function to differentiate (flash_attn's is not either): marked non-differentiable, so
# that it never requires grad, whatever q and k do.
def _probs_setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output)


def _probs_backward(ctx, _dprobs):
    return (None,) * 15


attention_probs.register_autograd(_probs_backward, setup_context=_probs_setup_context)


# What flashsteps/__init__.py calls: the ops' overloads, which torch.compile traces as single nodes.
forward_op = torch.ops.flashsteps.attention_forward.default
backward_op = torch.ops.flashsteps.attention_backward.default
kvcache_op = torch.ops.flashsteps.attention_with_kvcache.default
probs_op = torch.ops.flashsteps.attention_probs.default
