"""CTest's entry to tests/python/gpu: exit code 77 (CTest's "skipped") where PyTorch sees no CUDA
GPU, so that a machine without one shows these tests as skipped, never as passed; pytest's exit
code otherwise."""
import os
import sys

try:
    import torch

    usable = torch.cuda.is_available()
except ImportError:
    usable = False
if not usable:
    print("flashsteps kernels: no PyTorch with a CUDA GPU here, skipped")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__))]))
