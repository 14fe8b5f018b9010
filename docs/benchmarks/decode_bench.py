#!/usr/bin/env python3
"""Step 10's decoding benchmark: step10_decode next to PyTorch's SDPA on the same shapes, in one run.

For every batch and cache length (one new token per sequence by default, bf16, d = 128, 32 query
heads over 8 K/V heads, as issue "Step 10: decoding" asks):
  copy                     the GPU's copy rate: a 2 GiB device-to-device copy, read + written bytes
                           over its time (at the start and at the end of the run)
  torch_flash, torch_cudnn scaled_dot_product_attention pinned to one backend, q (B, H, n, d) and
                           k, v (B, H_kv, L, d) with enable_gqa=True
  .../folded               the same backend on the group folded into the query rows,
                           q (B, H_kv, g·n, d): exact for one new token without a causal mask, and
                           the layout flash_attn itself decodes with; each K/V head is read once
  step10_decode            this project's program (--csv), contiguous, and paged with each of
                           --pages (pages in shuffled order); the split rule's choice, and with
                           --sweep the counts of SWEEP as well, up to B·H_kv·splits = 2048
                           CTAs (split_rule = 0)
Every row is written to --csv with the bytes the run must move (K and V of the keys, q, O and LSE:
the same count for every implementation) and GB/s. Timed alike: warm-up, then the median of --reps
runs, each after the L2 flush enqueued 32 times (common/timing.hpp; torch_sdpa.py's time_ms); the
step's rows are its own program's measurement. The summary printed last (and by --summary CSV alone) puts each shape's
times side by side with the fraction of the copy rate.
"""
import argparse
import collections
import datetime
import os
import statistics
import subprocess
import sys

HEADER = ("gpu,impl,dtype,batch,heads,heads_kv,cache_len,new_tokens,d,causal,page_size,append,splits,split_rule,"
          "median_us,bytes,gbps,commit,date")
SWEEP = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 40, 48, 64, 96, 128)  # --sweep's split counts


def run_bytes(B, H, Hkv, L, n, d, elem):
    """What a run must move, as step10_decode counts it (DecodeRun::bytes, without --append)."""
    return 2 * elem * B * L * Hkv * d + 2 * elem * B * n * H * d + 4 * B * H * n


def time_us(fn, reps):
    """torch_sdpa.py's timing (the L2 flush held before each run, median of reps), in µs."""
    from torch_sdpa import time_ms  # beside this script
    return 1e3 * time_ms(fn, reps)


class Rows:
    def __init__(self, path, gpu, commit):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self.path, self.gpu, self.commit = path, gpu, commit
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        if new:
            with open(path, "w") as f:
                f.write(HEADER + "\n")

    def add(self, impl, dtype, B, H, Hkv, L, n, d, us, nbytes, splits=0):
        with open(self.path, "a") as f:
            f.write(f"{self.gpu},{impl},{dtype},{B},{H},{Hkv},{L},{n},{d},0,0,0,{splits},0,{us:.2f},{nbytes:.0f},"
                    f"{nbytes / (us * 1e-6) / 1e9:.1f},{self.commit},{self.date}\n")


def copy_rate(torch, rows, reps):
    n = 1 << 31
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), reps)
    rows.add("copy", "u8", 1, 1, 1, n, 1, 1, us, 2 * n)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / (us * 1e-6) / 1e9


