#!/usr/bin/env python3
"""Issue 52: every entry point survives every input — no crash, no hang, no memory past its limit.

Three parts, each a CTest of its own (tests/CMakeLists.txt) and each a command here:

  reproducers --bin DIR    the issue's reproducers, one by one: each must end as the issue says it
                           should (exit 2 and one line naming the problem; or, where the input is
                           good, an exit of 0 or 3) in under a second
  vectors --bin DIR        every program with at least --vectors argument vectors each (the table
                           of adversarial ones below, every option its --help lists with each of
                           EXTREMES, then random ones from those options with values from the pool
                           below), each under --timeout seconds
                           and an address-space limit of --memory-mb: exit 0, 1, 2 or 3, never a
                           signal, a hang or an exception that escapes
  python PYTHONPATH        the Python module on random shapes, strides, dtypes and keywords: each
                           call returns or raises ValueError or TypeError, within --timeout seconds

Every program runs with the GPU hidden (CUDA_VISIBLE_DEVICES empty): a vector good enough to run
ends at "no GPU" (exit 3) on any machine instead of in a long run, and what is checked is what
comes before the GPU. The visualizer renders on a virtual display this script starts (Xvfb, where
it is installed; without it the visualizer says so and exits 1), one run at a time, each vector
with --screenshot added so that it renders one frame and exits; its --bench and --frames, long by
design, are left out of the random vectors. The programs are those of PROGRAMS below that --bin holds (a build of some
steps has only theirs). The files the vectors name (a FIFO, a dangling symbolic link, traces good and bad) are made in a
temporary folder, which is also every program's working directory.

  python3 tests/test_survival.py reproducers --bin build/bin
  python3 tests/test_survival.py vectors --bin build/bin --vectors 200 [step01_naive tour ...]
  python3 tests/test_survival.py python build/python
"""
import argparse
import concurrent.futures
import contextlib
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PROGRAMS = ["step01_naive", "step02_fused", "step03_tiled", "step04_online_softmax", "step05_recompute_backward",
            "step06_block_sparse", "step07_smyrf", "step08_tensor_cores", "step09_hopper", "step10_decode", "tour", "bench", "io_model",
            "trace_validate", "flashsteps_viz", "smyrf_quality", "hopper_overlap_probe"]


def programs_in(folder, names):
    """The paths of the programs `names` (all of PROGRAMS when empty) that `folder` holds."""
    folder = os.path.abspath(folder)
    found = [os.path.join(folder, n) for n in (names or PROGRAMS) if os.access(os.path.join(folder, n), os.X_OK)]
    missing = [n for n in (names or PROGRAMS) if os.path.join(folder, n) not in found]
    if missing:
        print(f"not in {folder} (not built here): {' '.join(missing)}")
    return found


# --- Running a program under limits -----------------------------------------------------------

class Outcome:
    def __init__(self, argv, code, out, err, seconds, timed_out):
        self.argv, self.code, self.out, self.err, self.seconds, self.timed_out = argv, code, out, err, seconds, timed_out

    def lines(self):
        return [line for line in (self.out + self.err).splitlines() if line.strip()]

    def describe(self):
        what = "timed out" if self.timed_out else f"signal {-self.code}" if self.code < 0 else f"exit {self.code}"
        text = " | ".join(self.lines()[:4])
        return f"{what} in {self.seconds:.2f} s: {' '.join(self.argv)}\n    {text[:400]}"


def limits(memory_mb):
    def apply():
        os.setsid()  # its own process group: a timeout ends it and whatever it started
        if memory_mb:
            cap = memory_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


