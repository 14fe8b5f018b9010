#!/usr/bin/env python3
"""Holds the numbers the docs' prose quotes to the data they come from.

render.py regenerates whole tables; a sentence such as "step 03 takes 29.0 ms" is checked here
instead. The number stays in the prose, wrapped in a marker that says where it comes from:

    step 03 takes <!-- n:t03 -->29.0<!-- /n --> ms, step 04 <!-- n:t04 -->19.8<!-- /n -->, a ratio of
    <!-- n:t03/t04 -->1.46<!-- /n -->

The text between the markers is the number as printed; its decimals are the precision it
claims: the value must round to exactly that text. Inside the marker is an expression over
names, numbers, + - * / ** ( ), min, max, abs, ceil, floor and the units KiB MiB GiB KB MB GB; or a source
written inline. Names are defined once per file, in a comment that does not render (a line
starting with # is a comment):

    <!-- numbers
    t03 = csv step=03_tiled pass=fwd N=4096 d=64 causal=0 field=median_ms
    t04 = csv step=04_online_softmax/fa2 pass=fwd N=4096 d=64 causal=0 field=median_ms
    -->

Sources (key=value filters match a column exactly, or as a glob with * ?; quote values with
spaces; agg=one|sum|min|max|mean combines matching rows, `one` (the default, `sum` for ncu)
requires exactly one):

    csv         docs/benchmarks/<gpu>.csv (gpu=h200; gpu=experiments/NAME reads the file of an
                experiment, docs/benchmarks/experiments/NAME.csv), any column as a filter, field=COLUMN.
                Without dropout= and mask= filters: rows without dropout and without a mask.
                A later row of the same configuration replaces an earlier one, as in the tables;
                with commit=, the rows that commit recorded, even where later ones replace them
                (the figures of an earlier run, quoted beside the latest).
    ncu         docs/benchmarks/<gpu>_ncu.csv: step= pass= kernel= field=dram_read_bytes|
                dram_write_bytes|time_ns, summed over the matching launches
    ncu_metric  an Nsight Compute CSV export: file= (a path in docs/benchmarks) metric="Metric Name"
    model       build/bin/io_model B= H= N= d= causal= pattern= block= seed= smyrf= (defaults 1 8
                2048 64 0, no pattern, smyrf 8x32): step= pass= field=read_bytes|write_bytes|total
    tiles       build/bin/io_model --tiles N= d=: step= name= (the value)
    txt         a text file in the repository: file= re="regex with one (group)"

Also checked: every docs/benchmarks/<gpu>_model.csv against io_model's output now; (lint) that
no number with a unit of measurement (ms, TFLOP/s, GiB, ×, %, ...) appears in the prose of a
checked file outside a marker, a generated block or code; and that every relative link (and
image) of a checked file names a file inside the repository that exists, and a heading of it
that exists when the link has an #anchor.

check(paths, fix) returns the problems as lines; with fix=True it rewrites stale numbers
and model rows instead (and says which, so that the sentence around them can be re-read).
io_model is build/bin/io_model unless FS_IO_MODEL names another.
"""
import ast
import csv
import fnmatch
import io
import math
import os
import re
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "docs", "benchmarks")

INLINE = re.compile(r"<!-- n:(?P<expr>.*?) -->(?P<text>[^<]*?)<!-- /n -->", re.S)
NUMBERS = re.compile(r"<!-- numbers\n(?P<body>.*?)-->", re.S)
SHOWN = re.compile(r"^[−-]?\d+(\.\d+)?$")  # the number as printed: sign, digits, decimals
UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6, "GB": 1e9}
FUNCS = {"min": min, "max": max, "abs": abs, "ceil": math.ceil, "floor": math.floor}
BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}
AGGS = {"one": None, "sum": sum, "min": min, "max": max, "mean": lambda v: sum(v) / len(v)}
# Measurement columns of <gpu>.csv: everything else names the configuration of a row.
MEASURED = {"median_ms", "tflops", "peak_mem_bytes", "hbm_bytes_model", "max_err", "commit", "date"}

# Lint: a number followed by a unit of measurement, outside markers, generated blocks and code.
QUANTITY = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[×%]|\s?(?:ms|µs|ns|TFLOP/s|GFLOP/s|TFLOP|GFLOP|GB/s|TB/s|GiB|MiB"
                      r"|KiB|GB|MB|KB)(?![\w/])| s\b| minutes?\b)")
