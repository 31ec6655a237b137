"""Faults against a real `strictcall serve` process: a grammar disk cache whose files are
corrupt, and one that cannot be written, are logged and bypassed; the server starts and
answers. (The engine faults, a raising and a hung step, are injected in the real app with
the real engine in-process: tests/server/api/test_chat_api.py,
tests/server/engines/test_watchdog.py.)"""

from __future__ import annotations

import httpx
import pytest

from server.process import ServerProcess

pytestmark = pytest.mark.slow

BODY = {"model": "m", "max_tokens": 60, "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "reissue_card"}}],
        "messages": [{"role": "user", "content": "Reissue my card in Moscow."}]}


def _serve(cache_dir, *extra: str) -> ServerProcess:
    return ServerProcess("--served-model-name", "m", "--contracts", "contracts.examples",
                         "--cache-dir", str(cache_dir), "--grammar-disk-cache", *extra)


def test_corrupt_grammar_files_are_dropped_and_recompiled(model_dir, tmp_path):
    cache = tmp_path / "cache"
    with _serve(cache, "--model", str(model_dir)):
        pass  # warm-up wrote the contracts' grammars to disk
    files = sorted((cache / "grammars").rglob("*.*"))
    assert files, "the warm-up stored no grammar"
    for path in files:
        path.write_bytes(b"\x00not a grammar")
    with _serve(cache, "--model", str(model_dir)) as server:
        answer = httpx.post(f"{server.base_url}/v1/chat/completions", json=BODY,
                            headers={"X-Tenant-Id": "t1"}, timeout=120)
        log = server.log_path.read_text()
    assert answer.status_code in (200, 422), answer.text  # a call, or the contract's 422
    assert "dropping cached grammar" in log
    assert "Traceback" not in log


def test_unwritable_grammar_cache_is_bypassed(model_dir, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "grammars").write_text("a file where the directory should be")
    with _serve(cache, "--model", str(model_dir)) as server:
        health = httpx.get(f"{server.base_url}/health").json()
        log = server.log_path.read_text()
    assert health["status"] == "ok"
    assert "grammar disk cache" in log and "unusable" in log