def torch_rows(torch, args, rows, B, L):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"torch_flash": SDPBackend.FLASH_ATTENTION, "torch_cudnn": SDPBackend.CUDNN_ATTENTION,
                "torch_efficient": SDPBackend.EFFICIENT_ATTENTION}
    H, Hkv, n, d = args.heads, args.heads_kv, args.new_tokens, args.dim
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    q = torch.rand(B, H, n, d, dtype=dt, device="cuda") * 2 - 1
    k = torch.rand(B, Hkv, L, d, dtype=dt, device="cuda") * 2 - 1
    v = torch.rand(B, Hkv, L, d, dtype=dt, device="cuda") * 2 - 1
    nbytes = run_bytes(B, H, Hkv, L, n, d, 2)
    forms = {"": (q, dict(enable_gqa=True))}
    if n == 1:
        forms["/folded"] = (q.view(B, Hkv, H // Hkv, d), {})
    for name in args.backends.split():
        for suffix, (qq, kw) in forms.items():
            try:
                with sdpa_kernel(backends[name]):
                    fn = lambda: F.scaled_dot_product_attention(qq, k, v, **kw)  # noqa: E731
                    fn()
                    us = time_us(fn, args.reps)
                rows.add(name + suffix, args.dtype, B, H, Hkv, L, n, d, us, nbytes)
            except RuntimeError as e:
                print(f"  {name}{suffix} B={B} L={L}: skipped ({str(e).splitlines()[0][:120]})", file=sys.stderr)
    del q, k, v
    torch.cuda.empty_cache()


def step_rows(args, B, L, page, splits=0):
    cmd = [args.bin, "--batch", str(B), "--heads", str(args.heads), "--heads-kv", str(args.heads_kv),
           "--cache-len", str(L), "--new-tokens", str(args.new_tokens), "--dim", str(args.dim), "--dtype", args.dtype,
           "--reps", str(args.reps), "--csv", args.csv, "--page-size", str(page), "--splits", str(splits)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  step10_decode B={B} L={L} page={page} splits={splits}: exit {r.returncode}: "
              f"{(r.stderr or r.stdout).strip()[:200]}", file=sys.stderr)


def summary(path, part="all"):
    """Markdown: each shape's median µs per implementation (the fastest of a backend's two forms) with
    the fraction of the copy rate, cuDNN's time over the step's, the rule's splits; then, where the
    run swept them, the step's time by split count, one table per batch (part: "all", "summary" or
    "sweep"). render.py puts it in the docs (<!-- decode: file=... [part=...] -->); at most 8
    columns a table."""
    import csv
    rows = list(csv.DictReader(open(path)))
    copies = [float(r["gbps"]) for r in rows if r["impl"] == "copy"]
    copy = statistics.median(copies) if copies else float("nan")
    by = collections.defaultdict(dict)
    for r in rows:
        impl = r["impl"]
        if impl == "copy" or r["new_tokens"] != "1" or r["append"] != "0":
            continue
        key = (int(r["batch"]), int(r["cache_len"]))
        if impl == "step10_decode":
            if r["split_rule"] != "1":
                continue
            impl = "step10" + (f" paged {r['page_size']}" if r["page_size"] != "0" else "")
        impl = impl.split("/")[0]  # a backend's fastest form
        t = (float(r["median_us"]), float(r["gbps"]), r["splits"])
        if impl not in by[key] or t[0] < by[key][impl][0]:
            by[key][impl] = t
    impls = [i for i in ("step10", "step10 paged 16", "step10 paged 256", "torch_flash", "torch_cudnn")
             if any(i in v for v in by.values())]
    gpu = rows[0]["gpu"] if rows else "?"
    commit = rows[0]["commit"] if rows else "?"
    out = [f"{gpu}, {commit}: median µs (in brackets the bytes moved over the time, as a "
           f"fraction of the copy rate, {copy:,.0f} GB/s); cuDNN / step 10 ≥ 1 where the step is at least as fast\n",
           "| batch · cache | " + " | ".join(impls) + " | cuDNN / step 10 | splits |",
           "|---|" + "---:|" * (len(impls) + 2)]
    for key in sorted(by):
        cells = [f"{by[key][i][0]:,.1f} ({by[key][i][1] / copy:.0%})" if i in by[key] else "–" for i in impls]
        own, cud = by[key].get("step10"), by[key].get("torch_cudnn")
        ratio = f"{cud[0] / own[0]:.2f}" if cud and own else "–"
        out.append(f"| {key[0]} · {key[1] // 1024}K | " + " | ".join(cells) + f" | {ratio} | {own[2] if own else ''} |")
    if part == "sweep":
        out = []
    sweep = collections.defaultdict(dict)
    for r in rows:
        if part == "summary":
            break
        if r["impl"] == "step10_decode" and r["page_size"] == "0" and r["new_tokens"] == "1" and r["append"] == "0":
            cell = sweep[(int(r["batch"]), int(r["cache_len"]))]
            rule = r["split_rule"] == "1" or cell.get(int(r["splits"]), (0, "0"))[1] == "1"  # the rule's count, run twice
            if int(r["splits"]) not in cell or r["split_rule"] == "0":
                cell[int(r["splits"])] = (float(r["median_us"]), "1" if rule else "0")
            else:
                cell[int(r["splits"])] = (cell[int(r["splits"])][0], "1")
    for batch in sorted({b for b, _ in sweep}):
        lens = sorted(L for b, L in sweep if b == batch)
        counts = sorted({c for (b, _), v in sweep.items() if b == batch for c in v})
        if len(counts) < 2:
            continue
        out += [""] if out else []
        out += [f"Step 10 at batch {batch} by split count (µs; * the rule's choice)\n",
                "| splits | " + " | ".join(f"{L // 1024}K" for L in lens) + " |", "|---|" + "---:|" * len(lens)]
        for c in counts:
            cells = []
            for L in lens:
                t = sweep[(batch, L)].get(c)
                cells.append("–" if t is None else f"{t[0]:,.1f}" + ("*" if t[1] == "1" else ""))
            out.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bin/step10_decode", help="step10_decode")
    ap.add_argument("--csv", default="decode.csv", help="rows are appended here")
    ap.add_argument("--batches", default="1 8 64")
    ap.add_argument("--cache-lens", default="4096 32768 131072")
    ap.add_argument("--new-tokens", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--pages", default="16 256", help="page sizes of the paged runs (none: \"\")")
    ap.add_argument("--backends", default="torch_flash torch_cudnn")
    ap.add_argument("--sweep", action="store_true", help="also the split counts of SWEEP, contiguous cache")
    ap.add_argument("--summary", metavar="CSV", help="only print the summary of an earlier run's rows")
    args = ap.parse_args()
    if args.summary:
        print(summary(args.summary), end="")
        return
    import torch
    if not torch.cuda.is_available():
        sys.exit("decode_bench.py: no CUDA GPU")
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"decode_bench.py: {args.bin} is not an executable (build step10_decode)")
    torch.cuda.set_device(0)
    rows = Rows(args.csv, torch.cuda.get_device_name(0), os.environ.get("FS_COMMIT", "unknown"))
    rate = copy_rate(torch, rows, args.reps)
    print(f"copy rate {rate:.0f} GB/s", flush=True)
    for B in map(int, args.batches.split()):
        for L in map(int, args.cache_lens.split()):
            print(f"batch {B}, cache {L}", flush=True)
            torch_rows(torch, args, rows, B, L)
            for page in [0] + [int(p) for p in args.pages.split()]:
                step_rows(args, B, L, page)
            if args.sweep:  # up to about 8 waves of 2 CTAs per SM on 132 SMs
                for s in SWEEP:
                    if B * args.heads_kv * s <= 2048:
                        step_rows(args, B, L, 0, s)
    copy_rate(torch, rows, args.reps)
    print(summary(args.csv), end="")


if __name__ == "__main__":
    main()
