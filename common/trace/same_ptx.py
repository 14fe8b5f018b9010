#!/usr/bin/env python3
"""Shows that adding the tracing switch left a step's kernels unchanged when tracing is off.

Compile the step's .cu to PTX before and after instrumenting it, then compare:

    nvcc -arch=sm_90 -std=c++17 -O3 -I. -ptx steps/01_naive/naive.cu -o before.ptx   # before
    nvcc -arch=sm_90 -std=c++17 -O3 -I. -ptx steps/01_naive/naive.cu -o after.ptx    # after
    python3 common/trace/same_ptx.py before.ptx after.ptx

Each kernel of before.ptx is matched (by demangled name, with c++filt) with the instantiation
of after.ptx whose template arguments are its own plus a trailing `false` (kTrace, the last
template parameter) and whose last parameter is the added fs::trace::Slices. Their bodies are compared after renaming what
legitimately differs: the kernel's name (hence its parameter names) and branch labels. Same
PTX gives the same SASS from the same ptxas. Exit code 0 when every kernel is the same.
"""
import re
import subprocess
import sys


def entries(path):
    text = open(path).read()
    return {m.group(1): m.group(2) for m in re.finditer(r"\.entry (\S+)\(.*?\)\s*(\{.*?\n\})", text, re.S)}


def normalised(name, body):
    body = body.replace(name, "KERNEL")
    body = re.sub(r"KERNEL_param_\d+", "PARAM", body)
    return re.sub(r"\$L__BB\d+_", "$L_", body)


def demangled(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def split_params(signature):
    """`ns::(anonymous namespace)::k<1>(int, float)` → (`ns::(anonymous namespace)::k<1>`, `int, float`)."""
    depth = 0
    for i in range(len(signature) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0:
            return signature[:i], signature[i + 1 : -1]
    return signature, ""


def without_tracing(signature):
    """`void k<64, false>(float*, int, fs::trace::Slices)` → (`k<64>`, `float*, int`): the kernel's
    name as it was before the switch and its parameters, or None when `signature` is not a
    tracing-off instantiation."""
    if not signature.endswith(", fs::trace::Slices)"):
        return None
    s = signature[: -len(", fs::trace::Slices)")] + ")"
    s = s[len("void "):] if s.startswith("void ") else s
    head, params = split_params(s)
    if head.endswith("<false>"):
        return head[: -len("<false>")], params
    if head.endswith(", false>"):
        return head[: -len(", false>")] + ">", params
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    before, after = entries(sys.argv[1]), entries(sys.argv[2])
    names_before, names_after = demangled(list(before)), demangled(list(after))
    plain = {}
    for name, sig in names_after.items():
        key = without_tracing(sig)
        if key:
            plain[key[0]] = (name, key[1])
    same = True
    for name, body in before.items():
        sig = names_before[name]
        sig = sig[len("void "):] if sig.startswith("void ") else sig
        head, params = split_params(sig)
        match, after_params = plain.get(head, (None, None))
        # Tracing may add parameters (the Slices, and what only the trace needs) after the others.
        if match is None or not after_params.startswith(params):
            print(f"{sig}: no tracing-off instantiation found in {sys.argv[2]}")
            same = False
            continue
        equal = normalised(name, body) == normalised(match, after[match])
        same = same and equal
        print(f"{'same     ' if equal else 'DIFFERENT'} {sig}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
