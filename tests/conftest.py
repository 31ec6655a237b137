from __future__ import annotations

import functools
import json
import os
import random
import tempfile
from pathlib import Path

import pytest

# One day for the whole run, in the tests and in every server they start (in process or as
# a child, which inherits it): a run that crosses midnight must not have a test expect
# yesterday's date while its server has moved on to a new day (contracts/clock.py).
os.environ.setdefault("STRICTCALL_TODAY", __import__("datetime").date.today().isoformat())

# Fixtures every tier shares (imported so pytest finds them): the live server process on the
# embedded model and its openai client; real Postgres, Redis and `vllm serve` for the
# `replicas` tier, started on first use; the scripted app for the unit tier.
from tests.live import live_client, live_server  # noqa: F401 - fixtures, found by name
from tests.real_servers import postgres, redis_server, vllm_upstream  # noqa: F401 - fixtures, found by name
from tests.scripted import Replies, scripted_client
from tests.tiers import in_ci

ROOT = Path(__file__).resolve().parents[1]
EVALDATA = ROOT.parent / "shared" / "evaldata"


# The fuzz tiers' seeds, one per tier and fixed for the whole run: random unless set, so
# each run explores new cases, and a failure replays with the same variables set. pytest's
# header and, when a fuzz test ran, its summary print them.
FUZZ_SEEDS = {name: int(os.environ.get(name) or random.randrange(2**32))
              for name in ("STRICTCALL_PROPERTY_SEED", "STRICTCALL_FUZZ_SEED")}


def _seeds_line() -> str:
    return "fuzz seeds (replay with): " + " ".join(f"{k}={v}" for k, v in FUZZ_SEEDS.items())


def pytest_report_header(config):
    return _seeds_line()


def pytest_terminal_summary(terminalreporter):
    ran = [r for reports in terminalreporter.stats.values() for r in reports
           if "fuzz" in getattr(r, "keywords", {})]
    if ran:
        terminalreporter.write_line(_seeds_line())


def pytest_unconfigure(config):
    # llama-cpp-python opens two /dev/null files at import and never closes them; closed
    # here so the interpreter's exit does not report them as leaked.
    import sys

    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None:
            handle.close()


def pytest_configure(config):
    # Servers under test (in process or child processes) do not share compiled grammars
    # through the user's cache directory; the disk-store tests turn it on in a tmp dir.
    os.environ["STRICTCALL_GRAMMAR_DISK_CACHE"] = "false"
    # Nor their idempotency keys and outcomes: one throwaway SQLite file per session.
    os.environ.setdefault("STRICTCALL_TOOLS_DB", os.path.join(
        tempfile.mkdtemp(prefix="strictcall-tools-"), "tools.sqlite3"))


@pytest.fixture(scope="session")
def model_dir() -> Path:
    from server.model_store import ensure_embedded_model

    return ensure_embedded_model()


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="session")
def backend(tokenizer):
    from grammars import XgrammarBackend

    return XgrammarBackend(tokenizer, vocab_size=len(tokenizer),
                           stop_token_ids=[tokenizer.eos_token_id])


# Where each folder of ../shared/evaldata comes from (its README.md has the full table).
EVALDATA_SOURCES = {
    "bfcl": "BFCL v4 from github.com/ShishirPatil/gorilla, "
            "berkeley-function-call-leaderboard/bfcl_eval/data at 6ea5797",
    "jsonschemabench": "github.com/guidance-ai/jsonschemabench, maskbench/data at ba103c7",
    "json-schema-test-suite": "github.com/json-schema-org/JSON-Schema-Test-Suite, "
                              "tests/draft2020-12 and remotes at 44401e0",
}


def evaldata(relative: str) -> Path:
    """`relative` under ../shared/evaldata. Missing: a skip that says what to place where,
    or under CI a failure, so a run that silently lost its headline checks cannot pass."""
    path = EVALDATA / relative
    if path.exists():
        return path
    source = EVALDATA_SOURCES.get(Path(relative).parts[0], "see its README.md")
    what = (f"{path} is missing: place the shared evaluation data at {EVALDATA} (beside "
            f"the checkout {ROOT}); {Path(relative).parts[0]}/ is {source}")
    if in_ci():
        pytest.fail(f"{what}. CI=true: a missing data file fails the run", pytrace=False)
    pytest.skip(what)


def bfcl(name: str) -> list[dict]:
    with evaldata(f"bfcl/{name}").open() as f:
        return [json.loads(line) for line in f]


@pytest.fixture()
def replies() -> Replies:
    return Replies()


@pytest.fixture(scope="session")
def scripted(model_dir):
    """`scripted(script, **settings)`: a TestClient on the app over a ScriptedEngine
    (tests/scripted.py), as a context manager."""
    return functools.partial(scripted_client, model_dir)


@pytest.fixture()
def client(scripted, replies):
    """The default scripted app: no contracts, answering `replies.text`."""
    with scripted(replies) as c:
        yield c
