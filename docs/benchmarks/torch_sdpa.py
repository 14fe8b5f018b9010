#!/usr/bin/env python3
"""PyTorch's own attention on the same shapes, as rows of the same CSV as bin/bench.

torch.nn.functional.scaled_dot_product_attention, pinned to one backend per row: MATH (PyTorch's
standard attention, S and P materialised) as `torch_math`, EFFICIENT_ATTENTION (the
memory-efficient kernel) as `torch_efficient`, and for bf16/fp16 FLASH_ATTENTION (the
FlashAttention-2 kernels) as `torch_flash` and CUDNN_ATTENTION as `torch_cudnn`; and this project's
Python module on the same tensors as `flashsteps_auto` (flashsteps.attention(step="auto"): step 09
on an H100/H200 where it takes the call), `flashsteps_08` and `flashsteps_09` (pinned), where it
imports (PYTHONPATH=build/python), so that its call costs are measured beside the step programs'
rows (bin/bench). --dtypes picks
fp32 (TF32 off), bf16, fp16; a backend that does not take a dtype is skipped, saying why. Timed
like the steps (common/timing.hpp): CUDA events, warm-up, median of --reps, and before each timed
run the L2 flush enqueued HOLD_FLUSHES times, so that the GPU is busy while Python and autograd
enqueue the run, and the events time the kernels back to back rather than the host's launch gaps.
"""
import argparse
import datetime
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADER = ("gpu,step,pass,dtype,B,H,N,d,causal,dropout,mask,density,median_ms,tflops,peak_mem_bytes,"
          "hbm_bytes_model,max_err,commit,date")
BACKENDS = {"torch_math": SDPBackend.MATH, "torch_efficient": SDPBackend.EFFICIENT_ATTENTION,
            "torch_flash": SDPBackend.FLASH_ATTENTION, "torch_cudnn": SDPBackend.CUDNN_ATTENTION}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
HOLD_FLUSHES = 32  # as L2Flusher::kHoldFlushes


FLASHSTEPS = {"flashsteps_auto": "auto", "flashsteps_08": "08", "flashsteps_09": "09"}


def flashsteps_call(step):
    """scaled_dot_product_attention's call on (B, H, N, d) tensors by flashsteps.attention, which takes
    (B, N, H, d): the transposed views, nothing copied (the kernels take the strides)."""
    import flashsteps

    def call(q, k, v, dropout_p=0.0, is_causal=False):
        out = flashsteps.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p=dropout_p,
                                   causal=is_causal, step=step)
        return out.transpose(1, 2)
    return call


def flops(B, H, N, d, causal, bwd):
    f = 4.0 * B * H * N * N * d / (2 if causal else 1)
    return f * 2.5 if bwd else f


def time_ms(fn, reps, warmup=3):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        for _ in range(HOLD_FLUSHES):
            flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def open_rows(csv_path):
    """fp32 without TF32 on GPU 0, and the CSV to append rows to (its header written when new):
    (file, gpu name, commit, date) for the rows' last columns."""
    torch.cuda.set_device(0)  # a current context for autograd's backward thread, too
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    new = not os.path.exists(csv_path) or os.path.getsize(csv_path) == 0
    out = open(csv_path, "a")
    if new:
        out.write(HEADER + "\n")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return out, torch.cuda.get_device_name(0), os.environ.get("FS_COMMIT", "unknown"), date


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", default="512 1024 2048 4096 8192 16384")
    ap.add_argument("--dims", default="64 128")
    ap.add_argument("--causal", default="0 1")
    ap.add_argument("--backends", default="torch_math torch_efficient")
    ap.add_argument("--dtypes", default="fp32", help="element types, e.g. \"bf16 fp16\"")
    ap.add_argument("--dropout", default="0", help="dropout probabilities, e.g. \"0 0.1\"")
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--heads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()

    out, gpu, commit, date = open_rows(args.csv)

    for dtype_name, d in [(t, d) for t in args.dtypes.split() for d in map(int, args.dims.split())]:
        dtype = DTYPES[dtype_name]
        for N in map(int, args.seqs.split()):
            for causal, drop in [(c, p) for c in map(int, args.causal.split()) for p in map(float, args.dropout.split())]:
                B = args.batch or max(1, 16384 // N)
                H = args.heads or max(1, 2048 // d)
                gen = torch.Generator(device="cuda").manual_seed(1)
                q, k, v, do = (torch.randn(B, H, N, d, device="cuda", generator=gen).to(dtype) for _ in range(4))
                for name in args.backends.split():
                    line = (f"{name:16s} {dtype_name} B={B:<3d} H={H:<3d} N={N:<6d} d={d:<4d} causal={causal} "
                            f"dropout={drop:g}  ")
                    try:
                        attend = flashsteps_call(FLASHSTEPS[name]) if name in FLASHSTEPS else F.scaled_dot_product_attention
                        with sdpa_kernel(BACKENDS.get(name, SDPBackend.MATH)):
                            qg, kg, vg = (t.clone().requires_grad_(args.backward) for t in (q, k, v))
                            torch.cuda.reset_peak_memory_stats()
                            fwd = lambda: attend(qg, kg, vg, dropout_p=drop, is_causal=bool(causal))
                            o = fwd()
                            passes = [("fwd", fwd)]
                            if args.backward:
                                bwd = lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
                                bwd()
                                passes.append(("bwd", bwd))
                            torch.cuda.synchronize()
                            peak = torch.cuda.max_memory_allocated()
                            for p, fn in passes:
                                ms = time_ms(fn, args.reps)
                                tf = flops(B, H, N, d, causal, p == "bwd") / (ms * 1e-3) / 1e12
                                line += f"{p} {ms:9.3f} ms {tf:7.2f} TFLOP/s  "
                                out.write(f"{gpu},{name},{p},{dtype_name},{B},{H},{N},{d},{causal},{drop:g},,1,{ms:.4f},"
                                          f"{tf:.3f},{peak},,,{commit},{date}\n")
                            del o
                    except (RuntimeError, ValueError, TypeError, ImportError, torch.cuda.OutOfMemoryError) as e:
                        line += "skipped: " + str(e).splitlines()[0][:100]
                    torch.cuda.empty_cache()
                    print(line, flush=True)
    out.close()


if __name__ == "__main__":
    sys.exit(main())
