#!/usr/bin/env python3
"""Compares the SASS of two builds kernel by kernel: which kernels a change left identical.

    docs/benchmarks/compare_sass.py BASE_BUILD CHANGE_BUILD [STEP ...]   (default: every step)

For each step's library (BUILD/steps/<step>/libfa_step<NN>.a) it runs `cuobjdump -sass` on both
builds, cuts the listing into functions, drops addresses, encodings and comments, and prints, per
step: how many kernels are identical, how many differ, and how many exist in one build only (a
renamed or a new instantiation), then the names of those that differ. A kernel whose SASS is
identical runs the same instructions, so a timing comparison has nothing to find there; the ones
that differ are what compare_builds.sh must time. Exits 0 (it reports; it does not judge).
"""
import collections
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys


def cuobjdump():
    for cand in (shutil.which("cuobjdump"), os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "cuobjdump"),
                 "/usr/local/cuda/bin/cuobjdump"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    sys.exit("compare_sass.py: cuobjdump not found (CUDA toolkit's bin/)")


def kernels(lib, tool):
    """{mangled name: hash of its normalized SASS} for every function in lib's sm_90 code."""
    text = subprocess.run([tool, "-sass", lib], check=True, capture_output=True, text=True).stdout
    out, name, body = {}, None, []

    def close():
        if name is not None:
            out[name] = hashlib.sha1("\n".join(body).encode()).hexdigest()

    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            close()
            name, body = m.group(1), []
            continue
        if name is None:
            continue
        code = re.sub(r"/\*.*?\*/", "", line).strip()
        if code.startswith(".") or not code:
            continue  # directives (.headerflags) and encoding-only lines
        if code.startswith("Fatbin") or code.startswith("=") or code.startswith("arch =") or code.startswith("code "):
            close()
            name, body = None, []
            continue
        body.append(" ".join(code.split()))
    close()
    return out


def libraries(build, steps):
    found = {}
    for path in sorted(glob.glob(os.path.join(build, "steps", "*", "libfa_step*.a"))):
        step = os.path.basename(os.path.dirname(path))
        if not steps or step[:2] in steps:
            found[step] = path
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base, change, steps = sys.argv[1], sys.argv[2], {s[:2] for s in sys.argv[3:]}
    tool = cuobjdump()
    base_libs, change_libs = libraries(base, steps), libraries(change, steps)
    print(f"{'step':24} {'identical':>9} {'differ':>7} {'base only':>9} {'change only':>11}")
    differing = collections.defaultdict(list)
    for step in sorted(set(base_libs) | set(change_libs)):
        if step not in base_libs or step not in change_libs:
            print(f"{step:24} (library in one build only)")
            continue
        b, c = kernels(base_libs[step], tool), kernels(change_libs[step], tool)
        same = [k for k in b if k in c and b[k] == c[k]]
        differ = [k for k in b if k in c and b[k] != c[k]]
        differing[step] = differ
        print(f"{step:24} {len(same):9} {len(differ):7} {len(set(b) - set(c)):9} {len(set(c) - set(b)):11}")
    for step, names in differing.items():
        if names:
            print(f"\n{step}: SASS differs in")
            demangle = shutil.which("c++filt")
            shown = subprocess.run([demangle], input="\n".join(names), capture_output=True, text=True).stdout.split(
                "\n") if demangle else names
            for n in shown:
                if n:
                    print("  " + n[:200])


if __name__ == "__main__":
    main()
