"""docs/verify.md's example runs as written and passes the check it shows."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_verify_page_example_runs():
    text = (ROOT / "docs" / "verify.md").read_text()
    block = re.search(r"<!-- example: tests/python/test_docs.py runs this block -->\n```python\n(.*?)```", text, re.S)
    assert block, "docs/verify.md lost its example block"
    namespace = {}
    exec(compile(block.group(1), "docs/verify.md", "exec"), namespace)  # asserts report["ok"] itself
    assert namespace["report"]["ok"] and "O " in namespace["report"]["summary"]
