"""flashsteps' kernels as PyTorch custom ops (flashsteps/_ops.py) under torch.compile and in CUDA
graphs: torch.library.opcheck on the three ops (schema, autograd registration, the fake outputs'
sizes and strides against the real ones, AOT dispatch); a small transformer block (linear, reshape,
flashsteps.attention, linear) compiled with fullgraph=True, forward and backward, against eager, with
no graph break (torch._dynamo.explain) and the ops in the forward and backward graphs; packed
sequences and decoding compiled too; and CUDA graphs (torch.cuda.graph) of attention's forward and
backward, of packed sequences and of a decoding step, replayed on new inputs and compared with eager
calls on the same inputs. Needs PyTorch and a GPU (CTest label gpu)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402
from flashsteps import _ops  # noqa: E402

HAS_DECODE = hasattr(flashsteps._flashsteps, "_decode")
needs_decode = pytest.mark.skipif(not HAS_DECODE, reason="this build has no step 10")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def rand(*shape, seed, dtype=torch.bfloat16, requires_grad=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype).requires_grad_(requires_grad)


# The ops' settings after the tensors, in their schemas' order (flashsteps/__init__.py builds them so).
def settings(step="08", variant="deterministic", causal=True, softmax_scale=None, window=(-1, -1), softcap=0.0,
             dropout_p=0.0, seed=1, max_seqlen_q=None, max_seqlen_k=None):
    return (step, variant, causal, softmax_scale, window[0], window[1], softcap, dropout_p, seed, max_seqlen_q,
            max_seqlen_k)


# ----------------------------------------------------------------------------------------------
# opcheck: schema, autograd registration, fake against real (sizes, strides, dtype), AOT dispatch.
# The deterministic variants, so that AOT's run and eager's compare bit for bit.

OPCHECK_FORWARD = [
    dict(shape=(2, 200, 4, 64), Hk=2, Nk=150, kw=settings()),
    dict(shape=(1, 130, 2, 128), kw=settings(window=(40, 8), softcap=20.0, dropout_p=0.1, seed=7)),
    dict(shape=(2, 64, 2, 64), dtype=torch.float32, kw=settings(step="05")),
]


@pytest.mark.parametrize("case", OPCHECK_FORWARD, ids=["gqa", "features", "fp32-step05"])
def test_opcheck_attention_forward(case):
    B, N, H, d = case["shape"]
    dtype = case.get("dtype", torch.bfloat16)
    Nk, Hk = case.get("Nk", N), case.get("Hk", H)
    q = rand(B, N, H, d, seed=1, dtype=dtype, requires_grad=True)
    k, v = rand(B, Nk, Hk, d, seed=2, dtype=dtype, requires_grad=True), rand(B, Nk, Hk, d, seed=3, dtype=dtype,
                                                                              requires_grad=True)
    torch.library.opcheck(_ops.forward_op, (q, k, v, None, None, None) + case["kw"])


def test_opcheck_attention_forward_strided_and_packed():
    """q, k, v as views of one QKV tensor (not dense: out contiguous), and packed sequences."""
    qkv = rand(2, 100, 3, 4, 64, seed=4, requires_grad=True)
    q, k, v = qkv.unbind(2)
    torch.library.opcheck(_ops.forward_op, (q, k, v, None, None, None) + settings())
    lens_q, lens_k = [50, 0, 77], [60, 5, 40]
    cu_q = torch.tensor([0, 50, 50, 127], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 60, 65, 105], dtype=torch.int32, device="cuda")
    q = rand(sum(lens_q), 4, 64, seed=5, requires_grad=True)
    k, v = (rand(sum(lens_k), 2, 64, seed=s, requires_grad=True) for s in (6, 7))
    torch.library.opcheck(_ops.forward_op, (q, k, v, None, cu_q, cu_k) + settings(max_seqlen_q=77, max_seqlen_k=60))


def test_opcheck_attention_backward():
    q, k, v, dout = (rand(2, 90, 4, 64, seed=s) for s in range(4))
    out, lse = _ops.forward_op(q, k, v, None, None, None, *settings())
    torch.library.opcheck(_ops.backward_op, (dout, q, k, v, out, lse, None, None, None) + settings())


@needs_decode
def test_opcheck_attention_with_kvcache():
    """The append writes k_cache and v_cache, which the schema declares (opcheck checks both ways)."""
    B, S, H, Hk, d, n = 2, 300, 8, 2, 64, 2
    q, kc, vc = rand(B, n, H, d, seed=8), rand(B, S, Hk, d, seed=9), rand(B, S, Hk, d, seed=10)
    k, v = rand(B, n, Hk, d, seed=11), rand(B, n, Hk, d, seed=12)
    lens = torch.tensor([100, 250], dtype=torch.int32, device="cuda")
    args = (q, kc, vc, k, v, lens, None, None, None, None, None, False, None, True, -1, -1, 0.0, None, 2)
    torch.library.opcheck(_ops.kvcache_op, args)


# ----------------------------------------------------------------------------------------------
# torch.compile


class Block(torch.nn.Module):
    """linear → reshape to heads → flashsteps.attention → reshape → linear: q, k and v are views of
    one projection (strided, not dense), as a transformer block hands them over."""

    def __init__(self, dim=256, heads=4, **attention_kw):
        super().__init__()
        self.heads, self.kw = heads, attention_kw
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False, device="cuda", dtype=torch.bfloat16)
        self.proj = torch.nn.Linear(dim, dim, device="cuda", dtype=torch.bfloat16)

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, D // self.heads).unbind(2)
        o = flashsteps.attention(q, k, v, **self.kw)
        return self.proj(o.reshape(B, N, D))


def run_step(model, x, dy):
    """out and the gradients of sum(out * dy) for x and the parameters."""
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    out = model(x)
    out.backward(dy)
    return [out, x.grad] + [p.grad for p in model.parameters()]


def assert_close_bf16(got, want):
    # The attention is deterministic; the linears around it may be fused or ordered otherwise by
    # Inductor, a bf16 rounding apart.
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=2e-2, rtol=2e-2)


def recording_backend(graphs):
    """An AOT backend that keeps the forward and backward graphs and runs them as they are."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs.append((kind, gm))
            return make_boxed_func(gm.forward)
        return compiler

    return aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("kw", [dict(causal=True, deterministic=True), dict(causal=False)],
                         ids=["causal-deterministic", "atomic-dq"])
