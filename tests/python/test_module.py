"""The built module as a shared object: it exports PyInit__flashsteps and nothing else.

A toolchain may link libstdc++ into the module statically (the H200 test machine's GCC 13 does).
Exported, those symbols bind in part to the libstdc++.so that NumPy or PyTorch loaded before, and
the module then runs on two half-initialised copies of libstdc++'s state: check() crashed in its
first formatted double that way. The linker's version script (common/python/exports.map) keeps
every symbol but the entry point local; this test fails if that protection goes."""
import shutil
import subprocess
import sys

import pytest

import flashsteps


def exported_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None, reason="needs Linux and nm")
def test_the_module_exports_its_entry_point_only():
    symbols = exported_symbols(flashsteps._flashsteps.__file__)
    assert symbols == ["PyInit__flashsteps"], f"{len(symbols)} symbols exported, e.g. {symbols[:8]}"
