#!/usr/bin/env python3
"""Counts the instructions of an attention kernel's tile loop in its SASS, without a GPU.

    cuobjdump -sass build/steps/09_hopper/CMakeFiles/fa_step09.dir/forward_fp8_bf16.cu.o > fp8.sass
    python3 docs/benchmarks/sass_tile_loop.py fp8.sass --kernel 'Fp8Cfg.*Lb0ELb0E'

For each kernel whose mangled name matches --kernel, the tile loop is the smallest loop (a
backward branch) that holds a wgmma and at least 16 MUFU.EX2. Its basic blocks are printed with
their sizes, and three kinds are named where the code has them:
  mask     the block that sets scores to -inf (mostly FSEL), run only on tiles that need masking;
  rescale  the block of O's rescale (FMUL only), which a lazy softmax skips on most tiles;
  call     a block that calls a subroutine (a division's slow path, when FCHK asks for it).
The hot path is the loop without the mask and call blocks, with and without the rescale block.
"Per element" divides by the elements of S each thread holds per tile: the keys of S's wgmma (its
n) times 64 rows over the warpgroup's 128 threads, one exponential each.

These are static counts of one compile: what each thread issues per tile when no branch is
taken but the loop's own, not a measurement. cuobjdump comes with the CUDA toolkit, or from PyPI
(pip download nvidia-cuda-cuobjdump; the wheel holds bin/cuobjdump).
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_sass_mix import opcode  # noqa: E402  (the mnemonic without predicate and modifiers)

INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA(?:\.U\.ANY|\.DIV)?\s+(0x[0-9a-f]+)")
GMMA = re.compile(r"\b[HQ]GMMA\.64x(\d+)x\d+\S*\s+(\S+),\s*(\S+)")


def functions(text):
    """{mangled name: [(address, instruction text)]} from cuobjdump -sass output."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = INSN.match(line)
        if m and name:
            out[name].append((int(m.group(1), 16), m.group(2)))
    return out


def tile_loop(ins):
    index = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, t) in enumerate(ins):
        m = BRANCH.search(t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in index:
            lo = index[int(m.group(1), 16)]
            body = [x for _, x in ins[lo:i + 1]]
            if any("GMMA" in x for x in body) and sum("MUFU.EX2" in x for x in body) >= 16:
                loops.append((lo, i))
    return min(loops, key=lambda lp: lp[1] - lp[0]) if loops else None


def blocks(ins, lo, hi):
    start, end = ins[lo][0], ins[hi][0]
    leaders = {start}
    for a, t in ins[lo:hi + 1]:
        m = BRANCH.search(t)
        if m:
            target = int(m.group(1), 16)
            if start <= target <= end:
                leaders.add(target)
            leaders.add(a + 16)
    leaders = sorted(x for x in leaders if start <= x <= end)
    out = []
    for s, e in zip(leaders, leaders[1:] + [end + 16]):
        body = [t for a, t in ins[lo:hi + 1] if s <= a < e]
        if body:
            out.append((s, body))
    return out


def kind(body):
    ops = collections.Counter(opcode(t) for t in body)
    if ops["CALL"]:
        return "call"
    if ops["FSEL"] >= 0.4 * len(body) and ops["FSEL"] >= 16:
        return "mask"
    if ops["FMUL"] >= 0.8 * len(body) and ops["FMUL"] >= 16:
        return "rescale"
    return ""


def report(name, ins, top):
    lp = tile_loop(ins)
    if lp is None:
        print(f"{name}: no tile loop (no loop with a wgmma and 16 MUFU.EX2)")
        return
    lo, hi = lp
    body = [t for _, t in ins[lo:hi + 1]]
    keys = None
    for t in body:
        m = GMMA.search(t)
        if m and m.group(3).startswith("gdesc"):  # S = Q Kᵀ: both operands from shared memory
            keys = int(m.group(1))
            break
    if keys is None:
        print(f"{name}: its tile loop has no wgmma with both operands in shared memory (S = Q Kᵀ)")
        return
    per_thread = keys * 64 // 128
    bl = blocks(ins, lo, hi)
    print(f"{name}")
    print(f"  tile loop {ins[lo][0]:#06x}..{ins[hi][0]:#06x}: {len(body)} instructions, "
          f"S by {keys} keys: {per_thread} elements of S per thread")
    for a, b in bl:
        k = kind(b)
        ops = collections.Counter(opcode(t) for t in b)
        print(f"    block {a:#06x} {len(b):5d} {k:8s} MUFU {ops['MUFU']:3d}  " +
              " ".join(f"{o} {n}" for o, n in ops.most_common(6)))
    hot = [t for _, b in bl if kind(b) not in ("mask", "call") for t in b]
    lazy = [t for _, b in bl if kind(b) == "" for t in b]
    for label, path in (("hot path", hot), ("hot path, rescale skipped", lazy)):
        if label.endswith("skipped") and len(lazy) == len(hot):
            continue
        ops = collections.Counter(opcode(t) for t in path)
        unif = sum(n for o, n in ops.items() if o.startswith("U") or o == "R2UR")
        print(f"  {label}: {len(path)} instructions, {len(path) / per_thread:.2f} per element; "
              f"MUFU {ops['MUFU'] / per_thread:.2f}, uniform datapath {unif / per_thread:.2f}")
        print("    per element: " + ", ".join(f"{o} {n / per_thread:.2f}" for o, n in ops.most_common(top)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("dump", help="cuobjdump -sass output ('-' for stdin)")
    ap.add_argument("--kernel", default="hopper_forward_kernel",
                    help="regular expression for the mangled names to report (default: %(default)s)")
    ap.add_argument("--top", type=int, default=10, help="opcodes to list per element (default: %(default)s)")
    a = ap.parse_args()
    text = sys.stdin.read() if a.dump == "-" else open(a.dump).read()
    found = {n: i for n, i in functions(text).items() if re.search(a.kernel, n)}
    if not found:
        sys.exit(f"no function matches {a.kernel!r}")
    for n, i in found.items():
        report(n, i, a.top)


if __name__ == "__main__":
    main()
