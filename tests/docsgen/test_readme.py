"""The README stays short, and its benchmark lines are the headlines the committed results
files render (docsgen/readme.py), so a rerun that changes a number fails here until the
README says the new one: no benchmark number in it that a results file does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.report.pages import read_results
from docsgen.readme import BLOCK, headline_lines, with_headlines

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_at_most_15_kb() -> None:
    assert len(README.encode()) <= 15 * 1024


def test_each_benchmark_line_is_what_its_results_file_renders() -> None:
    expected = headline_lines(read_results(ROOT / "bench" / "results"))
    assert len(expected) >= 4
    assert with_headlines(README, expected) == README, \
        "the README's benchmark lines are stale: run `.venv/bin/python -m docsgen.readme`"


def test_the_block_is_rewritten_in_place() -> None:
    text = "a\n<!-- benchmark headlines: x -->\n- old\n<!-- end of benchmark headlines -->\nb\n"
    assert with_headlines(text, ["- new 1", "- new 2"]) == (
        "a\n<!-- benchmark headlines: x -->\n- new 1\n- new 2\n"
        "<!-- end of benchmark headlines -->\nb\n")
    with pytest.raises(ValueError):
        with_headlines("no block", [])


def test_no_other_number_of_a_benchmark_in_the_readme() -> None:
    outside = BLOCK.sub("", README)
    measured = re.findall(r"\b\d+(?:\.\d+)?\s?(?:ms|tokens/s|tok/s|%|x\b)", outside)
    assert not measured, f"measurements outside the benchmark lines: {measured}"