# Not prose: generated blocks and markers (<!-- KIND:args -->...<!-- /KIND -->, whatever the kind),
# numbers blocks, inline code.
SKIP = re.compile(r"<!-- (\w+):[^>]*-->.*?<!-- /\1 -->|<!-- numbers\n.*?-->|`[^`\n]*`", re.S)
# Numbers with units that are definitions or limits, not measurements.
# Each is the phrase that starts at the number, and why it is no measurement.
NOT_MEASURED = {
    "48 KiB": "CUDA's default limit of dynamic shared memory per CTA",
    "72 KiB": "a constant of steps/02_fused/fused.cu (kSmemTarget)",
    "2× (3× for gradients)": "the tolerance rule (common/verify.hpp)",
    "3× for gradients": "the tolerance rule (common/verify.hpp)",
    "10% allowance": "the block-sparse step's allowance for an all-ones mask, a target",
    "2 µs are a warning": "the trace validator's tolerance, a definition",
    "33 ms target": "the visualizer's frame-time target, a definition",
    "32 ns": "the update interval of %globaltimer on the GPUs used here, visible in every recorded trace",
    "20×, 500×": "the zoom levels of the visualizer's benchmark, its parameters",
    "500×": "the zoom levels of the visualizer's benchmark, its parameters",
}


class ProseError(Exception):
    pass


def _filters(args):
    """key=value tokens of a source spec; the keys that are not filters are popped by the caller."""
    out = {}
    for tok in args:
        if "=" not in tok:
            raise ProseError(f"expected key=value, got {tok!r}")
        k, v = tok.split("=", 1)
        out[k] = v
    return out


def _match(rows, filters, what):
    """The rows whose every filtered column matches (exactly, or as a glob)."""
    missing = sorted(k for k in filters if rows and k not in rows[0])
    if missing:
        raise ProseError(f"{what} has no column {', '.join(missing)}")
    return [r for r in rows if all(fnmatch.fnmatchcase(r[k], v) for k, v in filters.items())]


def _combine(values, agg, what):
    if agg not in AGGS:
        raise ProseError(f"agg={agg}: one of {', '.join(AGGS)}")
    if not values:
        raise ProseError(f"no row of {what} matches")
    if agg == "one":
        if len(values) != 1:
            raise ProseError(f"{len(values)} rows of {what} match; narrow the filters or give agg=")
        return values[0]
    return AGGS[agg](values)


