#!/usr/bin/env python3
"""Tests of reading.py's lesson check and step diffs, on fixtures of its own: a lesson with every
section of the outline passes; one over 4,500 words of own prose or over 800 lines fails, naming the
count; one without a section fails, naming it; generated blocks, tables, code and comments are not
own prose; "Check yourself" needs questions with answers that link to the lesson; an exempt lesson
does not fail until it passes. The step diffs go to DIFF.md beside the lesson, one linked line each
in it, and --check fails when either is out of date. Run by CTest (label cpu)."""
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

# A lesson with every section of the outline, each in one of the forms the lessons use.
GOOD = """\
# Step 01 — a toy

**Assumes:** CUDA's basics; every term is in docs/notation.md.

**The idea in three lines.** Keep the scores on chip. Write only what the next kernel reads.
Nothing of size N×N reaches memory.

## Read the code

<!-- reading:01_toy -->
1. `toy.cu`: the kernel
<!-- /reading -->

## The math

    O = softmax(QKᵀ)V

## Paper → code

| paper | here |
| --- | --- |
| line 1 | `toy_kernel` |

## HBM traffic, predicted and measured

The model counts <!-- n:2 * 3 -->6<!-- /n --> reads.

<!-- ncu:01_toy gpu=h200 -->
| kernel | DRAM read |
|---|---:|
| toy | 1.0 |
<!-- /ncu -->

## Run it

    build/bin/step01_toy --check

## Results

<!-- results:01_toy gpu=h200 -->
Measured on NVIDIA H200 (generated):
<!-- /results -->

## Pitfalls

- **A fully masked row** has m = −∞.

## What step 02 fixes

The scores never reach memory.

## Check yourself

1. **Why is nothing of size N×N written?** The scores stay on chip
   ([Read the code](#read-the-code), [the math](#the-math)).
2. **What does the model count?** Reads and writes of the inputs and outputs, once each
   ([HBM traffic](#hbm-traffic-predicted-and-measured)).
3. **What does a fully masked row give?** m = −∞, and a P of zeros ([Pitfalls](#pitfalls)).
"""

OWN_WORDS = 124  # GOOD's words of own prose, counted by hand: headings, lead-ins, sentences, list items and
#                  their numbers; not "#", "—", "=", "−∞." (no letter or digit), the math, the table, the blocks


def without(text, heading):
    """`text` without the section under `heading` (up to the next ## heading)."""
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[:start] + (text[end + 1:] if end >= 0 else "")


def paragraph(words):
    return "\n" + "\n".join(" ".join(["word"] * min(12, words - i)) for i in range(0, words, 12)) + "\n"


