#!/usr/bin/env python3
"""Which kernels of two builds have the same machine code: the SASS of every kernel in BEFORE's
object files or programs against AFTER's, by name.

    python3 cmake/same_sass.py BEFORE AFTER [--only REGEX] [--skip REGEX] [--rename PAT=>REPL]

BEFORE and AFTER are object files, programs, or folders (every *.o under them). Each kernel of
BEFORE (its mangled name, demangled for --only, --skip and --rename, which are Python regular
expressions on that demangled name) is looked up in AFTER and its SASS compared line by line, the
instruction encodings included: the same text is the same machine code, so the same speed (the
project's rule for a change that must not slow a kernel: the same SASS, or a measured time). Kernels
of AFTER that BEFORE lacks are counted. Exit code 0 when every kernel compared is the same, 1
otherwise, 2 on bad input. cuobjdump comes with the CUDA toolkit (or PyPI's nvidia-cuda-cuobjdump,
or Triton's wheel); CUOBJDUMP names another.

Typical use: the traced twins (kTrace, the last template argument `true`) are skipped with
--skip 'true>\\(' when a change removes some of them; the plain kernels must all be there, the same.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def objects(path):
    if os.path.isdir(path):
        out = []
        for root, _, files in os.walk(path):
            out += [os.path.join(root, f) for f in files if f.endswith(".o")]
        return sorted(out)
    return [path]


def cuobjdump():
    exe = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not exe:
        for d in ("/usr/local/cuda/bin", "/opt/cudatools"):
            if os.access(os.path.join(d, "cuobjdump"), os.X_OK):
                return os.path.join(d, "cuobjdump")
        sys.exit("same_sass: no cuobjdump (set CUOBJDUMP)")
    return exe


def kernels(path):
    """{mangled name: [instruction lines]} of every kernel in the files under path."""
    found = {}
    for f in objects(path):
        r = subprocess.run([cuobjdump(), "-sass", f], capture_output=True, text=True)
        if r.returncode != 0:
            continue  # no device code in it
        for block in re.split(r"\n\s*Function : ", r.stdout)[1:]:
            name, body = block.split("\n", 1)
            # Each instruction's line (its address, text and first 64 bits) and the line of its
            # other 64 bits (the scheduling controls: stalls, barriers, operand reuse), spaces
            # collapsed: cuobjdump pads the columns to the widest instruction of the whole file, so
            # a change to another kernel of the same object would otherwise move this one's text.
            lines = [" ".join(l.split()) for l in body.split("\n") if re.match(r"\s+/\*( 0x)?[0-9a-f]+ ?\*/", l)]
            found[name.strip()] = lines
    return found


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return dict(zip(names, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--only", help="compare only kernels whose demangled name matches")
    ap.add_argument("--skip", help="leave out kernels whose demangled name matches")
    ap.add_argument("--rename", action="append", default=[], help="PATTERN=>REPLACEMENT on BEFORE's demangled names")
    ap.add_argument("--list", action="store_true", help="name every kernel compared")
    args = ap.parse_args()
    for p in (args.before, args.after):
        if not os.path.exists(p):
            print(f"same_sass: {p}: no such file or folder", file=sys.stderr)
            return 2
    before, after = kernels(args.before), kernels(args.after)
    db, da = demangle(list(before)), demangle(list(after))
    after_by_name = {da[m]: m for m in after}
    same, differ, missing = [], [], []
    for m, lines in sorted(before.items()):
        name = db[m]
        if args.only and not re.search(args.only, name) or args.skip and re.search(args.skip, name):
            continue
        target = name
        for rule in args.rename:
            pat, repl = rule.split("=>", 1)
            target = re.sub(pat, repl, target)
        m2 = after_by_name.get(target)
        if m2 is None:
            missing.append(name)
        elif after[m2] == lines:
            same.append(name)
        else:
            differ.append(name)
    compared = len(same) + len(differ) + len(missing)
    print(f"same_sass: {len(same)} of {compared} kernels the same, {len(differ)} different, {len(missing)} missing "
          f"in {args.after} ({len(after) - len(same) - len(differ)} of its kernels not compared)")
    for title, names in (("different", differ), ("missing", missing)) + ((("same", same),) if args.list else ()):
        for n in names:
            print(f"  {title}: {n}")
    return 0 if not differ and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