class Sources:
    """The data a marker can name, read once."""

    def __init__(self):
        self._files = {}
        self._io = {}

    def csv_rows(self, path):
        if path not in self._files:
            if not os.path.exists(path):
                raise ProseError(f"{os.path.relpath(path, ROOT)} does not exist")
            with open(path, newline="") as f:
                self._files[path] = list(csv.DictReader(f))
        return self._files[path]

    def io_model(self, args):
        key = tuple(args)
        if key not in self._io:
            exe = os.environ.get("FS_IO_MODEL", os.path.join(ROOT, "build", "bin", "io_model"))
            if not os.access(exe, os.X_OK):
                raise ProseError(f"{exe} not found: build it (cmake --build build --target io_model) or set FS_IO_MODEL")
            out = subprocess.run([exe, *args], capture_output=True, text=True)
            if out.returncode != 0:
                raise ProseError(f"io_model {' '.join(args)}: {out.stderr.strip()}")
            self._io[key] = list(csv.DictReader(io.StringIO(out.stdout)))
        return self._io[key]

    def value(self, spec):
        kind, *rest = shlex.split(spec)
        f = _filters(rest)
        agg = f.pop("agg", "sum" if kind == "ncu" else "one")
        if kind == "csv":
            path = os.path.join(BENCH, f.pop("gpu", "h200") + ".csv")
            field = f.pop("field")
            f.setdefault("dropout", "0")
            f.setdefault("mask", "")
            latest = {}
            measured = MEASURED - {"commit"} if "commit" in f else MEASURED  # commit=: one per commit
            for r in self.csv_rows(path):
                r = {"dropout": "0", "mask": "", "density": "1", **r}
                latest[tuple((k, v) for k, v in r.items() if k not in measured)] = r
            rows = _match(list(latest.values()), f, os.path.relpath(path, ROOT))
            return _combine([float(r[field]) for r in rows], agg, spec)
        if kind == "ncu":
            path = os.path.join(BENCH, f.pop("gpu", "h200") + "_ncu.csv")
            field = f.pop("field")
            rows = _match(self.csv_rows(path), f, os.path.relpath(path, ROOT))
            return _combine([float(r[field]) for r in rows], agg, spec)
        if kind == "ncu_metric":
            path = os.path.join(BENCH, f.pop("file"))
            metric = f.pop("metric")
            f = {{"kernel": "Kernel Name", "section": "Section Name"}.get(k, k): v for k, v in f.items()}
            rows = _match([r for r in self.csv_rows(path) if r["Metric Name"] == metric], f, spec)
            return _combine([float(r["Metric Value"].replace(",", "")) for r in rows], agg, spec)
        if kind == "model":
            shape = {k: f.pop(k, v) for k, v in (("B", "1"), ("H", "8"), ("N", "2048"), ("d", "64"), ("causal", "0"))}
            args = ["--batch", shape["B"], "--heads", shape["H"], "--seq", shape["N"], "--dim", shape["d"]]
            args += ["--causal"] if shape["causal"] == "1" else []
            for k in ("pattern", "block", "seed", "smyrf"):
                if k in f:
                    args += ["--" + k, f.pop(k)]
            field = f.pop("field")
            rows = _match(self.io_model(args), f, "io_model " + " ".join(args))
            return _combine([float(r["read_bytes"]) + float(r["write_bytes"]) if field == "total" else float(r[field])
                             for r in rows], agg, spec)
        if kind == "tiles":
            args = ["--tiles", "--seq", f.pop("N", "2048"), "--dim", f.pop("d", "64")]
            rows = _match(self.io_model(args), f, "io_model " + " ".join(args))
            return _combine([float(r["value"]) for r in rows], agg, spec)
        if kind == "txt":
            path = os.path.join(ROOT, f.pop("file"))
            pattern = f.pop("re")
            with open(path) as fh:
                found = re.findall(pattern, fh.read())
            return _combine([float(x) for x in found], agg, spec)
        raise ProseError(f"unknown source {kind!r} (csv, ncu, ncu_metric, model, tiles, txt)")


SOURCE_KINDS = ("csv", "ncu", "ncu_metric", "model", "tiles", "txt")


