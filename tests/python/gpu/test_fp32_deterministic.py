"""deterministic=True in float32 (flash_attn's deterministic backward, for the dtype flash_attn lacks):
step 08's 3xTF32 adds dQ by atomics, so attention runs step 05's fp32 kernels there, whose dQ has a
pass of its own — bit-identical repeats, within the fp32 rule against float64. Needs PyTorch and a GPU."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402
from flashsteps.flash_attn_interface import flash_attn_func  # noqa: E402


def grads(q, k, v, dout, fn, **kw):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, **kw)
    out.backward(dout)
    return out.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("causal", [False, True])
def test_float32_deterministic_runs_step_05_bit_identically(causal):
    g = torch.Generator(device="cuda").manual_seed(5)
    B, N, Nk, H, Hk, d = 2, 301, 263, 4, 2, 64
    q = torch.randn(B, N, H, d, device="cuda", generator=g)
    k = torch.randn(B, Nk, Hk, d, device="cuda", generator=g)
    v = torch.randn(B, Nk, Hk, d, device="cuda", generator=g)
    dout = torch.randn(B, N, H, d, device="cuda", generator=g)
    kw = dict(causal=causal, deterministic=True, window_size=(50, 10), softcap=3.0)
    first = grads(q, k, v, dout, flash_attn_func, **kw)
    assert flashsteps.info()["last"].startswith("05"), flashsteps.info()["last"]
    second = grads(q, k, v, dout, flash_attn_func, **kw)
    for a, b in zip(first, second):
        assert torch.equal(a, b)  # bit for bit
    ref = dict(causal=causal, window_size=(50, 10), softcap=3.0)
    fwd = flashsteps.check(*(t.cpu() for t in (first[0], q, k, v)), **ref)
    assert fwd["ok"], fwd["summary"]
    bwd = flashsteps.check_backward(*(t.cpu() for t in (first[1], first[2], first[3], q, k, v, dout)), **ref)
    assert bwd["ok"], bwd["summary"]


def test_float32_pinned_to_step_08_deterministic_is_refused():
    q = torch.zeros(1, 8, 1, 64, device="cuda")
    with pytest.raises(ValueError, match="atomics"):
        flashsteps.attention(q, q, q, deterministic=True, step="08")
