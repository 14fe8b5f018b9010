"""The built module as a shared object: it exports PyInit__flashsteps and nothing else.

A toolchain may link libstdc++ into the module statically (the H200 test machine's GCC 13 does).
Exported, those symbols bind in part to the libstdc++.so that NumPy or PyTorch loaded before, and
the module then runs on two half-initialised copies of libstdc++'s state: check() crashed in its
first formatted double that way. The linker's version script (common/python/exports.map) keeps
every symbol but the entry point local; this test fails if that protection goes."""
import shutil
import subprocess
import sys

import pytest

import flashsteps


def exported_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None, reason="needs Linux and nm")
def test_the_module_exports_its_entry_point_only():
    symbols = exported_symbols(flashsteps._flashsteps.__file__)
    assert symbols == ["PyInit__flashsteps"], f"{len(symbols)} symbols exported, e.g. {symbols[:8]}"


def test_flash_attn_interface_names_and_refusals():
    """flashsteps.flash_attn_interface has flash_attn's names; what it refuses it refuses before any
    kernel runs (the kernels' own tests, on a GPU: tests/python/gpu/test_flash_attn_interface.py)."""
    import numpy as np
    import pytest
    from flashsteps import flash_attn_interface as fai

    for name in fai.__all__:
        assert callable(getattr(fai, name)), name
    with pytest.raises(ValueError, match="block_table"):
        fai.flash_attn_varlen_func(None, None, None, None, None, 1, 1, block_table=object())
    x = np.zeros((1, 4, 2, 8), np.float32)
    with pytest.raises(TypeError, match="PyTorch tensors"):
        fai.flash_attn_func(x, x, x)
    with pytest.raises(TypeError, match="PyTorch tensors"):
        fai.flash_attn_func(x, x, x, return_attn_probs=True)


class Shaped:
    """A stand-in for a tensor of this shape (shape and dim() are all _probs_shape reads)."""

    def __init__(self, *shape):
        self.shape = shape

    def dim(self):
        return len(self.shape)

    def select(self, dim, index):  # a packed tensor's view, as _unpacked takes it
        return Shaped(*(n for i, n in enumerate(self.shape) if i != dim % len(self.shape)))


def test_attention_probabilities_past_their_limit_are_refused_before_the_forward():
    """return_attn_probs=True is for tests and small problems: an S_dmask of more than 2^28 entries
    (batch·heads·seqlen_q·seqlen_k) is refused with ValueError before the forward runs (no tensor here
    reaches a kernel: the stand-ins would fail there); at the limit the shape is (batch, heads, seqlen_q,
    seqlen_k), or with packed sequences (sequences, heads, max_seqlen_q, max_seqlen_k)."""
    from flashsteps import flash_attn_interface as fai

    assert flashsteps._probs_limit == 2**28
    assert flashsteps._probs_shape(Shaped(1, 16384, 1, 8), Shaped(1, 16384, 1, 8)) == (1, 1, 16384, 16384)
    assert flashsteps._probs_shape(Shaped(2, 100, 8, 64), Shaped(2, 300, 2, 64)) == (2, 8, 100, 300)
    cu = [0, 5, 5, 12]
    assert flashsteps._probs_shape(Shaped(12, 4, 64), Shaped(20, 2, 64), cu, 7, 9) == (3, 4, 7, 9)
    big_q, big_k = Shaped(4, 8192, 16, 64), Shaped(4, 8192, 4, 64)
    with pytest.raises(ValueError, match=r"past the attention probabilities' limit of 2\^28"):
        fai.flash_attn_func(big_q, big_k, big_k, return_attn_probs=True)
    with pytest.raises(ValueError, match=r"limit of 2\^28"):
        fai.flash_attn_kvpacked_func(big_q, Shaped(4, 8192, 2, 4, 64), return_attn_probs=True)
    with pytest.raises(ValueError, match=r"limit of 2\^28"):
        fai.flash_attn_func(Shaped(1, 16385, 1, 8), Shaped(1, 16384, 1, 8), Shaped(1, 16384, 1, 8),
                            return_attn_probs=True)
    packed = Shaped(40000, 8, 64)
    with pytest.raises(ValueError, match=r"limit of 2\^28"):
        fai.flash_attn_varlen_func(packed, packed, packed, [0, 20000, 40000], [0, 20000, 40000], 20000, 20000,
                                   return_attn_probs=True)


def test_import_needs_no_pytorch():
    """`import flashsteps` imports no PyTorch (seconds, where it is installed) for the reference's
    users: the custom ops (flashsteps/_ops.py), which import it, come with the first call that passes
    PyTorch tensors, or at the import where PyTorch is imported already (tests/python/test_ops.py)."""
    code = "import sys, flashsteps; print('torch' in sys.modules, 'flashsteps._ops' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["False", "False"]


def test_info_says_what_the_build_runs():
    info = flashsteps.info()
    assert set(info) == {"steps", "hopper", "last"}
    assert isinstance(info["hopper"], bool)
    assert set(info["steps"]) <= {"04", "05", "08", "09"}
    assert info["last"] == "" or info["last"].count("/") == 1
    if not info["steps"]:  # a build without the GPU entry points
        assert info["hopper"] is False
    if "09" not in info["steps"]:
        assert info["hopper"] is False  # no step 09 kernels: never the default's choice
