"""flashsteps: the project's fp64 attention reference and its kernels, from Python.

    import torch, flashsteps
    out = flashsteps.attention(q, k, v, causal=True)   # q (batch, seqlen, heads, head_dim), bf16/fp16, on the GPU
    out.sum().backward()                                # q.grad, k.grad, v.grad by the step's backward
    ref, lse = flashsteps.reference(q.cpu(), k.cpu(), v.cpu(), causal=True)  # float64, on the CPU

`attention` takes flash_attn_func's arguments and PyTorch CUDA tensors (`attention_varlen`
flash_attn_varlen_func's: packed sequences, q (total_q, heads, head_dim) with cu_seqlens), and reads
them where they are: the kernels of steps 08 (bfloat16, float16), 04 and 05 (float32) take any strides
whose rows start on 16-byte boundaries (the last dimension contiguous), so nothing is copied.
`attention_with_kvcache` takes flash_attn_with_kvcache's arguments: decoding (step 10), a few new query
tokens against a KV cache, contiguous or paged, with the new keys and values appended in place.
`attention_into` is the kernel call itself, on any DLPack CUDA tensors (CuPy, JAX) with the
outputs given. `attention_probs` returns a call's attention probabilities (flash_attn's S_dmask,
return_attn_probs=True in flashsteps.flash_attn_interface), the dropped entries negative. With
PyTorch, the kernels are custom ops (flashsteps/_ops.py, namespace `flashsteps`) with fake
implementations and autograd: `torch.compile(model, fullgraph=True)` traces
attention, attention_varlen and attention_with_kvcache without a graph break, and a CUDA graph
(torch.cuda.graph) captures them: no host synchronisation, no allocation but PyTorch's.
`reference`, `reference_backward`, `check`, `check_backward` and `alibi_slopes` (docs/verify.md)
take any DLPack CPU tensor.
"""
import importlib.util
import operator
import sys

from ._flashsteps import (  # noqa: F401  (the package's interface)
    _address,
    _backward,
    _forward,
    _last_launch,
    _probs_limit,
    alibi_slopes,
    check,
    check_backward,
    reference,
    reference_backward,
)

# The steps attention runs: their variant by default and with deterministic=True (dQ without
# atomics). Their kernels all take any strides (StepInfo::strides), so nothing is copied for them.
_STEPS = {
    "09": {"default": "fa3", "deterministic": "deterministic"},  # bf16, fp16; where the build has step 09
    "08": {"default": "fa2", "deterministic": "deterministic"},  # float32: 3xtf32 (attention)
    "05": {"default": "atomic", "deterministic": "deterministic"},
    "04": {"default": "fa2", "deterministic": "fa2"},  # forward only
}


def _step_of(step):
    key = str(step).split("_")[0].zfill(2)
    if key not in _STEPS:
        raise ValueError(f"step: {step!r}; attention runs steps 04 (forward), 05, 08 and 09 (None: the fastest that "
                         "takes the call)")
    return key


def info(device=0):
    """What this build runs, as a dict: "steps", the steps flashsteps.attention can be pinned to; "hopper",
    whether GPU `device` is an sm_90 one (H100, H200) that this build has step 09's kernels for, where
    attention(step="auto") runs step 09 for the calls it takes (bfloat16 or float16, head_dim a multiple of 8
    up to 128, heads_k = heads, seqlen_k = seqlen_q, no window, softcap, ALiBi, dropout or cu_seqlens) and step 08 for
    the rest; "last", the step and variant the last attention call (or backward) ran, e.g.
    "09_hopper/fa3" ("" before any)."""
    from . import _flashsteps

    if not hasattr(_flashsteps, "_forward"):
        return {"steps": [], "hopper": False, "last": ""}
    steps = [k for k in ("04", "05", "08", "09") if _flashsteps._has_step(k)]
    return {"steps": steps, "hopper": bool(_flashsteps._hopper(device)), "last": _flashsteps._last_step()}