def evaluate(expr, names, sources):
    """The value of a marker's expression: a source written inline, or arithmetic over names."""
    expr = expr.strip()
    if expr.split(" ", 1)[0] in SOURCE_KINDS:
        return sources.value(expr)

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in UNITS:
                return UNITS[node.id]
            if node.id not in names:
                raise ProseError(f"{node.id} is not defined in a <!-- numbers --> block of this file")
            return names[node.id]()
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            return BINARY[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCS:
            return FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise ProseError(f"not allowed in an expression: {ast.dump(node)[:60]}")

    try:
        return ev(ast.parse(expr, mode="eval"))
    except SyntaxError as e:
        raise ProseError(f"expression {expr!r}: {e.msg}") from None


def shown(value, text):
    """value printed with as many decimals as `text` shows."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    out = f"{value:.{decimals}f}"
    return out.replace("-", "−") if text.startswith("−") else out


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check_file(path, sources, fix):
    """Problems in one file; with fix, the file's stale numbers rewritten (returned as notes)."""
    with open(path) as f:
        text = f.read()
    rel = os.path.relpath(path, ROOT)
    problems, notes = [], []
    names, cache = {}, {}
    for block in NUMBERS.finditer(text):
        for i, raw in enumerate(block.group("body").splitlines()):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, eq, spec = line.partition("=")
            where = f"{rel}:{line_of(text, block.start()) + 1 + i}"
            if not eq or not name.strip().isidentifier():
                problems.append(f"{where}: expected NAME = SOURCE ..., got {raw.strip()!r}")
                continue

            def get(name=name.strip(), spec=spec.strip(), where=where):
                if name not in cache:
                    try:
                        cache[name] = evaluate(spec, names, sources)
                    except (ProseError, KeyError, ValueError) as e:
                        raise ProseError(f"{name} ({where}): {e}") from None
                return cache[name]
            names[name.strip()] = get

    def replace(m):
        expr, text_shown = m.group("expr"), m.group("text")
        where = f"{rel}:{line_of(text, m.start())}"
        if not SHOWN.match(text_shown):
            problems.append(f"{where}: {text_shown!r} is not a number (marker n:{expr})")
            return m.group(0)
        try:
            value = evaluate(expr, names, sources)
        except (ProseError, KeyError, ValueError, ArithmeticError) as e:
            problems.append(f"{where}: n:{expr}: {e}")
            return m.group(0)
        want = shown(value, text_shown)
        if want == text_shown:
            return m.group(0)
        if fix:
            notes.append(f"{where}: {text_shown} -> {want} (n:{expr}); re-read the sentence")
            return m.group(0).replace(f"-->{text_shown}<!--", f"-->{want}<!--")
        problems.append(f"{where}: the prose says {text_shown}, the data give {want} ({value:.6g}; n:{expr})")
        return m.group(0)

    new = INLINE.sub(replace, text)
    problems += lint(text, rel) + links(text, path, rel)
    if fix and new != text:
        with open(path, "w") as f:
            f.write(new)
    return problems, notes


def lint(text, rel):
    """Numbers with a unit in prose that no marker holds to its source."""
    out = []
    masked = SKIP.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith(("    ", "\t")):  # code: program output, quoted as printed
            continue
        for m in QUANTITY.finditer(masked[n - 1]):
            if any(masked[n - 1][m.start():].startswith(k) for k in NOT_MEASURED):
                continue
            out.append(f"{rel}:{n}: {m.group(0)!r} is not held to any data: wrap it in a <!-- n:... --> marker")
    return out


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """The anchor GitHub gives a heading: from its text as rendered (a link's text, not its target)."""
    heading = re.sub(r"\[([^][]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def headings(path):
    with open(path) as f:
        return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", f.read(), re.M)}


def links(text, path, rel):
    """Relative links that leave the repository, name no file, or name no heading of it."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto: — not a file of the repository
            file, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if os.path.commonpath([full, ROOT]) != ROOT:
                out.append(f"{rel}:{n}: link {target} leaves the repository")
            elif not os.path.exists(full):
                out.append(f"{rel}:{n}: link {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in headings(full):
                out.append(f"{rel}:{n}: link {target}: no heading with that anchor")
    return out


def check_model_csvs(sources, fix, bench=BENCH):
    """docs/benchmarks/<gpu>_model.csv must be what io_model prints for its shapes now."""
    problems, notes = [], []
    for name in sorted(os.listdir(bench)):
        if not name.endswith("_model.csv"):
            continue
        path = os.path.join(bench, name)
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = reader.fieldnames, list(reader)
        changed = False
        for r in rows:
            args = ["--batch", r["B"], "--heads", r["H"], "--seq", r["N"], "--dim", r["d"]]
            args += ["--causal"] if r["causal"] == "1" else []
            mask = r.get("mask") or ""
            args += ["--smyrf", mask[len("smyrf:"):]] if mask.startswith("smyrf:") else ["--pattern", mask] if mask else []
            try:
                now = [x for x in sources.io_model(args) if x["step"] == r["step"] and x["pass"] == r["pass"]]
            except ProseError as e:
                return [f"docs/benchmarks/{name}: {e}"], notes
            if len(now) != 1:
                problems.append(f"docs/benchmarks/{name}: io_model has no row {r['step']} {r['pass']}")
                continue
            for k in ("read_bytes", "write_bytes"):
                if now[0][k] != r[k]:
                    if fix:
                        notes.append(f"docs/benchmarks/{name}: {r['step']} {r['pass']} {k} {r[k]} -> {now[0][k]}")
                        r[k], changed = now[0][k], True
                    else:
                        problems.append(f"docs/benchmarks/{name}: {r['step']} {r['pass']} {k} is {r[k]}, "
                                        f"io_model now gives {now[0][k]}")
        if changed:
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
    return problems, notes


def report(paths, fix=False):
    """Prints the problems (and with fix, what was rewritten); returns how many problems."""
    problems, notes = check(paths, fix)
    for line in notes + problems:
        print(line)
    return len(problems)


def check(paths, fix=False):
    """(problems, notes) over the prose of `paths` and the model CSVs."""
    sources = Sources()
    problems, notes = check_model_csvs(sources, fix)
    for p in paths:
        pr, no = check_file(p, sources, fix)
        problems += pr
        notes += no
    return problems, notes
