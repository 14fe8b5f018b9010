#!/usr/bin/env python3
"""The SMYRF authors' PyTorch implementation on the same shapes, as rows of the same CSV as bin/bench.

Step 07's peer: `SmyrfAttention` from https://github.com/giannisdaras/smyrf (Daras et al. 2020),
imported from a checkout of that repository (--src, or $SMYRF_SRC); nothing of it is copied here
(one method pair is patched to run on PyTorch 2: patch_xbox_plus).
Their module takes (batch, N, d) tensors, so B·H heads are its batch. Timed like the steps and
torch_sdpa.py: CUDA events, warm-up, L2 flushed before each timed run, median of --reps. The
forward row's device memory is torch.cuda.max_memory_allocated() over an inference forward
(inputs included, no autograd graph kept: the least the module can hold); the backward row's
is over a forward that keeps its graph and the backward through it. Rows are `smyrf_authors`,
mask `smyrf:HxC`, density H·C/N, TFLOP/s over the scores computed (density × dense FLOPs), as
step 07's.

    git clone https://github.com/giannisdaras/smyrf /tmp/smyrf
    python3 docs/benchmarks/smyrf_authors.py --src /tmp/smyrf --seqs "4096 65536" --smyrf "8x32" \\
        --batch 1 --heads 16 --dim 64 --backward --csv OUT/h200.csv
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa import flops, open_rows, time_ms  # noqa: E402  (the same timing and columns)


def parse_smyrf(spec):
    """'8x32' -> (8, 32): rounds of hashing × queries and keys per cluster."""
    try:
        hashes, cluster = (int(x) for x in spec.split("x"))
    except ValueError:
        raise SystemExit(f"smyrf_authors.py: --smyrf '{spec}' is not HASHESxCLUSTER (say 8x32)")
    if hashes < 1 or cluster < 1:
        raise SystemExit(f"smyrf_authors.py: --smyrf '{spec}': hashes and cluster size must be positive")
    return hashes, cluster


def patch_xbox_plus(xbox_plus):
    """Their XBOXPLUS builds its column of zeros as `torch.tensor(0.0).repeat(x.shape[:-1], 1)`,
    which PyTorch 2 refuses (repeat() takes one size argument); the same transform with the
    zeros made directly. Nothing else of their module is touched."""
    def zero_column(x):
        return x.new_zeros(x.shape[:-1] + (1,))

    def keys(self, x):  # [k, sqrt(M_Q^2 + M_K^2 - |k|^2), 0]
        return torch.cat((x, torch.sqrt(self.MQ ** 2 + self.MK ** 2 - self.k_norms ** 2), zero_column(x)), -1)

    def queries(self, x):  # [q, 0, sqrt(M_Q^2 + M_K^2 - |q|^2)]
        return torch.cat((x, zero_column(x), torch.sqrt(self.MQ ** 2 + self.MK ** 2 - self.q_norms ** 2)), -1)

    xbox_plus.K, xbox_plus.Q = keys, queries


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.environ.get("SMYRF_SRC", ""),
                    help="a checkout of github.com/giannisdaras/smyrf (default $SMYRF_SRC)")
    ap.add_argument("--seqs", default="4096 8192 16384 32768 65536")
    ap.add_argument("--smyrf", default="1x64 2x64 4x64 8x32", help="clusterings, HASHESxCLUSTER")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--r", type=float, default=4.0, help="E2LSH width, as step 07's --r")
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()

    if not args.src or not os.path.isfile(os.path.join(args.src, "smyrf", "torch", "attn.py")):
        raise SystemExit("smyrf_authors.py: --src must name a checkout of github.com/giannisdaras/smyrf "
                         f"(smyrf/torch/attn.py not found under '{args.src}')")
    sys.path.insert(0, args.src)
    from smyrf.torch import utils as smyrf_utils
    from smyrf.torch.attn import SmyrfAttention
    patch_xbox_plus(smyrf_utils.XBOXPLUS)

    out, gpu, commit, date = open_rows(args.csv)

    B, H, d = args.batch, args.heads, args.dim
    for N in map(int, args.seqs.split()):
        gen = torch.Generator(device="cuda").manual_seed(1)
        q, k, v, do = (torch.randn(B * H, N, d, device="cuda", generator=gen) for _ in range(4))
        for spec in args.smyrf.split():
            hashes, cluster = parse_smyrf(spec)
            line = f"smyrf_authors {spec:5s} fp32 B={B:<3d} H={H:<3d} N={N:<6d} d={d:<4d}  "
            if N % cluster:
                print(line + f"skipped: their module needs N a multiple of the cluster size {cluster}", flush=True)
                continue
            density = min(1.0, hashes * cluster / N)
            attn = SmyrfAttention(hashes, cluster, cluster, r=args.r)
            scale = d ** 0.5  # their norm_factor divides the scores: 1/sqrt(d), as step 07
            try:
                passes = []
                with torch.no_grad():
                    fwd = lambda: attn(q, k, v, norm_factor=scale)
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    fwd()
                    torch.cuda.synchronize()
                    passes.append(("fwd", fwd, torch.cuda.max_memory_allocated()))
                if args.backward:
                    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    o = attn(qg, kg, vg, norm_factor=scale)
                    bwd = lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
                    bwd()
                    torch.cuda.synchronize()
                    passes.append(("bwd", bwd, torch.cuda.max_memory_allocated()))
                for p, fn, peak in passes:
                    if p == "fwd":
                        with torch.no_grad():
                            ms = time_ms(fn, args.reps)
                    else:
                        ms = time_ms(fn, args.reps)
                    tf = density * flops(B, H, N, d, False, p == "bwd") / (ms * 1e-3) / 1e12
                    line += f"{p} {ms:9.3f} ms {tf:7.2f} TFLOP/s {peak / 2**30:6.2f} GiB  "
                    out.write(f"{gpu},smyrf_authors,{p},fp32,{B},{H},{N},{d},0,0,smyrf:{spec},{density:.4g},"
                              f"{ms:.4f},{tf:.3f},{peak},,,{commit},{date}\n")
                if args.backward:
                    del o, qg, kg, vg
            except torch.cuda.OutOfMemoryError as e:
                line += "skipped: " + str(e).splitlines()[0][:100]
            torch.cuda.empty_cache()
            print(line, flush=True)
    out.close()


if __name__ == "__main__":
    sys.exit(main())
