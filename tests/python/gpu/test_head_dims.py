"""flashsteps.attention at any head dimension 1 ... 256 (issue: the flash_attn drop-in): step 08's kernels
are compiled at d = 32, 64, 96, 128 and 256 and run any other d in the next one's tiles, zero past d
on chip (steps/08_tensor_cores/tc_tiles.cuh) — no padded copy in HBM, outputs written at d. Each d is
checked forward and backward against the fp64 reference by the project's rule, odd N, causal and not,
with features and dropout, in tensors whose rows lie inside larger ones (a slice of the last dimension),
so that a kernel reading or writing past d would meet its neighbour's numbers. Needs PyTorch and a GPU."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
HEAD_DIMS = [1, 8, 40, 59, 80, 111, 160, 192, 224, 256]


def sliced(B, N, H, d, dtype, gen, extra):
    """A (B, N, H, d) view of a (B, N, H, d + extra) tensor: rows d + extra elements apart, the columns past
    d filled with large numbers that would spoil any result they reached."""
    full = torch.randn(B, N, H, d + extra, device="cuda", generator=gen).to(dtype)
    full[..., d:] = 1000.0
    return full[..., :d]


def run(d, dtype, causal, extra, **kw):
    g = torch.Generator(device="cuda").manual_seed(1000 + d)
    B, N, Nk, H, Hk = 2, 77, 93, 4, 2
    q = sliced(B, N, H, d, dtype, g, extra).requires_grad_()
    k = sliced(B, Nk, Hk, d, dtype, g, extra).requires_grad_()
    v = sliced(B, Nk, Hk, d, dtype, g, extra).requires_grad_()
    dout = torch.randn(B, N, H, d, device="cuda", generator=g).to(dtype)
    out, lse = flashsteps.attention(q, k, v, causal=causal, return_lse=True, step="08", **kw)
    out.backward(dout)
    assert out.shape == (B, N, H, d) and q.grad.shape == q.shape and k.grad.shape == k.shape
    ref = {key: value for key, value in kw.items() if key != "deterministic"}
    if "alibi_slopes" in ref:
        ref["alibi_slopes"] = ref["alibi_slopes"].cpu()
    cpu = [t.detach().cpu().contiguous() for t in (out, q, k, v)]
    fwd = flashsteps.check(*cpu, lse=lse.cpu(), causal=causal, **ref)
    assert fwd["ok"], fwd["summary"]
    grads = [t.detach().cpu().contiguous() for t in (q.grad, k.grad, v.grad, q, k, v, dout)]
    bwd = flashsteps.check_backward(*grads, causal=causal, **ref)
    assert bwd["ok"], bwd["summary"]


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_any_head_dim(d, causal):
    # Rows 16-byte aligned where d is a multiple of 8 (the kernels' whole-chunk loads), else 3 elements apart.
    extra = 8 if d % 8 == 0 else 3
    run(d, DTYPES["bf16" if d % 2 else "fp16"], causal, extra)


@pytest.mark.parametrize("d", [59, 80, 160])
@pytest.mark.parametrize("deterministic", [False, True])
def test_any_head_dim_with_features(d, deterministic):
    extra = 8 if d % 8 == 0 else 5
    run(d, torch.bfloat16, True, extra, window_size=(20, 3), softcap=1.5, dropout_p=0.1, seed=7,
        alibi_slopes=torch.tensor(flashsteps.alibi_slopes(4), device="cuda"), deterministic=deterministic)


def test_head_dim_past_256_is_refused():
    q = torch.zeros(1, 8, 1, 264, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="d must be 1 to 256"):
        flashsteps.attention(q, q, q, step="08")
