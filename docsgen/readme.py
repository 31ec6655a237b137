"""The README's benchmark lines, written from the committed results files: one headline per
benchmark (bench/report/pages.py renders it), linking to its results file. `python -m
docsgen.readme` rewrites the block between the README's markers after a rerun;
tests/docsgen/test_readme.py fails until it has."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from bench.common.results_file import page_name
from bench.report.page_text import TITLES
from bench.report.pages import read_results, render

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- benchmark headlines:.*?-->\n)(.*?)(<!-- end of benchmark headlines)",
                   re.S)


def headline_lines(records: list[dict[str, Any]]) -> list[str]:
    lines = []
    for record in records:
        name = page_name(record)
        if headline := render(record).headline:
            lines.append(f"- [{TITLES.get(name, name)}](bench/results/{name}.json): {headline}")
    return lines


def with_headlines(readme: str, lines: list[str]) -> str:
    if not BLOCK.search(readme):
        raise ValueError("the README has no benchmark headlines block")
    return BLOCK.sub(lambda m: m.group(1) + "".join(f"{x}\n" for x in lines) + m.group(3),
                     readme, count=1)


def main() -> int:
    lines = headline_lines(read_results(ROOT / "bench" / "results"))
    README.write_text(with_headlines(README.read_text(), lines))
    print(f"{README}: {len(lines)} benchmark lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
