#!/usr/bin/env python3
"""Regenerates the benchmark tables and figures from the committed CSVs: docs/benchmarks/<gpu>.md
beside each <gpu>.csv (and beside each CSV of docs/benchmarks/experiments/), the figures in
docs/benchmarks/figures/, and every block between markers in the README, the lessons, docs/*.md
and the lab notebooks (docs/lab/*.md):

    <!-- results:STEP_PREFIX gpu=h200 [pass=fwd] [d=64] [causal=0] [layout=pivot] -->
    ...generated table...
    <!-- /results -->

    <!-- ncu:STEP_PREFIX gpu=h200 -->   DRAM bytes per kernel (Nsight Compute, <gpu>_ncu.csv)
    ...generated...                    next to the IO model (<gpu>_model.csv)
    <!-- /ncu -->

    <!-- figure:KIND [STEP_PREFIX,...] gpu=h200 [d=64] [causal=0] [pass=fwd,fwdbwd] -->
    ![...](docs/benchmarks/figures/<gpu>_<KIND>_<what it shows>.svg)
    <!-- /figure -->

    <!-- quality:attention|embeddings file=steps/07_smyrf/quality/minilm_*.csv -->
    ...SMYRF on a real model's attention (steps/07_smyrf/quality/run.sh writes the CSVs)...
    <!-- /quality -->

    <!-- decode: file=docs/benchmarks/experiments/<gpu>_*_decode.csv [part=summary|sweep] -->
    ...step 10 beside PyTorch's SDPA on decoding shapes (decode_bench.py writes the CSV, whose
    columns are its own: render.py renders no <slug>.md for a *_decode CSV)...
    <!-- /decode -->

A marker's gpu= names a CSV of docs/benchmarks without its .csv (gpu=h200), or one in a folder of
it (gpu=experiments/h200_tc_tiles: docs/benchmarks/experiments/h200_tc_tiles.csv, where the files
of one-off experiments live); a figure is named after the CSV's own name, without the folder.

Layouts of a results block: pivot (N by implementation), table (one line per row), fwdbwd
(forward + backward time), density (block-sparse time against density), smyrf (step 07 against
the SMYRF authors' code, mask=smyrf:*). Figure kinds: tflops
(TFLOP/s against N), memory (device memory per head against N), roofline, density, ladder (a
step's variants as bars), time (median ms against N, SMYRF's rows too). No generated table is wider than MAX_COLUMNS columns: a table answers
one question, and the CSV keeps every column.

Needs matplotlib: started by a python3 without it, it runs itself again under Debian's
/usr/bin/python3 (cmake/quickstart.sh installs python3-matplotlib there). `--check` exits 1 (and
changes nothing) when a generated file is out of date: CI runs that. Numbers and figures in the
docs come from here, never typed by hand.
"""
import argparse
import csv
import glob
import os
import re
import sys

