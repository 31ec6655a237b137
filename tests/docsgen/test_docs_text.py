"""What the docs' hand-written pages name exists: every `--flag` is a flag of `strictcall`,
of a benchmark or of the few outside tools the pages show (docker, pip, ray, vllm serve,
mkdocs), and every file or folder of the project named in prose is there. A flag renamed
in the code, or a module moved, fails here before a reader finds it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from server.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"])
# Other programs' flags the pages show in their commands.
OUTSIDE = {"--address", "--head",  # ray start
           "--gpus",  # docker run
           "--build", "--profile",  # docker compose
           "--no-deps",  # pip install
           "--strict",  # mkdocs build
           "--enable-auto-tool-choice", "--tool-call-parser",  # vllm serve
           "--structured-outputs-config"}
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")
_PATH = re.compile(r"(?<![\w./-])((?:server|grammars|contracts|bench|tests|docsgen|deploy|"
                   r"docs)/[\w./-]*\w/?)")
_PLACEHOLDER = re.compile(r"\b(NAME|FILE|DIR|N)\b")  # bench/results/NAME.json and the like
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _strictcall_flags(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:  # argparse lists a parser's arguments nowhere public
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _strictcall_flags(sub)
    return found


def _bench_flags() -> set[str]:
    """Flags the benchmarks' parsers add (read from their source: building them would
    import torch and the rest)."""
    found: set[str] = set()
    for source in (ROOT / "bench").rglob("*.py"):
        text = source.read_text()
        for call in re.finditer(r"add_argument\(([^)]*)", text):
            names = re.findall(r'"(--[\w-]+)"', call.group(1))
            found.update(names)
            if "BooleanOptionalAction" in call.group(1):
                found.update("--no-" + n[2:] for n in names)
    return found


@pytest.fixture(scope="module")
def known_flags() -> set[str]:
    return _strictcall_flags(_parser()) | _bench_flags() | OUTSIDE


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_a_page_names_exists(page: Path, known_flags: set[str]) -> None:
    unknown = sorted(set(_FLAG.findall(page.read_text())) - known_flags)
    assert not unknown, f"{page.name} names flags no parser has: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_project_path_a_page_names_exists(page: Path) -> None:
    prose = _FENCE.sub("", page.read_text())  # commands may name files they create
    missing = sorted({p for p in _PATH.findall(prose) if not _PLACEHOLDER.search(p)
                      and not (ROOT / p.rstrip("/")).exists()})
    assert not missing, f"{page.name} names paths that are not there: {missing}"
