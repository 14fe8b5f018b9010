"""flashsteps.attention_with_kvcache (step 10, common/python/flashsteps_decode.cpp) on PyTorch CUDA
tensors, with flash_attn_with_kvcache's arguments: each sequence's output against the fp64 reference
on the keys it holds (flashsteps.check, the project's rule) and step 08's output on the same problem
(flashsteps.attention) checked alike; a paged cache equal bit for bit to the contiguous one;
the append in place, with and without a rotary embedding (against PyTorch's own rotation);
cache_batch_idx; the errors. Needs PyTorch and a GPU (CTest label gpu)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402

if not hasattr(flashsteps._flashsteps, "_decode"):
    pytest.skip("this build has no step 10", allow_module_level=True)


def rand(*shape, seed, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


def check_rows(out, q, k_cache, v_cache, lens, causal, lse=None):
    """Sequence b of out against the reference on its first lens[b] keys; step 08 on the same problem too."""
    for b, L in enumerate(lens):
        qb, kb, vb = q[b:b + 1], k_cache[b:b + 1, :L], v_cache[b:b + 1, :L]
        if L == 0:  # no key: O = 0, LSE = -inf
            assert torch.all(out[b] == 0)
            if lse is not None:
                assert torch.all(lse[b] == float("-inf"))
            continue
        res = flashsteps.check(out[b:b + 1].cpu(), qb.cpu(), kb.cpu(), vb.cpu(), causal=causal,
                               lse=None if lse is None else lse[b:b + 1].cpu())
        assert res["ok"], f"sequence {b} (L={L}): {res['summary']}"
        if qb.shape[1] <= L:  # step 08 takes the same problem (seqlen_q ≤ seqlen_k)
            o8 = flashsteps.attention(qb, kb.contiguous(), vb.contiguous(), causal=causal)
            res8 = flashsteps.check(o8.cpu(), qb.cpu(), kb.cpu(), vb.cpu(), causal=causal)
            assert res8["ok"], res8["summary"]


@pytest.mark.parametrize("n,H,Hk", [(1, 32, 8), (4, 16, 4), (16, 8, 8)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_matches_the_reference_and_step08(n, H, Hk, causal, d):
    B, S = 3, 3000
    q, kc, vc = rand(B, n, H, d, seed=1), rand(B, S, Hk, d, seed=2), rand(B, S, Hk, d, seed=3)
    lens = [S, 1001, 17]
    out, lse = flashsteps.attention_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                                 causal=causal, return_softmax_lse=True)
    check_rows(out, q, kc, vc, lens, causal, lse)


@pytest.mark.parametrize("page", [16, 256])
def test_paged_equals_contiguous(page):
    B, S, H, Hk, d, n = 2, 2048, 32, 8, 128, 2
    q, kc, vc = rand(B, n, H, d, seed=4), rand(B, S, Hk, d, seed=5), rand(B, S, Hk, d, seed=6)
    lens = torch.tensor([2048, 999], dtype=torch.int32)
    per = S // page
    order = torch.randperm(B * per + 3, generator=torch.Generator().manual_seed(7))[:B * per].cuda()
    pages_k = torch.zeros(B * per + 3, page, Hk, d, dtype=kc.dtype, device="cuda")
    pages_v = torch.zeros_like(pages_k)
    pages_k[order] = kc.reshape(B * per, page, Hk, d)
    pages_v[order] = vc.reshape(B * per, page, Hk, d)
    table = order.reshape(B, per).to(torch.int32)
    for splits in (1, 5):
        want = flashsteps.attention_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True, num_splits=splits)
        got = flashsteps.attention_with_kvcache(q, pages_k, pages_v, cache_seqlens=lens, block_table=table, causal=True,
                                                num_splits=splits)
        assert torch.equal(got, want)


def rotate(x, cos, sin, pos, interleaved):
    """x (..., d) turned at position pos by PyTorch, in float32 (flash_attn's rotary, written out)."""
    rd = 2 * cos.shape[1]
    c, s = cos[pos].float(), sin[pos].float()
    xf = x.float()
    r = xf[..., :rd]
    if interleaved:
        x1, x2 = r[..., 0::2], r[..., 1::2]
        rot = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        x1, x2 = r[..., :rd // 2], r[..., rd // 2:]
        rot = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return torch.cat((rot, xf[..., rd:]), dim=-1)


@pytest.mark.parametrize("rotary", [None, (128, False), (64, True)])
def test_append_in_place(rotary):
    B, S, H, d, n = 2, 600, 8, 128, 1
    Hk = H  # one head per K/V head: q can be the new keys themselves, so that its turn is the cache's
    kc, vc = rand(B, S, Hk, d, seed=8), rand(B, S, Hk, d, seed=9)
    k_new, v_new = rand(B, n, Hk, d, seed=10), rand(B, n, Hk, d, seed=11)
    q = k_new.clone()
    lens = [300, 599]
    kw = {}
    if rotary:
        rd, inter = rotary
        pos = torch.arange(S, device="cuda").float()[:, None]
        theta = pos * 10000.0 ** (-torch.arange(0, rd, 2, device="cuda").float() / rd)
        kw = dict(rotary_cos=theta.cos().to(q.dtype), rotary_sin=theta.sin().to(q.dtype), rotary_interleaved=inter)
    before_k, before_v = kc.clone(), vc.clone()
    out = flashsteps.attention_with_kvcache(q, kc, vc, k=k_new, v=v_new,
                                            cache_seqlens=torch.tensor(lens, dtype=torch.int32), causal=True, **kw)
    for b, L in enumerate(lens):
        assert torch.equal(kc[b, :L], before_k[b, :L]) and torch.equal(kc[b, L + n:], before_k[b, L + n:])
        assert torch.equal(vc[b, L:L + n], v_new[b])
        want = k_new[b].float() if not rotary else rotate(k_new[b], kw["rotary_cos"], kw["rotary_sin"], L, rotary[1])
        # within a bf16 unit of PyTorch's rotation (and float32 rounding where the terms cancel)
        assert torch.all((kc[b, L:L + n].float() - want).abs() <= 2.0 ** -7 * want.abs() + 1e-3)
    # q was the new keys: its turned rows are the cache's new rows, so the reference reads them there.
    q_turned = torch.stack([kc[b, L:L + n] for b, L in enumerate(lens)])
    check_rows(out, q_turned, kc, vc, [L + n for L in lens], True)


def batch_slopes(B, H):
    """ALiBi slopes (B, H) whose rows differ: the standard slopes of H heads turned by b heads, times b + 1/2."""
    standard = torch.as_tensor(flashsteps.alibi_slopes(H))
    return torch.stack([torch.roll(standard, -b) * (b + 0.5) for b in range(B)]).float()


@pytest.mark.parametrize("mods", [dict(window_size=(100, 0)), dict(window_size=(50, 7)), dict(softcap=5.0),
                                  dict(alibi_slopes=True), dict(window_size=(300, -1), softcap=20.0, alibi_slopes=True),
                                  dict(alibi_slopes="rows"), dict(window_size=(300, -1), alibi_slopes="rows")])
@pytest.mark.parametrize("causal", [False, True])
def test_window_softcap_alibi(mods, causal):
    """alibi_slopes=True: the (heads,) slopes; "rows": (batch, heads), sequence b taking row b."""
    B, S, H, Hk, d, n = 2, 2000, 16, 4, 128, 3
    q, kc, vc = rand(B, n, H, d, seed=17), rand(B, S, Hk, d, seed=18), rand(B, S, Hk, d, seed=19)
    lens = [2000, 555]
    if mods.get("alibi_slopes") is True:
        mods = dict(mods, alibi_slopes=torch.tensor(flashsteps.alibi_slopes(H), dtype=torch.float32))
    elif mods.get("alibi_slopes") == "rows":
        mods = dict(mods, alibi_slopes=batch_slopes(B, H))
    out, lse = flashsteps.attention_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                                 causal=causal, return_softmax_lse=True, **mods)
    for b, L in enumerate(lens):
        slopes = mods.get("alibi_slopes")
        one = dict(mods, alibi_slopes=slopes[b:b + 1]) if slopes is not None and slopes.dim() == 2 else mods
        res = flashsteps.check(out[b:b + 1].cpu(), q[b:b + 1].cpu(), kc[b:b + 1, :L].cpu(), vc[b:b + 1, :L].cpu(),
                               causal=causal, lse=lse[b:b + 1].cpu(), **one)
        assert res["ok"], f"sequence {b}: {res['summary']}"


def test_cache_batch_idx():
    B, Bc, S, H, Hk, d = 3, 5, 1000, 16, 4, 64
    q, kc, vc = rand(B, 1, H, d, seed=12), rand(Bc, S, Hk, d, seed=13), rand(Bc, S, Hk, d, seed=14)
    idx = torch.tensor([4, 0, 4], dtype=torch.int32)
    out = flashsteps.attention_with_kvcache(q, kc, vc, cache_seqlens=700, cache_batch_idx=idx)
    check_rows(out, q, kc[idx.long()], vc[idx.long()], [700] * B, False)
    # ALiBi of shape (batch, heads): row b for sequence b of the batch, whichever cache sequence it reads
    # (sequences 0 and 2 read cache sequence 4, with other slopes).
    slopes = batch_slopes(B, H)
    out = flashsteps.attention_with_kvcache(q, kc, vc, cache_seqlens=700, cache_batch_idx=idx, alibi_slopes=slopes)
    for b in range(B):
        c = int(idx[b])
        res = flashsteps.check(out[b:b + 1].cpu(), q[b:b + 1].cpu(), kc[c:c + 1, :700].cpu(), vc[c:c + 1, :700].cpu(),
                               alibi_slopes=slopes[b])
        assert res["ok"], f"sequence {b}: {res['summary']}"


def test_errors():
    q, kc = rand(1, 1, 8, 128, seed=15), rand(1, 100, 2, 128, seed=16)
    cases = [
        (dict(q=q.float(), k_cache=kc.float(), v_cache=kc.float()), TypeError, "bfloat16 or float16"),
        (dict(q=q, k_cache=kc, v_cache=kc, cache_seqlens=101), ValueError, "cache_seqlens"),
        (dict(q=q, k_cache=kc, v_cache=kc, cache_seqlens=torch.tensor([200], dtype=torch.int32)), ValueError,
         "outside 0..100"),
        (dict(q=q, k_cache=kc, v_cache=kc, cache_leftpad=torch.zeros(1)), ValueError, "cache_leftpad"),
        (dict(q=q, k_cache=kc, v_cache=kc, window_size=(-2, 0)), ValueError, "window_size"),
        (dict(q=q, k_cache=kc, v_cache=kc, k=q[:, :, :2]), ValueError, "go together"),
        (dict(q=q, k_cache=kc, v_cache=kc, cache_batch_idx=torch.tensor([3], dtype=torch.int32)), ValueError,
         "outside the cache's 1 sequences"),
        (dict(q=q, k_cache=kc, v_cache=kc, block_table=torch.tensor([[0, 9]], dtype=torch.int32)), ValueError,
         "block_table: an entry 9 outside the cache's 1 blocks"),
        (dict(q=q, k_cache=kc.transpose(1, 2).contiguous().transpose(1, 2), v_cache=kc), ValueError, "contiguous"),
        (dict(q=q, k_cache=kc, v_cache=kc, k=q[:, :, :2], v=q[:, :, :2], cache_seqlens=100), ValueError, "overflows"),
        # ALiBi: (heads,) or (batch, heads), each named when neither is given.
        (dict(q=q, k_cache=kc, v_cache=kc, alibi_slopes=torch.ones(2, 8)), ValueError,
         r"shape \(8,\), or a row of them per batch, \(batch, heads\) = \(1, 8\); got \(2, 8\)"),
        (dict(q=q, k_cache=kc, v_cache=kc, alibi_slopes=torch.ones(8, 1)), ValueError, r"got \(8, 1\)"),
    ]
    for kw, err, text in cases:
        assert text, "an empty pattern matches every message"
        with pytest.raises(err, match=text):
            flashsteps.attention_with_kvcache(**kw)
