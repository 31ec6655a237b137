from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

# Real Postgres, Redis and `vllm serve` for the `replicas` tier, started on first use.
from tests.real_servers import postgres, redis_server, vllm_upstream  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
EVALDATA = ROOT.parent / "shared" / "evaldata"


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


def bfcl(name: str) -> list[dict]:
    path = EVALDATA / "bfcl" / name
    if not path.exists():
        pytest.skip(f"{path} is missing (shared/evaldata sits beside the project)")
    with path.open() as f:
        return [json.loads(line) for line in f]
