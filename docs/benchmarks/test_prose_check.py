#!/usr/bin/env python3
"""Tests of prose_check.py: a number that disagrees with its data, an unmarked measurement, a
link out of the repository and a stale model CSV each fail; the fix mode rewrites the number; a
source may name a CSV in a folder of docs/benchmarks (experiments/).
Run by CTest (label cpu) with FS_IO_MODEL set to the built io_model."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prose_check  # noqa: E402

# From docs/benchmarks/h200.csv: step 03 at N = 4096 took 29.0194 ms, step 04's fa2 19.8287 ms.
NAMES = """
<!-- numbers
t03 = csv step=03_tiled pass=fwd N=4096 d=64 causal=0 field=median_ms
t04 = csv step=04_online_softmax/fa2 pass=fwd N=4096 d=64 causal=0 field=median_ms
-->
"""


class ProseCheck(unittest.TestCase):
    def setUp(self):
        # Inside the repository, so that relative links resolve as they would in a lesson.
        self.dir = tempfile.mkdtemp(dir=os.path.join(prose_check.ROOT, "docs"), prefix="prose_check_test_")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_on(self, text, fix=False):
        path = os.path.join(self.dir, "lesson.md")
        with open(path, "w") as f:
            f.write(text)
        problems, notes = prose_check.check_file(path, prose_check.Sources(), fix)
        with open(path) as f:
            return problems, notes, f.read()

    def test_a_number_that_matches_its_data_passes(self):
        problems, _, _ = self.run_on("Step 03 takes <!-- n:t03 -->29.0<!-- /n --> ms, a ratio of "
                                     "<!-- n:t03 / t04 -->1.46<!-- /n -->.\n" + NAMES)
        self.assertEqual(problems, [])

    def test_a_number_that_disagrees_fails_and_names_file_and_line(self):
        problems, _, _ = self.run_on("First line.\nA ratio of <!-- n:t03 / t04 -->1.47<!-- /n -->.\n" + NAMES)
        self.assertEqual(len(problems), 1)
        self.assertIn("lesson.md:2: the prose says 1.47, the data give 1.46", problems[0])

    def test_the_decimals_shown_are_the_precision_claimed(self):
        ok, _, _ = self.run_on("<!-- n:t03 / t04 -->1.5<!-- /n -->×" + NAMES)
        self.assertEqual(ok, [])
        bad, _, _ = self.run_on("<!-- n:t03 / t04 -->1.4<!-- /n -->×" + NAMES)
        self.assertEqual(len(bad), 1)

    def test_fix_rewrites_the_number_and_says_so(self):
        problems, notes, text = self.run_on("<!-- n:t03 -->30.0<!-- /n --> ms" + NAMES, fix=True)
        self.assertEqual(problems, [])
        self.assertIn("<!-- n:t03 -->29.0<!-- /n --> ms", text)
        self.assertIn("30.0 -> 29.0", notes[0])

    def test_an_inline_source_and_a_row_that_is_not_unique(self):
        ok, _, _ = self.run_on("<!-- n:csv step=03_tiled pass=fwd N=4096 d=64 causal=0 field=tflops -->18.9<!-- /n -->")
        self.assertEqual(ok, [])
        bad, _, _ = self.run_on("<!-- n:csv step=03_tiled pass=fwd N=4096 d=64 field=tflops -->18.9<!-- /n -->")
        self.assertIn("2 rows of csv", bad[0])

    def test_commit_names_the_rows_of_an_earlier_run_that_later_rows_replace(self):
        # Step 01 at N = 512: two rows of commit fae8b16ebb (44.6982, then 44.7199 ms), replaced by
        # one of 267386bf50 (44.9385 ms).
        src = "csv step=01_naive pass=fwd N=512 d=64 causal=0 B=32"
        ok, _, _ = self.run_on(f"<!-- n:{src} field=median_ms -->44.94<!-- /n --> ms, "
                               f"<!-- n:{src} commit=fae8b16ebb field=median_ms -->44.72<!-- /n --> ms")
        self.assertEqual(ok, [])

    def test_gpu_names_a_csv_in_a_folder_of_docs_benchmarks(self):
        # gpu=experiments/NAME reads docs/benchmarks/experiments/NAME.csv: here a folder of the test's own.
        bench = os.path.join(self.dir, "bench")
        os.makedirs(os.path.join(bench, "experiments"))
        with open(os.path.join(bench, "experiments", "x_run.csv"), "w") as f:
            f.write("gpu,step,pass,dtype,B,H,N,d,causal,median_ms,commit,date\n"
                    "G,08_tensor_cores/fa2,fwd,bf16,1,16,16384,128,0,5.61,abc,2026-12-03\n")
        saved, prose_check.BENCH = prose_check.BENCH, bench
        try:
            src = "csv gpu=experiments/x_run step=08_tensor_cores/fa2 pass=fwd field=median_ms"
            ok, _, _ = self.run_on(f"<!-- n:{src} -->5.61<!-- /n --> ms")
            bad, _, _ = self.run_on("<!-- n:csv gpu=x_run step=08_tensor_cores/fa2 field=median_ms -->5.61<!-- /n --> ms")
        finally:
            prose_check.BENCH = saved
        self.assertEqual(ok, [])
        self.assertIn("x_run.csv does not exist", bad[0])

    def test_an_unmarked_measurement_fails_but_code_and_tables_do_not(self):
        problems, _, _ = self.run_on("Step 03 takes 29.0 ms and is 1.46× slower.\n\n"
                                     "    build/bin/x   # prints 29.0 ms\n\n"
                                     "```\n29.0 ms\n```\n"
                                     "<!-- results:03_tiled gpu=h200 -->\n| 29.02 ms |\n<!-- /results -->\n")
        self.assertEqual(len(problems), 2)
        self.assertIn("'29.0 ms'", problems[0])
        self.assertIn("'1.46×'", problems[1])

    def test_links_must_stay_in_the_repository_and_resolve(self):
        problems, _, _ = self.run_on("[notation](../notation.md#algorithm-4-flashattention-backward), "
                                     "[gone](../../../shared/ALGORITHMS.md), [none](nothing.md), "
                                     "[anchor](../notation.md#no-such-heading)\n")
        self.assertEqual(len(problems), 3)
        self.assertIn("leaves the repository", problems[0])
        self.assertIn("no such file", problems[1])
        self.assertIn("no heading", problems[2])

    def test_an_anchor_is_a_headings_text_as_rendered(self):
        # a link in a heading renders as its text: GitHub's anchor has no trace of the target
        problems, _, _ = self.run_on("## Paper → code ([`backward.cuh`](../../steps/05_recompute_backward/"
                                     "backward.cuh))\n\n[here](#paper--code-backwardcuh), "
                                     "[not here](#paper--code-backwardcuhstepsbackwardcuh)\n")
        self.assertEqual(len(problems), 1)
        self.assertIn("#paper--code-backwardcuhstepsbackwardcuh: no heading with that anchor", problems[0])

    @unittest.skipUnless(os.access(os.environ.get("FS_IO_MODEL", ""), os.X_OK), "FS_IO_MODEL: no io_model")
    def test_model_figures_are_held_to_io_model(self):
        ok, _, _ = self.run_on("B_r = <!-- n:tiles step=04_online_softmax/alg1 d=128 name=Br -->94<!-- /n -->")
        self.assertEqual(ok, [])
        bad, _, _ = self.run_on("B_r = <!-- n:tiles step=04_online_softmax/alg1 d=128 name=Br -->95<!-- /n -->")
        self.assertEqual(len(bad), 1)

    @unittest.skipUnless(os.access(os.environ.get("FS_IO_MODEL", ""), os.X_OK), "FS_IO_MODEL: no io_model")
    def test_a_model_csv_that_io_model_no_longer_prints_fails(self):
        bench = os.path.join(self.dir, "bench")
        os.mkdir(bench)
        with open(os.path.join(bench, "x_model.csv"), "w") as f:
            f.write("step,pass,B,H,N,d,causal,read_bytes,write_bytes,mask\n"
                    "03_tiled,fwd,1,8,2048,64,0,205520896,4259840,\n"
                    "06_block_sparse/atomic,fwd,1,8,2048,64,0,46137344,4259841,butterfly\n")
        problems, _ = prose_check.check_model_csvs(prose_check.Sources(), False, bench)
        self.assertEqual(len(problems), 1)
        self.assertIn("06_block_sparse/atomic fwd write_bytes is 4259841", problems[0])


if __name__ == "__main__":
    unittest.main()
