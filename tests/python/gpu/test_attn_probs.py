"""return_attn_probs=True in flashsteps.flash_attn_interface (flashsteps.attention_probs, the custom op
flashsteps::attention_probs, common/attn_probs.cuh): S_dmask against a float64 torch computation of
the softmax on the same inputs with every feature; with dropout, its sign bit is the mask the
forward's out was made with (out again from S_dmask, under the project's rule) and, element by
element, the fp64 reference's mask of the same seed; packed sequences in flash_attn's varlen layout;
the refusal past 2^28 entries; opcheck and torch.compile. Needs PyTorch and a GPU (CTest label gpu)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402
from flashsteps import _ops  # noqa: E402
from flashsteps import flash_attn_interface as fai  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def rand(*shape, seed, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


def batch_slopes(B, H):
    """ALiBi slopes (B, H) on the GPU whose rows differ: row b the standard slopes turned by b heads, times b + 1/2."""
    standard = torch.as_tensor(flashsteps.alibi_slopes(H))
    return torch.stack([torch.roll(standard, -b) * (b + 0.5) for b in range(B)]).float().cuda()


def probs64(q, k, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, softmax_scale=None):
    """The softmax of the definition in float64 on the GPU: q (B, Nq, H, d), k (B, Nk, Hk, d) -> P (B, H, Nq, Nk);
    masks aligned to the bottom-right corner, query head h reading K/V head h // (H / Hk); rows without a key 0."""
    q, k = q.double(), k.double()
    B, Nq, H, d = q.shape
    Nk, Hk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(H // Hk, dim=2)
    tau = softmax_scale if softmax_scale is not None else float(np.float32(1) / np.sqrt(np.float32(d)))
    s = torch.einsum("bihd,bjhd->bhij", q, k) * tau
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)
    j = torch.arange(Nk, device=q.device)[None, :]
    if alibi_slopes is not None:
        a = torch.as_tensor(alibi_slopes, device=q.device).double()
        a = a.expand(B, H) if a.dim() == 1 else a
        s = s - a[:, :, None, None] * (i - j).abs()[None, None]
    keep = torch.ones(Nq, Nk, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j <= i
    if window_size[0] >= 0:
        keep &= j >= i - window_size[0]
    if window_size[1] >= 0:
        keep &= j <= i + window_size[1]
    s = s.masked_fill(~keep, -torch.inf)
    p = torch.softmax(s, dim=-1)
    return torch.nan_to_num(p, nan=0.0)  # a row without a key: 0, not NaN


def redo_out(probs, v, p_drop):
    """out from S_dmask: |P| where the sign bit is clear (kept), over 1 - p, times v; float64 (B, Nq, H, d). p as the
    kernels take it, a float32."""
    H, Hk = probs.shape[1], v.shape[2]
    kept = torch.where(torch.signbit(probs), 0.0, probs.double()) / (1.0 - float(np.float32(p_drop)))
    return torch.einsum("bhij,bjhd->bihd", kept, v.double().repeat_interleave(H // Hk, dim=2))


FEATURES = [
    dict(),
    dict(causal=True, Nk=333, Hk=2),                     # bottom-right causal, grouped K/V heads
    dict(causal=True, Nk=100, Hk=1),                     # multi-query, fewer keys: the first rows see none
    dict(window_size=(64, 16)),
    dict(softcap=20.0),
    dict(causal=True, window_size=(32, 0), alibi=True),  # (heads,) slopes
    dict(Nk=333, Hk=2, softcap=20.0, alibi="rows", window_size=(40, 7)),  # (batch, heads): a row per batch
    dict(window_size=(5000, 5000), softmax_scale=0.3),   # wider than the sequence; a scale of its own
]


def features(f, B=2, H=4):
    """The call's keywords, its K/V length and heads."""
    f = dict(f)
    Nk, Hk, alibi = f.pop("Nk", None), f.pop("Hk", None), f.pop("alibi", False)
    if alibi:
        f["alibi_slopes"] = batch_slopes(B, H) if alibi == "rows" else torch.as_tensor(flashsteps.alibi_slopes(H)).cuda()
    return f, Nk, Hk


@pytest.mark.parametrize("feature", FEATURES, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "plain")
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_probabilities_match_float64(feature, dtype):
    """Without dropout S_dmask is the softmax of the call's scores: float32 (batch, heads, seqlen_q, seqlen_k),
    nothing negative, within 1e-4 (+ 1e-3 relative) of float64 on the same inputs; |rows| sum to 1 (0 for a row
    without keys, whose lse is -inf); out and lse are the call's without return_attn_probs; S_dmask needs no grad."""
    kw, Nk, Hk = features(feature)
    B, N, H, d = 2, 255, 4, 64
    t = DTYPES[dtype]
    q = rand(B, N, H, d, seed=1, dtype=t).requires_grad_()
    k, v = rand(B, Nk or N, Hk or H, d, seed=2, dtype=t), rand(B, Nk or N, Hk or H, d, seed=3, dtype=t)
    out, lse, probs = fai.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    assert probs.dtype == torch.float32 and probs.shape == (B, H, N, Nk or N) and probs.is_contiguous()
    assert not probs.requires_grad and out.requires_grad
    assert not torch.signbit(probs).any()
    want = probs64(q.detach(), k, **kw)
    torch.testing.assert_close(probs.double(), want, atol=1e-4, rtol=1e-3)
    sums = probs.double().sum(-1)
    seen = torch.isfinite(lse)
    torch.testing.assert_close(sums[seen], torch.ones_like(sums[seen]), atol=1e-3, rtol=0)
    assert torch.all(sums[~seen] == 0)
    assert torch.equal(out, fai.flash_attn_func(q, k, v, **kw))
    out.sum().backward()  # out stays differentiable beside S_dmask
    assert q.grad is not None


DROPOUT = [
    dict(),
    dict(causal=True, Nk=333, Hk=2),
    dict(causal=True, Nk=100, Hk=1, window_size=(30, 2)),
    dict(Nk=333, Hk=2, softcap=20.0, alibi="rows", window_size=(40, 7)),
]


@pytest.mark.parametrize("feature", DROPOUT, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "plain")
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_dropout_signs_are_the_mask_of_out(feature, dtype):
    """With dropout, S_dmask's sign bit is the mask the forward used: out made again from S_dmask (|P| where kept,
    over 1 - p, times v) passes the fp64 reference's check with that dropout, and is as close to the kernel's
    out as the two are to the reference; the sign bits equal the fp64 reference's S_dmask's of the same seed
    (seed 1, flash_attn_interface's) element by element; |S_dmask| is the probabilities without dropout."""
    kw, Nk, Hk = features(feature)
    B, N, H, d, p = 2, 255, 4, 64, 0.2
    t = DTYPES[dtype]
    q, k, v = rand(B, N, H, d, seed=4, dtype=t), rand(B, Nk or N, Hk or H, d, seed=5, dtype=t), \
        rand(B, Nk or N, Hk or H, d, seed=6, dtype=t)
    out, lse, probs = fai.flash_attn_func(q, k, v, dropout_p=p, return_attn_probs=True, **kw)
    plain = fai.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[2]
    torch.testing.assert_close(probs.abs(), plain, atol=1e-6, rtol=1e-5)
    dropped = torch.signbit(probs).double().mean().item()
    assert abs(dropped - p) < 0.02, dropped
    # The fp64 reference's S_dmask of the same call: the very same signs, and the values.
    ref_kw = {key: (val.cpu() if torch.is_tensor(val) else val) for key, val in kw.items()}
    cpu = [x.cpu() for x in (q, k, v)]
    ref_out, _, ref_probs = flashsteps.reference(*cpu, dropout_p=p, seed=1, return_attn_probs=True, **ref_kw)
    assert torch.equal(torch.signbit(probs).cpu(), torch.from_numpy(np.signbit(ref_probs)))
    torch.testing.assert_close(probs.double().cpu(), torch.from_numpy(ref_probs), atol=1e-4, rtol=1e-3)
    # out again from S_dmask, held to the reference of that dropout by the project's rule, and to the kernel's out.
    again = redo_out(probs, v, p)
    mine = flashsteps.check(again.float().cpu(), *cpu, dropout_p=p, seed=1, **ref_kw)
    assert mine["ok"], mine["summary"]
    theirs = flashsteps.check(out.cpu(), *cpu, dropout_p=p, seed=1, **ref_kw)
    assert theirs["ok"], theirs["summary"]
    err = {c["name"]: c for c in theirs["tensors"]}["O"]
    err_again = {c["name"]: c for c in mine["tensors"]}["O"]["err"]
    assert (out.double() - again).abs().max().item() <= err["tol"] + err_again


def test_probabilities_of_another_seed():
    """flashsteps.attention and attention_probs with a seed of their own: the mask of that seed (the reference's),
    not seed 1's."""
    B, N, H, d, p = 1, 130, 2, 64, 0.3
    q, k, v = (rand(B, N, H, d, seed=s) for s in (7, 8, 9))
    out, lse = flashsteps.attention(q, k, v, dropout_p=p, seed=12345, causal=True, return_lse=True)
    probs = flashsteps.attention_probs(q, k, lse, dropout_p=p, seed=12345, causal=True)
    ref = flashsteps.reference(*(x.cpu() for x in (q, k, v)), dropout_p=p, seed=12345, causal=True,
                               return_attn_probs=True)[2]
    assert torch.equal(torch.signbit(probs).cpu(), torch.from_numpy(np.signbit(ref)))
    seed1 = flashsteps.attention_probs(q, k, lse, dropout_p=p, seed=1, causal=True)
    assert (torch.signbit(seed1) != torch.signbit(probs)).double().mean().item() > 0.2
    mine = flashsteps.check(redo_out(probs, v, p).float().cpu(), *(x.cpu() for x in (q, k, v)), dropout_p=p,
                            seed=12345, causal=True)
    assert mine["ok"], mine["summary"]


LENS_Q = [100, 1, 37, 0, 64, 50]
LENS_K = [100, 70, 3, 20, 90, 0]


@pytest.mark.parametrize("feature", [dict(), dict(causal=True, window_size=(40, 7), softcap=20.0, alibi="rows")],
                         ids=["plain", "everything"])
def test_packed_sequences(feature):
    """flash_attn_varlen_func(return_attn_probs=True): S_dmask (sequences, heads, max_seqlen_q, max_seqlen_k),
    sequence b's probabilities in its corner (its own separate call's, and the reference's signs with dropout,
    indexed by token), zero past it; softmax_lse (heads, total_q)."""
    H, Hk, d, p = 4, 2, 64, 0.15
    kw = dict(feature)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = batch_slopes(len(LENS_Q), H)
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(LENS_Q)]), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(LENS_K)]), dtype=torch.int32, device="cuda")
    q, k, v = rand(sum(LENS_Q), H, d, seed=10), rand(sum(LENS_K), Hk, d, seed=11), rand(sum(LENS_K), Hk, d, seed=12)
    out, lse, probs = fai.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LENS_Q), max(LENS_K), dropout_p=p,
                                                 return_attn_probs=True, **kw)
    assert probs.shape == (len(LENS_Q), H, max(LENS_Q), max(LENS_K)) and lse.shape == (H, sum(LENS_Q))
    ref_kw = {key: (val.cpu() if torch.is_tensor(val) else val) for key, val in kw.items()}
    ref_out, _, ref_probs = flashsteps.reference(q.cpu(), k.cpu(), v.cpu(), dropout_p=p, seed=1,
                                                 cu_seqlens_q=cu_q.cpu(), cu_seqlens_k=cu_k.cpu(),
                                                 return_attn_probs=True, **ref_kw)
    assert torch.equal(torch.signbit(probs).cpu(), torch.from_numpy(np.signbit(ref_probs)))
    torch.testing.assert_close(probs.double().cpu(), torch.from_numpy(ref_probs), atol=1e-4, rtol=1e-3)
    again = torch.zeros(q.shape, dtype=torch.float64, device="cuda")
    for b in range(len(LENS_Q)):
        nq, nk = LENS_Q[b], LENS_K[b]
        assert not probs[b, :, nq:].any() and not probs[b, :, :, nk:].any()  # past the sequence: zero
        if nq == 0 or nk == 0:
            continue
        sq, sk = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        one = dict(kw)
        if "alibi_slopes" in one:
            one["alibi_slopes"] = kw["alibi_slopes"][b]
        alone = fai.flash_attn_func(q[None, sq], k[None, sk], v[None, sk], return_attn_probs=True, **one)[2]
        torch.testing.assert_close(probs[b, :, :nq, :nk].abs(), alone[0], atol=1e-6, rtol=1e-5)
        again[sq] = redo_out(probs[None, b, :, :nq, :nk], v[None, sk], p)[0]
    mine = flashsteps.check(again.float().cpu(), q.cpu(), k.cpu(), v.cpu(), dropout_p=p, seed=1,
                            cu_seqlens_q=cu_q.cpu(), cu_seqlens_k=cu_k.cpu(), **ref_kw)
    assert mine["ok"], mine["summary"]