def test_compiled_block_matches_eager_without_graph_breaks(kw):
    torch.manual_seed(0)
    model = Block(**kw)
    x, dy = rand(2, 128, 256, seed=20), rand(2, 128, 256, seed=21)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    torch._dynamo.reset()

    want = run_step(model, x, dy)
    compiled = torch.compile(model, fullgraph=True)
    got = run_step(compiled, x, dy)
    assert_close_bf16(got, want)
    got_again = run_step(compiled, rand(2, 128, 256, seed=22), dy)  # a second call: the compiled code, new data
    want_again = run_step(model, rand(2, 128, 256, seed=22), dy)
    assert_close_bf16(got_again, want_again)


def test_compiled_graphs_hold_the_ops():
    """The forward graph calls attention_forward and the backward graph attention_backward, each once."""
    model = Block(causal=True, deterministic=True)
    x, dy = rand(2, 64, 256, seed=23), rand(2, 64, 256, seed=24)
    graphs = []
    compiled = torch.compile(model, backend=recording_backend(graphs), fullgraph=True)
    got = run_step(compiled, x, dy)
    kinds = [kind for kind, _ in graphs]
    assert kinds == ["forward", "backward"], kinds
    assert targets(graphs[0][1]).count(_ops.forward_op) == 1
    assert targets(graphs[1][1]).count(_ops.backward_op) == 1
    assert_close_bf16(got, run_step(model, x, dy))


def test_compiled_with_dynamic_shapes():
    """The fake outputs follow symbolic shapes: one compiled graph for two sequence lengths."""
    model = Block(causal=True, deterministic=True)
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for N, seed in ((96, 25), (160, 26)):
        x, dy = rand(2, N, 256, seed=seed), rand(2, N, 256, seed=seed + 10)
        assert_close_bf16(run_step(compiled, x, dy), run_step(model, x, dy))


def test_compiled_packed_sequences():
    cu_q = torch.tensor([0, 70, 70, 171], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 50, 80, 200], dtype=torch.int32, device="cuda")
    q = rand(171, 4, 64, seed=27, requires_grad=True)
    k, v = (rand(200, 2, 64, seed=s, requires_grad=True) for s in (28, 29))

    def f(q, k, v):
        out, lse = flashsteps.attention_varlen(q, k, v, cu_q, cu_k, 101, 120, causal=True, deterministic=True,
                                               return_lse=True)
        return out * 2, lse

    explanation = torch._dynamo.explain(f)(q, k, v)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    dout = rand(171, 4, 64, seed=30)
    results = []
    for fn in (compiled, f):
        for t in (q, k, v):
            t.grad = None
        out, lse = fn(q, k, v)
        out.backward(dout)
        results.append([out, lse, q.grad, k.grad, v.grad])
    for g, w in zip(*results):
        assert torch.equal(g, w)


