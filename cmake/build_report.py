#!/usr/bin/env python3
"""What a build spent its time on, from ninja's log (BUILD/.ninja_log).

    python3 cmake/build_report.py [BUILD] [--top 10] [--limit SECONDS]

Prints the slowest translation units (and links) of the last build of each output, the CPU-seconds
of all of them, and the wall time from the first start to the last end. The log keeps one line per
output per build; an output built again (a rebuild, a ccache hit) counts at its latest time, so run
it after a build from scratch to see that build. --limit S: exit 1 when any step took more than S
seconds (the project's bound on a translation unit is 90 s on one core: issue "the build in
minutes"). Exit 2 when there is no log to read.
"""
import argparse
import os
import sys


def read_log(path):
    """{output: (start_ms, end_ms, command_hash)} from ninja's log, the latest line of each output."""
    entries = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            raise ValueError(f"{path}: not a ninja log (first line {header.strip()!r})")
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5:
                continue
            start, end, _, output, command = parts[:5]
            try:
                entries[output] = (int(start), int(end), command)
            except ValueError:
                continue
    return entries


def steps(entries):
    """One row per build step: the outputs of one command share its start, end and hash."""
    grouped = {}
    for output, (start, end, command) in entries.items():
        grouped.setdefault((start, end, command), []).append(output)
    rows = []
    for (start, end, _), outputs in grouped.items():
        # The object file or program names a step best; a stamp or a dependency file least.
        outputs.sort(key=lambda o: (o.endswith((".d", ".stamp")) or "CMakeFiles/" in o and not o.endswith(".o"), o))
        rows.append(((end - start) / 1000.0, start, end, outputs[0]))
    return rows


def short(name):
    """steps/08_tensor_cores/CMakeFiles/fa_step08.dir/forward_bf16_d64.cu.o → steps/08_tensor_cores/forward_bf16_d64.cu"""
    if "/CMakeFiles/" in name:
        folder, rest = name.split("/CMakeFiles/", 1)
        base = rest.split(".dir/", 1)[-1]
        name = f"{folder}/{base}"
    for ext in (".o", ".obj"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build", help="the build folder (default: build)")
    ap.add_argument("--top", type=int, default=10, help="how many of the slowest steps to list (default 10)")
    ap.add_argument("--limit", type=float, default=None, help="exit 1 when a step took longer than this many seconds")
    args = ap.parse_args()
    path = os.path.join(args.build, ".ninja_log")
    try:
        rows = steps(read_log(path))
    except (OSError, ValueError) as e:
        print(f"build_report: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(f"build_report: {path} records no build step")
        return 0
    rows.sort(reverse=True)
    cpu = sum(r[0] for r in rows)
    wall = (max(r[2] for r in rows) - min(r[1] for r in rows)) / 1000.0
    print(f"build: {len(rows)} steps, {cpu:.0f} CPU-seconds, {wall:.0f} s from the first start to the last end "
          f"({path})")
    print(f"the {min(args.top, len(rows))} slowest:")
    for seconds, _, _, name in rows[: args.top]:
        print(f"  {seconds:8.1f} s  {short(name)}")
    if args.limit is not None:
        over = [r for r in rows if r[0] > args.limit]
        if over:
            print(f"build_report: {len(over)} step(s) over {args.limit:g} s", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