import prose_check  # numbers quoted in the prose, held to the same data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "docs", "benchmarks")
FIGURES = os.path.join(BENCH, "figures")
# Folders of docs/benchmarks whose CSVs are rendered too (a slug then names the folder: gpu=experiments/NAME).
CSV_FOLDERS = ("", "experiments")
VERSION_FILE = os.path.join(FIGURES, "matplotlib_version.txt")
DEBIAN_PYTHON = "/usr/bin/python3"
MAX_COLUMNS = 8
MARKER = re.compile(r"(<!-- results:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
NCU_MARKER = re.compile(r"(<!-- ncu:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /ncu -->)", re.S)
FIGURE_MARKER = re.compile(r"(<!-- figure:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /figure -->)", re.S)
QUALITY_MARKER = re.compile(r"(<!-- quality:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /quality -->)", re.S)
DECODE_MARKER = re.compile(r"(<!-- decode:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /decode -->)", re.S)
# fwd_prep, fwd_kernel: the two parts of a forward that prepares its inputs (step 09's fp8: the
# quantizer, then the kernel on its output), timed alone beside the whole (common/driver.hpp).
PASS_NAME = {"fwd": "forward", "bwd": "backward", "fwdbwd": "forward + backward",
             "fwd_prep": "forward's preparation (the quantizer)", "fwd_kernel": "forward's kernel alone"}
PASS_ORDER = ["fwd", "fwd_prep", "fwd_kernel", "bwd", "fwdbwd"]
# Step 05 times its forward (step 04's fa2 kernel, unchanged) only to pair it with its own
# backward: a view that also shows step 04's fa2 shows that kernel once, as step 04's.
FORWARD_IS = {"05_recompute_backward/": "04_online_softmax/fa2"}
# step -> its place in the order in which the CSVs (read by load) first record the steps: bench
# runs a step's variants in the order of its ladder.
FIRST_SEEN = {}


# --- Rows --------------------------------------------------------------------------------------

def csv_slugs(bench=None):
    """The slugs of the CSVs render.py renders, each a path under docs/benchmarks without .csv
    ("h200", "experiments/h200_tc_tiles"), in the order of their names whatever their folder (the
    order in which a step's variants are first seen, FIRST_SEEN, follows it): not the Nsight Compute
    and IO model files, which only markers read. Two CSVs may not share a name in different folders:
    a figure is named after it."""
    bench = bench or BENCH
    slugs = []
    for folder in CSV_FOLDERS:
        for path in sorted(glob.glob(os.path.join(bench, folder, "*.csv"))):
            slug = os.path.relpath(os.path.splitext(path)[0], bench).replace(os.sep, "/")
            if not slug.endswith(("_ncu", "_model", "_decode")):
                slugs.append(slug)
    names = [os.path.basename(s) for s in slugs]
    twice = sorted({s for s in slugs if names.count(os.path.basename(s)) > 1})
    if twice:
        raise SystemExit(f"two CSVs of one name in docs/benchmarks: {', '.join(twice)} (figures are named after it)")
    return sorted(slugs, key=os.path.basename)


def gpu_of(slug):
    """The GPU's short name that a slug starts with (h200 of experiments/h200_tc_tiles): its ceilings
    are docs/benchmarks/<gpu>_ceilings.txt."""
    return os.path.basename(slug).split("_")[0]


def load(slug):
    with open(os.path.join(BENCH, slug + ".csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    # A later run of the same configuration replaces an earlier one.
    latest = {}
    for r in rows:
        FIRST_SEEN.setdefault(r["step"], len(FIRST_SEEN))
        # Files recorded before the dropout and mask columns existed: dense, no dropout.
        r.setdefault("dropout", "0")
        r.setdefault("mask", "")
        r.setdefault("density", "1")
        key = (r["step"], r["pass"], r["dtype"], r["B"], r["H"], r["N"], r["d"], r["causal"], r["dropout"],
               r["mask"])
        latest[key] = r
    return list(latest.values())


def plain(rows):
    """Rows without dropout and without a block mask."""
    return [r for r in rows if not r["mask"] and float(r["dropout"] or 0) == 0]


def with_fwdbwd(rows):
    """rows plus one row of pass `fwdbwd` for every forward and backward row of one configuration:
    the two times added, TFLOP/s over both (FLOPs 3.5× the forward's), the larger memory."""
    fwd = {}
    for r in rows:
        if r["pass"] == "fwd":
            fwd[tuple(r[k] for k in ("step", "dtype", "B", "H", "N", "d", "causal", "dropout", "mask"))] = r
    out = list(rows)
    for b in rows:
        f = fwd.get(tuple(b[k] for k in ("step", "dtype", "B", "H", "N", "d", "causal", "dropout", "mask")))
        if b["pass"] != "bwd" or not f:
            continue
        ms_f, ms_b = float(f["median_ms"]), float(b["median_ms"])
        r = dict(b)
        r["pass"] = "fwdbwd"
        r["median_ms"] = repr(ms_f + ms_b)
        r["tflops"] = repr((float(f["tflops"]) * ms_f + float(b["tflops"]) * ms_b) / (ms_f + ms_b))
        r["peak_mem_bytes"] = str(max(int(f["peak_mem_bytes"] or 0), int(b["peak_mem_bytes"] or 0)))
        r["hbm_bytes_model"] = ""
        out.append(r)
    return out


def label(r):
    """The step, and what the run added: dropout, a block-sparse mask."""
    out = r["step"]
    if float(r["dropout"] or 0) > 0:
        out += f' dropout {r["dropout"]}'
    if is_smyrf(r):  # its density follows from the clustering and N
        out += f' {r["mask"]}'
    elif r["mask"]:
        out += f' {r["mask"]} (density {float(r["density"]):.4g})'
    return out


def step_key(s):
    """Numbered steps in order, a step's variants (the rungs of its ladder) in the order the CSVs
    first record them, then PyTorch."""
    step = s.split(" ")[0]
    m = re.match(r"(\d+)_", step)
    return (0 if m else 1, int(m[1]) if m else 0, FIRST_SEEN.get(step, len(FIRST_SEEN)), s)


def legend_key(labels):
    """step_key of a label, or of the first of several drawn as one line."""
    return step_key(labels if isinstance(labels, str) else labels[0])


def select(rows, prefixes, filters):
    """Rows whose step starts with one of prefixes (all when empty) and whose columns match
    filters (a value, a comma-separated list of values, or *)."""
    return [r for r in rows if (not prefixes or r["step"].startswith(tuple(prefixes)))
            and all(v == "*" or r.get(k) in v.split(",") for k, v in filters.items())]


def drop_repeated_forward(rows):
    """Leaves out a step's forward rows when the kernel they time (FORWARD_IS) is in rows too."""
    steps = {r["step"] for r in rows}
    return [r for r in rows if not (r["pass"] == "fwd" and any(
        r["step"].startswith(p) and k in steps for p, k in FORWARD_IS.items()))]


def one_shape_per_n(rows):
    """{(label, N): row}: at each N the row with the most heads (B·H), the standard shape
    (B·N = 16384 tokens, H = 2048/d) where it was recorded."""
    best = {}
    for r in sorted(rows, key=lambda r: (int(r["B"]) * int(r["H"]), int(r["H"]))):
        best[(label(r), int(r["N"]))] = r
    return best


def groups(rows, *keys):
    """The distinct values of keys in rows, sorted (pass in PASS_ORDER, numbers as numbers)."""
    def order(k, v):
        return PASS_ORDER.index(v) if k == "pass" else (float(v) if re.fullmatch(r"[\d.]+", v) else v)
    return sorted({tuple(r[k] for k in keys) for r in rows},
                  key=lambda g: tuple((order(k, v),) for k, v in zip(keys, g)))


def heading(p, d, c):
    return f"**{PASS_NAME[p]}, d = {d}, {'causal' if c == '1' else 'not causal'}**"


# --- Tables ------------------------------------------------------------------------------------

def fmt_bytes(b):
    if not b:
        return ""
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.2f} {unit}"
        b /= 1024


def time_cell(r):
    return f"{float(r['median_ms']):.2f} ({float(r['tflops']):.1f})" if r else ""


def table(rows):
    """One line per row, one table per pass, d and causal."""
    out = []
    for p, d, c in groups(rows, "pass", "d", "causal"):
        sub = sorted([r for r in rows if (r["pass"], r["d"], r["causal"]) == (p, d, c)],
                     key=lambda r: (int(r["N"]), step_key(label(r))))
        out += [heading(p, d, c) + "\n",
                "| step | N | B×H | time (ms) | TFLOP/s | device memory | HBM model |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for r in sub:
            out.append(f"| {label(r)} | {r['N']} | {r['B']}×{r['H']} | {float(r['median_ms']):.3f} | "
                       f"{float(r['tflops']):.2f} | {fmt_bytes(r['peak_mem_bytes'])} | "
                       f"{fmt_bytes(r['hbm_bytes_model'])} |")
        out.append("")
    return "\n".join(out)


def column_chunks(columns, fixed):
    """columns split into as few tables as keep each within MAX_COLUMNS beside `fixed` columns,
    as evenly as they go (7 steps beside N and B×H: 4 and 3, not 6 and 1)."""
    per = MAX_COLUMNS - fixed
    n = max(1, -(-len(columns) // per))
    size = -(-len(columns) // n)
    return [columns[i:i + size] for i in range(0, len(columns), size)]


def pivot(rows):
    """Median time in ms (TFLOP/s) by N (rows) and step (columns), one table per pass, d, causal
    (two or more when there are more steps than columns fit)."""
    out = []
    for p, d, c in groups(rows, "pass", "d", "causal"):
        sub_rows = [r for r in rows if (r["pass"], r["d"], r["causal"]) == (p, d, c)]
        steps = sorted({label(r) for r in sub_rows}, key=step_key)
        shapes = sorted({(int(r["N"]), int(r["B"]), int(r["H"])) for r in sub_rows})
        cell = {(label(r), int(r["N"]), int(r["B"]), int(r["H"])): r for r in sub_rows}
        out.append(heading(p, d, c) + " — median ms (TFLOP/s)\n")
        for chunk in column_chunks(steps, 2):
            out.append("| N | B×H | " + " | ".join(chunk) + " |")
            out.append("|---:|---:|" + "---:|" * len(chunk))
            for N, B, H in shapes:
                out.append(f"| {N} | {B}×{H} | " + " | ".join(time_cell(cell.get((s, N, B, H))) for s in chunk) + " |")
            out.append("")
    return "\n".join(out)


def by_n(rows, cell=time_cell, unit="median ms (TFLOP/s)"):
    """Implementations (rows of the table) by N (columns), one table per pass, d and causal: at
    each N the shape with the most heads, named in the column's heading."""
    out = []
    for p, d, c in groups(rows, "pass", "d", "causal"):
        sub = one_shape_per_n([r for r in rows if (r["pass"], r["d"], r["causal"]) == (p, d, c)])
        labels = sorted({lb for lb, _ in sub}, key=step_key)
        shape = {}
        for (lb, n), r in sorted(sub.items(), key=lambda kv: int(kv[1]["B"]) * int(kv[1]["H"])):
            shape[n] = f"{r['B']}×{r['H']}"
        ns = sorted(shape)
        out.append(heading(p, d, c) + f" — {unit}; columns: N (B×H)\n")
        out.append("| implementation | " + " | ".join(f"{n} ({shape[n]})" for n in ns) + " |")
        out.append("|---|" + "---:|" * len(ns))
        for lb in labels:
            out.append(f"| {lb} | " + " | ".join(cell(sub.get((lb, n))) for n in ns) + " |")
        out.append("")
    return "\n".join(out)


def memory_cell(r):
    return fmt_bytes(r["peak_mem_bytes"]) if r else ""


def dropout_table(rows):
    """What dropout costs: time with dropout and its ratio to the same run without, by N."""
    base = {(r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"]): r for r in plain(rows)}
    with_p = [r for r in rows if float(r["dropout"] or 0) > 0 and not r["mask"]]

    def cell(r):
        if not r:
            return ""
        b = base.get((r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"]))
        ms = float(r["median_ms"])
        return f"{ms:.2f}" + (f" ({ms / float(b['median_ms']):.2f}×)" if b else "")
    return by_n(with_p, cell, "median ms with dropout (× the same run without)")


def dense_reference(rows):
    """{(step, pass, B, H, N, d, causal): row} of the dense runs a block-sparse run is measured
    against: forward, step 04's fa2 kernel; backward, step 05 with the same dQ variant."""
    dense = {}
    for r in plain(rows):
        if r["step"].startswith(("04_online_softmax/fa2", "05_")):
            dense[(r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"])] = r
    return dense


def mask_family(r):
    return r["mask"].split("@")[0].split(":")[0]


def density_cells(rows, all_rows):
    """Block-sparse rows as (N, B, H, causal, pass, dQ variant, pattern family, density, ms,
    ms / dense ms or None). The all-ones mask ("dense") is density 1 of every family; the forward
    is the same kernel for both dQ variants, so it is taken from the atomic one."""
    dense = dense_reference(all_rows)
    families = {}
    for r in rows:
        if mask_family(r) != "dense":
            families.setdefault((r["N"], r["B"], r["H"], r["causal"]), set()).add(mask_family(r))
    out = []
    for r in rows:
        v = r["step"].split("/")[-1]
        if r["pass"] == "fwd" and v != "atomic":
            continue
        refs = ["04_online_softmax/fa2", "05_recompute_backward/atomic"] if r["pass"] == "fwd" else \
            ["05_recompute_backward/" + v]
        d = next((dense[k] for k in ((ref, r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"]) for ref in refs)
                  if k in dense), None)
        ms = float(r["median_ms"])
        fams = sorted(families.get((r["N"], r["B"], r["H"], r["causal"]), {"dense"})) \
            if mask_family(r) == "dense" else [mask_family(r)]
        for f in fams:
            out.append((int(r["N"]), int(r["B"]), int(r["H"]), r["causal"], r["pass"], v, f,
                        round(float(r["density"]), 6), ms, ms / float(d["median_ms"]) if d else None))
    return out


def density_table(rows, all_rows):
    """Block-sparse time against density, one table per pass (and causal setting), a line per
    shape and density: each cell is the time in ms and, in brackets, its ratio to the dense step's
    time at the same shape; the target is a ratio of at most 1.3 × density."""
    cells = density_cells(rows, all_rows)
    out = []
    for c, p in sorted({(k[3], k[4]) for k in cells}, key=lambda k: (k[0], PASS_ORDER.index(k[1]))):
        sub = [k for k in cells if (k[3], k[4]) == (c, p)]
        cols = sorted({(k[5], k[6]) for k in sub})
        text = {(k[:3], k[7], k[5], k[6]): f"{k[8]:.2f}" + (f" ({k[9]:.3f})" if k[9] is not None else "") for k in sub}
        out.append(f"**{PASS_NAME[p]}, {'causal' if c == '1' else 'not causal'}** — ms (time / dense)\n")
        out.append("| N | B×H | density | 1.3 × density | " + " | ".join(
            f + (f" ({v} dQ)" if p == "bwd" else "") for v, f in cols) + " |")
        out.append("|---:|---:|---:|---:|" + "---:|" * len(cols))
        for shape, dn in sorted({(k[:3], k[7]) for k in sub}, key=lambda k: (k[0][0], k[0][1] * k[0][2], -k[1])):
            out.append(f"| {shape[0]} | {shape[1]}×{shape[2]} | {dn:.4g} | {1.3 * dn:.3f} | "
                       + " | ".join(text.get((shape, dn, v, f), "") for v, f in cols) + " |")
        out.append("")
    return "\n".join(out)


def fwdbwd_table(rows):
    """Forward + backward time (ms) by N (rows) and step (columns), one table per causal and
    dropout setting, with one speed-up: step 05's over the materialising baseline, or step 08's
    fa2 over FlashAttention-2 (torch_flash), when the table has that pair."""
    out = []
    both = [r for r in with_fwdbwd(rows) if r["pass"] == "fwdbwd"]
    for c, p in groups(both, "causal", "dropout"):
        sub = {(r["step"], int(r["N"]), int(r["B"]), int(r["H"])): float(r["median_ms"])
               for r in both if (r["causal"], r["dropout"]) == (c, p)}
        steps = sorted({k[0] for k in sub}, key=step_key)
        if "08_tensor_cores/fa2" in steps and "torch_flash" in steps:
            base, fast, label = "torch_flash", "08_tensor_cores/fa2", "torch_flash / 08 fa2"
        else:
            base = "01_naive" if "01_naive" in steps else "torch_math"
            fast, label = "05_recompute_backward/atomic", f"{base} / 05 atomic"
        out.append(f"**forward + backward, {'causal' if c == '1' else 'not causal'}, dropout {p}** — ms\n")
        out.append("| N | B×H | " + " | ".join(steps) + f" | {label} |")
        out.append("|---:|---:|" + "---:|" * (len(steps) + 1))
        for N, B, H in sorted({k[1:] for k in sub}):
            cells = [f"{sub[(s, N, B, H)]:.2f}" if (s, N, B, H) in sub else "" for s in steps]
            a, b = sub.get((base, N, B, H)), sub.get((fast, N, B, H))
            out.append(f"| {N} | {B}×{H} | " + " | ".join(cells) + f" | {f'{a / b:.2f}×' if a and b else ''} |")
        out.append("")
    return "\n".join(out)


def is_smyrf(r):
    return r["mask"].startswith("smyrf:")


# FlashAttention's interface features, as common/plan.cpp labels a run's mask column: parts
# joined by "+", each a name and its values ("heads-kv:8", "window:256:0", "softcap:30", "alibi").
FEATURES = ("seq-k", "heads-kv", "window", "softcap", "alibi")


def is_feature(r):
    return bool(r["mask"]) and all(part.split(":")[0] in FEATURES for part in r["mask"].split("+"))


def is_window(r):
    """A sliding window alone: time against the fraction of scores it keeps, as block-sparse's."""
    return is_feature(r) and "+" not in r["mask"] and r["mask"].startswith("window:")


def is_block_sparse(r):
    return bool(r["mask"]) and not is_smyrf(r) and not is_feature(r)


def feature_table(rows, all_rows):
    """Runs with interface features other than a window alone, against the same step without
    them at the same shape: a table per pass and causal setting, a line per step, shape and
    features."""
    dense = {(r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"], r["dtype"]): r for r in plain(all_rows)}
    out = []
    for c, p in sorted({(r["causal"], r["pass"]) for r in rows}, key=lambda k: (k[0], PASS_ORDER.index(k[1]))):
        out.append(f"**{PASS_NAME[p]}, {'causal' if c == '1' else 'not causal'}** — ms (time / without the features)\n")
        out.append("| implementation | N | B×H | features | ms | without | ratio |")
        out.append("|---|---:|---:|---|---:|---:|---:|")
        for r in sorted((r for r in rows if (r["causal"], r["pass"]) == (c, p)),
                        key=lambda r: (step_key(r["step"]), int(r["N"]), r["mask"])):
            d = dense.get((r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"], r["dtype"]))
            ms = float(r["median_ms"])
            ratio = f"{ms / float(d['median_ms']):.3f}" if d else ""
            out.append(f"| {r['step']} | {r['N']} | {r['B']}×{r['H']} | `{r['mask']}` | {ms:.2f} | "
                       f"{float(d['median_ms']):.2f} | {ratio} |" if d else
                       f"| {r['step']} | {r['N']} | {r['B']}×{r['H']} | `{r['mask']}` | {ms:.2f} |  |  |")
        out.append("")
    return "\n".join(out)


def smyrf_table(rows):
    """Step 07 against the SMYRF authors' PyTorch module (smyrf_authors.py), one table per pass and
    shape: a line per N and clustering, time and device memory of each and their ratios."""
    out = []
    sm = [r for r in rows if is_smyrf(r) and r["step"] in ("07_smyrf", "smyrf_authors")]
    for p, d, B, H in groups(sm, "pass", "d", "B", "H"):
        sub = {(r["step"], int(r["N"]), r["mask"]): r for r in sm if (r["pass"], r["d"], r["B"], r["H"]) == (p, d, B, H)}
        out.append(f"**{PASS_NAME[p]}, d = {d}, B×H = {B}×{H}** — step 07 against the authors' code\n")
        out.append("| N | hashes × cluster | step 07 (ms) | authors' (ms) | authors' / 07 | step 07 memory | "
                   "authors' memory | authors' / 07 |")
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|")
        keys = sorted({(n, m) for _, n, m in sub}, key=lambda k: (k[0], [int(x) for x in k[1][6:].split("x")]))
        for n, m in keys:
            a, b = sub.get(("07_smyrf", n, m)), sub.get(("smyrf_authors", n, m))
            t = lambda r: f"{float(r['median_ms']):.3f}" if r else ""
            ratio = lambda x, y: f"{x / y:.1f}×" if x and y else ""
            ms = ratio(b and float(b["median_ms"]), a and float(a["median_ms"]))
            mem = ratio(b and float(b["peak_mem_bytes"]), a and float(a["peak_mem_bytes"]))
            out.append(f"| {n} | {m[6:].replace('x', ' × ')} | {t(a)} | {t(b)} | {ms} | "
                       f"{fmt_bytes(a['peak_mem_bytes']) if a else ''} | {fmt_bytes(b['peak_mem_bytes']) if b else ''} | "
                       f"{mem} |")
        out.append("")
    return "\n".join(out)


def too_wide(text):
    """The header lines of markdown tables in text with more than MAX_COLUMNS columns."""
    lines = text.split("\n")
    return [a for a, b in zip(lines, lines[1:])
            if a.startswith("|") and re.fullmatch(r"\|(:?-+:?\|)+", b) and b.count("|") - 1 > MAX_COLUMNS]


# --- Figures -----------------------------------------------------------------------------------

class Figures:
    """The figures to draw, from the markers and the <gpu>.md pages: each is named after what it
    shows (kind, CSV, step prefixes, filters, with its dtype and d resolved from the rows), so a
    figure asked for in two places is one file."""

    def __init__(self, cache):
        self.cache = cache
        self.specs = {}

    def add(self, kind, slug, prefixes, filters):
        """The path of the figure's SVG."""
        if kind not in DRAW:
            raise SystemExit(f"unknown figure kind {kind!r} (one of {', '.join(DRAW)})")
        filters = {k: ",".join(sorted(v.split(","))) for k, v in filters.items()}
        with_mask = {"density": is_block_sparse, "window": is_window, "time": lambda r: not r["mask"] or is_smyrf(r)}
        rows = select([r for r in self.cache[slug] if with_mask.get(kind, lambda r: not r["mask"])(r)], prefixes,
                      {k: v for k, v in filters.items() if k != "pass"})
        for key in ("dtype", "d"):
            values = {r[key] for r in rows}
            if len(values) == 1:
                filters[key] = values.pop()
        prefixes = tuple(sorted(p.rstrip("/") for p in prefixes))
        rest = {k: v for k, v in filters.items() if k not in ("dtype", "d")}
        name = "_".join([os.path.basename(slug), kind] + (["-".join(prefixes).replace("/", ".")] if prefixes else [])
                        + ([filters["dtype"]] if "dtype" in filters else [])
                        + ([f"d{filters['d']}"] if "d" in filters else [])
                        + [f"{k}{v.replace(',', '-').replace(':', '')}" for k, v in sorted(rest.items())])
        self.specs[name] = (kind, slug, prefixes, tuple(sorted(filters.items())))
        return os.path.join(FIGURES, name + ".svg")

    def draw(self):
        """{path: svg bytes}."""
        import charts
        out = {}
        for name, (kind, slug, prefixes, filters) in sorted(self.specs.items()):
            # Colours by the order in which the slug's CSV first records each implementation.
            palette = charts.Palette(list(dict.fromkeys(r["step"] for r in self.cache[slug])))
            out[os.path.join(FIGURES, name + ".svg")] = DRAW[kind](charts, palette, slug, self.cache[slug], prefixes,
                                                                   dict(filters))
        return out

    def image(self, kind, slug, prefixes, filters, from_dir):
        """The markdown image line of a figure, which is added to the figures to draw."""
        path = self.add(kind, slug, prefixes, filters)
        f = dict(self.specs[os.path.splitext(os.path.basename(path))[0]][3])
        about = [", ".join(prefixes) or {"density": "every block-sparse run", "window": "every sliding-window run"}.get(
                     kind, "every step and PyTorch"),
                 f"{gpu_name(self.cache[slug])} ({slug}.csv)"]
        if "dtype" in f:
            about.append(f["dtype"])
        if "d" in f:
            about.append(f"d = {f['d']}")
        if "causal" in f:
            about.append({"0": "not causal", "1": "causal"}.get(f["causal"], "causal and not"))
        if "pass" in f:
            about.append(" and ".join(PASS_NAME[p] for p in sorted(f["pass"].split(","), key=PASS_ORDER.index)))
        return f"![{WHAT[kind][0].upper() + WHAT[kind][1:]}: {', '.join(about)}]({os.path.relpath(path, from_dir)})\n"


def gpu_name(rows):
    return ", ".join(sorted({r["gpu"] for r in rows}))


def ceilings(slug):
    """The measured ceilings of the slug's GPU (<gpu>_ceilings.txt, from ceilings.py):
    {'hbm': GB/s, <dtype>: TFLOP/s of its GEMM}."""
    path = os.path.join(BENCH, gpu_of(slug) + "_ceilings.txt")
    out = {}
    if os.path.exists(path):
        for line in open(path):
            m = re.search(r"HBM copy ([\d.]+) GB/s", line)
            if m:
                out["hbm"] = float(m[1])
            m = re.search(r"(\w+) [SDH]GEMM ([\d.]+) TFLOP/s", line)
            if m:
                out[m[1]] = float(m[2])
    return out


def compute_ceiling(slug, dtype):
    c = ceilings(slug).get(dtype)
    return [(c, f"cuBLAS {dtype} GEMM, measured: {c:g} TFLOP/s")] if c else []


def figure_rows(rows, prefixes, filters, default_causal=None):
    """The plain rows a figure draws (and the dtype and d it is about), with fwdbwd rows added."""
    filters = dict(filters)
    if default_causal is not None:
        filters.setdefault("causal", default_causal)
    sub = select(with_fwdbwd(plain(rows)), prefixes, filters)
    for key in ("dtype", "d"):
        if len({r[key] for r in sub}) > 1:
            raise SystemExit(f"a figure needs one {key}: say {key}= in its marker ({sorted({r[key] for r in sub})})")
    if not sub:
        raise SystemExit(f"no rows for the figure {prefixes} {filters}")
    return sub, sub[0]["dtype"], sub[0]["d"]


def shape_note(rows):
    """The shapes a figure draws (one per N in each panel): the standard sweep's, and where they
    leave it."""
    drawn = [r for p, c in groups(rows, "pass", "causal")
             for r in one_shape_per_n([r for r in rows if (r["pass"], r["causal"]) == (p, c)]).values()]
    odd = sorted({(int(r["N"]), f"{r['B']}×{r['H']}") for r in drawn
                  if int(r["B"]) * int(r["N"]) != max(16384, int(r["N"])) or int(r["H"]) * int(r["d"]) != 2048})
    return f"B·N = 16384 tokens, H = {2048 // int(rows[0]['d'])}" + "".join(f"; N = {n}: B×H = {s}" for n, s in odd)


def subtitle(what, rows, dtype, d):
    causal = {r["causal"] for r in rows}
    return (f"{what} on {gpu_name(rows)}: {dtype}, d = {d}"
            + ("" if len(causal) > 1 else ", causal" if causal == {"1"} else ", not causal") + f"\n{shape_note(rows)}")


def panel_title(p, c, causal_values):
    return PASS_NAME[p] + ("" if len(causal_values) < 2 and c == "0" else
                           (", causal" if c == "1" else ", not causal"))


def panel_grid(sub, passes, make):
    """Panels by pass and causal: one row when there is one causal setting, else rows of passes
    and columns of causal settings. make(pass, causal, rows) -> a panel."""
    causal_values = sorted({r["causal"] for r in sub})
    cells = [[(p, c) for c in causal_values] for p in passes]
    if len(causal_values) == 1:
        cells = [[pc[0] for pc in cells]]
    return [[make(p, c, [r for r in sub if (r["pass"], r["causal"]) == (p, c)], causal_values) for p, c in row]
            for row in cells]


def series(rows, value):
    """{label: [(N, value(row))]} in step order, one shape per N."""
    out = {}
    for (lb, n), r in sorted(one_shape_per_n(rows).items(), key=lambda kv: step_key(kv[0][0])):
        out.setdefault(lb, []).append((n, value(r)))
    return out


def merge_close(series, within=0.05):
    """Series of the same points within a fraction `within` of each other, as one series under a
    tuple of their labels (lines that would hide each other, e.g. the memory of steps 03 and 04)."""
    out = {}
    for lb, pts in series.items():
        pts = sorted(pts)
        twin = next((k for k, p in out.items() if [n for n, _ in p] == [n for n, _ in pts] and all(
            abs(a - b) <= within * max(a, b) for (_, a), (_, b) in zip(p, pts))), None)
        if twin:
            out[twin + (lb,)] = out.pop(twin)
        else:
            out[(lb,)] = pts
    return {k if len(k) > 1 else k[0]: v for k, v in out.items()}


def draw_tflops(charts, palette, slug, rows, prefixes, filters):
    sub, dtype, d = figure_rows(rows, prefixes, filters)
    sub = drop_repeated_forward(sub)
    passes = [p for p in ("fwd", "fwdbwd") if p in filters.get("pass", "fwd,fwdbwd").split(",")
              and any(r["pass"] == p for r in sub)]
    grid = panel_grid(sub, passes, lambda p, c, rs, cv: (panel_title(p, c, cv),
                                                       series(rs, lambda r: float(r["tflops"]))))
    return charts.lines_by_n(
        subtitle("Speed", sub, dtype, d), grid, "TFLOP/s", palette, legend_key, compute_ceiling(slug, dtype))


def draw_memory(charts, palette, slug, rows, prefixes, filters):
    sub, dtype, d = figure_rows(rows, prefixes, filters, "0")
    sub = drop_repeated_forward(sub)
    passes = [p for p in ("fwd", "fwdbwd") if p in filters.get("pass", "fwd,fwdbwd").split(",")
              and any(r["pass"] == p for r in sub)]
    grid = panel_grid(sub, passes, lambda p, c, rs, cv: (panel_title(p, c, cv), merge_close(series(
        rs, lambda r: int(r["peak_mem_bytes"]) / (int(r["B"]) * int(r["H"])) / 2**20))))
    return charts.lines_by_n(
        f"Device memory per head on {gpu_name(sub)}: {dtype}, d = {d}\n"
        f"what the program held ÷ B·H; {shape_note(sub)}", grid, "MiB per head", palette, legend_key)


def draw_roofline(charts, palette, slug, rows, prefixes, filters):
    sub, dtype, d = figure_rows(rows, prefixes, filters, "0")
    sub = [r for r in drop_repeated_forward(sub) if r["hbm_bytes_model"] and r["pass"] != "fwdbwd"]
    c = ceilings(slug)

    def point(r):
        flops = float(r["tflops"]) * 1e12 * float(r["median_ms"]) * 1e-3
        return (flops / float(r["hbm_bytes_model"]), float(r["tflops"]))
    panels = []
    for p in ("fwd", "bwd"):
        rs = [r for r in sub if r["pass"] == p]
        if rs:
            panels.append((PASS_NAME[p],
                           {lb: [(n, *v) for n, v in pts] for lb, pts in series(rs, point).items()}))
    return charts.roofline(
        f"Against the measured ceilings on {gpu_name(sub)}: {dtype}, d = {d}, not causal\n"
        f"one point per N ({min(int(r['N']) for r in sub)} … {max(int(r['N']) for r in sub)}) on each line",
        panels, palette,
        c[dtype], c["hbm"] / 1000, f"cuBLAS {dtype} GEMM, measured: {c[dtype]:g} TFLOP/s",
        f"HBM copy, measured: {c['hbm']:g} GB/s")


def draw_density(charts, palette, slug, rows, prefixes, filters):
    sub = select([r for r in rows if is_block_sparse(r)], prefixes, filters)
    return density_figure(charts, palette, sub, rows, "Block-sparse time against density")


def draw_window(charts, palette, slug, rows, prefixes, filters):
    sub = select([r for r in rows if is_window(r)], prefixes, filters)
    return density_figure(charts, palette, sub, rows, "Sliding-window time against the fraction of scores kept")


def density_figure(charts, palette, sub, rows, title):
    cells = [k for k in density_cells(sub, rows) if k[9] is not None]
    panels = []
    for p in ("fwd", "bwd"):
        lines = {}
        for N, B, H, c, pp, v, f, dn, ms, frac in cells:
            if pp == p:
                key = (next(r["step"] for r in sub if r["step"].endswith("/" + v)), f, N, B, H)
                lines.setdefault(key, []).append((dn, frac))
        if lines:
            panels.append((PASS_NAME[p] + (" (one kernel for both dQ variants)" if p == "fwd" else ""),
                           [(lb, f, f"N = {N}, B×H = {B}×{H}", pts) for (lb, f, N, B, H), pts in sorted(
                               lines.items(), key=lambda kv: (kv[0][2], kv[0][3] * kv[0][4], kv[0][:2]))]))
    d = sorted({r["d"] for r in sub})
    return charts.density(
        f"{title} on {gpu_name(sub)}: {sub[0]['dtype']}, d = {', '.join(d)}\n"
        "time as a fraction of the dense step's at the same shape", panels, palette)


def draw_ladder(charts, palette, slug, rows, prefixes, filters):
    sub, dtype, d = figure_rows(rows, prefixes, filters)
    others = [r for r in select(plain(rows), ["torch_"], {k: v for k, v in filters.items() if k != "pass"})
              if r["d"] == d and r["dtype"] == dtype]
    passes = [p for p in ("fwd", "bwd") if p in filters.get("pass", "fwd,bwd").split(",")
              and any(r["pass"] == p for r in sub)]
    def panel(p, c, rs, cv):
        shapes = one_shape_per_n(rs)
        rungs = sorted({lb for lb, _ in shapes}, key=step_key)
        refs = {}
        for r in others:
            if (r["pass"], r["causal"]) == (p, c) and any(
                    (s["B"], s["H"], s["N"]) == (r["B"], r["H"], r["N"]) for s in shapes.values()):
                refs.setdefault(r["step"], {})[int(r["N"])] = float(r["tflops"])
        return (panel_title(p, c, cv), [(lb, {n: float(r["tflops"]) for (l2, n), r in shapes.items() if l2 == lb})
                                        for lb in rungs], sorted(refs.items(), key=lambda kv: step_key(kv[0])))
    grid = panel_grid(sub, passes, panel)
    return charts.ladder(
        subtitle(f"The variants of {', '.join(charts.pretty(p) for p in prefixes)}", sub, dtype, d), grid, palette,
        ceilings=compute_ceiling(slug, dtype))


def draw_time(charts, palette, slug, rows, prefixes, filters):
    """Median time against N, log-log: what grows with N² and what with N. Unlike the other kinds
    it takes SMYRF's rows (mask=smyrf:...), beside dense ones (mask=,smyrf:8x32)."""
    filters = dict(filters)
    filters.setdefault("causal", "0")
    filters.setdefault("dropout", "0")
    filters.setdefault("mask", "")
    sub = select(with_fwdbwd([r for r in rows if not r["mask"] or is_smyrf(r)]), prefixes,
                 {k: v for k, v in filters.items() if k != "pass"})
    if not sub:
        raise SystemExit(f"no rows for the figure {prefixes} {filters}")
    sub = drop_repeated_forward(sub)
    passes = [p for p in PASS_ORDER if p in filters.get("pass", "fwd,bwd").split(",") and any(r["pass"] == p for r in sub)]
    grid = panel_grid(sub, passes, lambda p, c, rs, cv: (panel_title(p, c, cv),
                                                       series(rs, lambda r: float(r["median_ms"]))))
    shapes = {(r["B"], r["H"]) for r in sub}
    shape = f"B×H = {'×'.join(shapes.pop())}" if len(shapes) == 1 else shape_note(sub)
    return charts.lines_by_n(f"Time against sequence length on {gpu_name(sub)}: {sub[0]['dtype']}, d = {sub[0]['d']}\n"
                             f"median of CUDA-event timings, L2 flushed; {shape}", grid, "median ms", palette, legend_key)


DRAW = {"tflops": draw_tflops, "memory": draw_memory, "roofline": draw_roofline, "density": draw_density,
        "window": draw_window,
        "ladder": draw_ladder, "time": draw_time}
WHAT = {"tflops": "TFLOP/s against sequence length", "memory": "device memory per head against sequence length",
        "roofline": "TFLOP/s against FLOPs per modelled HBM byte, under the measured ceilings",
        "density": "block-sparse time as a fraction of dense time against density",
        "window": "sliding-window time as a fraction of the time without it, against the fraction of scores kept",
        "ladder": "a step's variants side by side, TFLOP/s by sequence length",
        "time": "median time against sequence length"}


# --- <gpu>.md ----------------------------------------------------------------------------------

def ladders(rows):
    """Steps with more than one variant in rows, in the order the CSV first records them."""
    variants = {}
    for r in rows:
        if "/" in r["step"]:
            variants.setdefault(r["step"].split("/")[0], set()).add(r["step"])
    return [s for s, v in variants.items() if len(v) > 1]


def speed_section(img, rows):
    return ["### Speed by sequence length\n", img("tflops", ()), by_n(drop_repeated_forward(with_fwdbwd(rows)))]


def memory_section(img, rows):
    return ["### Device memory by sequence length\n",
            "The memory per head (figure) is the device memory (table) divided by B·H.\n", img("memory", ()),
            by_n(drop_repeated_forward(select(with_fwdbwd(rows), (), {"causal": "0", "pass": "fwd,fwdbwd"})),
                 memory_cell, "device memory")]


def ceilings_section(img, rows, slug, dtype):
    c = ceilings(slug)
    if dtype not in c or "hbm" not in c or not any(r["hbm_bytes_model"] for r in rows):
        return []
    modelled = [r for r in select(rows, (), {"causal": "0", "pass": "fwd,bwd"}) if r["hbm_bytes_model"]]
    return ["### Against the measured ceilings\n",
            f"Measured ceilings ({gpu_of(slug)}_ceilings.txt): {c['hbm']:g} GB/s for an HBM copy, {c[dtype]:g} "
            f"TFLOP/s for cuBLAS's {dtype} GEMM. Each point's intensity is its FLOPs over the bytes its IO model "
            "counts (PyTorch has no model).\n", img("roofline", ()),
            by_n(drop_repeated_forward(modelled), lambda r: fmt_bytes(r["hbm_bytes_model"]) if r else "",
                 "HBM traffic, IO model")]


def ladder_section(img, rows, step):
    return [f"### The variants of {step}\n", img("ladder", (step,)), pivot(select(rows, (step + "/",), {}))]


def gpu_md(slug, rows, figures):
    """docs/benchmarks/<slug>.md: per dtype and d, speed, memory, the ceilings and each step's
    variants; then dropout and block-sparse density. Each table answers one question."""
    dense = plain(rows)
    here = os.path.dirname(os.path.join(BENCH, slug))  # the folder of the CSV and of its .md
    out = [f"# Benchmarks on {gpu_name(rows)}\n",
           f"Generated by `docs/benchmarks/render.py` from `{os.path.basename(slug)}.csv` (recorded by `docs/benchmarks/record.sh`; "
           f"commits {', '.join(sorted({r['commit'] for r in rows}))}; {min(r['date'] for r in rows)} to "
           f"{max(r['date'] for r in rows)}), which holds every row and column; each table here answers one "
           f"question. Element types {', '.join(v for (v,) in groups(rows, 'dtype'))}; "
           "time is the median of CUDA-event timings with the L2 flushed before each run (from commit "
           "f58feae on, flushed 32 times, which keeps the GPU busy while the host enqueues the run, so that "
           "PyTorch's launch gaps are not timed); "
           "TFLOP/s by the FlashAttention convention (forward 4·B·H·N²·d, halved when causal; backward 2.5×); "
           "device memory is what the program held (inputs, outputs, workspace; for PyTorch, "
           "`max_memory_allocated`); HBM model is the step's IO model. A shape is B·N = 16384 tokens and "
           "H = 2048/d unless a heading says otherwise.\n"]
    for dtype, d in groups(dense, "dtype", "d"):
        f = {"dtype": dtype, "d": d}
        sub = select(dense, (), f)

        def img(kind, prefixes):
            return figures.image(kind, slug, prefixes, f, here)
        steps = {r["step"].split("/")[0] for r in sub if not r["step"].startswith("torch_")}
        out.append(f"## {dtype}, d = {d}\n")
        # A CSV of one step's variants and nothing else is that step's ladder.
        if len(steps) > 1 or steps != set(ladders(sub)) or any(r["step"].startswith("torch_") for r in sub):
            out += speed_section(img, sub)
        if len(steps) > 1:  # memory and bytes differ between steps, not between a step's variants
            out += memory_section(img, sub) + ceilings_section(img, sub, slug, dtype)
        for step in ladders(sub):
            out += ladder_section(img, sub, step)
    if any(float(r["dropout"] or 0) > 0 and not r["mask"] for r in rows):
        out += ["## What dropout costs\n", dropout_table(rows)]
    if any(is_smyrf(r) for r in rows):
        out += ["## SMYRF (step 07) against its authors' code\n",
                "Step 07 and `smyrf_authors` (the authors' PyTorch module, `smyrf_authors.py`) on the same shapes; "
                "the authors' forward memory is an inference forward's.\n",
                smyrf_table(rows)]
    masked = [r for r in rows if is_block_sparse(r)]
    if masked:
        out += ["## Block-sparse: time against density\n",
                "Dense is step 04's forward and step 05's backward at the same shape; the target is a time of at "
                "most 1.3 × density × dense.\n",
                figures.image("density", slug, (), {}, here), density_table(masked, rows)]
    windowed = [r for r in rows if is_window(r)]
    if windowed:
        out += ["## Sliding window: time against the fraction of scores kept\n",
                "A window (`window:L:R`, query i sees keys i − L to i + R) skips the key tiles it leaves out, so "
                "its time should follow the fraction of scores it keeps (the density column), as a block mask's "
                "does; the reference is the same step without a window at the same shape (its forward step 04's, "
                "its backward step 05's).\n",
                figures.image("window", slug, (), {}, here), density_table(windowed, rows)]
    featured = [r for r in rows if is_feature(r) and not is_window(r)]
    if featured:
        out += ["## Other interface features: time against the same run without them\n",
                "Grouped K/V heads (`heads-kv:Hkv`), keys of another length (`seq-k:Nk`), softcapping and ALiBi, "
                "each against the same step, shape and pass without them.\n",
                feature_table(featured, rows)]
    return "\n".join(out).rstrip("\n") + "\n"


# --- Markers -----------------------------------------------------------------------------------

def marker_args(match):
    """(step prefixes, {key: value}) of a marker."""
    args = match.group("args").split()
    prefixes = [a for a in args if "=" not in a]
    return (prefixes[0].split(",") if prefixes else []), dict(a.split("=", 1) for a in args if "=" in a)


def render_marker(match, cache):
    prefixes, filters = marker_args(match)
    slug = filters.pop("gpu", "h200")
    layout = filters.pop("layout", "table")
    # Unless a marker asks (dropout=0.1, mask=*, ...), rows without dropout and without a mask.
    filters.setdefault("dropout", "0")
    filters.setdefault("mask", "*" if layout in ("density", "smyrf") else "")
    if slug not in cache:
        cache[slug] = load(slug)
    rows = select(cache[slug], prefixes, filters)
    render = {"pivot": pivot, "table": table, "fwdbwd": fwdbwd_table, "smyrf": smyrf_table,
              "density": lambda rs: density_table(rs, cache[slug])}[layout]
    body = render(rows) if rows else "(no rows recorded yet)\n"
    gpu = rows[0]["gpu"] if rows else slug
    body = f"Measured on {gpu} (generated from docs/benchmarks/{slug}.csv):\n\n" + body
    return match.group(1) + body + match.group(4)


def render_figure_marker(match, cache, figures, from_dir):
    args = match.group("args").split()
    kind = args[0]
    prefixes = [p for a in args[1:] if "=" not in a for p in a.split(",")]
    filters = dict(a.split("=", 1) for a in args[1:] if "=" in a)
    slug = filters.pop("gpu", "h200")
    if slug not in cache:
        cache[slug] = load(slug)
    return match.group(1) + figures.image(kind, slug, prefixes, filters, from_dir) + match.group(4)


def mib(b):
    return f"{float(b) / 2**20:.1f}"


def render_ncu(match):
    args = match.group("args").split()
    prefixes, filters = tuple(args[0].split(",")), dict(a.split("=", 1) for a in args[1:])
    slug = filters.get("gpu", "h200")
    ncu_path, model_path = os.path.join(BENCH, slug + "_ncu.csv"), os.path.join(BENCH, slug + "_model.csv")
    if not os.path.exists(ncu_path) or not os.path.exists(model_path):
        return match.group(1) + "(not measured yet)\n" + match.group(4)
    launches = [r for r in csv.DictReader(open(ncu_path)) if r["step"].startswith(prefixes)]
    model = {(r["step"], r["pass"]): r for r in csv.DictReader(open(model_path))}
    if not launches:
        return match.group(1) + "(not measured yet)\n" + match.group(4)
    r0 = launches[0]
    lines = [f"Nsight Compute on {r0['gpu']}, B={r0['B']} H={r0['H']} N={r0['N']} d={r0['d']}"
             f"{' causal' if r0['causal'] == '1' else ''} (generated from docs/benchmarks/{slug}_ncu.csv"
             f" and {slug}_model.csv; MiB):\n",
             "| step | pass | kernel | DRAM read | DRAM write | time (µs) |", "|---|---|---|---:|---:|---:|"]
    totals = {}
    for r in launches:
        lines.append(f"| {r['step']} | {r['pass']} | `{r['kernel']}` | {mib(r['dram_read_bytes'])} | "
                     f"{mib(r['dram_write_bytes'])} | {float(r['time_ns']) / 1000:.1f} |")
        t = totals.setdefault((r["step"], r["pass"]), [0, 0, 0.0])
        t[0] += int(r["dram_read_bytes"])
        t[1] += int(r["dram_write_bytes"])
        t[2] += float(r["time_ns"])
    lines += ["", "| step | pass | DRAM read (ncu) | model read | DRAM write (ncu) | model write | time (µs) |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for (step, p), (rd, wr, t) in totals.items():
        m = model.get((step, p))
        lines.append(f"| {step} | {p} | {mib(rd)} | {mib(m['read_bytes']) if m else ''} | {mib(wr)} | "
                     f"{mib(m['write_bytes']) if m else ''} | {t / 1000:.1f} |")
    return match.group(1) + "\n".join(lines) + "\n" + match.group(4)


# --- SMYRF's quality on a real model (steps/07_smyrf/quality/run.sh writes the CSVs) -------------

def mean(values):
    return sum(values) / len(values)


def quality_attention(rows, path):
    """SMYRF against random clusters of the same sizes and uniform attention, averaged over layers."""
    layers = sorted({int(r["layer"]) for r in rows})
    r0 = rows[0]
    agg = {}
    for r in rows:
        agg.setdefault((r["method"], int(r["hashes"]), int(r["cluster"])), []).append(r)
    out = [f"all-MiniLM-L6-v2, N={r0['N']} tokens, H={r0['H']} heads, d={r0['d']}; the mean over its "
           f"{len(layers)} layers of each head's attention output against exact attention (host reference, fp64; "
           f"generated from {path}). *mass*: the share of each query's exact attention on the keys its "
           "clusters hold:\n",
           "| hashes × cluster | rel. L2 error | vs random clusters | mean cosine | vs random | mass | vs random |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for (method, h, c) in sorted(k for k in agg if k[0] == "smyrf"):
        sm, rnd = agg[("smyrf", h, c)], agg[("random", h, c)]
        cell = lambda rs, f: f"{mean([float(r[f]) for r in rs]):.3f}"
        out.append(f"| {h} × {c} | {cell(sm, 'rel_l2')} | {cell(rnd, 'rel_l2')} | {cell(sm, 'mean_cos')} | "
                   f"{cell(rnd, 'mean_cos')} | {cell(sm, 'mass')} | {cell(rnd, 'mass')} |")
    uni = agg[("uniform", 0, 0)]
    out.append(f"| uniform weights (the floor) | {mean([float(r['rel_l2']) for r in uni]):.3f} | | "
               f"{mean([float(r['mean_cos']) for r in uni]):.3f} | | 1 | |")
    return "\n".join(out) + "\n"


def quality_embeddings(rows, path):
    """Sentence embeddings with SMYRF in every layer: cosine to the exact model's, per passage."""
    passages = sorted({int(r["passage"]) for r in rows})
    clusters = sorted({int(r["cluster"]) for r in rows if r["method"] == "smyrf"})
    hashes = sorted({int(r["hashes"]) for r in rows if r["method"] == "smyrf"})
    cos = {}
    for r in rows:
        cos.setdefault((r["method"], int(r["hashes"]), int(r["cluster"])), []).append(float(r["cos"]))
    out = [f"Cosine of the sentence embedding (mean pooling, normalised) with SMYRF in all 6 layers to the exact "
           f"model's, mean (lowest) over {len(passages)} passages of {rows[0]['N']} tokens (generated from {path}):\n",
           "| hashes | " + " | ".join(f"clusters of {c}" for c in clusters) + " |",
           "|---|" + "---:|" * len(clusters)]
    for h in hashes:
        cells = [f"{mean(cos[('smyrf', h, c)]):.3f} ({min(cos[('smyrf', h, c)]):.3f})" for c in clusters]
        out.append(f"| {h} | " + " | ".join(cells) + " |")
    other = cos[("next_passage", 0, 0)]
    out += ["", f"For scale: the exact model's embeddings of two neighbouring passages of the same text have a "
                f"cosine of {mean(other):.3f} on average (lowest {min(other):.3f})."]
    return "\n".join(out) + "\n"


def render_quality(match):
    args = dict(a.split("=", 1) for a in match.group("args").split()[1:])
    kind = match.group("args").split()[0]
    path = args["file"]
    full = os.path.join(ROOT, path)
    if not os.path.exists(full):
        return match.group(1) + "(not measured yet)\n" + match.group(4)
    rows = list(csv.DictReader(open(full, newline="")))
    body = {"attention": quality_attention, "embeddings": quality_embeddings}[kind](rows, path)
    return match.group(1) + body + match.group(4)


def render_decode(match):
    """A decode block: decode_bench.py's summary of the CSV its file= names (from the repository's root)."""
    import decode_bench  # beside this script (render_all puts BENCH on the path)
    args = dict(a.split("=", 1) for a in match.group("args").split())
    full = os.path.join(ROOT, args["file"])
    if not os.path.exists(full):
        return match.group(1) + "(not measured yet)\n" + match.group(4)
    return match.group(1) + decode_bench.summary(full, args.get("part", "all")) + match.group(4)


# --- Driver ------------------------------------------------------------------------------------

def matplotlib_version():
    """matplotlib's version; started by a python3 without it, runs this script again under
    Debian's python3 (where cmake/quickstart.sh installs python3-matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable)
        if here != os.path.realpath(DEBIAN_PYTHON) and os.access(DEBIAN_PYTHON, os.X_OK):
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit(f"render.py draws figures with matplotlib, which {sys.executable} does not have: install "
                 "Debian's python3-matplotlib (bash cmake/quickstart.sh does, as root)")
    return matplotlib.__version__


def doc_paths():
    """The README, the lessons, the docs pages and the lab notebooks: where generated blocks and
    quoted numbers are."""
    return ([os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "steps", "*", "README.md")))
            + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
            + sorted(glob.glob(os.path.join(ROOT, "docs", "lab", "*.md"))))


def render_all():
    """({path: text} of every generated text file, {path: svg bytes} of every figure)."""
    sys.path.insert(0, BENCH)
    cache, texts = {}, {}
    figures = Figures(cache)
    for slug in csv_slugs():
        cache[slug] = load(slug)
        texts[os.path.join(BENCH, slug + ".md")] = gpu_md(slug, cache[slug], figures)
    for path in doc_paths():
        text = open(path).read()
        new = MARKER.sub(lambda m: render_marker(m, cache), text)
        new = NCU_MARKER.sub(render_ncu, new)
        new = FIGURE_MARKER.sub(lambda m: render_figure_marker(m, cache, figures, os.path.dirname(path)), new)
        new = QUALITY_MARKER.sub(render_quality, new)
        new = DECODE_MARKER.sub(render_decode, new)
        texts[path] = new
    return texts, figures.draw()


def generated_parts(path, text):
    """What render.py wrote in a file: all of a <gpu>.md, the marker blocks elsewhere."""
    if os.path.dirname(path) in [os.path.normpath(os.path.join(BENCH, f)) for f in CSV_FOLDERS]:
        return [text]
    return [m.group("body") for marker in (MARKER, NCU_MARKER, QUALITY_MARKER, DECODE_MARKER)
            for m in marker.finditer(text)]


def too_wide_tables(texts):
    """Says which generated tables are wider than MAX_COLUMNS; True when there is one."""
    wide = [(p, h) for p, t in texts.items() for part in generated_parts(p, t) for h in too_wide(part)]
    for p, h in wide:
        print(f"{os.path.relpath(p, ROOT)}: a generated table has more than {MAX_COLUMNS} columns: {h[:100]}")
    return bool(wide)


def recorded_version():
    return open(VERSION_FILE).read().strip() if os.path.exists(VERSION_FILE) else None


def stale_files(texts, svgs):
    """(texts out of date, figures out of date, figures render.py no longer draws)."""
    return ([p for p, t in texts.items() if not os.path.exists(p) or open(p).read() != t],
            [p for p, svg in svgs.items() if not os.path.exists(p) or open(p, "rb").read() != svg],
            sorted(set(glob.glob(os.path.join(FIGURES, "*.svg"))) - set(svgs)))


def check(texts, svgs, version):
    """Says what is out of date; True when something is. Figures are compared only when this is
    the matplotlib (major.minor) that drew them: another lays text out differently."""
    texts_stale, figures_stale, orphans = stale_files(texts, svgs)
    for p in texts_stale:
        print(f"out of date: {os.path.relpath(p, ROOT)} (run docs/benchmarks/render.py)")
    recorded = recorded_version()
    if recorded is None or recorded.split(".")[:2] != version.split(".")[:2]:
        print(f"figures not compared: {os.path.relpath(VERSION_FILE, ROOT)} says they were drawn with matplotlib "
              f"{recorded}, and this is matplotlib {version} ({sys.executable}), which lays text out differently. "
              f"Check them with matplotlib {recorded}; CI does, with Debian 12's {DEBIAN_PYTHON} and "
              "python3-matplotlib.")
        return True
    for p in figures_stale:
        print(f"out of date: {os.path.relpath(p, ROOT)} (run docs/benchmarks/render.py)")
    for p in orphans:
        print(f"not drawn by render.py any more: {os.path.relpath(p, ROOT)} (run docs/benchmarks/render.py)")
    return bool(texts_stale or figures_stale or orphans)


def write(texts, svgs, version):
    """Writes what is out of date, removes the figures no longer drawn, records the matplotlib."""
    recorded = recorded_version()
    if recorded is not None and recorded.split(".")[:2] != version.split(".")[:2]:
        print(f"note: the figures were drawn with matplotlib {recorded} and are redrawn with {version}: CI "
              f"(Debian 12's {DEBIAN_PYTHON} with python3-matplotlib) compares them with what its own draws")
    texts_stale, figures_stale, orphans = stale_files(texts, svgs)
    os.makedirs(FIGURES, exist_ok=True)
    for p in texts_stale:
        with open(p, "w") as f:
            f.write(texts[p])
    for p in figures_stale:
        with open(p, "wb") as f:
            f.write(svgs[p])
    for p in orphans:
        os.remove(p)
    if recorded != version:
        with open(VERSION_FILE, "w") as f:
            f.write(version + "\n")
    for p in texts_stale + figures_stale + ([VERSION_FILE] if recorded != version else []):
        print(f"wrote {os.path.relpath(p, ROOT)}")
    for p in orphans:
        print(f"removed {os.path.relpath(p, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if anything is out of date")
    args = ap.parse_args()
    version = matplotlib_version()
    texts, svgs = render_all()
    wide = too_wide_tables(texts)
    if args.check:
        stale = check(texts, svgs, version)
        return 1 if stale or wide or prose_check.report(doc_paths()) else 0
    write(texts, svgs, version)
    return 1 if prose_check.report(doc_paths(), fix=True) or wide else 0


if __name__ == "__main__":
    sys.exit(main())