def attention_into(q, k, v, out, lse, *, step="08", variant="fa2", causal=False, softmax_scale=None,
                   window_size=(-1, -1), softcap=0.0, alibi_slopes=None, dropout_p=0.0, seed=1, cu_seqlens_q=None,
                   cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, stream=0):
    """The forward kernel on DLPack CUDA tensors, in place: q (batch, seqlen_q, heads, head_dim), k and v
    (batch, seqlen_k, heads_k, head_dim), out like q, lse float32 (batch, heads, seqlen_q) contiguous; with
    cu_seqlens_q, cu_seqlens_k (int32 CUDA tensors of batch + 1 prefix sums) q (total_q, heads, head_dim),
    k and v (total_k, heads_k, head_dim), lse (heads, total_q). stream: the CUDA stream to launch on (a
    pointer; 0, the default stream). A workspace, where the pass has one (step 04), is allocated in the
    stream's order (cudaMallocAsync); attention's ops take theirs from PyTorch's allocator instead."""
    _forward(q, k, v, out, lse, step=step, variant=variant, causal=causal, softmax_scale=softmax_scale,
             window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed,
             cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
             max_seqlen_k=max_seqlen_k, stream=stream)


def _torch_ops():
    """flashsteps/_ops.py, the kernels as PyTorch custom ops: imported on the first call with PyTorch
    tensors (PyTorch is then imported already), or at the package's import where it was."""
    from . import _ops

    return _ops


def _number(x, name):
    """A float keyword for the ops' schema, refused in one line as the native calls refuse it."""
    if x is not None and not isinstance(x, (str, bytes)):
        try:
            return float(x)
        except TypeError:
            pass
    raise TypeError(f"{name}: expected a number, got {type(x).__name__}")


def _int64(x):
    """An integer keyword for the ops' schema (int64): past it, the nearest int64, which the native
    call then refuses with its own one line (no bound of theirs comes near it)."""
    return max(-2**63, min(2**63 - 1, operator.index(x)))


def _seed(seed):
    """The dropout seed, 0 to 2^64 - 1, as the int64 of the same bits (the ops' schema has no uint64)."""
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be from 0 to 2^64 - 1 (got {seed})")
    return seed - 2**64 if seed >= 2**63 else seed


def _on_device(torch, q, alibi_slopes, cu_seqlens_q, cu_seqlens_k):
    """ALiBi's slopes as float32 and the offsets as int32, contiguous on q's GPU (None stays None);
    cu_seqlens_q and cu_seqlens_k come together or not at all."""
    if alibi_slopes is not None:
        alibi_slopes = torch.as_tensor(alibi_slopes, dtype=torch.float32, device=q.device).contiguous()
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("cu_seqlens_q and cu_seqlens_k go together")
    if cu_seqlens_q is not None:
        cu_seqlens_q = torch.as_tensor(cu_seqlens_q, dtype=torch.int32, device=q.device).contiguous()
        cu_seqlens_k = torch.as_tensor(cu_seqlens_k, dtype=torch.int32, device=q.device).contiguous()
    return alibi_slopes, cu_seqlens_q, cu_seqlens_k


