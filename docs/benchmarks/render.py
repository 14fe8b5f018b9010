#!/usr/bin/env python3
"""Regenerates the benchmark tables from the committed CSVs: docs/benchmarks/<gpu>.md beside
each <gpu>.csv, and every block between markers in the lessons:

    <!-- results:STEP_PREFIX gpu=h200 [pass=fwd] [d=64] [causal=0] -->
    ...generated...
    <!-- /results -->

    <!-- ncu:STEP_PREFIX gpu=h200 -->   DRAM bytes per kernel (Nsight Compute, <gpu>_ncu.csv)
    ...generated...                    next to the IO model (<gpu>_model.csv)
    <!-- /ncu -->

`--check` exits 1 (and changes nothing) when a generated file is out of date: CI runs that.
Figures in the docs come from here, never typed by hand.
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
MARKER = re.compile(r"(<!-- results:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
NCU_MARKER = re.compile(r"(<!-- ncu:(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /ncu -->)", re.S)


def load(slug):
    with open(os.path.join(BENCH, slug + ".csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    # A later run of the same configuration replaces an earlier one.
    latest = {}
    for r in rows:
        # Files recorded before the dropout and mask columns existed: dense, no dropout.
        r.setdefault("dropout", "0")
        r.setdefault("mask", "")
        r.setdefault("density", "1")
        key = (r["step"], r["pass"], r["dtype"], r["B"], r["H"], r["N"], r["d"], r["causal"], r["dropout"],
               r["mask"])
        latest[key] = r
    return list(latest.values())


def fmt_bytes(b):
    if not b:
        return ""
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.2f} {unit}"
        b /= 1024


def label(r):
    """The step, and what the run added: dropout, a block-sparse mask."""
    out = r["step"]
    if float(r["dropout"] or 0) > 0:
        out += f' dropout {r["dropout"]}'
    if r["mask"]:
        out += f' {r["mask"]} (density {float(r["density"]):.4g})'
    return out


def table(rows):
    rows = sorted(rows, key=lambda r: (int(r["d"]), int(r["causal"]), r["pass"], int(r["N"]), r["step"],
                                       float(r["dropout"] or 0), r["mask"], -float(r["density"] or 1)))
    head = "| step | pass | B | H | N | d | causal | time (ms) | TFLOP/s | device memory | HBM model | max err |"
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append("| {step} | {pass} | {B} | {H} | {N} | {d} | {c} | {ms} | {tf} | {mem} | {io} | {err} |".format(
            step=label(r), c="yes" if r["causal"] == "1" else "no", ms=f'{float(r["median_ms"]):.3f}',
            tf=f'{float(r["tflops"]):.2f}', mem=fmt_bytes(r["peak_mem_bytes"]), io=fmt_bytes(r["hbm_bytes_model"]),
            err=r["max_err"] or "", **{k: r[k] for k in ("pass", "B", "H", "N", "d")}))
    return "\n".join(lines) + "\n"


STEP_ORDER = ["01_naive", "02_fused", "03_tiled", "04_online_softmax/alg1", "04_online_softmax/fa2",
              "05_recompute_backward/atomic", "05_recompute_backward/deterministic", "torch_math", "torch_efficient"]


def step_key(s):
    step = s.split(" ")[0]
    return (STEP_ORDER.index(step) if step in STEP_ORDER else len(STEP_ORDER), s)


def pivot(rows):
    """Median time in ms (TFLOP/s) by N (rows) and step (columns), one table per pass, d, causal."""
    out = []
    groups = sorted({(r["pass"], int(r["d"]), r["causal"]) for r in rows}, key=lambda g: (g[0] != "fwd", g[1], g[2]))
    for p, d, c in groups:
        sub_rows = [r for r in rows if r["pass"] == p and int(r["d"]) == d and r["causal"] == c]
        steps = sorted({label(r) for r in sub_rows}, key=step_key)
        shapes = sorted({(int(r["N"]), int(r["B"]), int(r["H"])) for r in sub_rows})
        cell = {(label(r), int(r["N"]), int(r["B"]), int(r["H"])): r for r in sub_rows}
        out.append(f"**{'forward' if p == 'fwd' else 'backward'}, d = {d}, {'causal' if c == '1' else 'not causal'}**"
                   " — median ms (TFLOP/s)\n")
        out.append("| N | B×H | " + " | ".join(steps) + " |")
        out.append("|---:|---:|" + "---:|" * len(steps))
        for N, B, H in shapes:
            cells = []
            for s in steps:
                r = cell.get((s, N, B, H))
                cells.append(f"{float(r['median_ms']):.2f} ({float(r['tflops']):.1f})" if r else "")
            out.append(f"| {N} | {B}×{H} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def density_table(rows, all_rows):
    """Block-sparse time against density, one table per shape: each cell is the time in ms and,
    in brackets, its ratio to the dense step's time at the same shape (forward:
    04_online_softmax/fa2; backward: step 05 with the same dQ variant); the target is a ratio of
    at most 1.3 × density. The all-ones mask ("dense") is density 1 of every pattern."""
    dense = {}
    for r in all_rows:
        if r["dropout"] in ("0", "") and not r["mask"] and r["step"].startswith(("04_online_softmax/fa2", "05_")):
            dense[(r["step"], r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"])] = r

    def family(r):
        return r["mask"].split("@")[0].split(":")[0]

    out = []
    for N, B, H, c in sorted({(int(r["N"]), int(r["B"]), int(r["H"]), r["causal"]) for r in rows}):
        sub = [r for r in rows if (int(r["N"]), int(r["B"]), int(r["H"]), r["causal"]) == (N, B, H, c)]
        families = sorted({family(r) for r in sub if family(r) != "dense"}) or ["dense"]
        cols = []  # (pass, dQ variant, family)
        for p in ("fwd", "bwd"):
            for v in (["atomic"] if p == "fwd" else ["atomic", "deterministic"]):
                cols += [(p, v, f) for f in families]
        cell = {}
        for r in sub:
            v = r["step"].split("/")[-1]
            # The dense forward is step 04's fa2 kernel; step 05's forward is the same kernel.
            refs = ["04_online_softmax/fa2", "05_recompute_backward/atomic"] if r["pass"] == "fwd" else \
                ["05_recompute_backward/" + v]
            d = next((dense[k] for k in ((ref, r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"]) for ref in refs)
                      if k in dense), None)
            text = f'{float(r["median_ms"]):.2f}' + (f' ({float(r["median_ms"]) / float(d["median_ms"]):.3f})' if d else "")
            for f in (families if family(r) == "dense" else [family(r)]):
                cell[(round(float(r["density"]), 6), r["pass"], v if r["pass"] == "bwd" else "atomic", f)] = text
        densities = sorted({k[0] for k in cell}, reverse=True)
        out.append(f"**N = {N}, B×H = {B}×{H}, {'causal' if c == '1' else 'not causal'}** — ms (time / dense)\n")
        out.append("| density | 1.3 × density | " + " | ".join(
            f"{p} {f}" + (f" ({v} dQ)" if p == "bwd" else "") for p, v, f in cols) + " |")
        out.append("|---:|---:|" + "---:|" * len(cols))
        for dn in densities:
            out.append(f"| {dn:.4g} | {1.3 * dn:.3f} | " + " | ".join(cell.get((dn, p, v, f), "") for p, v, f in cols) + " |")
        out.append("")
    return "\n".join(out)


def fwdbwd_table(rows):
    """Forward + backward time (ms) by N (rows) and step (columns), one table per causal and
    dropout setting, with step 05's speed-up over the materialising baselines."""
    out = []
    for c, p in sorted({(r["causal"], r["dropout"]) for r in rows}, key=lambda g: (g[0], float(g[1] or 0))):
        sub = [r for r in rows if r["causal"] == c and r["dropout"] == p]
        total = {}
        for r in sub:
            key = (r["step"], int(r["N"]), int(r["B"]), int(r["H"]))
            total.setdefault(key, {})[r["pass"]] = float(r["median_ms"])
        steps = sorted({k[0] for k, v in total.items() if len(v) == 2}, key=step_key)
        shapes = sorted({k[1:] for k, v in total.items() if len(v) == 2})  # a row only where a sum exists
        base = "01_naive" if "01_naive" in steps else "torch_math"
        fast = "05_recompute_backward/atomic"
        out.append(f"**forward + backward, {'causal' if c == '1' else 'not causal'}, dropout {p}** — ms\n")
        out.append("| N | B×H | " + " | ".join(steps) + f" | {base} / 05 atomic |")
        out.append("|---:|---:|" + "---:|" * (len(steps) + 1))
        for N, B, H in shapes:
            cells = []
            for st in steps:
                v = total.get((st, N, B, H), {})
                cells.append(f"{v['fwd'] + v['bwd']:.2f}" if len(v) == 2 else "")
            a, b = total.get((base, N, B, H), {}), total.get((fast, N, B, H), {})
            ratio = f"{(a['fwd'] + a['bwd']) / (b['fwd'] + b['bwd']):.2f}×" if len(a) == 2 and len(b) == 2 else ""
            out.append(f"| {N} | {B}×{H} | " + " | ".join(cells) + f" | {ratio} |")
        out.append("")
    return "\n".join(out)


