"""What flashsteps.attention refuses or clamps before a kernel runs (common/python/flashsteps_gpu.cpp,
prepare_step): tensors of a dtype the kernels do not take (float64, integers: the kernels would read
their bytes as float32 or float16), q, k, v of different dtypes of one width, and windows wider than
any sequence (clamped to max(seqlen_q, seqlen_k), which sees the same keys, instead of overflowing a
query's last key). Needs PyTorch and a GPU."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import flashsteps  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float64, torch.int16, torch.int32])
def test_dtypes_the_kernels_do_not_take_are_refused(dtype):
    q = torch.zeros(1, 8, 2, 64, device="cuda", dtype=dtype)
    with pytest.raises(TypeError, match="the kernels take float32, float16 or bfloat16"):
        flashsteps.attention(q, q, q, step="08")


def test_one_dtype_of_one_width_is_not_enough():
    q = torch.zeros(1, 8, 2, 64, device="cuda", dtype=torch.float16)
    k = torch.zeros(1, 8, 2, 64, device="cuda", dtype=torch.int16)
    with pytest.raises(TypeError, match="one dtype for all three"):
        flashsteps.attention(q, k, q, step="08")
    with pytest.raises(TypeError, match="one dtype for all three"):
        flashsteps.attention(q, q.bfloat16(), q, step="08")


@pytest.mark.parametrize("causal", [False, True])
def test_a_window_wider_than_every_sequence_is_that_window(causal):
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(2, 97, 4, 64, device="cuda", generator=g).bfloat16()
    k = torch.randn(2, 130, 2, 64, device="cuda", generator=g).bfloat16()
    v = torch.randn(2, 130, 2, 64, device="cuda", generator=g).bfloat16()
    huge = flashsteps.attention(q, k, v, causal=causal, window_size=(2**31 - 1, 2**31 - 1), step="08")
    widest = flashsteps.attention(q, k, v, causal=causal, window_size=(130, 130), step="08")
    assert torch.equal(huge, widest)
    report = flashsteps.check(*(t.cpu() for t in (huge, q, k, v)), causal=causal, window_size=(130, 130))
    assert report["ok"], report["summary"]