def attention(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, deterministic=False, return_lse=False, *, step=None, variant=None, seed=1,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """Attention by the project's kernels, with flash_attn_func's arguments: q (batch, seqlen_q, heads,
    head_dim), k and v (batch, seqlen_k, heads_k, head_dim) PyTorch CUDA tensors (step 08: bfloat16 or float16 at
    any head_dim from 1 to 256, or float32 on the tensor cores by 3xTF32 at 32, 64 or 128; steps 04 and 05: float32),
    heads a multiple of heads_k; causal and the windows aligned to
    the bottom-right corner when seqlen_q != seqlen_k. Returns out (like q), or (out, lse) with
    return_lse=True, lse float32 (batch, heads, seqlen_q). Differentiable: backward runs the step's
    backward (deterministic=True: the variant without atomics; in float32 step 05's kernels, as step 08's
    3xTF32 adds dQ by atomics). step: None (default) runs step 08;
    "auto" runs step 09 on an sm_90 GPU (H100, H200) where it takes the call (bfloat16/float16, head_dim
    a multiple of 8 up to 128, no K/V shape of its own, window, softcap, ALiBi, dropout or cu_seqlens; info()["last"]
    says which ran), else step 08; "09", "08", "05" or "04" (forward only) pins one; variant: any of the
    step's, instead of the one deterministic picks; seed: the
    dropout mask's (the project's Philox stream, as flashsteps.reference draws it). alibi_slopes: float32
    (heads,), one slope per head, or (batch, heads), a row per batch. cu_seqlens_q, cu_seqlens_k: packed
    sequences, as attention_varlen takes them. The kernels run as PyTorch custom ops
    (torch.ops.flashsteps.attention_forward, attention_backward): torch.compile traces this call with
    no graph break, and it can be captured in a CUDA graph, alibi_slopes and cu_seqlens then CUDA
    tensors already (flashsteps/_ops.py: what a graph freezes, the offsets unread while captured)."""
    # A PyTorch tensor means PyTorch is imported already: anything else is refused without importing
    # it (seconds, where it is installed).
    torch = sys.modules.get("torch")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if torch is None or not isinstance(t, torch.Tensor):
            installed = importlib.util.find_spec("torch") is not None
            raise TypeError(f"{name}: attention takes PyTorch tensors{'' if installed else ' (PyTorch is not installed here)'}"
                            " (attention_into takes any DLPack CUDA tensor)")
        if not t.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor; the CPU reference is flashsteps.reference")
    if step == "auto" and q.dtype != torch.float32:
        # Step 09 where it takes the call on this GPU, else 08: decided natively, from the tensors' shapes
        # and the GPU (flashsteps_gpu.cpp, prepare), the same for the forward and its backward.
        key = "auto"
        variant = variant or ("deterministic" if deterministic else "default")
    elif step in (None, "auto"):  # step 08 (float32: its 3xTF32), or step 09 for its own variant's name
        key = "09" if variant == "fa3" else "08"
    else:
        key = _step_of(step)
    if variant is None and key == "08" and q.dtype == torch.float32:  # fp32 on the tensor cores: 3xTF32
        if deterministic and step not in (None, "auto"):
            raise ValueError("step 08 in float32 (3xtf32) adds dQ by atomics; deterministic=True in float32 is step='05'")
        if deterministic:  # 3xTF32's dQ goes by atomics: step 05's fp32 kernels, whose dQ has a pass of its own
            key = "05"
        else:
            variant = "3xtf32"
    if variant is None:
        variant = _STEPS[key]["deterministic" if deterministic else "default"]
    alibi_slopes, cu_seqlens_q, cu_seqlens_k = _on_device(torch, q, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    out, lse = _torch_ops().forward_op(
        q, k, v, alibi_slopes, cu_seqlens_q, cu_seqlens_k, key, variant, bool(causal),
        None if softmax_scale is None else _number(softmax_scale, "softmax_scale"), _int64(int(window_size[0])),
        _int64(int(window_size[1])), _number(softcap, "softcap"), _number(dropout_p, "dropout_p"), _seed(seed),
        None if max_seqlen_q is None else _int64(max_seqlen_q), None if max_seqlen_k is None else _int64(max_seqlen_k))
    return (out, lse) if return_lse else out


def _probs_shape(q, k, cu_seqlens_q=None, max_seqlen_q=None, max_seqlen_k=None):
    """The shape of a call's S_dmask (attention_probs): (batch, heads, seqlen_q, seqlen_k), or with packed
    sequences (sequences, heads, max_seqlen_q, max_seqlen_k); ValueError past _probs_limit (2^28) entries,
    so that a call is refused before its forward runs or its memory is taken."""
    if cu_seqlens_q is None:
        if q.dim() != 4 or k.dim() != 4:
            raise ValueError(f"q, k: expected (batch, seqlen, heads, head_dim), got q {tuple(q.shape)}, k {tuple(k.shape)}")
        shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    else:
        if q.dim() != 3:
            raise ValueError(f"q: expected (total_q, heads, head_dim) with cu_seqlens, got {tuple(q.shape)}")
        if max_seqlen_q is None or max_seqlen_k is None:
            raise ValueError("max_seqlen_q, max_seqlen_k: the packed probabilities' shape needs both")
        sequences = (cu_seqlens_q.shape[0] if hasattr(cu_seqlens_q, "shape") else len(cu_seqlens_q)) - 1
        shape = (sequences, q.shape[1], max_seqlen_q, max_seqlen_k)
    entries = shape[0] * shape[1] * shape[2] * shape[3]
    if entries > _probs_limit:
        raise ValueError(f"return_attn_probs: batch·heads·seqlen_q·seqlen_k = {entries} entries {tuple(shape)}, past "
                         f"the attention probabilities' limit of 2^28 = {_probs_limit} (float32, 1 GiB): they are "
                         "for tests and small problems")
    return shape


def attention_probs(q, k, lse, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, *, seed=1, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                    max_seqlen_k=None):
    """The attention probabilities of a forward call, flash_attn's S_dmask (what flash_attn_func returns
    third with return_attn_probs=True; flash_attn_interface calls this): q, k and the lse that
    attention(..., return_lse=True) returned for them, and that call's keywords (its seed too: the
    dropout mask is a function of it). Returns float32 (batch, heads, seqlen_q, seqlen_k): P =
    exp(S - lse), S the scaled scores with the call's softcap, ALiBi, window and causal mask (bottom-right
    aligned, grouped K/V heads as the kernels read them), 0 where masked; where the dropout mask
    dropped an entry, -P (the sign bit is the mask, -0 included; |P| is before dropout, not scaled by
    1/(1 - p)), so that out = (where(signbit(P), 0, P) / (1 - p)) @ v. With cu_seqlens_q, cu_seqlens_k
    (attention_varlen's packed sequences; lse (heads, total_q)): (sequences, heads, max_seqlen_q,
    max_seqlen_k), sequence b's P in [b, :, :its queries, :its keys] and zero past them, as flash_attn's
    varlen functions lay it out (max_seqlen_q/k: found from the offsets when not given, which reads them
    back). Unlike FlashAttention's, whose N dimensions are rounded up to multiples of 128 and whose
    values are in q's dtype and scaled by each tile's running max ("the output of softmax (possibly
    with different scaling)", which its tests normalise again from lse), these are the entries alone,
    normalised, in float32: a test can use them as they are. For tests and small problems: refused
    (ValueError) past 2^28 entries (1 GiB). Not differentiable. A PyTorch custom op
    (torch.ops.flashsteps.attention_probs) with a fake implementation, as attention's."""
    torch = sys.modules.get("torch")
    for name, t in (("q", q), ("k", k), ("lse", lse)):
        if torch is None or not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: attention_probs takes PyTorch tensors")
        if not t.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor")
    alibi_slopes, cu_seqlens_q, cu_seqlens_k = _on_device(torch, q, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    if cu_seqlens_q is not None:
        if max_seqlen_q is None and cu_seqlens_q.numel() > 1:
            max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())
        if max_seqlen_k is None and cu_seqlens_k.numel() > 1:
            max_seqlen_k = int((cu_seqlens_k[1:] - cu_seqlens_k[:-1]).max())
    return _torch_ops().probs_op(
        q, k, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k, bool(causal),
        None if softmax_scale is None else _number(softmax_scale, "softmax_scale"), _int64(int(window_size[0])),
        _int64(int(window_size[1])), _number(softcap, "softcap"), _number(dropout_p, "dropout_p"), _seed(seed),
        None if max_seqlen_q is None else _int64(max_seqlen_q), None if max_seqlen_k is None else _int64(max_seqlen_k))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0,
                     softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                     deterministic=False, return_lse=False, *, step=None, variant=None, seed=1):
    """Packed sequences with flash_attn_varlen_func's arguments: q (total_q, heads, head_dim), k and v
    (total_k, heads_k, head_dim), cu_seqlens_q and cu_seqlens_k int32 prefix sums of batch + 1 offsets
    (sequence b is q[cu_seqlens_q[b]:cu_seqlens_q[b + 1]] against k, v[cu_seqlens_k[b]:cu_seqlens_k[b + 1]],
    each with its own bottom-right causal and window alignment; a sequence may be empty). max_seqlen_q,
    max_seqlen_k: checked if given (the offsets are read back to be checked in any case), except while a
    CUDA graph is captured: then nothing is read back and the grid is cut to them (flashsteps/_ops.py).
    alibi_slopes: (heads,), or (batch, heads) with a row per sequence. Returns out like q, or (out, lse)
    with lse float32 (heads, total_q). The rest as attention."""
    return attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                     return_lse, step=step, variant=variant, seed=seed, cu_seqlens_q=cu_seqlens_q,
                     cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                           cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                           return_softmax_lse=False):
    """Decoding by step 10's kernels, with flash_attn_with_kvcache's arguments, on PyTorch CUDA tensors
    (bfloat16 or float16, contiguous): q (batch, seqlen_q, heads, head_dim), seqlen_q ≤ 16 new tokens;
    k_cache, v_cache (batch_cache, seqlen_cache, heads_k, head_dim), or paged (num_blocks, page_size,
    heads_k, head_dim) with block_table (batch, max_blocks) int32, page_size a power of two ≥ 16;
    head_dim 64, 128 or 256. k, v (batch, seqlen_q, heads_k, head_dim): appended into the cache in place
    at cache_seqlens before attending (rotary_cos, rotary_sin (rotary_len, rotary_dim / 2) then turn them
    and q: causal at each token's position, else all at cache_seqlens). cache_seqlens: an int or (batch)
    int32; None: the whole cache. cache_batch_idx (batch) int32: the contiguous cache's sequence each
    reads. causal, window_size, softcap, alibi_slopes (float32 (heads,) or (batch, heads), a row per
    sequence of q's batch): as attention's, aligned to the bottom-right corner (token t of n at query
    position cache_seqlens + t when appending, else cache_seqlens − n + t). num_splits: 0 for the split
    rule. Returns out like q, or (out, lse) with lse float32 (batch, heads, seqlen_q). Not taken yet
    (ValueError): cache_leftpad. A PyTorch custom op (torch.ops.flashsteps.attention_with_kvcache, the
    cache declared mutated): torch.compile traces it and a CUDA graph captures it; while captured the
    int32 tensors are not read back to be checked, and cache_seqlens as a CUDA int32 tensor is read
    again at each replay (flashsteps/_ops.py)."""
    torch = sys.modules.get("torch")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if torch is None or not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: attention_with_kvcache takes PyTorch tensors")
        if not t.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor")
    from . import _flashsteps

    if not hasattr(_flashsteps, "_decode"):
        raise ValueError("attention_with_kvcache: this build has no step 10 (configure without FS_STEPS, or with 10 in it)")
    if cache_leftpad is not None:
        raise ValueError("cache_leftpad: step 10 does not take it yet")
    if alibi_slopes is not None:
        alibi_slopes = torch.as_tensor(alibi_slopes, dtype=torch.float32, device=q.device).contiguous()
    if q.dim() != 4:
        raise ValueError(f"q: (batch, seqlen_q, heads, head_dim), got shape {tuple(q.shape)}")
    for name, t in (("k", k), ("v", v), ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: attention_with_kvcache takes PyTorch tensors, got {type(t).__name__}")

    def int32(x):
        return None if x is None else torch.as_tensor(x, dtype=torch.int32, device=q.device).contiguous()

    # cache_seqlens: one length for all (an int, cache_len to the op) or a length per sequence.
    cache_len = None
    if isinstance(cache_seqlens, bool):
        raise TypeError("cache_seqlens: expected an integer or an int32 tensor, got bool")
    if isinstance(cache_seqlens, int):
        cache_len, cache_seqlens = _int64(cache_seqlens), None
    elif cache_seqlens is not None:
        cache_seqlens = int32(cache_seqlens)
    out, lse = _torch_ops().kvcache_op(
        q, k_cache, v_cache, k, v, cache_seqlens, cache_len, int32(block_table), int32(cache_batch_idx), rotary_cos,
        rotary_sin, bool(rotary_interleaved), None if softmax_scale is None else _number(softmax_scale, "softmax_scale"),
        bool(causal), _int64(int(window_size[0])), _int64(int(window_size[1])), _number(softcap, "softcap"),
        alibi_slopes, _int64(int(num_splits)))
    return (out, lse) if return_softmax_lse else out


# The ops registered now where PyTorch is imported already, so that the first call, even one that
# torch.compile traces, finds them (otherwise that call imports them: _torch_ops). An older PyTorch
# without torch.library.custom_op leaves the reference usable; attention then says what it needs.
if "torch" in sys.modules:
    try:
        _torch_ops()
    except ImportError:
        pass
