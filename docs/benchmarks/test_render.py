#!/usr/bin/env python3
"""Tests of render.py's CSVs in a folder of docs/benchmarks (experiments/): it finds them beside
the top-level ones, in the order of their names; a results marker's gpu=experiments/NAME reads
that file and says so; a CSV's .md links its figures from its own folder; a figure is named after
the CSV without its folder, and its ceilings are the GPU's. Runs on a docs/benchmarks of the
test's own; needs no matplotlib (nothing is drawn). Run by CTest (label cpu)."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render  # noqa: E402

COLUMNS = "gpu,step,pass,dtype,B,H,N,d,causal,dropout,mask,density,median_ms,tflops,peak_mem_bytes,hbm_bytes_model," \
          "max_err,commit,date\n"


def row(step, n, ms, tflops):
    return f"NVIDIA H200,{step},fwd,bf16,{16384 // n},16,{n},128,0,0,,1,{ms},{tflops},1,,,abc,2026-12-03\n"


class Render(unittest.TestCase):
    def setUp(self):
        self.bench = tempfile.mkdtemp(prefix="render_test_")
        os.makedirs(os.path.join(self.bench, "experiments"))
        self.write("h200.csv", row("08_tensor_cores/fa2", 4096, 1.46, 377.6))
        self.write("h200_ncu.csv", "")
        self.write("h200_model.csv", "")
        self.write("h200_ceilings.txt", "HBM copy 4000 GB/s\nbf16 HGEMM 751.1 TFLOP/s\n")
        self.write("experiments/h200_x.csv", row("08_tensor_cores/fa2", 4096, 1.46, 377.6)
                   + row("08_tensor_cores/tuneA", 4096, 1.50, 366.5))
        self.write("experiments/h100_a.csv", row("09_hopper/fa3", 4096, 0.88, 628.1))
        self.saved = render.BENCH, render.FIGURES, dict(render.FIRST_SEEN)
        render.BENCH, render.FIGURES = self.bench, os.path.join(self.bench, "figures")

    def tearDown(self):
        render.BENCH, render.FIGURES = self.saved[0], self.saved[1]
        render.FIRST_SEEN.clear()
        render.FIRST_SEEN.update(self.saved[2])
        shutil.rmtree(self.bench)

    def write(self, name, text):
        with open(os.path.join(self.bench, name), "w") as f:
            f.write(COLUMNS + text if name.endswith(".csv") and text else text)

    def test_the_csvs_of_every_folder_by_name_without_ncu_and_model_files(self):
        self.assertEqual(render.csv_slugs(), ["experiments/h100_a", "h200", "experiments/h200_x"])

    def test_two_csvs_of_one_name_in_two_folders_are_refused(self):
        self.write("h200_x.csv", row("08_tensor_cores/fa2", 4096, 1.46, 377.6))
        with self.assertRaises(SystemExit) as e:
            render.csv_slugs()
        self.assertIn("experiments/h200_x, h200_x", str(e.exception))

    def test_a_results_marker_reads_a_csv_of_a_folder_and_says_which(self):
        text = "<!-- results:08_tensor_cores gpu=experiments/h200_x layout=pivot -->\n<!-- /results -->"
        out = render.MARKER.sub(lambda m: render.render_marker(m, {}), text)
        self.assertIn("(generated from docs/benchmarks/experiments/h200_x.csv)", out)
        self.assertIn("08_tensor_cores/tuneA", out)
        self.assertIn("1.50 (366.5)", out)

    def test_a_figure_is_named_after_the_csv_and_its_md_links_it_from_its_folder(self):
        cache = {"experiments/h200_x": render.load("experiments/h200_x")}
        figures = render.Figures(cache)
        md = render.gpu_md("experiments/h200_x", cache["experiments/h200_x"], figures)
        self.assertIn("from `h200_x.csv`", md)
        self.assertIn("(experiments/h200_x.csv), bf16, d = 128](../figures/h200_x_ladder_08_tensor_cores_bf16_d128.svg)",
                      md)
        self.assertIn(os.path.join(self.bench, "figures", "h200_x_ladder_08_tensor_cores_bf16_d128.svg"),
                      [os.path.join(render.FIGURES, name + ".svg") for name in figures.specs])

    def test_a_csv_in_a_folder_has_its_gpus_ceilings(self):
        self.assertEqual(render.ceilings("experiments/h200_x"), {"hbm": 4000.0, "bf16": 751.1})
        self.assertEqual(render.ceilings("experiments/h100_a"), {})

    def test_the_whole_of_an_md_beside_a_csv_is_generated_wherever_it_is(self):
        for name in ("h200.md", "experiments/h200_x.md"):
            self.assertEqual(render.generated_parts(os.path.join(self.bench, name), "all"), ["all"])
        self.assertEqual(render.generated_parts(os.path.join(os.path.dirname(self.bench), "lesson.md"), "all"), [])


if __name__ == "__main__":
    unittest.main()