def gpu_md(slug, rows):
    gpus = sorted({r["gpu"] for r in rows})
    commits = sorted({r["commit"] for r in rows})
    dates = sorted({r["date"] for r in rows})
    return (f"# Benchmarks on {', '.join(gpus)}\n\n"
            f"Generated by `docs/benchmarks/render.py` from `{slug}.csv` (recorded by "
            f"`docs/benchmarks/record.sh`; commits {', '.join(commits)}; {dates[0]} to {dates[-1]}). "
            "fp32; time is the median of CUDA-event timings with the L2 flushed before each run; "
            "TFLOP/s by the FlashAttention convention (forward 4·B·H·N²·d, halved when causal; "
            "backward 2.5×); device memory is what the program held (inputs, outputs, workspace; "
            "for PyTorch, `max_memory_allocated`); HBM model is the step's IO model.\n\n"
            "## Time by sequence length\n\n" + pivot(rows) + "\n## Every row\n\n" + table(rows))


def render_marker(match, cache):
    args = match.group("args").split()
    prefix, filters = args[0], dict(a.split("=", 1) for a in args[1:])
    slug = filters.pop("gpu", "h200")
    layout = filters.pop("layout", "table")
    # Unless a marker asks (dropout=0.1, mask=*, ...), rows without dropout and without a mask.
    filters.setdefault("dropout", "0")
    filters.setdefault("mask", "*" if layout == "density" else "")
    if slug not in cache:
        cache[slug] = load(slug)
    rows = [r for r in cache[slug] if r["step"].startswith(tuple(prefix.split(",")))
            and all(v == "*" or r.get(k) == v for k, v in filters.items())]
    render = {"pivot": pivot, "table": table, "fwdbwd": fwdbwd_table,
              "density": lambda rs: density_table(rs, cache[slug])}[layout]
    body = render(rows) if rows else "(no rows recorded yet)\n"
    gpu = rows[0]["gpu"] if rows else slug
    body = f"Measured on {gpu} (generated from docs/benchmarks/{slug}.csv):\n\n" + body
    return match.group(1) + body + match.group(4)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if anything is out of date")
    args = ap.parse_args()
    outputs = {}
    cache = {}
    for path in sorted(glob.glob(os.path.join(BENCH, "*.csv"))):
        slug = os.path.splitext(os.path.basename(path))[0]
        if slug.endswith(("_ncu", "_model")):
            continue
        cache[slug] = load(slug)
        outputs[os.path.join(BENCH, slug + ".md")] = gpu_md(slug, cache[slug])
    lessons = ([os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "steps", "*", "README.md"))
               + glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for path in lessons:
        text = open(path).read()
        new = MARKER.sub(lambda m: render_marker(m, cache), text)
        new = NCU_MARKER.sub(render_ncu, new)
        if new != text:
            outputs[path] = new
    stale = [p for p, text in outputs.items() if not os.path.exists(p) or open(p).read() != text]
    if args.check:
        for p in stale:
            print(f"out of date: {os.path.relpath(p, ROOT)} (run docs/benchmarks/render.py)")
        return 1 if prose_check.report(lessons) + len(stale) else 0
    for p in stale:
        with open(p, "w") as f:
            f.write(outputs[p])
        print(f"wrote {os.path.relpath(p, ROOT)}")
    return 1 if prose_check.report(lessons, fix=True) else 0


if __name__ == "__main__":
    sys.exit(main())
