"""The README stays short, and its benchmark lines are the headlines the committed results
files render (bench/pages.py), so a rerun that changes a number fails here until the README
says the new one: no benchmark number in it that a results file does not hold."""

from __future__ import annotations

import re
from pathlib import Path

from bench.page_text import TITLES
from bench.pages import read_results, render

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _headline_lines() -> list[str]:
    block = re.search(r"<!-- benchmark headlines:.*?-->\n(.*?)<!-- end of benchmark headlines",
                      README, re.S)
    assert block, "the README's benchmark block is gone"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_is_at_most_15_kb() -> None:
    assert len(README.encode()) <= 15 * 1024


def test_each_benchmark_line_is_what_its_results_file_renders() -> None:
    expected = []
    for record in read_results(ROOT / "bench" / "results"):
        name = record["benchmark"]
        headline = render(record).headline
        if headline:
            expected.append(f"- [{TITLES.get(name, name)}](bench/results/{name}.json): "
                            f"{headline}")
    assert _headline_lines() == expected, "\n".join(["the README should read:", *expected])


def test_no_other_number_of_a_benchmark_in_the_readme() -> None:
    outside = README.split("<!-- benchmark headlines")[0] + README.split(
        "<!-- end of benchmark headlines -->")[1]
    measured = re.findall(r"\b\d+(?:\.\d+)?\s?(?:ms|tokens/s|tok/s|%|x\b)", outside)
    assert not measured, f"measurements outside the benchmark lines: {measured}"
