"""flashsteps' PyTorch custom ops (flashsteps/_ops.py) on a machine without a GPU: their schemas
(the cache declared mutated), the fake outputs' shapes, dtypes and strides under FakeTensorMode for
CUDA tensors that hold no memory (through flashsteps.attention itself, and attention_backward's),
forward and backward traced through the registered autograd (make_fx, as AOT autograd traces them),
each entry point traced whole by dynamo with no graph break (torch.export, strict), the wrapper's
own refusals, and when the ops are registered; the attention probabilities' op (return_attn_probs)
likewise: its fake output, its refusal past 2^28 entries, not differentiable. The kernels themselves,
opcheck, torch.compile run end to end and CUDA graphs: tests/python/gpu/test_compile.py (and
tests/python/gpu/test_attn_probs.py for the probabilities)."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("PyTorch before 2.4 has no torch.library.custom_op", allow_module_level=True)

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import flashsteps  # noqa: E402
from flashsteps import _ops  # noqa: E402
from flashsteps import flash_attn_interface as fai  # noqa: E402

HAS_DECODE = hasattr(flashsteps._flashsteps, "_decode")


def fake_cuda(*shape, dtype=torch.bfloat16, requires_grad=False):
    return torch.empty(*shape, device="cuda", dtype=dtype, requires_grad=requires_grad)


def test_schemas():
    probs = _ops.probs_op._schema
    assert [a.name for a in probs.arguments][:6] == ["q", "k", "lse", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k"]
    assert not any(a.alias_info and a.alias_info.is_write for a in probs.arguments) and len(probs.returns) == 1
    fwd = _ops.forward_op._schema
    assert [a.name for a in fwd.arguments][:6] == ["q", "k", "v", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k"]
    assert not any(a.alias_info and a.alias_info.is_write for a in fwd.arguments)
    assert len(fwd.returns) == 2 and len(_ops.backward_op._schema.returns) == 3
    written = [a.name for a in _ops.kvcache_op._schema.arguments if a.alias_info and a.alias_info.is_write]
    assert written == ["k_cache", "v_cache"]
    for op in (_ops.forward_op, _ops.backward_op, _ops.kvcache_op):
        assert _ops._TAGS[0] in op.tags  # Inductor keeps the traced strides (the fake outputs follow them)


def layouts():
    """q, k, v in the layouts a caller hands over, each with the strides out must have."""
    B, N, H, d = 2, 48, 4, 64
    dense = [fake_cuda(B, N, H, d) for _ in range(3)]
    heads_first = [fake_cuda(B, H, N, d).transpose(1, 2) for _ in range(3)]  # dense, not contiguous
    qkv = fake_cuda(B, N, 3, H, d)
    packed = list(qkv.unbind(2))  # not dense: out is contiguous
    return [(dense, dense[0].stride()), (heads_first, heads_first[0].stride()),
            (packed, (N * H * d, H * d, d, 1))]


# The ops' settings after the tensors, in their schemas' order (flashsteps/__init__.py builds them so).
SETTINGS = ("08", "fa2", True, None, -1, -1, 0.0, 0.0, 1, None, None)


@pytest.mark.parametrize("which", [0, 1, 2], ids=["contiguous", "heads-first", "qkv-views"])
def test_fake_outputs_follow_q(which):
    """out (through flashsteps.attention) and dq, dk, dv (attention_backward's fake) like q, k, v."""
    with FakeTensorMode():
        (q, k, v), want_strides = layouts()[which]
        out, lse = flashsteps.attention(q, k, v, causal=True, return_lse=True)
        assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
        assert out.stride() == want_strides
        assert lse.shape == (2, 4, 48) and lse.dtype == torch.float32 and lse.is_contiguous()
        dq, dk, dv = _ops.backward_op(torch.empty_like(out), q, k, v, out, lse, None, None, None, *SETTINGS)
        for g, t in ((dq, q), (dk, k), (dv, v)):
            assert g.shape == t.shape and g.dtype == t.dtype and g.stride() == want_strides


def test_autograd_is_traced_through_the_ops():
    """Forward and backward traced with fake tensors (make_fx, as AOT autograd traces them): the
    registered autograd calls attention_backward for the gradients, lse is not differentiable, and step
    04 (forward only) refuses to be differentiated. On the CPU, where the fakes need no GPU: the ops
    themselves take any device; only their real implementations want CUDA tensors."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def grads(q, k, v, dout, settings):
        out, lse = _ops.forward_op(q, k, v, None, None, None, *settings)
        assert not lse.requires_grad
        return torch.autograd.grad(out, (q, k, v), dout)

    q = torch.zeros(2, 48, 4, 64, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.zeros(2, 40, 2, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.zeros_like(q)
    gm = make_fx(lambda *t: grads(*t, SETTINGS), tracing_mode="fake")(q, k, v, dout)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls.count(_ops.forward_op) == 1 and calls.count(_ops.backward_op) == 1, calls
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    assert [tuple(t.meta["val"].shape) for t in out_node.args[0]] == [(2, 48, 4, 64), (2, 40, 2, 64), (2, 40, 2, 64)]
    with pytest.raises(RuntimeError, match="step 04 has no backward"):
        make_fx(lambda *t: grads(*t, ("04", "fa2") + SETTINGS[2:]), tracing_mode="fake")(q, k, v, dout)


def test_fake_outputs_packed_and_grouped():
    with FakeTensorMode():
        q, k, v = fake_cuda(171, 8, 64), fake_cuda(200, 2, 64), fake_cuda(200, 2, 64)
        cu_q = torch.empty(4, dtype=torch.int32, device="cuda")
        cu_k = torch.empty(4, dtype=torch.int32, device="cuda")
        out, lse = flashsteps.attention_varlen(q, k, v, cu_q, cu_k, 101, 120, return_lse=True)
        assert out.shape == (171, 8, 64) and lse.shape == (8, 171) and lse.dtype == torch.float32
        out, lse = flashsteps.attention(fake_cuda(3, 10, 8, 128), fake_cuda(3, 30, 2, 128), fake_cuda(3, 30, 2, 128),
                                        return_lse=True)
        assert out.shape == (3, 10, 8, 128) and lse.shape == (3, 8, 10)
        out = flashsteps.attention(*(fake_cuda(1, 16, 2, 64, dtype=torch.float32) for _ in range(3)), step="05")
        assert out.dtype == torch.float32


def test_fake_outputs_of_the_probabilities():
    """return_attn_probs=True through flash_attn_interface: S_dmask float32 (batch, heads, seqlen_q, seqlen_k)
    contiguous on q's device, or packed (sequences, heads, max_seqlen_q, max_seqlen_k); past 2^28 entries
    refused (ValueError) before the forward."""
    with FakeTensorMode():
        q, k = fake_cuda(2, 48, 4, 64), fake_cuda(2, 40, 2, 64)
        out, lse, probs = fai.flash_attn_func(q, k, k, dropout_p=0.1, causal=True, return_attn_probs=True)
        assert out.shape == q.shape and lse.shape == (2, 4, 48)
        assert probs.shape == (2, 4, 48, 40) and probs.dtype == torch.float32 and probs.is_contiguous()
        assert probs.device == q.device
        qp, kp = fake_cuda(171, 8, 64), fake_cuda(200, 2, 64)
        cu = torch.empty(4, dtype=torch.int32, device="cuda")
        out, lse, probs = fai.flash_attn_varlen_func(qp, kp, kp, cu, cu.clone(), 101, 120, return_attn_probs=True)
        assert lse.shape == (8, 171) and probs.shape == (3, 8, 101, 120) and probs.dtype == torch.float32
        big_q, big_k = fake_cuda(4, 8192, 16, 64), fake_cuda(4, 8192, 4, 64)
        with pytest.raises(ValueError, match=r"limit of 2\^28"):
            fai.flash_attn_func(big_q, big_k, big_k, return_attn_probs=True)


def test_probabilities_are_not_differentiable():
    """S_dmask never requires grad, whatever q and k do (its autograd marks it non-differentiable), traced
    as one call of the op beside the forward's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def probs_of(q, k, v):
        out, lse = _ops.forward_op(q, k, v, None, None, None, *SETTINGS)
        probs = _ops.probs_op(q, k, lse, None, None, None, True, None, -1, -1, 0.0, 0.0, 1, None, None)
        assert out.requires_grad and not probs.requires_grad
        return probs

    q = torch.zeros(2, 48, 4, 64, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.zeros(2, 40, 2, 64, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    gm = make_fx(probs_of, tracing_mode="fake")(q, k, v)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls.count(_ops.probs_op) == 1, calls


@pytest.mark.skipif(not HAS_DECODE, reason="this build has no step 10")
def test_fake_outputs_decoding():
    with FakeTensorMode():
        q, kc = fake_cuda(2, 3, 16, 128), fake_cuda(2, 512, 4, 128)
        k = fake_cuda(2, 3, 4, 128)
        out, lse = flashsteps.attention_with_kvcache(q, kc, kc, k, k, cache_seqlens=100, causal=True,
                                                     return_softmax_lse=True)
        assert out.shape == q.shape and out.is_contiguous() and out.dtype == q.dtype
        assert lse.shape == (2, 16, 3) and lse.dtype == torch.float32


class Block(torch.nn.Module):
    """linear → reshape to heads → flashsteps.attention → reshape → linear."""

    def __init__(self, dim=128, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False, device="cuda", dtype=torch.bfloat16)
        self.proj = torch.nn.Linear(dim, dim, device="cuda", dtype=torch.bfloat16)

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, D // self.heads).unbind(2)
        o = flashsteps.attention(q, k, v, causal=True, deterministic=True)
        return self.proj(o.reshape(B, N, D))


class Packed(torch.nn.Module):
    def forward(self, q, k, v, cu_q, cu_k):
        out, lse = flashsteps.attention_varlen(q, k, v, cu_q, cu_k, 101, 120, causal=True, return_lse=True)
        return out * 2, lse


class Decode(torch.nn.Module):
    def forward(self, q, k_cache, v_cache, k, v, lens):
        return flashsteps.attention_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens, causal=True) + 1


class Probs(torch.nn.Module):
    def forward(self, q, k, v):
        out, lse, probs = fai.flash_attn_func(q, k, v, dropout_p=0.1, causal=True, return_attn_probs=True)
        return out * 2, lse, probs


def export_cases():
    """(module, its inputs, the op it must call once): made under the caller's FakeTensorMode."""
    cu = torch.empty(4, dtype=torch.int32, device="cuda")
    cases = [(Block(), (fake_cuda(2, 32, 128),), _ops.forward_op),
             (Packed(), (fake_cuda(171, 4, 64), fake_cuda(200, 2, 64), fake_cuda(200, 2, 64), cu, cu.clone()),
              _ops.forward_op)]
    if HAS_DECODE:
        cases.append((Decode(), (fake_cuda(2, 1, 8, 64), fake_cuda(2, 256, 2, 64), fake_cuda(2, 256, 2, 64),
                                 fake_cuda(2, 1, 2, 64), fake_cuda(2, 1, 2, 64),
                                 torch.empty(2, dtype=torch.int32, device="cuda")), _ops.kvcache_op))
    return cases


def test_export_traces_return_attn_probs_whole():
    """flash_attn_func(return_attn_probs=True) is one call of the forward's op and one of the probabilities',
    with no graph break."""
    with FakeTensorMode():
        model, inputs = Probs(), (fake_cuda(2, 48, 4, 64), fake_cuda(2, 40, 2, 64), fake_cuda(2, 40, 2, 64))
        ep = torch.export.export(model, inputs, strict=True)
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(*inputs)
        torch._dynamo.reset()
    calls = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert calls.count(_ops.forward_op) == 1 and calls.count(_ops.probs_op) == 1, calls
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation.break_reasons


@pytest.mark.parametrize("which", [0, 1, 2], ids=["block", "packed", "decoding"])
def test_export_traces_each_call_whole(which):
    """torch.export in strict mode is dynamo with fullgraph=True: a graph break raises here; and
    torch._dynamo.explain counts none (on fake CUDA tensors: it runs the fake implementations). Each of
    attention (in a block: linear, reshape, attention, linear), attention_varlen and
    attention_with_kvcache is one call of its op in the graph."""
    if which == 2 and not HAS_DECODE:
        pytest.skip("this build has no step 10")
    with FakeTensorMode():
        model, inputs, op = export_cases()[which]
        ep = torch.export.export(model, inputs, strict=True)
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(*inputs)  # what torch.compile's dynamo finds
        torch._dynamo.reset()
    calls = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert calls.count(op) == 1, calls
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1, explanation.break_reasons
    assert explanation.ops_per_graph[0].count(op) == 1


def test_refusals_before_the_op():
    """What the wrapper refuses itself, in one line, as the native call would."""
    with FakeTensorMode():
        q = fake_cuda(1, 16, 2, 64)
        with pytest.raises(ValueError, match="seed"):
            flashsteps.attention(q, q, q, seed=-1)
        with pytest.raises(ValueError, match="seed"):
            flashsteps.attention(q, q, q, seed=2**64)
        with pytest.raises(TypeError, match="softmax_scale"):
            flashsteps.attention(q, q, q, softmax_scale="0.1")
        with pytest.raises(TypeError, match="dropout_p"):
            flashsteps.attention(q, q, q, dropout_p=None)
        with pytest.raises(TypeError):
            flashsteps.attention(q, q, q, max_seqlen_q=1.5, cu_seqlens_q=[0, 16], cu_seqlens_k=[0, 16])
        flashsteps.attention(q, q, q, seed=2**64 - 1)  # the largest seed: the int64 of the same bits


def test_the_real_op_refuses_cpu_tensors():
    q = torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA tensor"):
        _ops.forward_op(q, q, q, None, None, None, "08", "fa2", False, None, -1, -1, 0.0, 0.0, 1, None, None)
    lse = torch.zeros(1, 2, 16)
    with pytest.raises(ValueError, match="CUDA tensor"):
        _ops.probs_op(q, q, lse, None, None, None, False, None, -1, -1, 0.0, 0.0, 1, None, None)


def test_the_ops_pass_the_native_calls_keywords_they_take(monkeypatch):
    """Each op's real implementation calls its native function (_forward, _backward, _probs, _decode) with
    keywords the native function takes: on CPU tensors, let through to it here, the call gets as far as
    the native check that wants CUDA tensors (a keyword it did not take would be pybind11's TypeError
    before that)."""
    import contextlib

    monkeypatch.setattr(_ops, "_cuda", lambda t, name: t.detach())
    monkeypatch.setattr(_ops, "_stream", lambda t: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    q = torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16, requires_grad=True)
    lse = torch.zeros(1, 2, 16)
    calls = [lambda: _ops.forward_op(q, q, q, None, None, None, *SETTINGS),
             lambda: _ops.backward_op(q, q, q, q, q, lse, None, None, None, *SETTINGS),
             lambda: _ops.probs_op(q, q, lse, None, None, None, True, None, -1, -1, 0.0, 0.1, 1, None, None)]
    if HAS_DECODE:
        calls.append(lambda: _ops.kvcache_op(q, q, q, None, None, None, 5, None, None, None, None, False, None, True,
                                             -1, -1, 0.0, None, 0))
    for call in calls:
        with pytest.raises(ValueError, match="the kernels run on the GPU"):
            call()


def run(code):
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split()


def test_the_ops_are_registered_at_import_where_torch_is():
    assert run("import torch, flashsteps; print(hasattr(torch.ops.flashsteps, 'attention_forward'))") == ["True"]


def test_the_ops_are_registered_at_the_first_call_otherwise():
    out = run("import sys, flashsteps, torch\n"
              "print('flashsteps._ops' in sys.modules)\n"
              "from torch._subclasses.fake_tensor import FakeTensorMode\n"
              "with FakeTensorMode():\n"
              "    q = torch.empty(1, 16, 2, 64, device='cuda', dtype=torch.bfloat16)\n"
              "    flashsteps.attention(q, q, q)\n"
              "print(hasattr(torch.ops.flashsteps, 'attention_forward'))")
    assert out == ["False", "True"]