class Display:
    """A virtual X display (Xvfb) for the visualizer's runs, for as long as the `with` lasts."""

    def __init__(self):
        self.name, self.server = None, None

    def __enter__(self):
        xvfb = shutil.which("Xvfb")
        if not xvfb:
            return self
        for n in range(152, 200):
            if os.path.exists(f"/tmp/.X{n}-lock") or os.path.exists(f"/tmp/.X11-unix/X{n}"):
                continue
            self.server = subprocess.Popen([xvfb, f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                if os.path.exists(f"/tmp/.X11-unix/X{n}"):
                    self.name = f":{n}"
                    return self
                if self.server.poll() is not None:
                    break
                time.sleep(0.05)
            self.__exit__()
        return self

    def __exit__(self, *exc):
        if self.server and self.server.poll() is None:
            self.server.terminate()
            self.server.wait()
        self.server = None


DISPLAY = Display()
VIZ_LOCK = threading.Lock()  # one visualizer at a time on the display


def run(argv, cwd, timeout, memory_mb, env_extra=None):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", **(env_extra or {}))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    viz = os.path.basename(argv[0]) == "flashsteps_viz"
    if viz and DISPLAY.name:
        env["DISPLAY"] = DISPLAY.name
    with VIZ_LOCK if viz else contextlib.nullcontext():
        return run_now(argv, cwd, timeout, memory_mb, env)


def run_now(argv, cwd, timeout, memory_mb, env):
    start = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=limits(memory_mb))
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    seconds = time.monotonic() - start
    return Outcome(argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"), seconds, timed_out)


# --- The files the vectors name ---------------------------------------------------------------

def fixtures(folder):
    """Makes the files in `folder` and returns their paths by name."""
    f = {}
    f["dir"] = folder
    f["fifo"] = os.path.join(folder, "fifo")
    os.mkfifo(f["fifo"])
    f["dangling"] = os.path.join(folder, "dangling")
    os.symlink(os.path.join(folder, "no-such-target"), f["dangling"])
    f["missing"] = os.path.join(folder, "no-such-folder", "x")
    f["file"] = os.path.join(folder, "plain.txt")
    with open(f["file"], "w") as out:
        out.write("not a trace\n")
    f["folder"] = os.path.join(folder, "folder")
    os.mkdir(f["folder"])
    # A trace the reader accepts whose step 08 dQ kernel has one warp and 2^50 bytes of shared
    # memory: the memory panel's layout search spun forever on it (issue 52).
    base = os.path.join(SOURCE, "docs", "traces", "08_tensor_cores_deterministic.bwd.json")
    if os.path.exists(base):
        with open(base) as src:
            t = json.load(src)
        for k in t["otherData"]["kernels"]:
            if k["name"] == "tc_dq_kernel":
                k["block"] = [32, 1, 1]
                k["smem_bytes"] = 1 << 50
        f["dq_trace"] = os.path.join(folder, "dq_smem_2p50.json")
        with open(f["dq_trace"], "w") as out:
            json.dump(t, out)
        f["good_trace"] = base
    f["cut_trace"] = os.path.join(folder, "cut.json")
    with open(f["cut_trace"], "w") as out:
        out.write('{"traceEvents": [{"ph": "X", "pid": 1, ')
    f["deep_json"] = os.path.join(folder, "deep.json")
    with open(f["deep_json"], "w") as out:
        out.write("[" * 100000)
    # cu_seqlens of 70000 sequences (more than a grid's 65535), as an .npy file of int32.
    f["many_seqs"] = os.path.join(folder, "many_seqs.npy")
    count = 70001
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % count
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(f["many_seqs"], "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        out.write(b"".join(i.to_bytes(4, "little") for i in range(count)))
    # ALiBi slopes of shape (3, 2), float32: (H, B) where a step takes (H) or (B, H).
    f["alibi_rows"] = os.path.join(folder, "alibi_3x2.npy")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(f["alibi_rows"], "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        out.write(struct.pack("<6f", 0.5, 0.25, 0.125, 1.0, 2.0, 4.0))
    return f


def empty_objects(folder, megabytes):
    """A JSON array of empty objects, `megabytes` long: the reader's memory bound (issue 52)."""
    path = os.path.join(folder, f"empty_objects_{megabytes}mb.json")
    if not os.path.exists(path):
        n = megabytes * 1000000 // 3
        with open(path, "w") as out:
            out.write("[" + "{}," * (n - 1) + "{}]")
    return path


# --- The reproducers ----------------------------------------------------------------------------

def program(paths, name):
    for p in paths:
        if os.path.basename(p) == name:
            return p
    return None


def reproducers(paths, f, folder):
    """(name, argv, codes, regex, memory_mb, env): what the issue reported, and how each must end."""
    cases = []

    def case(name, prog, args, codes, regex="", memory_mb=4096, env=None, one_line=True, seconds=None):
        exe = program(paths, prog)
        if exe:
            cases.append((name, [exe] + args, codes, regex, memory_mb, env, one_line, seconds))

    # Python module, a hang: the same loop in the step programs, before the B·H refusal.
    case("alibi slopes of 2^30 heads", "step05_recompute_backward",
         ["--alibi", "--heads", "1073741824", "--seq", "1", "--dim", "1"], {2}, "B·H must be at most 65535")
    # Slopes of neither form ALiBi takes, (H) or (B, H): one line naming both.
    case("alibi slopes of shape (H, B)", "step05_recompute_backward",
         ["--alibi", f["alibi_rows"], "--batch", "2", "--heads", "3", "--seq", "8", "--dim", "16"], {2},
         re.escape("shape (3, 2), but ALiBi takes one slope per head, (3,), or a row of them per batch, (2, 3)"))
    # io_model: a division by zero, and two hangs.
    case("io_model --dim 0 --tiles", "io_model", ["--dim", "0", "--tiles"], {2}, "--dim must be at least 1")
    case("io_model --dim 0", "io_model", ["--dim", "0"], {2}, "--dim must be at least 1")
    case("io_model --seq 2^31-1 --pattern butterfly", "io_model", ["--seq", "2147483647", "--pattern", "butterfly"], {2},
         "--seq")
    case("io_model --heads -3", "io_model", ["--heads", "-3"], {2}, "--heads must be at least 1")
    case("io_model --tiles --dim 2^30", "io_model", ["--tiles", "--dim", "1073741824"], {2}, "--dim must be at most")
    case("io_model: a parse error is one line", "io_model", ["--frobnicate"], {2}, "frobnicate")
    # The visualizer's memory panel on a dQ kernel of one warp and 2^50 bytes of shared memory:
    # the trace is valid as far as the reader goes; rendering it must end.
    if "dq_trace" in f:
        case("viz: dQ kernel of 2^50 bytes of shared memory", "flashsteps_viz",
             ["--screenshot", os.path.join(folder, "dq.png"), "--panels", "memory", "--kernel", "2", "--cta", "0",
              f["dq_trace"]], {0, 1}, one_line=False, seconds=5)  # it renders a frame: seconds, not a hang
        case("trace_validate: dQ kernel of 2^50 bytes of shared memory", "trace_validate", [f["dq_trace"]], {0, 1})
    # The trace reader under a memory limit: a 75 MB JSON of empty objects passed the 20x
    # pre-check and then ran out of memory in the JSON library's destructor (exit 134).
    big = empty_objects(folder, 75)
    case("trace_validate: 75 MB of empty objects in 2 GiB", "trace_validate", [big], {2}, "memory", memory_mb=2048)
    case("viz: 75 MB of empty objects in 2 GiB", "flashsteps_viz",
         ["--screenshot", os.path.join(folder, "big.png"), big], {1, 2}, memory_mb=2048, one_line=False, seconds=5)
    # Outputs that failed only after the GPU ran: refused before it.
    case("--save to a dangling symlink", "step01_naive", ["--save", f["dangling"]], {2}, "symbolic link")
    case("--save under a dangling symlink", "step01_naive", ["--save", os.path.join(f["dangling"], "sub")], {2},
         "symbolic link")
    case("--trace to a FIFO", "step01_naive", ["--trace", f["fifo"]], {2}, "FIFO")
    case("--csv to a FIFO", "step01_naive", ["--bench", "--csv", f["fifo"]], {2}, "FIFO")
    case("--csv to a dangling symlink", "step01_naive", ["--bench", "--csv", f["dangling"]], {2}, "symbolic link")
    # Refused too late or not at all.
    case("step 09: B·H past the grid", "step09_hopper", ["--batch", "65536", "--heads", "1", "--dtype", "bf16"], {2},
         "B·H must be at most 65535")
    for args, regex in ((["--seqs", "abc"], "--seqs"), (["--seqs", "0"], "--seqs"), (["--seqs", "-5"], "--seqs"),
                        (["--dims", "0"], "--dims"), (["--reps", "0"], "--reps"), (["--patterns", "bogus"], "bogus"),
                        (["--causal", "2"], "--causal"), (["--dropout", "1.5"], "--dropout")):
        case("bench " + " ".join(args), "bench", args + ["--csv", os.path.join(folder, "bench.csv")], {2}, regex)
    case("bench: an unwritable --csv", "bench", ["--csv", f["missing"]], {2}, "does not exist")
    case("bench: --csv to a FIFO", "bench", ["--csv", f["fifo"]], {2}, "FIFO")
    case("bench: a parse error is one line", "bench", ["--frobnicate", "--csv", "x.csv"], {2}, "frobnicate")
    case("tour --step 42", "tour", ["--step", "42"], {2}, "--step 42")
    case("tour --dim 3", "tour", ["--dim", "3"], {2}, "d must be")
    case("tour: an unwritable --csv", "tour", ["--csv", f["missing"]], {2}, "does not exist")
    case("tour: a parse error is one line", "tour", ["--frobnicate"], {2}, "frobnicate")
    case("trace_validate: a parse error is one line", "trace_validate", ["--frobnicate", f["file"]], {2}, "frobnicate")
    # A newcomer's first call: the default (no --dtype) runs; without a GPU, exit 3.
    case("step 08 --check without --dtype", "step08_tensor_cores", ["--check"], {0, 3}, one_line=False)
    case("step 09 --check without --dtype", "step09_hopper", ["--check"], {0, 3}, one_line=False)
    return cases


def cmd_reproducers(args):
    folder = tempfile.mkdtemp(prefix="flashsteps_survival_")
    try:
        DISPLAY.__enter__()
        f = fixtures(folder)
        failures, ran = [], 0
        for name, argv, codes, regex, memory_mb, env, one_line, seconds in reproducers(programs_in(args.bin, []), f, folder):
            r = run(argv, folder, args.timeout, memory_mb, env)
            ran += 1
            problems = []
            if r.timed_out or r.code not in codes:
                problems.append(f"expected exit {sorted(codes)}")
            if regex and not re.search(regex, r.out + r.err):
                problems.append(f"output does not match '{regex}'")
            if one_line and r.code == 2 and len(r.lines()) != 1:
                problems.append(f"{len(r.lines())} lines of output, not one")
            if r.seconds > (seconds or args.seconds):
                problems.append(f"took {r.seconds:.2f} s (at most {seconds or args.seconds} s)")
            status = "ok" if not problems else "FAILED: " + "; ".join(problems)
            print(f"{name}: {status}\n    {r.describe()}")
            if problems:
                failures.append(name)
        print(f"{ran} reproducers, {len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
        return 1 if failures or ran == 0 else 0
    finally:
        DISPLAY.__exit__()
        shutil.rmtree(folder, ignore_errors=True)


# --- Argument vectors -------------------------------------------------------------------------

# Values a careless or hostile user types: numbers at and past every limit, in every notation,
# non-numbers, lists and specs of the options that take them, and paths of every kind.
NUMBERS = ["0", "1", "2", "3", "16", "17", "64", "97", "128", "256", "1000", "65535", "65536", "1048576",
           "1073741824", "2147483647", "2147483648", "4294967296", "9223372036854775807", "99999999999999999999",
           "-1", "-3", "-2147483648", "010", "0x10", "1e3", "0.5", "1.5", "-0.5", "nan", "inf", "-inf", "1e308", "1e-45"]
WORDS = ["", " ", "abc", "bogus", "-", "--", "--help-not", "x" * 5000, "\u00e9\u00e8", "1,2", "-1,0", "0,0", "5,-4",
         "3x", "8x32", "1x128x256", "0x0", "8y32", "local:1", "global:1,1", "random:0.5", "random:-1", "butterfly",
         "butterfly:99", "butterfly@0.25", "causal", "dense", "fp32", "bf16", "fp16", "fp8", "fa2", "atomic",
         "deterministic", "3xtf32", "all", "memory,scores", "frac:0.5", "seq:5", "t:-1", "frac:nan", "1600x1000",
         "0x0", "01 04", "512 0", "64 abc", "none 4096,0"]
PATH_KEYS = ["fifo", "dangling", "missing", "file", "folder", "good_trace", "dq_trace", "cut_trace", "deep_json",
             "many_seqs"]


def help_options(exe, folder):
    """The long options a program's --help lists."""
    r = run([exe, "--help"], folder, 10, 0)
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.out + r.err)) - {"--help"})


def small_shape(rng):
    return ["--batch", str(rng.choice([1, 2])), "--heads", str(rng.choice([1, 2, 3])),
            "--seq", str(rng.choice([1, 17, 64, 97])), "--dim", str(rng.choice([16, 32, 64, 3]))]


def adversarial(name, f):
    """Vectors written out: the issue's and their neighbours, for every program."""
    v = [[], ["--help"], ["--frobnicate"], ["-"], ["--"], ["x" * 5000], ["--seq"], ["--seq", "--dim"],
         ["--seq", "0"], ["--seq", "-1"], ["--seq", "2147483647"], ["--seq", "99999999999999999999"],
         ["--dim", "0"], ["--dim", "2147483647"], ["--heads", "1073741824"], ["--batch", "65536"],
         ["--heads", "-3"], ["--seq", "0x10"], ["--seq", "1e3"], ["--seq", "nan"],
         ["--batch", "65536", "--heads", "65536", "--seq", "65536", "--dim", "128"],
         ["--heads", "1073741824", "--seq", "1", "--dim", "1", "--alibi"],
         ["--seq", "2147483647", "--pattern", "butterfly"], ["--dim", "0", "--tiles"], ["--tiles", "--seq", "2147483647"],
         ["--tiles", "--dim", "1073741824"], ["--tiles", "--dim", "65536", "--seq", "1073741824"],
         ["--save", f["dangling"]], ["--save", f["fifo"]], ["--save", f["file"]], ["--save", f["missing"]],
         ["--trace", f["fifo"]], ["--trace", f["dangling"]], ["--bench", "--csv", f["fifo"]],
         ["--csv", f["fifo"]], ["--csv", f["dangling"]], ["--csv", f["missing"]], ["--csv", f["folder"]],
         ["--load", f["folder"]], ["--load", f["fifo"]], ["--mask", f["fifo"]], ["--alibi=" + f["fifo"]],
         ["--varlen", f["fifo"]], ["--varlen", "1000000000,1000000000,1000000000"], ["--varlen", f["many_seqs"]],
         ["--varlen", ",".join(["1"] * 30000)],
         ["--window", "2147483647,2147483647"], ["--softcap", "inf"], ["--softcap", "nan"], ["--scale", "nan"],
         ["--scale", "0"], ["--dropout", "1"], ["--dropout", "nan"], ["--reps", "0"], ["--reps", "2147483648"],
         ["--trace-cap", "0"], ["--trace", "t.json", "--trace-cap", "2147483647"], ["--seqs", "abc"], ["--seqs", "0"],
         ["--seqs", "-5"], ["--dims", "0"], ["--patterns", "bogus"], ["--step", "42"], ["--dim", "3"],
         ["--hashes", "2147483647"], ["--cluster", "0"], ["--r", "nan"], ["--block", "0"], ["--block", "2147483647"],
         ["--check", "--seq", "17", "--dim", "16"], ["--backward", "--check", "--seq", "17"], ["--tour", "--dim", "3"],
         ["--tour", "--reps", "0"], ["--tour", "--frobnicate"]]
    if name in ("trace_validate", "flashsteps_viz"):
        v += [[f[k]] for k in PATH_KEYS if k in f] + [[f["dir"]], ["--all", f.get("dq_trace", f["file"])]]
        v += [["--screenshot", "s.png", f[k]] for k in ("good_trace", "dq_trace", "cut_trace", "deep_json") if k in f]
        v += [["--at", "seq:99999999999", "--screenshot", "s.png"], ["--size", "99999x99999"], ["--panels", "bogus"],
              ["--synthetic", "flash", "--N", "1048576", "--screenshot", "s.png"], ["--round", "-1"], ["--cta", "-5"]]
    return v


# Every option alone with each of these (and with each of the flags that change what a program
# does: io_model's --tiles, a step's --backward): the edges one option can reach.
EXTREMES = ["0", "-1", "1073741824", "2147483647", "2147483648", "99999999999999999999", "nan", ""]


def systematic(options):
    modes = [[]] + [[m] for m in ("--tiles", "--backward") if m in options]
    return [mode + [o, x] for mode in modes for o in options if o not in mode for x in EXTREMES]


def random_vector(rng, options, f):
    v = small_shape(rng) if rng.random() < 0.3 else []
    for _ in range(rng.randint(0, 5)):
        r = rng.random()
        if r < 0.85 and options:
            v.append(rng.choice(options))
            r2 = rng.random()
            if r2 < 0.45:
                v.append(rng.choice(NUMBERS))
            elif r2 < 0.75:
                v.append(rng.choice(WORDS))
            elif r2 < 0.9:
                v.append(f[rng.choice([k for k in PATH_KEYS if k in f])])
        elif r < 0.93:
            v.append(rng.choice(WORDS + NUMBERS))
        else:
            v.append(f[rng.choice([k for k in PATH_KEYS if k in f])])
    return v


def cmd_vectors(args):
    folder = tempfile.mkdtemp(prefix="flashsteps_survival_")
    try:
        DISPLAY.__enter__()
        f = fixtures(folder)
        jobs = []
        programs = programs_in(args.bin, args.programs)
        for exe in programs:
            name = os.path.basename(exe)
            rng = random.Random(f"{args.seed}:{name}")
            options = help_options(exe, folder)
            if name == "flashsteps_viz":  # long by design: a benchmark, an animation
                options = [o for o in options if not o.startswith(("--bench", "--frame"))]
            vectors = adversarial(name, f) + systematic(options)
            while len(vectors) < args.vectors + len(options):
                vectors.append(random_vector(rng, options, f))
            if name == "flashsteps_viz":  # one frame, then exit (without it: a window, open until closed);
                # first, where no option before it can take it as its value and no "--" make it a file
                vectors = [["--screenshot", os.path.join(folder, "shot.png")] + v for v in vectors]
            jobs += [(exe, v) for v in vectors]
        failures, worst = [], 0.0
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run, [exe] + v, folder, args.timeout, args.memory_mb) for exe, v in jobs]
            codes = {}
            for fut in futures:
                r = fut.result()
                name = os.path.basename(r.argv[0])
                codes.setdefault(name, {}).setdefault(r.code, 0)
                codes[name][r.code] += 1
                worst = max(worst, r.seconds)
                if r.timed_out or r.code not in (0, 1, 2, 3) or "terminate called" in r.err:
                    failures.append(r)
        for name in sorted(codes):
            print(f"{name}: " + ", ".join(f"exit {c}: {n}" for c, n in sorted(codes[name].items())))
        for r in failures[:30]:
            print("FAILED: " + r.describe())
        print(f"{len(programs)} programs, {len(jobs)} argument vectors (at least {args.vectors} each), {len(failures)} failed; "
              f"slowest {worst:.2f} s (limit {args.timeout} s, {args.memory_mb} MiB of address space)")
        return 1 if failures or not jobs else 0
    finally:
        DISPLAY.__exit__()
        shutil.rmtree(folder, ignore_errors=True)


