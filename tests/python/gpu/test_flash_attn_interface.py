"""flashsteps.flash_attn_interface on a GPU: the packed entry points equal the unpacked call on the
same tensors (forward bit for bit, and, with the deterministic backward, the packed tensor's
gradient the three gradients stacked),
and the unpacked call is the one test_attention.py holds to the fp64 reference. Needs PyTorch and a
GPU (CTest label gpu)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from flashsteps import flash_attn_interface as fai  # noqa: E402


def rand(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(torch.bfloat16)


@pytest.mark.parametrize("causal", [False, True])
def test_qkvpacked_equals_unpacked(causal):
    qkv = rand(2, 257, 3, 4, 64, seed=1).requires_grad_()
    dout = rand(2, 257, 4, 64, seed=2)
    out = fai.flash_attn_qkvpacked_func(qkv, causal=causal, deterministic=True)  # gradients without atomics
    out.backward(dout)
    q, k, v = (qkv.detach()[:, :, i].clone().requires_grad_() for i in range(3))
    ref = fai.flash_attn_func(q, k, v, causal=causal, deterministic=True)
    ref.backward(dout)
    assert torch.equal(out, ref)
    assert torch.equal(qkv.grad, torch.stack((q.grad, k.grad, v.grad), dim=2))


def test_kvpacked_equals_unpacked():
    q = rand(2, 100, 8, 128, seed=3).requires_grad_()
    kv = rand(2, 300, 2, 2, 128, seed=4).requires_grad_()
    dout = rand(2, 100, 8, 128, seed=5)
    out = fai.flash_attn_kvpacked_func(q, kv, causal=True, deterministic=True)
    out.backward(dout)
    k, v = (kv.detach()[:, :, i].clone().requires_grad_() for i in range(2))
    q2 = q.detach().clone().requires_grad_()
    ref = fai.flash_attn_func(q2, k, v, causal=True, deterministic=True)
    ref.backward(dout)
    assert torch.equal(out, ref)
    assert torch.equal(q.grad, q2.grad)
    assert torch.equal(kv.grad, torch.stack((k.grad, v.grad), dim=2))


def test_varlen_qkvpacked_equals_unpacked():
    cu = torch.tensor([0, 17, 17, 100], dtype=torch.int32, device="cuda")
    qkv = rand(100, 3, 4, 64, seed=6)
    out = fai.flash_attn_varlen_qkvpacked_func(qkv, cu, 83, causal=True)
    q, k, v = (qkv[:, i].contiguous() for i in range(3))
    ref = fai.flash_attn_varlen_func(q, k, v, cu, cu, 83, 83, causal=True)
    assert torch.equal(out, ref)
