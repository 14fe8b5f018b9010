"""The Python module's reference (common/python/flashsteps.cpp) against attention written here in
NumPy float64 from its definition: flash_attn_func's layout, masks aligned to the bottom-right
corner, GQA, windows, ALiBi, softcap, packed sequences; and the module's errors and zero-copy reads."""
import numpy as np
import pytest

import flashsteps

RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi=None, scale=None, with_p=False):
    """out (B, Nq, H, d), lse (B, H, Nq) and the gradient function, in float64, from the definition
    (with_p: and P (B, H, Nq, Nk), the probabilities)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, Nq, H, d = q.shape
    Nk, Hk = k.shape[1], k.shape[2]
    g = H // Hk
    k = np.repeat(k, g, axis=2)  # query head h reads K/V head h // g
    v = np.repeat(v, g, axis=2)
    tau = scale if scale is not None else float(np.float32(1) / np.sqrt(np.float32(d)))  # the kernels' float32 1/√d
    raw = np.einsum("bihd,bjhd->bhij", q, k) * tau
    s = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    i = np.arange(Nq)[:, None] + (Nk - Nq)  # bottom-right alignment: query i sits at key i + Nk - Nq
    j = np.arange(Nk)[None, :]
    if alibi is not None:  # (H,): every batch's; (B, H): row b for batch b
        a = np.asarray(alibi, np.float64)
        a = np.broadcast_to(a, (B, H)) if a.ndim == 1 else a
        s = s - a[:, :, None, None] * np.abs(i - j)[None, None]
    keep = np.ones((Nq, Nk), bool)
    if causal:
        keep &= j <= i
    if window[0] >= 0:
        keep &= j >= i - window[0]
    if window[1] >= 0:
        keep &= j <= i + window[1]
    s = np.where(keep[None, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, l, out=np.zeros_like(e), where=l > 0)
    out = np.einsum("bhij,bjhd->bihd", p, v)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, m[..., 0] + np.log(l[..., 0]), -np.inf)

    def grads(dout):
        dout = dout.astype(np.float64)
        dv = np.einsum("bhij,bihd->bjhd", p, dout)
        dp = np.einsum("bihd,bjhd->bhij", dout, v)
        ds = p * (dp - (dout * out).sum(-1).transpose(0, 2, 1)[..., None])
        if softcap > 0:
            ds = ds * (1 - np.tanh(raw / softcap) ** 2)
        dq = np.einsum("bhij,bjhd->bihd", ds, k) * tau
        dk = np.einsum("bhij,bihd->bjhd", ds, q) * tau
        fold = lambda x: x.reshape(B, Nk, Hk, g, d).sum(axis=3)  # a group's heads add up
        return dq, fold(dk), fold(dv)

    return (out, lse, grads, p) if with_p else (out, lse, grads)


def batch_slopes(B, H):
    """ALiBi slopes (B, H) whose rows differ: row b is the standard slopes turned by b heads, times b + 1/2."""
    standard = flashsteps.alibi_slopes(H)
    return np.stack([np.roll(standard, -b) * np.float32(b + 0.5) for b in range(B)]).astype(np.float32)


CASES = [
    dict(),
    dict(causal=True),
    dict(causal=True, nk=23),  # N_q < N_k: causal from the bottom-right corner
    dict(causal=True, nk=5),   # N_q > N_k: the first queries see no key (O = 0, LSE = -inf)
    dict(hk=1),                # MQA
    dict(hk=2, causal=True),   # GQA
    dict(window=(3, 2)),
    dict(window=(4, 0), nk=20),
    dict(window=(100, 100)),   # wider than N
    dict(softcap=2.5),
    dict(alibi=True, causal=True),
    dict(alibi="rows", causal=True, nk=23),  # (batch, heads): a row per batch
    dict(alibi="rows", window=(3, 2), softcap=2.5),
    dict(scale=float(np.float32(0.3))),  # the scale the kernels take is a float32
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_forward_and_backward_match_numpy(case):
    B, Nq, H, d = 2, 17, 4, 16
    Nk, Hk = case.get("nk", Nq), case.get("hk", H)
    q, k, v, dout = randn(B, Nq, H, d), randn(B, Nk, Hk, d), randn(B, Nk, Hk, d), randn(B, Nq, H, d)
    slopes = (batch_slopes(B, H) if case.get("alibi") == "rows" else flashsteps.alibi_slopes(H) if case.get("alibi")
              else None)
    kw = dict(causal=case.get("causal", False), window_size=case.get("window", (-1, -1)), softcap=case.get("softcap", 0.0),
              alibi_slopes=slopes, softmax_scale=case.get("scale"))
    want_o, want_lse, grads = attention(q, k, v, case.get("causal", False), case.get("window", (-1, -1)),
                                        case.get("softcap", 0.0), slopes, case.get("scale"))
    out, lse = flashsteps.reference(q, k, v, **kw)
    assert out.dtype == np.float64 and out.shape == q.shape and lse.shape == (B, H, Nq)
    np.testing.assert_allclose(out, want_o, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(want_lse))
    fin = np.isfinite(want_lse)
    np.testing.assert_allclose(lse[fin], want_lse[fin], rtol=1e-10, atol=1e-12)
    dq, dk, dv = flashsteps.reference_backward(q, k, v, dout, **kw)
    for got, want in zip((dq, dk, dv), grads(dout)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


def test_packed_sequences_equal_separate_runs():
    lens_q, lens_k = [5, 0, 9, 1], [7, 3, 9, 0]  # an empty sequence of each kind
    H, Hk, d = 4, 2, 8
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(cu_q[-1], H, d), randn(cu_k[-1], Hk, d), randn(cu_k[-1], Hk, d)
    dout = randn(cu_q[-1], H, d)
    out, lse = flashsteps.reference(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    dq, dk, dv = flashsteps.reference_backward(q, k, v, dout, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert out.shape == q.shape and lse.shape == (H, cu_q[-1])
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lens_q[b] == 0:
            continue
        if lens_k[b] == 0:  # no key at all: O = 0, LSE = -inf, no gradient
            assert np.all(out[sq] == 0) and np.all(np.isneginf(lse[:, sq])) and np.all(dq[sq] == 0)
            continue
        o1, l1, grads = attention(q[None, sq], k[None, sk], v[None, sk], causal=True)
        np.testing.assert_allclose(out[sq], o1[0], rtol=1e-10, atol=1e-12)
        fin = np.isfinite(l1[0])
        np.testing.assert_allclose(lse[:, sq][fin], l1[0][fin], rtol=1e-10, atol=1e-12)
        g = grads(dout[None, sq])
        np.testing.assert_allclose(dq[sq], g[0][0], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(dk[sk], g[1][0], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(dv[sk], g[2][0], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("alibi", [None, "heads", "rows"])
def test_packed_sequences_with_alibi_equal_separate_runs(alibi):
    """ALiBi with packed sequences: (heads,) slopes for every sequence, or (sequences, heads), sequence b taking
    row b (flash_attn_varlen_func's batch is the sequences)."""
    lens_q, lens_k = [5, 0, 9, 4], [7, 3, 9, 2]
    H, Hk, d = 4, 2, 8
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(cu_q[-1], H, d), randn(cu_k[-1], Hk, d), randn(cu_k[-1], Hk, d)
    dout = randn(cu_q[-1], H, d)
    slopes = {None: None, "heads": flashsteps.alibi_slopes(H), "rows": batch_slopes(len(lens_q), H)}[alibi]
    kw = dict(window_size=(4, 1), alibi_slopes=slopes, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    out, lse = flashsteps.reference(q, k, v, **kw)
    dq, dk, dv = flashsteps.reference_backward(q, k, v, dout, **kw)
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lens_q[b] == 0:
            continue
        row = None if slopes is None else slopes[b] if slopes.ndim == 2 else slopes
        o1, l1, grads = attention(q[None, sq], k[None, sk], v[None, sk], window=(4, 1), alibi=row)
        np.testing.assert_allclose(out[sq], o1[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(lse[:, sq], l1[0], rtol=1e-10, atol=1e-12)
        g = grads(dout[None, sq])
        np.testing.assert_allclose(dq[sq], g[0][0], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(dk[sk], g[1][0], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(dv[sk], g[2][0], rtol=1e-9, atol=1e-11)


def test_alibi_rows_that_are_equal_give_the_per_head_form_exactly():
    """(batch, heads) slopes whose rows are all the (heads,) slopes: the same bits, forward, backward and check."""
    q, k, v, dout = randn(3, 11, 4, 8), randn(3, 13, 2, 8), randn(3, 13, 2, 8), randn(3, 11, 4, 8)
    heads = flashsteps.alibi_slopes(4)
    rows = np.tile(heads, (3, 1))
    kw = dict(causal=True, window_size=(5, -1))
    a, b = flashsteps.reference(q, k, v, alibi_slopes=heads, **kw), flashsteps.reference(q, k, v, alibi_slopes=rows, **kw)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    for x, y in zip(flashsteps.reference_backward(q, k, v, dout, alibi_slopes=heads, **kw),
                    flashsteps.reference_backward(q, k, v, dout, alibi_slopes=rows, **kw)):
        np.testing.assert_array_equal(x, y)
    out = a[0].astype(np.float32)
    assert flashsteps.check(out, q, k, v, alibi_slopes=rows, **kw)["ok"]
    # And rows that differ are not the (heads,) form: batch 0 alike, the others not.
    other = batch_slopes(3, 4)
    c = flashsteps.reference(q, k, v, alibi_slopes=other, **kw)[0]
    np.testing.assert_array_equal(c[0], flashsteps.reference(q[:1], k[:1], v[:1], alibi_slopes=other[0], **kw)[0][0])
    assert not np.allclose(c[1:], flashsteps.reference(q, k, v, alibi_slopes=other[0], **kw)[0][1:])
    assert not flashsteps.check(out, q, k, v, alibi_slopes=other, **kw)["ok"]


def test_strided_and_16_bit_inputs_read_in_place():
    q, k, v = randn(1, 9, 2, 8), randn(1, 9, 2, 8), randn(1, 9, 2, 8)
    assert flashsteps._address(q) == q.ctypes.data  # DLPack hands over the array's own memory
    view = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # same values, other strides
    assert not view.flags.c_contiguous and flashsteps._address(view) == view.ctypes.data
    np.testing.assert_array_equal(flashsteps.reference(view, k, v)[0], flashsteps.reference(q, k, v)[0])
    h = [x.astype(np.float16) for x in (q, k, v)]
    np.testing.assert_array_equal(flashsteps.reference(*h)[0], flashsteps.reference(*[x.astype(np.float32) for x in h])[0])


def test_dropout_is_the_seeded_mask():
    q, k, v = randn(1, 33, 2, 16), randn(1, 33, 2, 16), randn(1, 33, 2, 16)
    plain = flashsteps.reference(q, k, v)[0]
    a = flashsteps.reference(q, k, v, dropout_p=0.2, seed=5)[0]
    np.testing.assert_array_equal(a, flashsteps.reference(q, k, v, dropout_p=0.2, seed=5)[0])
    assert not np.allclose(a, plain) and not np.allclose(a, flashsteps.reference(q, k, v, dropout_p=0.2, seed=6)[0])
    np.testing.assert_array_equal(flashsteps.reference(q, k, v, dropout_p=0.0, seed=5)[0], plain)


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_attention_probabilities_match_numpy(case):
    """return_attn_probs=True: S_dmask (batch, heads, seqlen_q, seqlen_k) float64 is the softmax of the
    definition (0 where masked), beside the same out and lse."""
    B, Nq, H, d = 2, 17, 4, 16
    Nk, Hk = case.get("nk", Nq), case.get("hk", H)
    q, k, v = randn(B, Nq, H, d), randn(B, Nk, Hk, d), randn(B, Nk, Hk, d)
    slopes = (batch_slopes(B, H) if case.get("alibi") == "rows" else flashsteps.alibi_slopes(H) if case.get("alibi")
              else None)
    kw = dict(causal=case.get("causal", False), window_size=case.get("window", (-1, -1)), softcap=case.get("softcap", 0.0),
              alibi_slopes=slopes, softmax_scale=case.get("scale"))
    *_, want = attention(q, k, v, case.get("causal", False), case.get("window", (-1, -1)), case.get("softcap", 0.0),
                         slopes, case.get("scale"), with_p=True)
    out, lse, probs = flashsteps.reference(q, k, v, return_attn_probs=True, **kw)
    assert probs.dtype == np.float64 and probs.shape == (B, H, Nq, Nk)
    np.testing.assert_allclose(probs, want, rtol=1e-10, atol=1e-13)
    assert not np.signbit(probs).any()  # no dropout: nothing negative, not even -0
    o2, l2 = flashsteps.reference(q, k, v, **kw)
    np.testing.assert_array_equal(out, o2)
    np.testing.assert_array_equal(lse, l2)


def redo_out(probs, v, p_drop):
    """out from S_dmask: |P| where kept (sign bit clear), over 1 - p, times v (B, Nk, Hk, d); float64. p as the
    reference and the kernels take it, a float32."""
    H, Hk = probs.shape[1], v.shape[2]
    kept = np.where(np.signbit(probs), 0.0, probs) / (1.0 - float(np.float32(p_drop)))
    return np.einsum("bhij,bjhd->bihd", kept, np.repeat(v.astype(np.float64), H // Hk, axis=2))


@pytest.mark.parametrize("case", [dict(), dict(causal=True, nk=23, hk=2, window=(6, 1), softcap=2.5, alibi="rows"),
                                  dict(causal=True, nk=5)], ids=["plain", "everything", "keyless rows"])
def test_attention_probabilities_carry_the_dropout_mask(case):
    """With dropout, S_dmask's sign bit is the mask the forward applied: out is |P| where the sign bit is clear,
    over 1 - p, times v; |S_dmask| is the probabilities without dropout, bit for bit; about p of them dropped;
    another seed, another mask."""
    B, Nq, H, d, p = 2, 17, 4, 16, 0.3
    Nk, Hk = case.get("nk", Nq), case.get("hk", H)
    q, k, v = randn(B, Nq, H, d), randn(B, Nk, Hk, d), randn(B, Nk, Hk, d)
    kw = dict(causal=case.get("causal", False), window_size=case.get("window", (-1, -1)),
              softcap=case.get("softcap", 0.0), alibi_slopes=batch_slopes(B, H) if case.get("alibi") else None)
    out, _, probs = flashsteps.reference(q, k, v, dropout_p=p, seed=11, return_attn_probs=True, **kw)
    np.testing.assert_allclose(redo_out(probs, v, p), out, rtol=1e-10, atol=1e-12)
    plain = flashsteps.reference(q, k, v, return_attn_probs=True, **kw)[2]
    np.testing.assert_array_equal(np.abs(probs), plain)
    dropped = np.signbit(probs).mean()
    assert abs(dropped - p) < 0.05, dropped
    other = flashsteps.reference(q, k, v, dropout_p=p, seed=12, return_attn_probs=True, **kw)[2]
    assert (np.signbit(other) != np.signbit(probs)).mean() > 0.2


def test_attention_probabilities_of_packed_sequences():
    """Packed: S_dmask (sequences, heads, longest queries, longest keys), sequence b's P in its corner (the
    separate run's, without dropout), zero past it; with dropout its sign is the mask that gave out."""
    lens_q, lens_k = [5, 0, 9, 3, 4], [7, 3, 9, 0, 2]
    H, Hk, d, p = 4, 2, 8, 0.25
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(cu_q[-1], H, d), randn(cu_k[-1], Hk, d), randn(cu_k[-1], Hk, d)
    slopes = batch_slopes(len(lens_q), H)
    kw = dict(causal=True, window_size=(4, 1), alibi_slopes=slopes, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    _, _, probs = flashsteps.reference(q, k, v, return_attn_probs=True, **kw)
    out, _, dropped = flashsteps.reference(q, k, v, dropout_p=p, seed=3, return_attn_probs=True, **kw)
    assert probs.shape == dropped.shape == (len(lens_q), H, max(lens_q), max(lens_k))
    np.testing.assert_array_equal(np.abs(dropped), probs)
    for b in range(len(lens_q)):
        nq, nk = lens_q[b], lens_k[b]
        assert not probs[b, :, nq:].any() and not probs[b, :, :, nk:].any()  # past the sequence: zero
        assert not np.signbit(dropped[b, :, nq:]).any() and not np.signbit(dropped[b, :, :, nk:]).any()
        if nq == 0 or nk == 0:
            continue
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        *_, want = attention(q[None, sq], k[None, sk], v[None, sk], causal=True, window=(4, 1), alibi=slopes[b],
                             with_p=True)
        np.testing.assert_allclose(probs[b, :, :nq, :nk], want[0], rtol=1e-10, atol=1e-13)
        redo = redo_out(dropped[None, b, :, :nq, :nk], v[None, sk], p)[0]
        np.testing.assert_allclose(redo, out[sq], rtol=1e-10, atol=1e-12)


def test_attention_probabilities_past_the_limit_are_refused():
    """2^28 entries at most (batch·heads·seqlen_q·seqlen_k), refused before anything is computed."""
    x = randn(1, 16385, 1, 1)
    with pytest.raises(ValueError, match=r"2\^28"):
        flashsteps.reference(x, x, x, return_attn_probs=True)


def test_alibi_slopes_are_the_geometric_ones():
    np.testing.assert_allclose(flashsteps.alibi_slopes(8), 2.0 ** (-np.arange(1, 9)), rtol=1e-7)


@pytest.mark.parametrize("call, error, words", [
    (lambda q, k, v: flashsteps.reference(q[0], k, v), ValueError, "expected (batch, seqlen, heads, head_dim)"),
    (lambda q, k, v: flashsteps.reference(q.astype(np.float64), k, v), TypeError, "float64"),
    (lambda q, k, v: flashsteps.reference(q, np.concatenate([k, k[:, :, :1]], 2), np.concatenate([v, v[:, :, :1]], 2)),
     ValueError, "multiple"),
    (lambda q, k, v: flashsteps.reference(q, k, v[:, :4]), ValueError, "does not match"),
    (lambda q, k, v: flashsteps.reference(q, k, v, cu_seqlens_q=np.array([0, 5], np.int32)), ValueError, "go together"),
    (lambda q, k, v: flashsteps.reference(q.tolist(), k, v), TypeError, "__dlpack__"),
    (lambda q, k, v: flashsteps.reference(q, k, v, dropout_p=1.0), ValueError, "dropout_p"),
    (lambda q, k, v: flashsteps.reference(q, k, v, alibi_slopes=np.ones(3, np.float32)), ValueError, "one slope per head"),
    # (batch, heads) of another batch, transposed, 3-D: each refused naming the two shapes it takes.
    (lambda q, k, v: flashsteps.reference(q, k, v, alibi_slopes=np.ones((2, 4), np.float32)), ValueError,
     "shape (4,), or a row of them per batch, (batch, heads) = (1, 4); got (2, 4)"),
    (lambda q, k, v: flashsteps.reference(q, k, v, alibi_slopes=np.ones((4, 1), np.float32)), ValueError, "got (4, 1)"),
    (lambda q, k, v: flashsteps.reference(q, k, v, alibi_slopes=np.ones((1, 1, 4), np.float32)), ValueError,
     "got (1, 1, 4)"),
    (lambda q, k, v: flashsteps.reference(q[0], k[0], v[0], alibi_slopes=np.ones((1, 4), np.float32),
                                          cu_seqlens_q=np.array([0, 3, 7], np.int32), cu_seqlens_k=np.array([0, 4, 7], np.int32)),
     ValueError, "a row of them per sequence, (sequences, heads) = (2, 4); got (1, 4)"),
    (lambda q, k, v: flashsteps.reference(q, k, v, alibi_slopes=np.array([[0.5, 0.25, np.inf, 1]], np.float32)), ValueError,
     "the slope of head 2 of batch 0 is not finite"),
    (lambda q, k, v: flashsteps.reference_backward(q, k, v, q[:, :3]), ValueError, "dout"),
])
def test_bad_input_raises_one_clear_error(call, error, words):
    q, k, v = randn(1, 7, 4, 8), randn(1, 7, 2, 8), randn(1, 7, 2, 8)
    with pytest.raises(error) as info:
        call(q, k, v)
    assert words in str(info.value)


def test_check_passes_a_faithful_kernel_and_fails_a_wrong_one():
    q, k, v = randn(2, 33, 4, 16), randn(2, 40, 2, 16), randn(2, 40, 2, 16)
    out, lse = flashsteps.reference(q, k, v, causal=True)
    good = flashsteps.check(out.astype(np.float32), q, k, v, lse=lse.astype(np.float32), causal=True)
    assert good["ok"] and [t["name"] for t in good["tensors"]] == ["O", "LSE"] and "ok" in good["summary"]
    bad_out = out.astype(np.float32)
    bad_out[1, 7, 3, 5] += 1e-3
    bad = flashsteps.check(bad_out, q, k, v, causal=True)
    assert not bad["ok"] and abs(bad["tensors"][0]["err"] - 1e-3) < 1e-6 and "FAIL" in bad["summary"]
    # the masks count: the same output is wrong for attention that is not causal
    assert not flashsteps.check(out.astype(np.float32), q, k, v)["ok"]


def test_check_takes_16_bit_kernels_at_their_rounding():
    q, k, v = (randn(1, 65, 2, 32).astype(np.float16) for _ in range(3))
    out, _ = flashsteps.reference(q, k, v)
    assert flashsteps.check(out.astype(np.float16), q, k, v)["ok"]  # one rounding of the exact answer
    worse = (out.astype(np.float16).astype(np.float32) * 1.01).astype(np.float16)
    assert not flashsteps.check(worse, q, k, v)["ok"]


def test_check_backward():
    q, k, v, dout = randn(1, 17, 4, 8), randn(1, 17, 2, 8), randn(1, 17, 2, 8), randn(1, 17, 4, 8)
    dq, dk, dv = (g.astype(np.float32) for g in flashsteps.reference_backward(q, k, v, dout, window_size=(4, 4)))
    r = flashsteps.check_backward(dq, dk, dv, q, k, v, dout, window_size=(4, 4))
    assert r["ok"] and [t["name"] for t in r["tensors"]] == ["dQ", "dK", "dV"]
    dk[0, 3, 1, 2] *= 1.5
    r = flashsteps.check_backward(dq, dk, dv, q, k, v, dout, window_size=(4, 4))
    assert not r["ok"] and [t["ok"] for t in r["tensors"]] == [True, False, True]
    with pytest.raises(ValueError, match="dK: shape"):
        flashsteps.check_backward(dq, dq, dv, q, k, v, dout)


def test_check_measures_the_plain_float32_implementation_it_returns():
    q, k, v = (randn(1, 50, 2, 32).astype(np.float16) for _ in range(3))
    exact, _ = flashsteps.reference(q, k, v, causal=True)
    plain, _ = flashsteps.reference(q, k, v, causal=True, plain=True)
    err_fp32 = np.abs(plain - exact).max()
    assert 0 < err_fp32 < 1e-2  # a 16-bit kernel's roundings: P and O in fp16
    assert np.all(plain.astype(np.float16).astype(np.float64) == plain)  # O rounded to the kernel's dtype
    r = flashsteps.check(exact.astype(np.float16), q, k, v, causal=True)
    assert r["tensors"][0]["err_fp32"] == pytest.approx(err_fp32, rel=0, abs=0)
