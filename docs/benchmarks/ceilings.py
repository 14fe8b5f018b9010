#!/usr/bin/env python3
"""The GPU's measured ceilings, for the lessons' FLOPs-against-bytes arguments.

HBM bandwidth: a 4 GiB device-to-device copy (4 GiB read + 4 GiB written), CUDA events,
median of 10. fp32 compute: torch.mm of 8192 × 8192 matrices in fp32 with TF32 off
(cuBLAS SGEMM, 2·n³ FLOPs), median of 10. Prints one line each and appends them to --out.
"""
import argparse
import statistics

import torch


def median_ms(fn, reps=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0)
    n = 1 << 30  # floats: 4 GiB
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    ms = median_ms(lambda: dst.copy_(src))
    bw = 2 * n * 4 / (ms * 1e-3) / 1e9
    del src, dst
    m = 8192
    a, b = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
    ms_mm = median_ms(lambda: torch.mm(a, b))
    tf = 2 * m ** 3 / (ms_mm * 1e-3) / 1e12
    lines = [f"{gpu}: HBM copy {bw:.0f} GB/s (4 GiB read + 4 GiB written in {ms:.3f} ms)",
             f"{gpu}: fp32 SGEMM {tf:.1f} TFLOP/s (8192^3, TF32 off, {ms_mm:.3f} ms)"]
    with open(args.out, "a") as f:
        for line in lines:
            print(line)
            f.write(line + "\n")


if __name__ == "__main__":
    main()
