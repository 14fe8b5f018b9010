#!/usr/bin/env python3
"""Tests of reading.py's coverage: on a small tree of its own (a kernel that calls two helpers, one
of them in its reading path), the lines its kernel uses are found — with their comments and
template headers, through a header in common/, not through a local that shares a helper's name, a
file the kernel does not include, another kernel or the CPU emulation's code — and --check fails
below 90% with one line for the lesson, and passes once the path lists the helper.
Run by CTest (label cpu)."""
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reading  # noqa: E402

KERNEL = """\
// Step 01 — a toy: one kernel, two helpers.
#include "steps/01_toy/toy.hpp"

#include "common/helpers.cuh"

namespace fs {

namespace {

constexpr int kRows = 4;  // rows per thread

// Listed in the reading path.
__device__ float helper_a(float x) {
  return x * kRows;
}

// Not listed: a template, its header on a line of its own.
template <int N>
__device__ float helper_b(float x) {
  float acc = 0.f;
  for (int i = 0; i < N; ++i) acc += x;
  return acc;
}

// Called by the other kernel only.
__device__ float unused(float x) { return x; }

#ifndef FS_EMULATION
__device__ float fast_exp(float x) { return __expf(x); }
#else
inline float fast_exp(float x) { return x; }  // the CPU emulation's: no reader of the GPU's code reads it
#endif

// The kernel: its template header and signature over several lines.
template <int N,
          bool kTrace>
__global__ void toy_kernel(float* out,
                           float scale) {
  const float unused = scale;  // a local that shares a helper's name
  asm volatile("{ }");         // braces in a string
  out[threadIdx.x] = helper_a(scale) + helper_b<N>(unused) + shared_helper(fast_exp(scale));
}

__global__ void other_kernel(float* out) { out[0] = unused(1.f); }

void launch_other(float* out) { other_kernel<<<1, 1>>>(out); }

}  // namespace

void toy_forward(float* out, float scale, bool other) {
  if (other) return launch_other(out);
  toy_kernel<2, false><<<1, 32>>>(out, scale);
}

}  // namespace fs
"""

HEADER = """\
#pragma once

namespace fs {

void toy_forward(float* out, float scale, bool other);

}  // namespace fs
"""

HELPERS = """\
#pragma once

namespace fs {

// Shared by the toy steps.
__device__ __forceinline__ float shared_helper(float x) { return x + 1.f; }

// Not called.
__device__ __forceinline__ float spare_helper(float x) { return x; }

}  // namespace fs
"""

# A helper of the same name in a file the kernel does not include.
OTHER_STEP = """\
#pragma once

namespace fs {

template <int N>
__device__ float helper_b(float x) { return 0.f; }

}  // namespace fs
"""

LESSON = """\
# Step 01 — a toy

<!-- reading:01_toy -->
<!-- /reading -->
"""

TOY = "steps/01_toy/toy.cu"


