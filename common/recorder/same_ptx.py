#!/usr/bin/env python3
"""Shows that adding the tracing switch left a step's kernels unchanged when tracing is off.

Compile the step's .cu to PTX before and after instrumenting it, then compare:

    nvcc -arch=sm_90 -std=c++17 -O3 -I. -ptx steps/01_naive/naive.cu -o before.ptx   # before
    nvcc -arch=sm_90 -std=c++17 -O3 -I. -ptx steps/01_naive/naive.cu -o after.ptx    # after
    python3 common/recorder/same_ptx.py before.ptx after.ptx

Each kernel of before.ptx is matched (by demangled name, with c++filt) with the instantiation
of after.ptx whose template arguments are its own plus a trailing `false` (kTrace, the last
template parameter) and whose last parameter is the added fs::trace::Slices. Their bodies are compared after renaming what
legitimately differs: the kernel's name (hence its parameter names), branch labels, the hash in
the anonymous namespace's name, and register numbers. Same PTX gives the same SASS from the
same ptxas. Exit code 0 when every kernel is the same.

A refactoring that renames a kernel's template arguments (bool switches that became policy
types, say) is checked the same way, with the names mapped instead of the tracing switch:

    python3 common/recorder/same_ptx.py \
        --rename '(flash2_forward_kernel<.*), false, false, (true|false)>=>\1, fs::DenseWalk, fs::NoDropout, \2>' \
        before.ptx after.ptx

Each kernel of before.ptx is then looked up in after.ptx by its demangled name with the
--rename substitutions (Python regular expressions, PATTERN=>REPLACEMENT, applied in order)
made; kernels no substitution changes are looked up as they are.

A change that grows a parameter struct in its middle (a field added to fs::Shape, which
FwdParams holds) moves the fields after it: every load of them has another offset. Say so, and
the comparison adds the shift to before.ptx's offsets of the kernels whose demangled name
matches, from the first moved byte on:

    python3 common/recorder/same_ptx.py --param-shift '\(fs::FwdParams=>60:8' \
        --param-shift '\(fs::BwdParams=>92:8' before.ptx after.ptx

(`[name_param_0+K]` with K ≥ 60 is read as `[name_param_0+K+8]`; the first parameter only.) A
load through a register that holds the parameter's address (`ld.param.u8 %rs1, [%rd3+12]`) names
no parameter, so the base is unknown: such a line may differ from its counterpart in the offset
alone, and by exactly the shift. The loads are then the same loads of the same fields, and
nothing else may differ.

nvcc 13.0 is not deterministic: compiling one file twice can give a kernel that, after a
16-byte shared-memory load, loads some of the same bytes again (`.pragma "used_bytes_mask"`,
then `ld.shared.v2` or `ld.shared.f32` of lanes it already has) and uses those registers. Such
re-loads are folded into the load they repeat before comparing, so that this noise is not
reported as a difference; nothing else is.
"""
import re
import subprocess
import sys


def entries(path):
    """Kernel name → its body, with the performance directives before it (.maxntid from
    __launch_bounds__, ...), which must stay the same too."""
    text = open(path).read()
    # The body ends at the `}` in column 0 that the next kernel, function or the file's end
    # follows: inline assembly with braces of its own (step 09's `{ .reg .pred ... }`) puts `}`
    # in column 0 inside a body too.
    found = {m.group(1): m.group(2) for m in
             re.finditer(r"\.entry (\S+)\(.*?\)\s*((?:\.\w+[^\n{]*\n\s*)*\{.*?\n\})"
                         r"(?=\s*(?://\s*\.globl|\.visible|\.entry|\.func|\.weak|\Z))", text, re.S)}
    if len(found) != text.count(".entry "):
        sys.exit(f"{path}: read {len(found)} of its {text.count('.entry ')} kernels")
    return found


_V4 = re.compile(r"\s*ld\.shared\.v4\.f32\s+\{(%f\d+), (%f\d+), (%f\d+), (%f\d+)\}, \[(%r\d+)(?:\+(\d+))?\];")
_RELOADS = (
    (re.compile(r"\s*ld\.shared\.v2\.f32\s+\{(%f\d+), (%f\d+)\}, \[(%r\d+)(?:\+(\d+))?\];"), 2),
    (re.compile(r"\s*ld\.shared\.f32\s+(%f\d+), \[(%r\d+)(?:\+(\d+))?\];"), 1),
)