@needs_decode
def test_compiled_decoding_appends_in_place():
    """attention_with_kvcache compiled (its op declares the cache mutated): the compiled call writes the
    same cache rows and returns the same output as the eager one."""
    B, S, H, Hk, d, n = 2, 512, 8, 2, 128, 1
    q, k, v = rand(B, n, H, d, seed=31), rand(B, n, Hk, d, seed=32), rand(B, n, Hk, d, seed=33)
    kc, vc = rand(B, S, Hk, d, seed=34), rand(B, S, Hk, d, seed=35)
    lens = torch.tensor([100, 400], dtype=torch.int32, device="cuda")

    def f(q, kc, vc, k, v, lens):
        return flashsteps.attention_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens, causal=True, num_splits=3) + 1

    explanation = torch._dynamo.explain(f)(q, kc.clone(), vc.clone(), k, v, lens)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()
    kc_c, vc_c = kc.clone(), vc.clone()
    got = torch.compile(f, fullgraph=True)(q, kc_c, vc_c, k, v, lens)
    want = f(q, kc, vc, k, v, lens)
    assert torch.equal(got, want)
    assert torch.equal(kc_c, kc) and torch.equal(vc_c, vc)
    assert torch.equal(kc[0, 100], k[0, 0]) and torch.equal(vc[1, 400], v[1, 0])  # the append happened


def test_compiled_reduce_overhead_inference():
    """mode="reduce-overhead": Inductor's CUDA graphs around the op (none skipped), replayed on new inputs."""
    from torch._dynamo.utils import counters

    counters.clear()
    model = Block(causal=True)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for seed in (36, 37, 38, 39):  # warm-up, recording, then replays
            x = rand(2, 128, 256, seed=seed)
            assert_close_bf16([compiled(x).clone()], [model(x)])
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])


# ----------------------------------------------------------------------------------------------
# CUDA graphs: the ops queue kernels on the current stream and allocate through PyTorch only.


def test_workspace_comes_from_pytorch(monkeypatch):
    """The backward's workspace (step 08: D, LSE's copy, dQ's accumulator) is torch.empty's: the
    kernels were launched with the address of the tensor the op's allocator returned."""
    given = []

    def allocator(device):
        def allocate(nbytes):
            t = torch.empty(nbytes, dtype=torch.uint8, device=device)
            given.append((nbytes, t.data_ptr()))
            return t
        return allocate

    monkeypatch.setattr(_ops, "_allocator", allocator)
    q, k, v = (rand(2, 100, 4, 64, seed=s, requires_grad=True) for s in (40, 41, 42))
    flashsteps.attention(q, k, v, causal=True).sum().backward()
    assert len(given) == 1 and given[0][0] > 0, given
    assert flashsteps._last_launch()["workspace"] == given[0][1]


