"""flashsteps.attention's choice of step (step="auto"): step 09 on an sm_90 GPU (H100, H200) where it
takes the call, forward and backward, step 08 for the rest; what info() says of it; that the choice
gives the pinned step's own results bit for bit; and that the default (step=None) is step 08. Needs PyTorch and a GPU (CTest
label gpu); the step 09 cases need an sm_90 GPU and a build with step 09, and are skipped elsewhere."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402

HOPPER = flashsteps.info()["hopper"]
needs_hopper = pytest.mark.skipif(not HOPPER, reason="step 09 needs an sm_90 GPU and a build with step 09")


def inputs(B, N, H, d, dtype=torch.bfloat16, Hk=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, N, H, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(B, N, Hk or H, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(B, N, Hk or H, d, device="cuda", generator=g).to(dtype)
    dout = torch.randn(B, N, H, d, device="cuda", generator=g).to(dtype)
    return q, k, v, dout


def run(q, k, v, dout, **kw):
    """out and the gradients by flashsteps.attention, and the step each pass ran (info()["last"])."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = flashsteps.attention(q, k, v, **kw)
    fwd_step = flashsteps.info()["last"]
    out.backward(dout)
    return out, q.grad, k.grad, v.grad, fwd_step, flashsteps.info()["last"]


def test_info_names_the_built_steps_and_the_gpu():
    info = flashsteps.info()
    assert {"08", "05", "04"} <= set(info["steps"])
    major, minor = torch.cuda.get_device_capability()
    assert info["hopper"] == ("09" in info["steps"] and (major, minor) == (9, 0))


@needs_hopper
@pytest.mark.parametrize("deterministic, variant", [(False, "fa3"), (True, "deterministic")])
@pytest.mark.parametrize("shape, causal", [((2, 1000, 4, 128), True), ((1, 257, 2, 64), False)])
def test_step_09_where_it_takes_the_call_and_its_results_bit_for_bit(shape, causal, deterministic, variant):
    q, k, v, dout = inputs(*shape, seed=shape[1])
    auto = run(q, k, v, dout, causal=causal, deterministic=deterministic, step="auto")
    assert auto[4] == f"09_hopper/{variant}" and auto[5] == f"09_hopper/{variant}"
    pinned = run(q, k, v, dout, causal=causal, step="09", variant=variant)
    if deterministic:  # the atomic variant adds dQ in the order its reduce-adds land: only O is fixed
        for a, b in zip(auto[:4], pinned[:4]):
            assert torch.equal(a, b)
    else:
        assert torch.equal(auto[0], pinned[0])
    ref = flashsteps.check(*(t.detach().cpu() for t in (auto[0], q, k, v)), causal=causal)
    assert ref["ok"], ref["summary"]
    grads = flashsteps.check_backward(*(t.detach().cpu() for t in (auto[1], auto[2], auto[3], q, k, v, dout)),
                                      causal=causal)
    assert grads["ok"], grads["summary"]


@needs_hopper
@pytest.mark.parametrize("d", [8, 40, 72, 96, 120])
def test_step_09_at_a_head_dim_between_its_compiled_ones(d):
    """d a multiple of 8 up to 128 runs in step 09's next compiled kernels (64 or 128), padded on chip: in
    tensors whose rows lie inside larger ones, the columns past d large numbers that would spoil any result
    they reached, forward and backward against the fp64 reference."""
    g = torch.Generator(device="cuda").manual_seed(d)
    B, N, H = 2, 193, 3

    def sliced():
        full = torch.randn(B, N, H, d + 8, device="cuda", generator=g).to(torch.bfloat16)
        full[..., d:] = 1000.0
        return full[..., :d]

    q, k, v = sliced(), sliced(), sliced()
    dout = torch.randn(B, N, H, d, device="cuda", generator=g).to(torch.bfloat16)
    out, dq, dk, dv, fwd_step, bwd_step = run(q, k, v, dout, causal=True, step="auto")
    assert fwd_step == "09_hopper/fa3" and bwd_step == "09_hopper/fa3"
    ref = flashsteps.check(*(t.detach().cpu().contiguous() for t in (out, q, k, v)), causal=True)
    assert ref["ok"], ref["summary"]
    grads = flashsteps.check_backward(*(t.detach().cpu().contiguous() for t in (dq, dk, dv, q, k, v, dout)),
                                      causal=True)
    assert grads["ok"], grads["summary"]


@pytest.mark.parametrize("why, shape, kw", [
    ("a softcap", (1, 300, 2, 128), dict(softcap=30.0)),
    ("a window", (1, 300, 2, 128), dict(window_size=(64, 0))),
    ("dropout", (1, 300, 2, 128), dict(dropout_p=0.1)),
    ("head_dim 59, not a multiple of 8 (TMA's rows)", (1, 300, 2, 59), {}),
    ("head_dim 160, past step 09's backward", (1, 300, 2, 160), {}),
    ("grouped K/V heads", (1, 300, 4, 128), dict(Hk=2)),
    ("float32", (1, 300, 2, 64), dict(dtype=torch.float32)),
])
def test_step_08_for_what_step_09_does_not_take(why, shape, kw):
    kw = dict(kw)
    dtype, Hk = kw.pop("dtype", torch.bfloat16), kw.pop("Hk", None)
    q, k, v, dout = inputs(*shape, dtype=dtype, Hk=Hk, seed=7)
    out = run(q, k, v, dout, step="auto", **kw)
    want = "08_tensor_cores/3xtf32" if dtype == torch.float32 else "08_tensor_cores/fa2"
    assert out[4] == want and out[5] == want, why


@pytest.mark.parametrize("step", [None, "08"])
def test_the_default_and_pinned_step_08_run_step_08_on_any_gpu(step):
    q, k, v, dout = inputs(1, 256, 2, 128, seed=3)
    out = run(q, k, v, dout, step=step, causal=True)
    assert out[4] == "08_tensor_cores/fa2" and out[5] == "08_tensor_cores/fa2"


def test_packed_sequences_run_step_08():
    q, k, v, _ = inputs(1, 300, 2, 128, seed=5)
    cu = torch.tensor([0, 100, 300], dtype=torch.int32, device="cuda")
    flashsteps.attention_varlen(q[0], k[0], v[0], cu, cu, causal=True, step="auto")
    assert flashsteps.info()["last"] == "08_tensor_cores/fa2"


def test_step_auto_refuses_a_named_variant():
    q, k, v, _ = inputs(1, 64, 1, 64, seed=1)
    with pytest.raises(ValueError, match="step 'auto' takes 'default' or 'deterministic'"):
        flashsteps.attention(q, k, v, step="auto", variant="fa2")