def without_reloads(body):
    """Drops shared-memory loads that re-read lanes of a 16-byte load at most 12 lines before
    (no shared store, barrier or cp.async wait in between), renaming their registers to that
    load's, and drops the `used_bytes_mask` pragmas nvcc puts before such loads."""
    rename, out, recent = {}, [], []  # recent: (line, base register, offset, its 4 registers)
    for line in body.splitlines():
        if "used_bytes_mask" in line:
            continue
        if "st.shared" in line or "bar.sync" in line or "cp.async.wait" in line:
            recent = []
        m = _V4.match(line)
        if m:
            recent.append((len(out), m.group(5), int(m.group(6) or 0), m.groups()[:4]))
        repeat = None
        for pattern, n in _RELOADS:
            r = pattern.match(line)
            if not r:
                continue
            regs, base, off = r.groups()[:n], r.group(n + 1), int(r.group(n + 2) or 0)
            for at, b, o, lanes in reversed(recent):
                if len(out) - at > 12:
                    break
                if b == base and o <= off and off + 4 * n <= o + 16:
                    repeat = {regs[i]: lanes[(off - o) // 4 + i] for i in range(n)}
                    break
        if repeat:
            rename.update(repeat)
            continue
        out.append(line)
    text = "\n".join(out)
    return re.sub(r"%f\d+\b", lambda m: rename.get(m.group(0), m.group(0)), text) if rename else text


def renumbered(body):
    """Registers numbered by first appearance, per class; their declared counts dropped."""
    names, count = {}, {}

    def number(m):
        if m.group(0) not in names:
            cls = m.group(1)
            names[m.group(0)] = f"%{cls}_{count.get(cls, 0)}"
            count[cls] = count.get(cls, 0) + 1
        return names[m.group(0)]

    body = re.sub(r"%(rd|rs|r|fd|f|p|hh|h|b)\d+\b", number, body)
    return re.sub(r"\.reg \.\S+\s+%\w+<\d+>;", ".reg DECLARED;", body)


def shifted(name, body, start, delta):
    """Offsets ≥ start into the kernel's first parameter, moved by delta."""
    return re.sub(re.escape(name) + r"_param_0\+(\d+)\]",
                  lambda m: f"{name}_param_0+{int(m.group(1)) + (delta if int(m.group(1)) >= start else 0)}]", body)


_REG_PARAM = re.compile(r"^(\s*ld\.param\.[\w.]+\s+(?:%\w+|\{[^}]*\}), \[%\w+)\+(-?\d+)\];$")


def equal_but_shifted(before, after, deltas):
    """Whether two normalised bodies are the same line for line, but for register-based parameter
    loads whose offsets differ by one of `deltas`."""
    a, b = before.splitlines(), after.splitlines()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        mx, my = _REG_PARAM.match(x), _REG_PARAM.match(y)
        if not (mx and my and mx.group(1) == my.group(1) and int(my.group(2)) - int(mx.group(2)) in deltas):
            return False
    return True


def normalised(name, body):
    body = body.replace(name, "KERNEL")
    body = re.sub(r"KERNEL_param_\d+", "PARAM", body)
    # The anonymous namespace's name holds a hash of the source (`_GLOBAL__N__207e4ff3_8_fused_cu_6ee80094`):
    # symbols in it, such as an `extern __shared__` array, differ in name only.
    body = re.sub(r"_GLOBAL__N__[0-9a-f]{8}_\d+_\w*?_[0-9a-f]{8}", "_GLOBAL__N_", body)
    body = re.sub(r"\$L__BB\d+_", "$L_", body)
    # Labels of inline assembly (`WAIT_%=` in step 09's mbarrier wait) are numbered per asm
    # statement of the file: another count of statements before them renames them only.
    body = re.sub(r"\b([A-Z]+)_\d+\b", r"\1_N", body)
    return renumbered(without_reloads(body))


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


def signature(name_sig):
    return name_sig[len("void "):] if name_sig.startswith("void ") else name_sig


def main():
    args = sys.argv[1:]
    renames, shifts = [], []
    while len(args) > 2 and args[0] in ("--rename", "--param-shift"):
        pattern, _, replacement = args[1].partition("=>")
        if args[0] == "--rename":
            renames.append((re.compile(pattern), replacement))
        else:
            start, _, delta = replacement.partition(":")
            shifts.append((re.compile(pattern), int(start), int(delta)))
        args = args[2:]
    if len(args) != 2:
        print(__doc__)
        return 2
    before, after = entries(args[0]), entries(args[1])
    names_before, names_after = demangled(list(before)), demangled(list(after))
    plain = {}
    if renames:  # kernels by their full demangled signature
        for name, sig in names_after.items():
            plain[signature(sig)] = (name, None)
    else:  # tracing-off instantiations by their name before the switch
        for name, sig in names_after.items():
            key = without_tracing(sig)
            if key:
                plain[key[0]] = (name, key[1])
    same = True
    for name, body in before.items():
        sig = signature(names_before[name])
        if renames:
            for pattern, replacement in renames:
                sig = pattern.sub(replacement, sig)
            match, _ = plain.get(sig, (None, None))
            found = match is not None
        else:
            head, params = split_params(sig)
            match, after_params = plain.get(head, (None, None))
            # Tracing may add parameters (the Slices, and what only the trace needs) after the others.
            found = match is not None and after_params.startswith(params)
        if not found:
            print(f"{sig}: no {'such kernel' if renames else 'tracing-off instantiation'} found in {args[1]}")
            same = False
            continue
        deltas = set()
        for pattern, start, delta in shifts:
            if pattern.search(names_before[name]):
                body = shifted(name, body, start, delta)
                deltas.add(delta)
        a, b = normalised(name, body), normalised(match, after[match])
        equal = a == b or (bool(deltas) and equal_but_shifted(a, b, deltas))
        same = same and equal
        print(f"{'same     ' if equal else 'DIFFERENT'} {sig}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
