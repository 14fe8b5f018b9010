#!/usr/bin/env python3
"""Turns Nsight Compute's CSV (one row per kernel and metric, with the step, "04_online_softmax/fa2",
prefixed as the first column by ncu_bytes.sh) into one row per kernel launch:

  gpu,step,pass,kernel,dram_read_bytes,dram_write_bytes,time_ns,B,H,N,d,causal,commit,date

A step program runs its forward, then its backward: kernels after the first backward kernel
(named in BACKWARD_KERNELS) belong to the backward pass. --keep OLD.csv first copies the rows
of OLD.csv whose step this run did not measure (ncu_bytes.sh with STEPS=...).

  ncu_normalize.py RAW.csv --gpu "NVIDIA H200" --shape 1,8,2048,64 --causal 0 --commit C --date D [--keep OLD.csv] > OUT.csv
"""
import argparse
import csv
import re
import sys

BACKWARD_KERNELS = ("dv_kernel", "dp_kernel", "ds_fused_kernel", "bwd_preprocess_kernel")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--shape", required=True, help="B,H,N,d")
    ap.add_argument("--causal", default="0")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--keep", help="an earlier <gpu>_ncu.csv: its rows of the steps not measured now stay")
    args = ap.parse_args()
    B, H, N, d = args.shape.split(",")
    launches = {}  # (step, id) -> dict
    order = []
    for row in csv.reader(open(args.raw)):
        if len(row) < 16 or row[1] == "ID":
            continue
        step = row[0]
        key = (step, int(row[1]))
        if key not in launches:
            name = re.sub(r"^void ", "", row[5])
            name = re.sub(r"\(.*$", "", name).replace("unnamed>::", "").replace("fs::", "")
            launches[key] = {"step": step, "kernel": name}
            order.append(key)
        metric, value = row[13], row[15].replace(",", "")
        launches[key][metric] = value
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["gpu", "step", "pass", "kernel", "dram_read_bytes", "dram_write_bytes", "time_ns",
                "B", "H", "N", "d", "causal", "commit", "date"])
    if args.keep:
        measured = {step for step, _ in order}
        with open(args.keep, newline="") as f:
            rows = list(csv.reader(f))[1:]
        w.writerows(r for r in rows if r[1] not in measured)
    in_bwd = {}
    for key in order:
        l = launches[key]
        if any(k in l["kernel"] for k in BACKWARD_KERNELS):
            in_bwd[l["step"]] = True
        w.writerow([args.gpu, l["step"], "bwd" if in_bwd.get(l["step"]) else "fwd", l["kernel"],
                    l.get("dram__bytes_read.sum", ""), l.get("dram__bytes_write.sum", ""),
                    l.get("gpu__time_duration.sum", ""), B, H, N, d, args.causal, args.commit, args.date])


if __name__ == "__main__":
    sys.exit(main())