class Coverage(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="reading_test_")
        for path, text in ((TOY, KERNEL), ("steps/01_toy/toy.hpp", HEADER), ("steps/01_toy/README.md", LESSON),
                           ("common/helpers.cuh", HELPERS), ("steps/02_other/other.cuh", OTHER_STEP)):
            os.makedirs(os.path.join(self.root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(self.root, path), "w", encoding="utf-8") as f:
                f.write(text)
        self.tree = [
            mock.patch.object(reading, "ROOT", self.root),
            mock.patch.object(reading, "COMMON", ["common/helpers.cuh"]),
            mock.patch.object(reading, "MAIN", {"01_toy": [(TOY, ["toy_kernel", "toy_forward"])]}),
            mock.patch.object(reading, "DIFFS", {}),
            mock.patch.object(reading, "FLOOR", {}),
            # its size and outline are test_lessons.py's
            mock.patch.object(reading, "EXEMPT", {"01_toy": "a reading path and nothing else"}),
        ]
        for p in self.tree:
            p.start()
        self.read(["toy_kernel", "helper_a", "toy_forward"])

    def tearDown(self):
        for p in reversed(self.tree):
            p.stop()
        shutil.rmtree(self.root)

    def read(self, names):
        p = mock.patch.object(reading, "READING", {"01_toy": [(TOY, names, "the kernel and what it calls")]})
        p.start()
        self.tree.append(p)

    def run_main(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = reading.main(list(args))
        return rc, out.getvalue()

    def test_a_definition_spans_its_comment_template_header_and_body(self):
        # the comment above, the template header, the signature's lines, past the braces in the asm string
        self.assertEqual(reading.find_symbol(TOY, "toy_kernel"), (34, 42))
        self.assertEqual(reading.find_symbol(TOY, "helper_b"), (17, 23))
        self.assertEqual(reading.find_symbol(TOY, "kRows"), (10, 10))
        self.assertEqual([(d.first, d.last) for d in reading.definitions(TOY, "fast_exp")], [(29, 29)])  # the GPU's
        with self.assertRaises(SystemExit):
            reading.find_symbol(TOY, "no_such_symbol")

    def test_the_kernel_uses_its_helpers_the_common_header_and_its_launcher_chain(self):
        c = reading.Coverage("01_toy")
        used = sorted((d.path, d.name) for d in c.defs)
        self.assertEqual(used, [("common/helpers.cuh", "shared_helper"), (TOY, "fast_exp"), (TOY, "helper_a"),
                                (TOY, "helper_b"), (TOY, "kRows"), (TOY, "toy_forward"), (TOY, "toy_kernel")])
        self.assertEqual([d.first for d in c.defs if d.name == "fast_exp"], [29])  # the GPU's, not the emulation's
        # Left out: `unused` (a local hides it; the other kernel calls it), other_kernel and launch_other
        # (another kernel and its launcher), steps/02's helper_b (not included), spare_helper (not called).

    def test_coverage_is_the_listed_share_of_the_lines_used(self):
        c = reading.Coverage("01_toy")
        # used: kRows 1, helper_a 4, helper_b 7, fast_exp 1, toy_kernel 9, toy_forward 4; shared_helper 2 (its
        # comment too); listed: helper_a, toy_kernel, toy_forward
        self.assertEqual(c.counts(), (4 + 9 + 4, 1 + 4 + 7 + 1 + 9 + 4 + 2))
        self.assertEqual(c.used["common/helpers.cuh"], {5, 6})
        self.assertEqual([(d.name, left) for d, left in c.missing],
                         [("helper_b", 7), ("shared_helper", 2), ("kRows", 1), ("fast_exp", 1)])

    def test_coverage_prints_the_share_and_what_is_missing(self):
        rc, out = self.run_main("--coverage")
        self.assertEqual(rc, 0)
        self.assertEqual(out.strip(), "01_toy: coverage 60% (17/28 lines in 2 files), missing: helper_b "
                                      "(steps/01_toy/toy.cu:17-23), shared_helper (common/helpers.cuh:5-6), kRows "
                                      "(steps/01_toy/toy.cu:10-10), fast_exp (steps/01_toy/toy.cu:29-29)")

    def test_check_fails_below_90_percent_with_one_line_for_the_lesson(self):
        self.assertEqual(self.run_main()[0], 0)  # the block written
        rc, out = self.run_main("--check")
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip().splitlines(), [
            "01_toy: the reading path covers 60% (17/28 lines) of what its kernels use, below 90% "
            "(python3 docs/reading.py --coverage lists what it leaves out)"])

    def test_check_passes_once_the_path_lists_the_helper(self):
        self.read(["kRows", "toy_kernel", "helper_a", "helper_b", "toy_forward"])  # 25 of 28 lines: 89%
        self.run_main()
        self.assertEqual(self.run_main("--check")[0], 1)
        self.read(["kRows", "toy_kernel", "helper_a", "helper_b", "fast_exp", "toy_forward"])  # 26 of 28: 93%
        self.assertEqual(self.run_main()[0], 0)
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip().splitlines()[0]), (0, "checked the reading path of 1 lessons"))
        with open(os.path.join(self.root, "steps/01_toy/README.md"), encoding="utf-8") as f:
            self.assertIn("1. `steps/01_toy/toy.cu` lines [10–23](toy.cu#L10-L23), [29–29](toy.cu#L29-L29), "
                          "[34–42](toy.cu#L34-L42), [50–53](toy.cu#L50-L53): `kRows`, `toy_kernel`, `helper_a`, "
                          "`helper_b`, `fast_exp`, `toy_forward`", f.read())

    def test_a_floor_holds_a_lesson_to_less_and_no_less(self):
        self.run_main()
        with mock.patch.object(reading, "FLOOR", {"01_toy": 0.6}):
            self.assertEqual(self.run_main("--check")[0], 0)
        with mock.patch.object(reading, "FLOOR", {"01_toy": 0.7}):
            self.assertEqual(self.run_main("--check")[0], 1)


if __name__ == "__main__":
    unittest.main()
