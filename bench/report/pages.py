"""The benchmark pages of the docs, rendered from the committed results files
(bench/results/NAME.json, written by bench/common/results_file.py) at every docs build
(docsgen/hooks.py): a page per benchmark with the run's command, commit and machine, its
tables and plots, and an index with one headline line each. Every number on those pages
comes from a results file; rerun a benchmark with --save and the page follows."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.results_file import MEASURED, NOT_MEASURED, page_name
from bench.report.page_kinds import RENDERERS
from bench.report.page_parts import Rendered, generic
from bench.report.page_text import ABOUT, TITLES

ROOT = Path(__file__).resolve().parents[2]


def read_results(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def benchmark_pages(records: list[dict[str, Any]], *,
                    changed: Callable[[str], str | None] | None = None
                    ) -> dict[str, str | bytes]:
    """Every benchmark page and plot, by path under docs/, and benchmarks/index.md.
    `changed(commit)`: what of the measured code differs from that commit now (None:
    nothing); by default, read from git (`changed_since`)."""
    if changed is None:
        head = _head()  # read once for every page
        changed = functools.partial(changed_since, head=head)
    files: dict[str, str | bytes] = {}
    index = ["# Benchmarks", "", ABOUT["index"], "",
             "| benchmark | latest run | headline |", "|---|---|---|"]
    for record in records:
        name = page_name(record)
        rendered = render(record)
        since = changed(record["commit"])
        files[f"benchmarks/{name}.md"] = page(record, rendered, since)
        for image, png in rendered.images.items():
            files[f"benchmarks/{image}"] = png
        mark = f" (measured on older code: {since})" if since else ""
        index.append(f"| [{TITLES.get(name, name)}]({name}.md) | {record['date'][:10]} | "
                     f"{rendered.headline or '-'}{mark} |")
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


def changed_since(commit: str, head: str | None = None) -> str | None:
    """Which of the code a benchmark measures (results_file.MEASURED: server, grammars,
    contracts, bench but its results and report, pyproject.toml) differs between `commit` and this
    checkout's HEAD, in words; None where nothing does. A run on a dirty tree, or on a
    commit this history does not hold, says so; outside a git checkout nothing is said.
    `head`: HEAD's sha, where the caller read it already."""
    sha = commit.removesuffix("+dirty")
    if not re.fullmatch(r"[0-9a-f]{7,40}", sha):
        return None
    head = head or _head()
    if head is None:
        return None  # not a git checkout: nothing to compare with
    if commit.endswith("+dirty"):
        return f"run on uncommitted changes to {sha[:12]}"
    try:
        _git(ROOT, "cat-file", "-e", f"{sha}^{{commit}}")
    except subprocess.CalledProcessError:
        return f"commit {sha[:12]} is not in this history"
    names = _git(ROOT, "diff", "--name-only", sha, head, "--", *MEASURED,
                 *NOT_MEASURED).splitlines()
    if not names:
        return None
    parts = sorted({n.split("/", 1)[0] + ("/" if "/" in n else "") for n in names})
    return f"{', '.join(parts)} changed since {sha[:12]} ({len(names)} files)"


def _head() -> str | None:
    """This checkout's HEAD; None outside a git checkout."""
    try:
        return _git(ROOT, "rev-parse", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def page(record: dict[str, Any], rendered: Rendered, since: str | None = None) -> str:
    name = page_name(record)
    m = record["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items())
    run = ["!!! info \"This run\"", "",
           f"    `{record['command']}`", "",
           f"    Commit `{record['commit']}`, {record['date']}, {record['seconds']} s. "
           f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Python "
           f"{m['python']}; {packages}."]
    if since:
        run += ["", "!!! warning \"Measured on older code\"", "",
                f"    {since}: these numbers may not hold for the code as it is now. "
                f"Rerun `{record['command']}` from a clean tree with `--save`."]
    parts = [f"# {TITLES.get(name, name)}", "", ABOUT.get(name, ""), "", *run, "",
             "## Results", "", *rendered.sections]
    return "\n".join(parts) + "\n"
