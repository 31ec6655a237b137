"""mkdocs hook (mkdocs.yml `hooks:`): adds the generated pages to the site before the build
reads the nav, so a page the nav names and nothing generates fails `mkdocs build --strict`.
Nothing generated is written into docs/: each build renders it again from the code and from
bench/results/."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from bench.common.results_file import page_name
from bench.report.pages import benchmark_pages, read_results
from docsgen.reference import (
    flags_page,
    metrics_page,
    problem_rows,
    problems_page,
    service_errors,
    setting_rows,
)

ROOT = Path(__file__).resolve().parents[1]


def generated_pages() -> dict[str, str | bytes]:
    """Every generated file of the site, by its path under docs/."""
    import server.engines.upstream  # noqa: F401 - its UpstreamLost is a problem type too
    from server.cli import _parser  # the real command line, subcommands and all
    from server.errors import OUTCOME_PROBLEMS
    from server.metrics import Metrics

    pages: dict[str, str | bytes] = {
        "reference/flags.md": flags_page(setting_rows(), _commands(_parser())),
        "reference/metrics.md": metrics_page(Metrics().series()),
        "reference/problems.md": problems_page(problem_rows(service_errors(),
                                                            OUTCOME_PROBLEMS)),
    }
    pages.update(benchmark_pages(read_results(ROOT / "bench" / "results")))
    return pages


def on_config(config: MkDocsConfig, **_: Any) -> MkDocsConfig:
    """The nav's Benchmarks section lists every committed results file's page after its
    index, so a new results file is a new page without editing mkdocs.yml."""
    config.nav = with_benchmarks(config.nav or [], benchmark_names(ROOT / "bench" / "results"))
    return config


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


def benchmark_names(directory: Path) -> list[str]:
    return [page_name(record) for record in read_results(directory)]


def with_benchmarks(nav: list[Any], names: list[str]) -> list[Any]:
    """`nav` with each benchmark's page placed after "benchmarks/index.md", wherever the
    index sits; pages the nav names already are left where they are."""
    named = set(_paths(nav))
    pages = [f"benchmarks/{n}.md" for n in names if f"benchmarks/{n}.md" not in named]
    out: list[Any] = []
    for item in nav:
        if isinstance(item, dict):
            item = {k: with_benchmarks(v, names) if isinstance(v, list) else v
                    for k, v in item.items()}
        out.append(item)
        if item == "benchmarks/index.md":
            out += pages
    return out


def _paths(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in _paths(v)]
    if isinstance(nav, list):
        return [p for v in nav for p in _paths(v)]
    return []


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser; `serve` keeps only its flags that are not settings."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = dict(sub.choices)
    serve = argparse.ArgumentParser(prog="strictcall serve",
                                    description="Flags of `strictcall serve` that are not "
                                                "settings (no environment variable).")
    settings = {row.flag.split(" / ")[0] for row in setting_rows()}
    for action in commands.pop("serve")._actions:
        if action.option_strings and not set(action.option_strings) & settings \
                and not isinstance(action, argparse._HelpAction):
            serve._add_action(action)
    return {"serve": serve, **commands}