# --- The Python module ------------------------------------------------------------------------

def python_child(calls, seed):
    """Runs in the limited child: random calls, one line each before it starts and after it ends."""
    import numpy as np
    import flashsteps

    rng = random.Random(seed)
    dims_pool = [0, 1, 2, 3, 5, 8, 16, 17, 64, 2 ** 31, 2 ** 40]

    def tensor(shape, dtype):
        shape = [max(0, s) for s in shape]
        if any(s > 4096 for s in shape) or np.prod([float(s) for s in shape]) > 2e6:
            # Big views of little memory: zero strides over one element.
            base = np.ones(1, dtype=dtype)
            return np.lib.stride_tricks.as_strided(base, shape=shape, strides=[0] * len(shape))
        a = np.random.default_rng(rng.randrange(1 << 30)).standard_normal(shape).astype(dtype)
        if a.ndim >= 2 and rng.random() < 0.2:
            a = np.swapaxes(a, 0, 1)  # other strides
        if a.size and rng.random() < 0.05:
            a.flat[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf])
        return a

    for i in range(calls):
        clean = rng.random() < 0.4  # a call the module runs, or one it must refuse (the rest)
        rank = rng.choice([4, 3] if clean else [4, 4, 4, 3, 2, 5])
        B, N, H, d = (rng.choice(dims_pool) if rng.random() < (0 if clean else 0.15) else rng.choice([1, 2, 3, 17, 33])
                      for _ in range(4))
        d = rng.choice([1, 8, 16, 64]) if rng.random() < 0.7 else d
        Hk = rng.choice([H, 1] if clean else [H, 1, 0, 3, H * 2])
        Nk = rng.choice([N, N + 3, 1] if clean else [N, N + 3, 1, 0])
        dt = rng.choice([np.float32, np.float16] if clean else [np.float32, np.float32, np.float16, np.float64, np.int32])
        qs = ([B, N, H, d] if rank == 4 else [N, H, d] if rank == 3 else [rng.choice(dims_pool) for _ in range(rank)])
        ks = ([B, Nk, Hk, d] if rank == 4 else [Nk, Hk, d] if rank == 3 else qs)
        kw = {}
        for key, good, bad in (("causal", [True, False], ["yes", None]), ("dropout_p", [0.0, 0.1], [1.0, -0.5, float("nan")]),
                               ("softmax_scale", [None, 0.5], [0.0, -1.0, float("inf"), float("nan"), 1e300]),
                               ("softcap", [0.0, 5.0], [float("inf"), float("nan"), -1.0, "5"]),
                               ("window_size", [(-1, -1), (2, 0), (0, 3)], [(-2, 3), (2 ** 40, 0), 5, (1, 2, 3)]),
                               ("seed", [0, 1, 2 ** 63], [-1, 2 ** 64, 1.5])):
            if rng.random() < 0.3:
                kw[key] = rng.choice(good if clean or rng.random() < 0.5 else bad)
        fn = rng.choice(["reference", "reference", "check", "reference_backward", "check_backward", "alibi_slopes",
                         "attention_into", "decode", "probs"])
        print(f"call {i}: {fn} q{qs} k{ks} {np.dtype(dt).name} {sorted(kw)}", flush=True)
        start = time.monotonic()
        try:  # the arguments, made here: NumPy's own refusals (a shape past memory) are not the module's
            q, k, v, other = tensor(qs, dt), tensor(ks, dt), tensor(ks, dt), tensor(qs, dt)
            if rng.random() < 0.15:  # ALiBi's slopes: (heads) or (batch, heads), and shapes of neither form
                n = min(max(H, 0), 1 << 20)
                if clean:
                    kw["alibi_slopes"] = rng.choice([np.ones(n, np.float32), np.ones((max(B, 1), n), np.float32)]) / 8
                else:
                    kw["alibi_slopes"] = rng.choice([np.ones(n, np.float32), np.ones(3, np.float32),
                                                     np.full(n, np.nan, np.float32), np.ones(n, np.float64)])
                    if rng.random() < 0.5:  # 2-D: a row per batch, the heads' and batch's places swapped, 3-D
                        kw["alibi_slopes"] = tensor(rng.choice([[B, H], [H, B], [B + 1, H], [1, B, H]]), np.float32)
            if rank == 3 and rng.random() < 0.7:
                kw["cu_seqlens_q"] = np.array(rng.choice([[0, N], [0, N // 2, N]] if clean else [[0, N + 1], [1, N], [0]]),
                                              np.int64 if not clean and rng.random() < 0.2 else np.int32)
                kw["cu_seqlens_k"] = np.array(rng.choice([[0, Nk], [0, Nk // 2, Nk]] if clean else [[0, -1], [0, Nk]]),
                                              np.int32)
                if clean and len(kw["cu_seqlens_q"]) != len(kw["cu_seqlens_k"]):
                    kw["cu_seqlens_k"] = np.array([0, Nk // 2, Nk][: len(kw["cu_seqlens_q"])][:-1] + [Nk], np.int32)
        except (ValueError, MemoryError, OverflowError):
            print(f"done {i}: shape not made", flush=True)
            continue
        try:
            if fn == "reference":
                flashsteps.reference(q, k, v, **kw, return_attn_probs=rng.random() < 0.3)
            elif fn == "check":
                flashsteps.check(other, q, k, v, **kw)
            elif fn == "reference_backward":
                flashsteps.reference_backward(q, k, v, other, **kw)
            elif fn == "check_backward":
                flashsteps.check_backward(q, k, v, q, k, v, other, **kw)
            elif fn == "alibi_slopes":
                flashsteps.alibi_slopes(rng.choice([0, -1, 1, 3, 2 ** 20, 2 ** 30, 2 ** 31, 2 ** 64, 2.5, "8"]))
            elif fn == "decode":  # step 10's call, where the module has it: its keywords, then the tensors
                decode = getattr(flashsteps._flashsteps, "_decode", None)
                if decode is None:
                    raise TypeError("no step 10 in this build")
                dkw = {key: rng.choice(values) for key, values in (
                    ("cache_seqlens", [None, 0, 5, -1, 2 ** 40, "5", 1.5, q]), ("num_splits", [0, 3, -1, 129, 2 ** 70]),
                    ("window_size", [(-1, -1), (2, 0), (-3, 0), (2 ** 40, 1), 5]), ("softcap", [0.0, 5.0, float("nan"), -1]),
                    ("stream", [0, -1, 2 ** 70, "0"]), ("block_table", [None, q]), ("rotary_cos", [None, k]))
                    if rng.random() < 0.4}
                decode(q, k, v, other, np.zeros(1, np.float32), **dkw)
            elif fn == "probs":  # the attention probabilities' kernel call (return_attn_probs)
                flashsteps._flashsteps._probs(q, k, np.zeros(1, np.float32), other, **kw)
            else:
                flashsteps.attention_into(q, k, v, other, np.zeros(1, np.float32), **kw)
            result = "returned"
        except (ValueError, TypeError) as e:
            if "\n" in str(e).strip():
                print(f"FAILED {i}: a message of more than one line: {e!r}", flush=True)
                sys.exit(1)
            result = type(e).__name__
        print(f"done {i}: {result} in {time.monotonic() - start:.2f} s", flush=True)


def cmd_python(args):
    env = dict(os.environ, PYTHONPATH=args.pythonpath, PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="")
    argv = [sys.executable, os.path.abspath(__file__), "python-child", "--calls", str(args.calls), "--seed", str(args.seed)]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=limits(args.memory_mb))
    last, counts, slowest = "", {}, 0.0
    deadline = [time.monotonic() + args.timeout + 10]  # + the import

    def watchdog():
        while p.poll() is None:
            if time.monotonic() > deadline[0]:
                os.killpg(p.pid, signal.SIGKILL)
                return
            time.sleep(0.1)

    import threading
    threading.Thread(target=watchdog, daemon=True).start()
    lines = []
    for line in p.stdout:
        lines.append(line.rstrip())
        deadline[0] = time.monotonic() + args.timeout
        if line.startswith("call "):
            last = line.strip()
        m = re.match(r"done \d+: (\S+)(?: in ([\d.]+) s)?", line)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
            slowest = max(slowest, float(m.group(2) or 0))
    code = p.wait()
    print(", ".join(f"{k}: {n}" for k, n in sorted(counts.items())) + f"; slowest call {slowest:.2f} s")
    if code != 0:
        print(f"FAILED: the module's process ended with {code} (signal {-code} or killed past {args.timeout} s) at\n  {last}")
        print("\n".join(lines[-5:]))
        return 1
    print(f"{sum(counts.values())} calls, none crashed or hung")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reproducers")
    r.add_argument("--bin", required=True)
    r.add_argument("--timeout", type=float, default=30)
    r.add_argument("--seconds", type=float, default=1.0, help="how long a reproducer may take")
    v = sub.add_parser("vectors")
    v.add_argument("--bin", required=True)
    v.add_argument("programs", nargs="*", help="names of PROGRAMS (default: all that --bin holds)")
    v.add_argument("--vectors", type=int, default=200)
    v.add_argument("--seed", default="52")
    v.add_argument("--timeout", type=float, default=5)
    v.add_argument("--memory-mb", type=int, default=4096)
    v.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("python")
    p.add_argument("pythonpath")
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--seed", default="52")
    p.add_argument("--timeout", type=float, default=5)
    p.add_argument("--memory-mb", type=int, default=4096)
    c = sub.add_parser("python-child")
    c.add_argument("--calls", type=int)
    c.add_argument("--seed")
    args = ap.parse_args()
    if args.cmd == "reproducers":
        return cmd_reproducers(args)
    if args.cmd == "vectors":
        return cmd_vectors(args)
    if args.cmd == "python":
        return cmd_python(args)
    python_child(args.calls, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