def warm_up(fn, times=2):
    """torch.cuda.graph's warm-up: a few eager runs on a side stream before the capture."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(times):
            fn()
    torch.cuda.current_stream().wait_stream(s)


def captured(fn):
    warm_up(fn)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        result = fn()
    return g, result


@pytest.mark.parametrize("kw", [dict(causal=True, deterministic=True),
                                dict(window_size=(50, 10), softcap=15.0, dropout_p=0.1, seed=3, deterministic=True),
                                dict(causal=True)], ids=["deterministic", "features", "atomic-dq"])
def test_cuda_graph_forward_and_backward(kw):
    """attention's forward and backward captured into one graph; replayed on new q, k, v and dout, its
    out and gradients are those of an eager call on the same values (bit for bit where the backward is
    deterministic; dQ by atomics adds in any order)."""
    B, N, H, Hk, d = 2, 200, 4, 2, 64
    q = rand(B, N, H, d, seed=43, requires_grad=True)
    k, v = (rand(B, N, Hk, d, seed=s, requires_grad=True) for s in (44, 45))
    dout = rand(B, N, H, d, seed=46)
    if "softcap" in kw:
        kw = dict(kw, alibi_slopes=torch.tensor(flashsteps.alibi_slopes(H), device="cuda"))

    def step():
        for t in (q, k, v):
            t.grad = None
        out = flashsteps.attention(q, k, v, **kw)
        out.backward(dout)
        return out

    g, out = captured(step)
    grads = (q.grad, k.grad, v.grad)
    for seed in (47, 48):
        with torch.no_grad():
            for t, s in ((q, seed), (k, seed + 10), (v, seed + 20), (dout, seed + 30)):
                t.copy_(rand(*t.shape, seed=s))
        g.replay()
        qe, ke, ve = (t.detach().clone().requires_grad_() for t in (q, k, v))
        want = flashsteps.attention(qe, ke, ve, **kw)
        want.backward(dout)
        assert torch.equal(out, want)
        for got, w in zip(grads, (qe.grad, ke.grad, ve.grad)):
            if kw.get("deterministic"):
                assert torch.equal(got, w)
            else:
                torch.testing.assert_close(got, w, atol=1e-2, rtol=1e-2)


def test_cuda_graph_of_the_block_matches_eager():
    """A whole training step of Block (linears around attention) captured and replayed."""
    torch.manual_seed(1)
    model = Block(causal=True, deterministic=True)
    x = rand(2, 128, 256, seed=49, requires_grad=True)
    dy = rand(2, 128, 256, seed=50)

    def step():
        for p in list(model.parameters()) + [x]:
            p.grad = None
        out = model(x)
        out.backward(dy)
        return out

    g, out = captured(step)
    grads = [x.grad] + [p.grad for p in model.parameters()]
    with torch.no_grad():
        x.copy_(rand(2, 128, 256, seed=51))
    g.replay()
    want = run_step(model, x.detach().clone(), dy)
    assert_close_bf16([out] + grads, want)


@pytest.mark.parametrize("max_seqlen", [(101, 120), (None, None)], ids=["bounded", "every-token"])
def test_cuda_graph_packed_sequences(max_seqlen):
    """Packed sequences captured: the offsets are not read back while the stream is captured; the grid
    is cut to max_seqlen_q/k, or spans every token where they are not given. Replayed with other
    offsets (same count, within the bounds), the graph computes the new packing, as eager does."""
    cu_q = torch.tensor([0, 70, 70, 171], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 50, 80, 200], dtype=torch.int32, device="cuda")
    q = rand(171, 4, 64, seed=52, requires_grad=True)
    k, v = (rand(200, 2, 64, seed=s, requires_grad=True) for s in (53, 54))
    dout = rand(171, 4, 64, seed=55)
    mq, mk = max_seqlen

    def step():
        for t in (q, k, v):
            t.grad = None
        out = flashsteps.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True, deterministic=True)
        out.backward(dout)
        return out

    g, out = captured(step)
    grads = (q.grad, k.grad, v.grad)
    for offsets_q, offsets_k in (([0, 70, 70, 171], [0, 50, 80, 200]), ([0, 101, 150, 171], [0, 120, 121, 200])):
        cu_q.copy_(torch.tensor(offsets_q, dtype=torch.int32))
        cu_k.copy_(torch.tensor(offsets_k, dtype=torch.int32))
        g.replay()
        qe, ke, ve = (t.detach().clone().requires_grad_() for t in (q, k, v))
        want = flashsteps.attention_varlen(qe, ke, ve, cu_q, cu_k, causal=True, deterministic=True)
        want.backward(dout)
        assert torch.equal(out, want)
        for got, w in zip(grads, (qe.grad, ke.grad, ve.grad)):
            assert torch.equal(got, w)


@needs_decode
@pytest.mark.parametrize("paged", [False, True])
def test_cuda_graph_decoding_loop(paged):
    """A decoding step captured once (append, then attend) and replayed as the lengths grow: each
    replay reads cache_seqlens anew, writes the new rows where eager writes them, and returns eager's
    output (the same split count: num_splits given)."""
    B, S, H, Hk, d, n, page = 2, 1024, 16, 4, 128, 1, 64
    q, k, v = rand(B, n, H, d, seed=56), rand(B, n, Hk, d, seed=57), rand(B, n, Hk, d, seed=58)
    kc, vc = rand(B, S, Hk, d, seed=59), rand(B, S, Hk, d, seed=60)
    table = None
    if paged:  # the same rows, in pages in reverse order
        per = S // page
        order = torch.arange(B * per - 1, -1, -1, device="cuda")
        rows_k, rows_v = kc.reshape(B * per, page, Hk, d), vc.reshape(B * per, page, Hk, d)
        pages_k, pages_v = torch.empty_like(rows_k), torch.empty_like(rows_v)
        pages_k[order], pages_v[order] = rows_k, rows_v
        kc, vc, table = pages_k, pages_v, order.reshape(B, per).to(torch.int32)
    lens = torch.tensor([10, 700], dtype=torch.int32, device="cuda")

    def step():
        return flashsteps.attention_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens, block_table=table, causal=True,
                                                 num_splits=4)

    warm_kc, warm_vc = kc.clone(), vc.clone()  # the warm-up's eager runs append (a capture runs nothing)
    g, out = captured(step)
    kc.copy_(warm_kc)
    vc.copy_(warm_vc)
    for i, grown in enumerate(([10, 700], [11, 701], [300, 1000])):
        lens.copy_(torch.tensor(grown, dtype=torch.int32))
        for t, s in ((q, 61 + i), (k, 71 + i), (v, 81 + i)):
            t.copy_(rand(*t.shape, seed=s))
        kc_e, vc_e = kc.clone(), vc.clone()
        g.replay()
        want = flashsteps.attention_with_kvcache(q, kc_e, vc_e, k, v, cache_seqlens=lens, block_table=table,
                                                 causal=True, num_splits=4)
        assert torch.equal(out, want)
        assert torch.equal(kc, kc_e) and torch.equal(vc, vc_e)
