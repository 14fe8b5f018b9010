"""flashsteps.attention on PyTorch CUDA tensors (common/python/flashsteps_gpu.cpp and
flashsteps/__init__.py): the kernels' outputs and autograd gradients against the fp64 reference by
the project's rule (flashsteps.check, check_backward), beside torch's scaled_dot_product_attention
on the same tensors; reads in place (the addresses the kernels were launched with are the
tensors'); every feature; the errors. Needs PyTorch and a GPU (CTest label gpu)."""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import flashsteps  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def inputs(B, N, H, d, dtype, Nk=None, Hk=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    Nk, Hk = Nk or N, Hk or H
    q = torch.randn(B, N, H, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(B, Nk, Hk, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(B, Nk, Hk, d, device="cuda", generator=g).to(dtype)
    dout = torch.randn(B, N, H, d, device="cuda", generator=g).to(dtype)
    return q, k, v, dout


def cpu(*ts):
    return [t.detach().cpu() for t in ts]


def forward_backward(q, k, v, dout, **kw):
    """out, lse and the gradients of sum(out * dout) by flashsteps.attention."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out, lse = flashsteps.attention(q, k, v, return_lse=True, **kw)
    out.backward(dout)
    return out, lse, q.grad, k.grad, v.grad


REF_KEYS = ("dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes", "seed")


def batch_slopes(B, H):
    """ALiBi slopes of shape (B, H) on the GPU whose rows differ: row b is the standard slopes of H heads turned
    by b heads, times b + 1/2 (a kernel that read row 0, or the (H,) form, for every batch fails the check)."""
    standard = torch.as_tensor(flashsteps.alibi_slopes(H))
    return torch.stack([torch.roll(standard, -b) * (b + 0.5) for b in range(B)]).float().cuda()


def reference_keywords(kw):
    out = {key: kw[key] for key in REF_KEYS if key in kw}
    if out.get("alibi_slopes") is not None:
        out["alibi_slopes"] = torch.as_tensor(out["alibi_slopes"]).float().cpu()
    return out


def checked(q, k, v, dout, **kw):
    """Runs attention forward and backward and checks every output against the fp64 reference."""
    out, lse, dq, dk, dv = forward_backward(q, k, v, dout, **kw)
    ref = reference_keywords(kw)
    fwd = flashsteps.check(*cpu(out, q, k, v), lse=lse.cpu(), **ref)
    assert fwd["ok"], fwd["summary"]
    bwd = flashsteps.check_backward(*cpu(dq, dk, dv, q, k, v, dout), **ref)
    assert bwd["ok"], bwd["summary"]
    return out, lse, dq, dk, dv, fwd, bwd


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 257, 4, 64), (1, 1000, 2, 128), (3, 77, 2, 32)])
def test_matches_the_reference_and_sdpa(dtype, causal, shape):
    B, N, H, d = shape
    q, k, v, dout = inputs(B, N, H, d, DTYPES[dtype], seed=N + d)
    out, _, dq, dk, dv, fwd, bwd = checked(q, k, v, dout, causal=causal)
    # torch's attention on the same tensors, (batch, heads, seqlen, head_dim), judged by the same rule.
    qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    ref_out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
    ref_out.backward(dout.transpose(1, 2))
    sdpa = flashsteps.check(*cpu(ref_out.transpose(1, 2), q, k, v), causal=causal)
    assert sdpa["ok"], sdpa["summary"]
    theirs = [t.grad.transpose(1, 2) for t in (qs, ks, vs)]
    assert flashsteps.check_backward(*cpu(*theirs, q, k, v, dout), causal=causal)["ok"]
    # And ours is no further from the exact answer than 2x theirs (plus a unit in the last place).
    ulp = 2.0 ** (-8 if dtype == "bf16" else -11)
    err = {t["name"]: t["err"] for t in fwd["tensors"]}
    err_sdpa = {t["name"]: t["err"] for t in sdpa["tensors"]}
    assert err["O"] <= 2 * err_sdpa["O"] + ulp * float(out.detach().abs().max()), (err, err_sdpa)
    diff = (out.float() - ref_out.transpose(1, 2).float()).abs().max().item()
    print(f"{dtype} causal={causal} {shape}: max |out - sdpa| {diff:.3g}, err {err['O']:.3g} (sdpa {err_sdpa['O']:.3g})")


@pytest.mark.parametrize("step,dtype", [("08", torch.bfloat16), ("05", torch.float32)])
def test_reads_and_writes_in_place(step, dtype):
    """No copy: the kernels are launched with the tensors' own addresses, including slices of a
    packed QKV tensor and (batch, heads, seqlen, head_dim) views, whose strides they take as given
    (step 08's 16-bit kernels and steps 04/05's float32 ones alike)."""
    B, N, H, d = 2, 300, 4, 64
    qkv = torch.randn(B, N, 3, H, d, device="cuda", dtype=dtype, requires_grad=True)
    q, k, v = qkv.unbind(2)
    out = flashsteps.attention(q, k, v, causal=True, deterministic=True, step=step)
    launched = flashsteps._last_launch()
    assert launched["q"] == q.data_ptr() and launched["k"] == k.data_ptr() and launched["v"] == v.data_ptr()
    assert launched["out"] == out.data_ptr()
    assert q.stride() == (N * 3 * H * d, 3 * H * d, d, 1)
    dout = torch.randn_like(out)
    out.backward(dout)
    launched = flashsteps._last_launch()
    assert launched["q"] == q.data_ptr() and launched["dout"] == dout.data_ptr()
    # The same values, contiguous: the same outputs bit for bit, and the same gradients.
    qc, kc, vc = (t.detach().contiguous().requires_grad_() for t in (q, k, v))
    out_c = flashsteps.attention(qc, kc, vc, causal=True, deterministic=True, step=step)
    assert torch.equal(out_c, out)
    out_c.backward(dout)
    qd = qkv.detach().clone().requires_grad_()
    o2 = flashsteps.attention(*qd.unbind(2), causal=True, deterministic=True, step=step)
    o2.backward(dout)
    assert torch.equal(qd.grad[:, :, 0], qc.grad) and torch.equal(qd.grad[:, :, 1], kc.grad)
    assert torch.equal(qd.grad[:, :, 2], vc.grad)


FEATURES = [
    dict(causal=True, Nk=333, Hk=2),                  # bottom-right causal, grouped K/V heads
    dict(Nk=100, Hk=1),                               # multi-query, fewer keys than queries
    dict(window_size=(64, 16)),
    dict(causal=True, window_size=(32, 0), alibi=True),
    dict(causal=True, window_size=(32, 0), alibi="rows"),  # (batch, heads): a row per batch
    dict(Nk=333, Hk=2, softcap=20.0, alibi="rows"),
    dict(softcap=20.0),
    dict(dropout_p=0.1, seed=5),
    dict(dropout_p=0.1, seed=5, causal=True, softcap=30.0, Hk=2, deterministic=True),
    dict(window_size=(5000, 5000)),                   # wider than the sequence
]


@pytest.mark.parametrize("feature", FEATURES, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
@pytest.mark.parametrize("d", [64, 128])
def test_features(feature, d):
    f = dict(feature)
    Nk, Hk = f.pop("Nk", None), f.pop("Hk", None)
    alibi = f.pop("alibi", False)
    if alibi:
        f["alibi_slopes"] = batch_slopes(2, 4) if alibi == "rows" else torch.as_tensor(flashsteps.alibi_slopes(4)).cuda()
    q, k, v, dout = inputs(2, 255, 4, d, torch.bfloat16, Nk=Nk, Hk=Hk, seed=d)
    checked(q, k, v, dout, **f)


@pytest.mark.parametrize("step,dtype", [("08", torch.bfloat16), ("08", torch.float16), ("08", torch.float32),
                                        ("05", torch.float32), ("04", torch.float32)])
def test_alibi_slopes_of_batch_and_heads(step, dtype):
    """alibi_slopes of shape (batch, heads), flash_attn_func's second form, in every step attention runs: rows
    that differ are checked against the reference of the same rows; rows that are all the (heads,) slopes give the
    (heads,) form's bits; and a row per batch does change the batches after the first."""
    q, k, v, dout = inputs(3, 200, 4, 64, dtype, Nk=230, Hk=2, seed=29)
    rows = batch_slopes(3, 4)
    kw = dict(causal=True, window_size=(70, 10), step=step)
    if step == "04":  # forward only
        out, lse = flashsteps.attention(q, k, v, alibi_slopes=rows, return_lse=True, **kw)
        r = flashsteps.check(*cpu(out, q, k, v), lse=lse.cpu(), causal=True, window_size=(70, 10), alibi_slopes=rows.cpu())
        assert r["ok"], r["summary"]
    else:
        out = checked(q, k, v, dout, alibi_slopes=rows, **kw)[0]
    heads = torch.as_tensor(flashsteps.alibi_slopes(4)).cuda()
    same = flashsteps.attention(q, k, v, alibi_slopes=heads.expand(3, 4).contiguous(), **kw)
    assert torch.equal(same, flashsteps.attention(q, k, v, alibi_slopes=heads, **kw))
    first = flashsteps.attention(q, k, v, alibi_slopes=rows[0], **kw)
    assert torch.equal(out[0], first[0])  # batch 0 takes row 0 either way
    assert not torch.equal(out[1], first[1]) and not torch.equal(out[2], first[2])


def test_deterministic_backward_repeats_bit_for_bit():
    q, k, v, dout = inputs(2, 1000, 4, 64, torch.float16, seed=3)
    first = forward_backward(q, k, v, dout, causal=True, deterministic=True, dropout_p=0.1, seed=9)
    again = forward_backward(q, k, v, dout, causal=True, deterministic=True, dropout_p=0.1, seed=9)
    for a, b in zip(first, again):
        assert torch.equal(a, b)


@pytest.mark.parametrize("step", ["05", "04", "08"])
def test_fp32_steps(step):
    """float32 in steps 04 and 05 (CUDA cores) and 08 (3xtf32: the tensor cores, three TF32 products
    per product), under the float32 rule; step 08 in float32 has no deterministic backward."""
    q, k, v, dout = inputs(2, 130, 2, 64, torch.float32, seed=11)
    if step == "08":
        checked(q, k, v, dout, causal=True, step=step, window_size=(50, 3), softcap=20.0)
        assert flashsteps._last_launch()["q"] == q.data_ptr()  # read in place, as the 16-bit kernels do
        with pytest.raises(ValueError, match="deterministic"):
            flashsteps.attention(q, k, v, step=step, deterministic=True)
    elif step == "04":  # forward only
        out, lse = flashsteps.attention(q, k, v, causal=True, return_lse=True, step=step)
        r = flashsteps.check(*cpu(out, q, k, v), lse=lse.cpu(), causal=True)
        assert r["ok"], r["summary"]
        with pytest.raises(RuntimeError, match="no backward"):
            flashsteps.attention(q.requires_grad_(), k, v, step=step).sum().backward()
    else:
        checked(q, k, v, dout, causal=True, step=step, deterministic=True)


def test_attention_into_writes_the_given_outputs():
    """attention_into, the forward alone on DLPack CUDA tensors with the outputs given: the same
    bits as attention's forward, written into out and lse in place; a step outside 04/05/08 refused
    by the native call itself."""
    q, k, v, _ = inputs(2, 300, 4, 64, torch.float16, Nk=200, Hk=2, seed=13)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((2, 4, 300), float("nan"), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    flashsteps.attention_into(q, k, v, out, lse, causal=True, window_size=(64, 0), stream=stream)
    assert flashsteps._last_launch()["out"] == out.data_ptr()
    want, want_lse = flashsteps.attention(q, k, v, causal=True, window_size=(64, 0), return_lse=True)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    with pytest.raises(ValueError, match="steps 04"):
        flashsteps.attention_into(q, k, v, out, lse, step="06")


# Packed sequences (flash_attn_varlen_func): an empty sequence, one token (the ones after it start at
# odd tokens), queries without keys and keys without queries, lengths across tiles.
LENS_Q = [300, 0, 1, 129, 33, 0, 77]
LENS_K = [300, 5, 1, 200, 0, 17, 60]


def packed_inputs(dtype, H=4, Hk=2, d=64, seed=0):
    cu_q = torch.tensor([0] + LENS_Q, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    cu_k = torch.tensor([0] + LENS_K, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    g = torch.Generator(device="cuda").manual_seed(seed)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    q = torch.randn(total_q, H, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(total_k, Hk, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(total_k, Hk, d, device="cuda", generator=g).to(dtype)
    dout = torch.randn(total_q, H, d, device="cuda", generator=g).to(dtype)
    return q, k, v, dout, cu_q, cu_k


PACKED = [
    dict(),
    dict(causal=True),
    dict(causal=True, dropout_p=0.1, seed=3, deterministic=True),
    dict(window_size=(40, 7), softcap=20.0, alibi=True, dropout_p=0.1, seed=4),
    dict(window_size=(40, 7), causal=True, alibi="rows"),  # (sequences, heads): a row per sequence
]


@pytest.mark.parametrize("feature", PACKED, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "plain")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_packed_sequences(feature, dtype):
    """attention_varlen on packed sequences, read in place: out, lse (heads, total_q) and the
    gradients against the fp64 reference of the same cu_seqlens; the rows of queries without keys
    are O = 0, LSE = -inf, and the keys without queries get dK = dV = 0."""
    f = dict(feature)
    alibi = f.pop("alibi", False)
    if alibi:
        f["alibi_slopes"] = (batch_slopes(len(LENS_Q), 4) if alibi == "rows" else
                             torch.as_tensor(flashsteps.alibi_slopes(4)).cuda())
    q, k, v, dout, cu_q, cu_k = packed_inputs(DTYPES[dtype], seed=len(f))
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    out, lse = flashsteps.attention_varlen(qg, kg, vg, cu_q.cuda(), cu_k.cuda(), max(LENS_Q), max(LENS_K),
                                           return_lse=True, **f)
    assert flashsteps._last_launch()["q"] == q.data_ptr()  # read in place
    assert lse.shape == (4, q.shape[0])
    out.backward(dout)
    assert flashsteps._last_launch()["dq"] == qg.grad.data_ptr()
    ref = dict(reference_keywords(f), cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    fwd = flashsteps.check(*cpu(out, q, k, v), lse=lse.cpu(), **ref)
    assert fwd["ok"], fwd["summary"]
    bwd = flashsteps.check_backward(*cpu(qg.grad, kg.grad, vg.grad, q, k, v, dout), **ref)
    assert bwd["ok"], bwd["summary"]
    keyless = slice(int(cu_q[4]), int(cu_q[5]))  # sequence 4: 33 queries, no key
    assert torch.all(out[keyless] == 0) and torch.all(lse[:, keyless] == -math.inf)
    assert torch.all(qg.grad[keyless] == 0)
    queryless = slice(int(cu_k[5]), int(cu_k[6]))  # sequence 5: 17 keys, no query
    assert torch.all(kg.grad[queryless] == 0) and torch.all(vg.grad[queryless] == 0)


@pytest.mark.parametrize("deterministic", [False, True])
def test_packed_sequences_fp32_step05(deterministic):
    """Step 05's fp32 kernels on packed sequences, forward and backward, against the reference."""
    q, k, v, dout, cu_q, cu_k = packed_inputs(torch.float32, d=64, seed=7)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    out, lse = flashsteps.attention_varlen(qg, kg, vg, cu_q, cu_k, causal=True, dropout_p=0.1, seed=2,
                                           deterministic=deterministic, return_lse=True, step="05")
    out.backward(dout)
    ref = dict(causal=True, dropout_p=0.1, seed=2, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    fwd = flashsteps.check(*cpu(out, q, k, v), lse=lse.cpu(), **ref)
    assert fwd["ok"], fwd["summary"]
    bwd = flashsteps.check_backward(*cpu(qg.grad, kg.grad, vg.grad, q, k, v, dout), **ref)
    assert bwd["ok"], bwd["summary"]


def test_packed_sequences_match_one_call_per_sequence():
    """Each sequence of a packed call is that sequence's own problem: its out and lse are those of
    attention on it alone, bit for bit (the forward's arithmetic does not depend on the packing)."""
    q, k, v, _, cu_q, cu_k = packed_inputs(torch.bfloat16, seed=21)
    out, lse = flashsteps.attention_varlen(q, k, v, cu_q, cu_k, causal=True, window_size=(50, 0), return_lse=True)
    for b in range(len(LENS_Q)):
        sq, sk = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        if LENS_Q[b] == 0 or LENS_K[b] == 0:
            continue
        one, one_lse = flashsteps.attention(q[None, sq], k[None, sk], v[None, sk], causal=True, window_size=(50, 0),
                                            return_lse=True)
        assert torch.equal(out[sq], one[0]) and torch.equal(lse[:, sq], one_lse[0])


def test_packed_errors():
    q, k, v, _, cu_q, cu_k = packed_inputs(torch.bfloat16)
    with pytest.raises(ValueError, match="go together"):
        flashsteps.attention(q, k, v, cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="prefix sums"):
        flashsteps.attention_varlen(q, k, v, cu_q[:-1], cu_k[:-1])
    bad = cu_q.clone()
    bad[2], bad[3] = int(cu_q[3]), int(cu_q[2])  # (bad[3], bad[2] would be views: the second read sees the first write)
    with pytest.raises(ValueError, match="decrease"):
        flashsteps.attention_varlen(q, k, v, bad, cu_k)
    with pytest.raises(ValueError, match="max_seqlen_q"):
        flashsteps.attention_varlen(q, k, v, cu_q, cu_k, max_seqlen_q=100)
    with pytest.raises(ValueError, match="total_tokens"):
        flashsteps.attention_varlen(q[None], k[None], v[None], cu_q, cu_k)
    with pytest.raises(TypeError, match="int32"):
        flashsteps.attention_into(q, k, v, torch.empty_like(q), torch.empty(4, q.shape[0], device="cuda"),
                                  cu_seqlens_q=cu_q.cuda().long(), cu_seqlens_k=cu_k.cuda().long())
    with pytest.raises(ValueError, match="fa2 and deterministic"):
        flashsteps.attention_varlen(q, k, v, cu_q, cu_k, variant="key_warps")


def test_errors():
    q, k, v, _ = inputs(1, 64, 2, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA tensor"):
        flashsteps.attention(q.cpu(), k.cpu(), v.cpu())
    with pytest.raises(TypeError, match="one dtype"):
        flashsteps.attention(q, k.half(), v)
    with pytest.raises(TypeError, match="takes fp32, not bf16"):  # step 08 takes float32 too (3xtf32)
        flashsteps.attention(q, k, v, step="04")
    with pytest.raises(ValueError, match="multiple"):
        flashsteps.attention(q, *inputs(1, 64, 3, 64, torch.bfloat16)[1:3])
    with pytest.raises(ValueError, match="16-byte"):  # rows 4 elements (8 bytes) off the grid
        wide = torch.randn(1, 64, 2, 72, device="cuda", dtype=torch.bfloat16)
        flashsteps.attention(wide[..., 4:68], k, v)
    with pytest.raises(ValueError, match="step"):
        flashsteps.attention(q, k, v, step="07")
    with pytest.raises(ValueError, match="d must be 1 to 256"):  # past the widest head dimension compiled
        flashsteps.attention(*inputs(1, 64, 2, 264, torch.bfloat16)[:3])
    with pytest.raises(ValueError, match="dropout_p"):
        flashsteps.attention(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match="variant"):
        flashsteps.attention(q, k, v, variant="nope")
    # ALiBi's slopes: (heads,) or (batch, heads), float32, contiguous; anything else named with both shapes.
    for bad in (torch.ones(3, device="cuda"), torch.ones(2, 2, device="cuda"), torch.ones(1, 1, 2, device="cuda")):
        with pytest.raises(ValueError, match=r"shape \(2,\), or a row of them per batch, \(batch, heads\) = \(1, 2\)"):
            flashsteps.attention(q, k, v, alibi_slopes=bad)
    out, lse = torch.empty_like(q), torch.empty(1, 2, 64, device="cuda")
    with pytest.raises(ValueError, match="contiguous"):  # a column of a wider table: not row-major
        flashsteps.attention_into(q, k, v, out, lse, alibi_slopes=torch.ones(2, 3, device="cuda")[:, 0])
    with pytest.raises(ValueError, match="float32"):
        flashsteps.attention_into(q, k, v, out, lse, alibi_slopes=torch.ones(1, 2, device="cuda", dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(sequences, heads\) = \(2, 2\)"):
        cu = torch.tensor([0, 30, 64], dtype=torch.int32, device="cuda")
        flashsteps.attention_varlen(q[0], k[0], v[0], cu, cu, alibi_slopes=torch.ones(1, 2, device="cuda"))
    assert math.isfinite(flashsteps.attention(q, k, v).float().sum().item())


def test_verify_page_gpu_example_runs():
    """docs/verify.md's kernel example runs as written, and its checks pass."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "verify.md").read_text()
    block = re.search(r"<!-- example-gpu: [^>]*-->\n```python\n(.*?)```", text, re.S)
    assert block, "docs/verify.md lost its GPU example block"
    namespace = {}
    exec(compile(block.group(1), "docs/verify.md", "exec"), namespace)
    assert namespace["fwd"]["ok"], namespace["fwd"]["summary"]
    assert namespace["bwd"]["ok"], namespace["bwd"]["summary"]
