"""A real server process with keys, a rate-limited key, JSON logs and an audit log rotated
at a tiny size: every log line is one JSON object carrying the request id; every tool-call
decision is an audit line, rotated into at most N backups, with `Redact()` fields hidden and
no key anywhere; a key over its requests per minute gets a 429 with Retry-After."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from server.process import ServerProcess
from tests.live import MODEL

pytestmark = pytest.mark.slow
KEY = "sk-records-0123456789abcdef"
LIMITED_KEY = "sk-limited-0123456789abcdef"
BACKUPS = 2
DISPUTE = {"model": MODEL, "max_tokens": 120, "tool_choice": "required",
           "messages": [{"role": "user", "content": "Card 4417 was charged 1200.50 twice "
                                                    "yesterday. Open a dispute."}],
           "tools": [{"type": "function", "function": {"name": "open_dispute"}}]}


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    where = tmp_path_factory.mktemp("records")
    keys = where / "keys.yaml"
    keys.write_text(f"keys:\n  - {{key: {KEY}, name: agent, tenant: acme}}\n"
                    f"  - {{key: {LIMITED_KEY}, name: limited, requests_per_minute: 1}}\n")
    audit = where / "audit.jsonl"
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--contracts", "contracts.examples", "--api-keys", str(keys),
                       "--log-format", "json", "--audit-log", str(audit),
                       "--audit-log-max-bytes", "1024",
                       "--audit-log-backups", str(BACKUPS)) as proc:
        proc.audit = audit
        yield proc


def test_decisions_are_audited_and_rotated_with_redaction(server):
    ids = [f"req-audit-{i}" for i in range(BACKUPS + 2)]
    for request_id in ids:
        resp = httpx.post(f"{server.base_url}/v1/chat/completions", json=DISPUTE, timeout=300,
                          headers={"Authorization": f"Bearer {KEY}",
                                   "X-Request-Id": request_id})
        assert resp.status_code in (200, 422), resp.text  # valid, repaired, or rejected
    files = sorted(server.audit.parent.glob("audit.jsonl*"))
    assert [f.name for f in files] == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    text = "".join(f.read_text() for f in files)
    assert KEY not in text
    # The card's digits are Redact()ed wherever a record holds them (calls, arguments,
    # questions' collected values): "4417" is nowhere in the audit log.
    assert "4417" not in text
    # ... and the card did reach the records, redacted there: a call's arguments or a
    # question's collected values hold it (the dispute lacks only the original operation's
    # id: a server that answered with no value at all would leave nothing to redact).
    assert re.search(r'"card_last4": ?"\[redacted\]"', text), text[-2000:]
    records = [json.loads(line) for line in text.splitlines()]
    assert {r["request_id"] for r in records} <= set(ids)
    newest = json.loads(files[0].read_text().splitlines()[-1])
    assert newest["request_id"] == ids[-1]  # the oldest went, the newest is in FILE
    for record in records:
        assert record["identity"] == {"name": "agent", "tenant": "acme", "roles": ["chat"]}
        assert record["tools_offered"] == ["open_dispute"] and record["grammar"]["key"]
        # (needs_input: a question about a value nobody gave, the original operation's id)
        assert record["outcome"] in ("valid", "repaired", "rejected", "cut_off", "needs_input")
        assert {"queue_s", "prefill_s", "e2e_s"} <= set(record["timings"])
        for call in record["calls"]:
            assert call["arguments"]["card_last4"] == "[redacted]"


def test_log_lines_are_json_with_the_request_id(server):
    httpx.get(f"{server.base_url}/v1/models", headers={"Authorization": f"Bearer {KEY}",
                                                        "X-Request-Id": "req-json-log"})
    lines = [line for line in server.log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line, startup included
    assert all({"time", "level", "logger", "message", "request_id"} <= set(r)
               for r in records)
    mine = [r for r in records if r["request_id"] == "req-json-log"]
    assert mine and any("GET /v1/models" in r["message"] for r in mine)  # uvicorn's access
    assert any(r["logger"] == "strictcall.api" and "audit log" in r["message"]
               for r in records)
    assert KEY not in server.log_path.read_text()


def test_a_key_over_its_requests_per_minute_gets_429(server):
    headers = {"Authorization": f"Bearer {LIMITED_KEY}"}
    assert httpx.get(f"{server.base_url}/v1/models", headers=headers).status_code == 200
    refused = httpx.get(f"{server.base_url}/v1/models", headers=headers)
    assert refused.status_code == 429
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert int(refused.headers["retry-after"]) >= 1 and refused.json()["retryable"] is True
    other = httpx.get(f"{server.base_url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert other.status_code == 200