def test_past_the_limit_is_refused():
    """More than 2^28 entries (batch·heads·seqlen_q·seqlen_k): ValueError naming the limit, before the forward runs
    (the last launch is still the call before)."""
    q = rand(1, 16385, 1, 64, seed=13)
    k = rand(1, 16384, 1, 64, seed=14)
    flashsteps.attention(q[:, :8], k[:, :8], k[:, :8])
    before = flashsteps._last_launch()
    with pytest.raises(ValueError, match=r"limit of 2\^28"):
        fai.flash_attn_func(q, k, k, return_attn_probs=True)
    assert flashsteps._last_launch() == before
    with pytest.raises(ValueError, match=r"limit of 2\^28"):
        flashsteps.attention_probs(q, k, torch.zeros(1, 1, 16385, device="cuda"))
    assert fai.flash_attn_func(q[:, :16384], k, k, return_attn_probs=True)[2].shape == (1, 1, 16384, 16384)  # at it


def test_opcheck_attention_probs():
    """The op's schema, autograd registration (non-differentiable), fake against real, AOT dispatch."""
    B, N, H, d = 2, 130, 4, 64
    q = rand(B, N, H, d, seed=15).requires_grad_()
    k = rand(B, 150, 2, d, seed=16).requires_grad_()
    v = rand(B, 150, 2, d, seed=17)
    _, lse = flashsteps.attention(q, k, v, dropout_p=0.1, causal=True, window_size=(20, 3), return_lse=True)
    torch.library.opcheck(_ops.probs_op, (q, k, lse, batch_slopes(B, H), None, None, True, None, 20, 3, 10.0, 0.1, 1,
                                          None, None))
    cu = torch.tensor([0, 60, 60, 130], dtype=torch.int32, device="cuda")
    qp, kp = rand(130, H, d, seed=18), rand(130, 2, d, seed=19)
    _, lse = flashsteps.attention_varlen(qp, kp, kp, cu, cu, 70, 70, causal=True, return_lse=True)
    torch.library.opcheck(_ops.probs_op, (qp, kp, lse, None, cu, cu, True, None, -1, -1, 0.0, 0.0, 1, 70, 70))


def test_compiled_call_returns_the_same_probabilities():
    """flash_attn_func(return_attn_probs=True) under torch.compile(fullgraph=True): no graph break, and the eager
    call's out, lse and S_dmask bit for bit (the same kernels on the same inputs)."""
    torch._dynamo.reset()
    q, k, v = rand(2, 200, 4, 64, seed=20), rand(2, 150, 2, 64, seed=21), rand(2, 150, 2, 64, seed=22)

    def call(q, k, v):
        return fai.flash_attn_func(q, k, v, dropout_p=0.1, causal=True, softcap=20.0, return_attn_probs=True)

    compiled = torch.compile(call, fullgraph=True)
    for got, want in zip(compiled(q, k, v), call(q, k, v)):
        assert torch.equal(got, want)
    torch._dynamo.reset()
