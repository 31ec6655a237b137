"""Greedy output at one client is the same fresh or warm: the same questions asked twice of
one server (the second time from its prefix cache) and once of a fresh one give the same
text, token for token. When kept prompts were cells left in the KV cache, 3 of 6 BFCL
answers differed warm: a reused prompt's cells sat where its first request left them, and
llama.cpp's attention sums over cells in their order. Restored from host memory, a kept
prompt's cells are laid out as a fresh prefill's (docs/engines.md, "Reproducible greedy
output")."""

from __future__ import annotations

import httpx
import pytest

from bench.accuracy.bfcl_ast import load
from server.process import ServerProcess

pytestmark = pytest.mark.slow

QUESTIONS = [q["question"][0] for q, _ in load("simple_python", limit=6)]
FLAGS = ("--served-model-name", "m", "--max-batch", "1")


def answers(base_url: str) -> list[str]:
    texts = []
    for messages in QUESTIONS:
        reply = httpx.post(f"{base_url}/v1/chat/completions", timeout=300, json={
            "model": "m", "messages": messages, "temperature": 0, "max_tokens": 48})
        reply.raise_for_status()
        texts.append(reply.json()["choices"][0]["message"]["content"])
    return texts


def test_greedy_output_is_the_same_fresh_or_warm(model_dir):
    with ServerProcess("--model", str(model_dir), *FLAGS) as server:
        first, warm = answers(server.base_url), answers(server.base_url)
        engine = httpx.get(f"{server.base_url}/health").json()["engine"]
        assert engine["prefix_hits"] >= len(QUESTIONS)  # the warm pass came from the cache
    with ServerProcess("--model", str(model_dir), *FLAGS) as server:
        fresh = answers(server.base_url)
    assert all(first) and warm == first and fresh == first
