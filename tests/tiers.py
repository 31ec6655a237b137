"""When a tier cannot run here (no Postgres, Redis, vLLM or llama.cpp installed): a skip
that names what installs it, or, under CI (`CI=true`, as .ci/run and most CI services set
it), a failure, so a CI run that silently lost a whole tier cannot pass. Called where the
tests that need it run (a fixture, a test), never at import: a module whose tests another
tier selects is collected everywhere."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (`CI=true`, as .ci/run and most CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def cannot_run(why: str) -> NoReturn:
    """Skip with `why`, or fail under CI."""
    if in_ci():
        pytest.fail(f"{why}. CI=true: a tier that cannot run fails the run, it is not "
                    "skipped", pytrace=False)
    pytest.skip(why)


def needs_module(name: str, install: str) -> ModuleType:
    """The module `name`, or `cannot_run` naming the target that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        cannot_run(f"needs {name} ({install})")