class Tree(unittest.TestCase):
    """A tree of the test's own: steps/01_toy (and 02_toy), reading.py pointed at it."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="lessons_test_")
        self.patches = [mock.patch.object(reading, "ROOT", self.root)]
        for name, value in (("READING", {}), ("DIFFS", {}), ("MAIN", {}), ("FLOOR", {}), ("EXEMPT", {}),
                            ("LADDERS", set())):
            self.patches.append(mock.patch.object(reading, name, value))
        for p in self.patches:
            p.start()
        reading._sources.clear()
        self.write("steps/01_toy/README.md", GOOD)

    def tearDown(self):
        for p in reversed(self.patches):
            p.stop()
        reading._sources.clear()
        shutil.rmtree(self.root)

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def read(self, path):
        with open(os.path.join(self.root, path), encoding="utf-8") as f:
            return f.read()

    def patch(self, name, value):
        p = mock.patch.object(reading, name, value)
        p.start()
        self.patches.append(p)

    def run_main(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = reading.main(list(args))
        return rc, out.getvalue()

    def problems(self, text, lesson="01_toy"):
        return reading.lesson_shape(lesson, text)[2]


class Shape(Tree):
    def test_a_lesson_with_every_section_passes(self):
        self.assertEqual(reading.lesson_shape("01_toy", GOOD), (OWN_WORDS, GOOD.count("\n"), []))
        rc, out = self.run_main("--check")
        self.assertEqual(rc, 0, out)
        self.assertIn("checked the size and outline of 1 lessons", out)

    def test_over_4500_words_of_own_prose_fails_naming_the_lesson_and_the_count(self):
        self.write("steps/01_toy/README.md", GOOD + paragraph(reading.MAX_WORDS - OWN_WORDS))
        self.assertEqual(self.run_main("--check")[0], 0)  # 4,500: at the limit
        self.write("steps/01_toy/README.md", GOOD + paragraph(reading.MAX_WORDS - OWN_WORDS + 1))
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "steps/01_toy/README.md: 4,501 words of own prose, over 4,500"))

    def test_over_800_lines_fails_naming_the_count(self):
        table = "".join(f"| row {i} | {i} |\n" for i in range(reading.MAX_LINES - GOOD.count("\n") + 1))
        text = GOOD.replace("| line 1 | `toy_kernel` |\n", "| line 1 | `toy_kernel` |\n" + table)
        self.assertEqual(self.problems(text), ["801 lines, over 800"])  # a table's rows are no words
        self.write("steps/01_toy/README.md", text)
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "steps/01_toy/README.md: 801 lines, over 800"))

    def test_generated_blocks_tables_code_comments_and_link_targets_are_not_own_prose(self):
        many = " ".join(["word"] * 5000)
        text = GOOD.replace("## Pitfalls\n", "\n".join([
            f"<!-- results:01_toy gpu=h200 -->\n{many}\n<!-- /results -->",
            f"<!-- diff:01_toy -->\n{many}\n<!-- /diff -->",
            f"| {many} |",
            f"```\n{many}\n```",
            f"\n    {many}\n    {many}\n",
            f"<!-- numbers\n# {many}\nx = 1\n-->",
            "[two words](../../a/very/long/path/that/is/no/word.md)",
            "inside [0, N) ([`toy.cu`](toy.cu))",  # a link's text, not its target: 4 words
            "", "## Pitfalls", ""]))
        self.assertEqual(reading.word_count(text), OWN_WORDS + 2 + 4)

    def test_a_lesson_without_a_section_fails_naming_what_is_missing(self):
        text = without(GOOD, "## Run it")
        self.assertEqual(self.problems(text), ["no section for how to run it"])
        text = without(without(text, "## Paper → code"), "## Check yourself")
        self.assertEqual(self.problems(text), ["no section for paper → code; how to run it; check yourself"])
        self.write("steps/01_toy/README.md", text.replace("**Assumes:**", "**Needs:**"))
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "steps/01_toy/README.md: no section for what it assumes; "
                                                "paper → code; how to run it; check yourself"))

    def test_headings_and_lead_ins_are_matched_flexibly(self):
        text = (GOOD.replace("**Assumes:**", "## What it assumes\n\n")
                .replace("## HBM traffic, predicted and measured", "## The IO model")
                .replace("(#hbm-traffic-predicted-and-measured)", "(#the-io-model)")
                .replace("## What step 02 fixes", "## What comes next")
                .replace("## The math", "## The math (Algorithm 1; line numbers are the paper's)")
                .replace("## Results", "### Results on the H200: speed and memory"))
        self.assertEqual(self.problems(text), [])
        # a heading in a code block or a comment is no section
        text = without(GOOD, "## Run it")
        self.assertEqual(self.problems(text + "\n```\n## Run it\n```\n<!-- numbers\n## Run it\n-->\n"),
                         ["no section for how to run it"])

    def test_an_answer_links_to_a_headings_anchor_as_github_makes_it(self):
        self.assertEqual(reading.heading_anchor("Paper → code ([`backward.cuh`](backward.cuh), launched from "
                                                "[`backward.cu`](backward.cu))"),
                         "paper--code-backwardcuh-launched-from-backwardcu")
        self.assertEqual(self.problems(GOOD.replace("## Pitfalls", "## Pitfalls ([`toy.cu`](toy.cu))").replace(
            "(#pitfalls)", "(#pitfalls-toycu)")), [])

    def test_the_io_model_results_and_reading_path_must_hold_their_data(self):
        io_ = GOOD.index("## HBM traffic")
        no_bytes = GOOD[:io_] + "## HBM traffic, predicted and measured\n\nThe model only.\n\n" + \
            GOOD[GOOD.index("## Run it"):]
        self.assertEqual(self.problems(no_bytes), [
            "the IO model (HBM traffic, predicted and measured): the section holds no bytes measured (an "
            "<!-- ncu --> block, or numbers held to data by <!-- n --> markers)"])
        res = GOOD.index("<!-- results:")
        no_results = GOOD[:res] + "Fast.\n" + GOOD[GOOD.index("<!-- /results -->") + len("<!-- /results -->"):]
        self.assertEqual(self.problems(no_results), [
            "results on a named GPU (generated): the section holds no a generated <!-- results -->, "
            "<!-- figure --> or <!-- decode --> block"])
        decode = GOOD[:res] + "<!-- decode: file=x.csv part=summary -->\n| a |\n<!-- /decode -->\n" + \
            GOOD[GOOD.index("<!-- /results -->") + len("<!-- /results -->"):]
        self.assertEqual(self.problems(decode), [])

    def test_check_yourself_needs_three_questions_answered_with_a_link_into_the_lesson(self):
        q = GOOD.index("3. **What does a fully")
        self.assertEqual(self.problems(GOOD[:q]), [
            "check yourself: 2 questions, at least 3 (a list item each: **the question?** and its answer)"])
        text = GOOD.replace("m = −∞, and a P of zeros ([Pitfalls](#pitfalls)).", "")
        self.assertEqual(self.problems(text), [
            "check yourself: question 3 ('What does a fully masked row give?') has no answer"])
        text = GOOD.replace("([Pitfalls](#pitfalls))", "([Pitfalls](#no-such-heading))")
        self.assertEqual(self.problems(text), [
            "check yourself: the answer to question 3 ('What does a fully masked row give?') links to no "
            "section of the lesson it is answered from ([...](#heading))"])

    def test_the_ladder_only_where_the_step_has_one(self):
        self.patch("LADDERS", {"01_toy"})
        self.assertEqual(self.problems(GOOD), ["no section for the ladder (what each rung bought)"])
        self.assertEqual(self.problems(GOOD.replace("## Results", "## The ladder\n\nOne line a rung.\n\n## Results")),
                         [])

    def test_an_exempt_lesson_does_not_fail_until_it_passes(self):
        self.patch("EXEMPT", {"01_toy": "rewritten later"})
        self.write("steps/01_toy/README.md", without(GOOD, "## Run it"))
        rc, out = self.run_main("--check")
        self.assertEqual(rc, 0, out)
        self.assertIn("01_toy exempt for now", out)
        rc, out = self.run_main("--lessons")
        self.assertIn("(exempt: rewritten later)\n  no section for how to run it", out)
        self.write("steps/01_toy/README.md", GOOD)
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "steps/01_toy/README.md: passes the lesson check: remove its entry "
                                                "from EXEMPT in docs/reading.py"))


KERNEL_01 = """\
namespace fs {

// The kernel.
__global__ void toy_kernel(float* o) {
  o[0] = 1.f;
  o[1] = 2.f;
}

}  // namespace fs
"""

KERNEL_02 = KERNEL_01.replace("toy_kernel", "toy2_kernel").replace("o[1] = 2.f;", "o[1] = 3.f;")

TITLE = "step 01's kernel → step 02's (one store changed)"


class StepDiffs(Tree):
    def setUp(self):
        super().setUp()
        self.write("steps/01_toy/toy.cu", KERNEL_01)
        self.write("steps/02_toy/toy2.cu", KERNEL_02)
        self.write("steps/02_toy/README.md", GOOD.replace("01_toy", "02_toy").replace(
            "## What step 02 fixes", "## The diff from step 01\n\n<!-- diff:02_toy -->\n<!-- /diff -->\n\n"
            "## What step 03 fixes"))
        self.patch("DIFFS", {"02_toy": [(TITLE, [("steps/01_toy/toy.cu", "toy_kernel")],
                                         [("steps/02_toy/toy2.cu", "toy2_kernel")])]})

    def test_the_diff_goes_beside_the_lesson_and_the_lesson_links_it_in_one_line(self):
        rc, out = self.run_main()
        self.assertEqual(rc, 0, out)
        lesson = self.read("steps/02_toy/README.md")
        self.assertIn("<!-- diff:02_toy -->\n- [step 01's kernel → step 02's (one store changed)]"
                      "(DIFF.md#step-01s-kernel--step-02s-one-store-changed): 4 lines changed "
                      "(generated by `docs/reading.py`)\n<!-- /diff -->", lesson)
        diff = self.read("steps/02_toy/DIFF.md")
        self.assertTrue(diff.startswith("# Step 02's code against the steps before it\n"))
        self.assertIn("The lesson it belongs to: [README.md](README.md).", diff)
        self.assertIn(f"## {TITLE}\n\n4 lines changed.\n\n```diff\n--- steps/01_toy/toy.cu:toy_kernel\n"
                      "+++ steps/02_toy/toy2.cu:toy2_kernel\n", diff)
        self.assertIn("-__global__ void toy_kernel(float* o) {\n+__global__ void toy2_kernel(float* o) {\n", diff)
        self.assertIn("-  o[1] = 2.f;\n+  o[1] = 3.f;\n", diff)
        self.assertEqual(self.run_main("--check")[0], 0)

    def test_check_fails_when_the_code_moves_on_and_names_a_diff_no_entry_writes(self):
        self.run_main()
        self.write("steps/02_toy/toy2.cu", KERNEL_02.replace("o[0] = 1.f;", "o[0] = 0.f;"))
        reading._sources.clear()
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "out of date (run python3 docs/reading.py): steps/02_toy/DIFF.md, "
                                                "steps/02_toy/README.md"))
        self.run_main()
        self.write("steps/01_toy/DIFF.md", "# a diff no entry of DIFFS writes\n")
        rc, out = self.run_main("--check")
        self.assertEqual((rc, out.strip()), (1, "not written by docs/reading.py (no diff of DIFFS; run python3 "
                                                "docs/reading.py): steps/01_toy/DIFF.md"))
        self.run_main()
        self.assertFalse(os.path.exists(os.path.join(self.root, "steps/01_toy/DIFF.md")))
        self.assertEqual(self.run_main("--check")[0], 0)


if __name__ == "__main__":
    unittest.main()
