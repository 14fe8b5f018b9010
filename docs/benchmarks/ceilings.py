#!/usr/bin/env python3
"""The GPU's measured ceilings, for the lessons' FLOPs-against-bytes arguments.

HBM bandwidth: a 4 GiB device-to-device copy (4 GiB read + 4 GiB written). fp32 compute:
torch.mm of 8192 × 8192 matrices in fp32 with TF32 off (cuBLAS SGEMM, 2·n³ FLOPs); tensor-core
compute: the same product in bf16 (cuBLAS, fp32 accumulate) on random data. All timed as
torch_sdpa.py times PyTorch (CUDA events, warm-up, L2 flushed before each run, median of 10).
Prints one line each and appends them to --out.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa import time_ms  # noqa: E402  (CUDA events, warm-up, L2 flushed, median)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0)
    n = 1 << 30  # floats: 4 GiB
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    ms = time_ms(lambda: dst.copy_(src), 10)
    bw = 2 * n * 4 / (ms * 1e-3) / 1e9
    del src, dst
    m = 8192
    a, b = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
    ms_mm = time_ms(lambda: torch.mm(a, b), 10)
    tf = 2 * m ** 3 / (ms_mm * 1e-3) / 1e12
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    ms_16 = time_ms(lambda: torch.mm(a16, b16), 10)
    tf16 = 2 * m ** 3 / (ms_16 * 1e-3) / 1e12
    lines = [f"{gpu}: HBM copy {bw:.0f} GB/s (4 GiB read + 4 GiB written in {ms:.3f} ms)",
             f"{gpu}: fp32 SGEMM {tf:.1f} TFLOP/s (8192^3, TF32 off, {ms_mm:.3f} ms)",
             f"{gpu}: bf16 GEMM {tf16:.1f} TFLOP/s (8192^3, fp32 accumulate, {ms_16:.3f} ms)"]
    with open(args.out, "a") as f:
        for line in lines:
            print(line)
            f.write(line + "\n")


if __name__ == "__main__":
    main()
