from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVALDATA = ROOT.parent / "shared" / "evaldata"


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
