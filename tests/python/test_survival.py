"""Issue 52's reproducers of the Python module: each bad call raises ValueError or TypeError with one
line, in well under a second, where it used to kill the interpreter (SIGFPE), hang, return a wrong
"ok", or raise another error. Each call runs in a process of its own, so that a crash or a hang is
this test's failure and not pytest's."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

SETUP = """
import numpy as np
import flashsteps
rng = np.random.default_rng(1)
def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)
q, k, v = randn(1, 7, 8, 16), randn(1, 7, 8, 16), randn(1, 7, 8, 16)
"""


def outcome(call, timeout=20):
    """(the exception's type name or "returned", its message, seconds) of `call` in a fresh process."""
    code = SETUP + textwrap.dedent(f"""
    import time
    start = time.monotonic()
    try:
        {call}
        print("returned")
    except Exception as e:
        print(type(e).__name__)
        print(repr(str(e)))
    print(time.monotonic() - start)
    """)
    start = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{call}: still running after {timeout} s")
    if p.returncode != 0:
        pytest.fail(f"{call}: the interpreter died ({p.returncode}): {p.stderr.strip()[-400:]}")
    lines = p.stdout.strip().splitlines()
    if lines[0] == "returned":
        return "returned", "", float(lines[1])
    return lines[0], eval(lines[1]), float(lines[2])


@pytest.mark.parametrize("call, error, words", [
    # A crash: K/V of zero heads divided H by 0 (H % Hk) in the module's problem builder.
    ("flashsteps.reference(q, np.zeros((1, 8, 0, 16), np.float32), np.zeros((1, 8, 0, 16), np.float32))",
     "ValueError", "at least 1"),
    ("flashsteps.reference(q, k[:, :, :0], v[:, :, :0])", "ValueError", "at least 1"),
    ("flashsteps.reference(q[..., :0], k[..., :0], v[..., :0])", "ValueError", "at least 1"),
    # A hang: the power-of-two loop of the slopes overflowed int.
    ("flashsteps.alibi_slopes(2**30)", "ValueError", "heads"),
    ("flashsteps.alibi_slopes(2**31)", "ValueError", "heads"),
    ("flashsteps.alibi_slopes(2.5)", "TypeError", "heads"),
    ("flashsteps.alibi_slopes(0)", "ValueError", "heads"),
    # Checks weaker than the command line's: a NaN input, an infinite softcap, a NaN slope.
    ("q[0, 3, 2, 1] = np.nan; flashsteps.check(q, q, k, v)", "ValueError", "NaN"),
    ("k[0, 0, 0, 0] = np.inf; flashsteps.reference(q, k, v)", "ValueError", "inf"),
    ("flashsteps.reference_backward(q, k, v, np.full_like(q, np.nan))", "ValueError", "NaN"),
    ("flashsteps.reference(q, k, v, softcap=float('inf'))", "ValueError", "softcap"),
    ("flashsteps.reference(q, k, v, softcap=float('nan'))", "ValueError", "softcap"),
    ("flashsteps.reference(q, k, v, alibi_slopes=np.full(8, np.nan, np.float32))", "ValueError", "slope"),
    ("flashsteps.reference(q, k, v, alibi_slopes=np.full((1, 8), np.nan, np.float32))", "ValueError", "slope"),
    # ALiBi slopes of (batch, heads) with a batch past any memory: refused by their shape, before a read.
    ("flashsteps.reference(q, k, v, alibi_slopes=np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**40, 8),"
     " (0, 0)))", "ValueError", "(batch, heads) = (1, 8)"),
    ("flashsteps.reference(q, k, v, dropout_p=float('nan'))", "ValueError", "dropout_p"),
    # NumPy arrays handed to the kernels: the documented error, not NumPy's about streams.
    ("flashsteps.attention_into(q, k, v, q.copy(), np.zeros((1, 8, 7), np.float32))", "ValueError", "CUDA"),
    # attention takes PyTorch tensors: a TypeError that says so, with or without PyTorch installed.
    ("flashsteps.attention(q, k, v)", "TypeError", "PyTorch"),
    # No size ceiling: a zero-strided view of 131072 tokens ran the reference for minutes.
    ("z = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (1, 131072, 1, 64), (0, 0, 0, 0));"
     " flashsteps.reference(z, z, z)", "ValueError", "too large"),
    ("z = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (1, 2**31, 1, 1), (0, 0, 0, 0));"
     " flashsteps.reference(z, z, z)", "ValueError", ""),
    ("z = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**20, 2**20, 1, 1), (0, 0, 0, 0));"
     " flashsteps.check(z, z, z, z)", "ValueError", ""),
    # Packed sequences whose offsets do not add up, and a window past int.
    ("flashsteps.reference(q[0], k[0], v[0], cu_seqlens_q=np.array([0, 9], np.int32),"
     " cu_seqlens_k=np.array([0, 7], np.int32))", "ValueError", "cu_seqlens"),
    ("flashsteps.reference(q, k, v, window_size=(-5, 0))", "ValueError", "window_size"),
    # Keywords past what their C++ types hold: one line, not pybind11's list of signatures.
    ("flashsteps.reference(q, k, v, window_size=(2**40, 0))", "ValueError", "window_size"),
    ("flashsteps.reference(q, k, v, seed=-1)", "ValueError", "seed"),
    ("flashsteps.reference(q, k, v, dropout_p='0.1')", "TypeError", "dropout_p"),
])
def test_a_bad_call_raises_at_once(call, error, words):
    kind, message, seconds = outcome(call)
    assert kind == error, f"{call}: {kind} {message!r}"
    assert words in message, f"{call}: {message!r}"
    assert "\n" not in message.strip(), f"{call}: a message of more than one line: {message!r}"
    assert seconds < 1.0, f"{call}: took {seconds:.2f} s"


def test_a_good_call_still_runs():
    kind, message, seconds = outcome("out, lse = flashsteps.reference(q, k[:, :, :2], v[:, :, :2], causal=True);"
                                     " assert flashsteps.check(out.astype(np.float32), q, k[:, :, :2], v[:, :, :2],"
                                     " causal=True)['ok']")
    assert kind == "returned", message
