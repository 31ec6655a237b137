"""The benchmark pages of the docs, rendered from the committed results files
(bench/results/NAME.json, written by bench/results_file.py) at every docs build
(docsgen/hooks.py): a page per benchmark with the run's command, commit and machine, its
tables and plots, and an index with one headline line each. Every number on those pages
comes from a results file; rerun a benchmark with --save and the page follows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.page_kinds import RENDERERS
from bench.page_parts import Rendered, generic
from bench.page_text import ABOUT, TITLES
from bench.results_file import page_name


def read_results(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def benchmark_pages(records: list[dict[str, Any]]) -> dict[str, str | bytes]:
    """Every benchmark page and plot, by path under docs/, and benchmarks/index.md."""
    files: dict[str, str | bytes] = {}
    index = ["# Benchmarks", "", ABOUT["index"], "",
             "| benchmark | latest run | headline |", "|---|---|---|"]
    for record in records:
        name = page_name(record)
        rendered = render(record)
        files[f"benchmarks/{name}.md"] = page(record, rendered)
        for image, png in rendered.images.items():
            files[f"benchmarks/{image}"] = png
        index.append(f"| [{TITLES.get(name, name)}]({name}.md) | {record['date'][:10]} | "
                     f"{rendered.headline or '-'} |")
    files["benchmarks/index.md"] = "\n".join(index) + "\n"
    return files


def render(record: dict[str, Any]) -> Rendered:
    """The benchmark's renderer on the run's results; a variant's plots are named after its
    page, so they never replace the default run's."""
    rendered = RENDERERS.get(record["benchmark"], generic)(record["results"])
    if not record.get("variant"):
        return rendered
    prefix = f"{page_name(record)}-"
    sections = [_renamed(text, rendered.images, prefix) for text in rendered.sections]
    return Rendered(sections=sections, headline=rendered.headline,
                    images={prefix + n: png for n, png in rendered.images.items()})


def _renamed(text: str, images: dict[str, bytes], prefix: str) -> str:
    for image in images:
        text = text.replace(f"]({image})", f"]({prefix}{image})")
    return text


def page(record: dict[str, Any], rendered: Rendered) -> str:
    name = page_name(record)
    m = record["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items())
    run = ["!!! info \"This run\"", "",
           f"    `{record['command']}`", "",
           f"    Commit `{record['commit']}`, {record['date']}, {record['seconds']} s. "
           f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Python "
           f"{m['python']}; {packages}."]
    parts = [f"# {TITLES.get(name, name)}", "", ABOUT.get(name, ""), "", *run, "",
             "## Results", "", *rendered.sections]
    return "\n".join(parts) + "\n"
