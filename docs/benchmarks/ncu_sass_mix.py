#!/usr/bin/env python3
"""Per-opcode totals of Nsight Compute's source page: what a kernel executed and where its warps waited.

    ncu --section SourceCounters --section WarpStateStats --clock-control none -o REPORT -k regex:KERNEL ... PROGRAM
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > PAGE.csv
    python3 docs/benchmarks/ncu_sass_mix.py LABEL=PAGE.csv [LABEL=PAGE.csv ...] > OUT.csv

One row per kernel and opcode (the SASS mnemonic without its predicate and modifiers: BRA, HMMA,
LDSM, REDG, ...): the instructions executed (warp-level) and the warp-stall samples taken at that
opcode's instructions, in all and by the reasons that matter most for the step 08 kernels. The
columns gpu, step, pass, N, d, ... of <gpu>.csv are absent; prose_check's `csv gpu=FILE` reads it
by its own columns (kernel=LABEL op=OPCODE field=executed).
"""
import collections
import csv
import re
import sys

REASONS = ("long_sb", "short_sb", "mio", "barrier", "wait", "math", "branch_resolving", "no_inst")


def opcode(source):
    text = re.sub(r"^@!?U?P\w+\s+", "", source.strip())
    return text.split()[0].split(".")[0] if text else ""


def page_rows(path):
    with open(path, newline="") as fh:
        lines = fh.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))  # after the kernel's name
    return list(csv.DictReader(lines[start:]))


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["kernel", "op", "executed", "samples", *REASONS])
    for arg in args:
        label, path = arg.split("=", 1)
        executed, samples = collections.Counter(), collections.defaultdict(collections.Counter)
        for r in page_rows(path):
            op = opcode(r["Source"])
            if not op:
                continue
            executed[op] += float(r["Instructions Executed"] or 0)
            for key, value in r.items():
                if key.startswith("stall_") and "Not Issued" not in key:
                    samples[op][key[len("stall_"):]] += float(value or 0)
        for op in sorted(executed, key=lambda o: -executed[o]):
            s = samples[op]
            out.writerow([label, op, int(executed[op]), int(sum(s.values())), *(int(s[k]) for k in REASONS)])


if __name__ == "__main__":
    main(sys.argv[1:])
