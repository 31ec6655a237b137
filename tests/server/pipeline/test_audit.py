"""The audit log over a ScriptedEngine: one record per tool-call decision, whichever API
asked (chat completions, Responses, Messages, streaming or not), with its outcome, the
contract's attempts and violations, and `Redact()` fields hidden wherever they would show.
The records go through the real AuditLog into a file, which the tests read back."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.logs import AuditLog
from server.settings import Settings

KEY = "sk-audit-0123456789abcdef"
GOOD_IBAN = "DE89370400440532013000"
BAD_IBAN = "FR7630006000011234567890189"
PAY = {"type": "function", "function": {"name": "pay_invoice"}}
USER = [{"role": "user", "content": "Pay INV-0001, 5 euros."}]
TAGS = {"type": "function", "function": {"name": "tag", "parameters": {
    "type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                              "uniqueItems": True}},
    "required": ["tags"]}}}


def pay(iban: str) -> str:
    return json.dumps([{"name": "pay_invoice", "arguments": {
        "invoice": "INV-0001", "iban": iban, "amount": 5}}], separators=(",", ":"))


class Script:
    """The call the test sets; a repair prompt gets `repair` (fields to write again)."""

    def __init__(self) -> None:
        self.call = pay(GOOD_IBAN)
        self.repair = f'{{"iban":"{GOOD_IBAN}"}}'

    def __call__(self, prompt: str) -> str:
        return self.repair if "is not valid yet" in prompt else self.call


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def audit_path(tmp_path):
    return tmp_path / "audit.jsonl"


@pytest.fixture()
def client(model_dir, tmp_path, audit_path, script):
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys: [{{key: {KEY}, name: billing-agent, tenant: acme}}]")
    settings = Settings(served_model_name="scripted", api_keys_file=keys, repair_attempts=1,
                        contracts=["tests.server.pipeline.audit_contracts"])
    audit = AuditLog(audit_path, max_bytes=2**20, backups=1)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, script), audit=audit)
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def records(path) -> list[dict]:
    text = path.read_text() if path.exists() else ""
    assert KEY not in text and BAD_IBAN not in text and GOOD_IBAN not in text
    return [json.loads(line) for line in text.splitlines()]


def chat(client, **body):
    body = {"model": "scripted", "messages": USER, **body}
    return client.post("/v1/chat/completions", json=body, headers={"X-Request-Id": "req-7"})


def test_a_valid_call_is_recorded_with_who_what_and_timings(client, audit_path):
    resp = chat(client, tools=[PAY], tool_choice="required")
    assert resp.status_code == 200, resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["iban"] == GOOD_IBAN  # client sees it
    (record,) = records(audit_path)
    assert record["request_id"] == "req-7" and record["model"] == "scripted"
    assert record["identity"] == {"name": "billing-agent", "tenant": "acme", "roles": ["chat"]}
    assert record["tools_offered"] == ["pay_invoice"] and record["outcome"] == "valid"
    assert len(record["grammar"]["key"]) >= 16 and record["grammar"]["cache"] in ("hit", "miss")
    assert record["calls"] == [{"name": "pay_invoice", "arguments": {
        "invoice": "INV-0001", "iban": "[redacted]", "amount": 5}}]
    (contract,) = record["contracts"]
    assert contract["repaired"] is False and len(contract["attempts"]) == 1
    assert contract["arguments"]["tenant_id"] == "acme"  # runtime fields are filled in
    assert record["finish_reason"] == "tool_calls" and record["error"] is None
    assert {"e2e_s", "checks_s"} <= set(record["timings"])
    assert record["tokens"]["prompt"] > 0


def test_a_repaired_call_keeps_every_attempt_with_values_redacted(client, script,
                                                                   audit_path):
    script.call = pay(BAD_IBAN)
    assert chat(client, tools=[PAY], tool_choice="required").status_code == 200
    (record,) = records(audit_path)
    assert record["outcome"] == "repaired"
    first, second = record["contracts"][0]["attempts"]
    (violation,) = first["violations"]
    assert violation["pointer"] == "/iban" and violation["observed"] == "[redacted]"
    assert violation["message"].startswith("[redacted] is not a German IBAN")
    assert first["arguments"]["iban"] == "[redacted]" and second["violations"] == []


def test_a_rejected_call_says_why_without_the_secret(client, script, audit_path):
    script.call, script.repair = pay(BAD_IBAN), f'{{"iban":"{BAD_IBAN}"}}'
    resp = chat(client, tools=[PAY], tool_choice="required")
    assert resp.status_code == 422 and BAD_IBAN in resp.text  # the client's own data
    (record,) = records(audit_path)
    assert record["outcome"] == "rejected" and record["error"]["status"] == 422
    assert record["error"]["type"] == "contract-violation"
    assert record["error"]["violations"][0]["observed"] == "[redacted]"
    assert "[redacted] is not a German IBAN" in record["error"]["detail"]
    assert len(record["contracts"][0]["attempts"]) == 2


def test_output_validation_cut_off_and_no_call_are_decisions_too(client, script,
                                                                 audit_path):
    script.call = '[{"name":"tag","arguments":{"tags":["a","a"]}}]'  # uniqueItems: validator
    assert chat(client, tools=[TAGS], tool_choice="required").status_code == 422
    script.call = pay(GOOD_IBAN)
    cut = chat(client, tools=[PAY], tool_choice="required", max_tokens=4)
    assert cut.json()["choices"][0]["finish_reason"] == "length"
    script.call = "No payment today."
    assert chat(client, tools=[PAY], tool_choice="none").status_code == 200
    assert chat(client).status_code == 200  # no tools offered: no decision, no record
    invalid, cut_off, no_call = records(audit_path)
    assert invalid["outcome"] == "rejected" and invalid["error"]["type"] == "output-invalid"
    assert invalid["calls"] == [{"name": "tag", "arguments": {"tags": ["a", "a"]}}]
    assert invalid["error"]["violations"][0]["pointer"] == "/tags"
    assert cut_off["outcome"] == "cut_off" and cut_off["finish_reason"] == "length"
    assert cut_off["calls"] == []
    assert no_call["outcome"] == "no_call" and no_call["grammar"] is None


def test_every_api_and_the_stream_write_a_record(client, audit_path):
    assert chat(client, tools=[PAY], tool_choice="required", stream=True).status_code == 200
    responses = client.post("/v1/responses", json={
        "model": "scripted", "input": "Pay INV-0001.", "tool_choice": "required",
        "tools": [{"type": "function", "name": "pay_invoice"}]})
    assert responses.status_code == 200, responses.text
    messages = client.post("/v1/messages", json={
        "model": "scripted", "max_tokens": 200, "messages": USER,
        "tools": [{"name": "pay_invoice", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"}})
    assert messages.status_code == 200, messages.text
    streamed, via_responses, via_messages = records(audit_path)
    for record in (streamed, via_responses, via_messages):
        assert record["outcome"] == "valid" and record["tools_offered"] == ["pay_invoice"]
        assert record["identity"]["name"] == "billing-agent"
        assert record["calls"][0]["arguments"]["iban"] == "[redacted]"
    assert streamed["request_id"] == "req-7"
    assert via_messages["request_id"] == messages.headers["x-request-id"]


def test_the_audit_file_rotates_at_its_size_and_keeps_n_backups(tmp_path):
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path, max_bytes=1024, backups=2)
    for i in range(60):
        audit.write({"n": i, "pad": "x" * 100})
    audit.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    kept = [json.loads(line)["n"] for name in reversed(files)
            for line in (tmp_path / name).read_text().splitlines()]
    assert kept == sorted(kept) and kept[-1] == 59  # the newest, in order, none broken
    assert all((tmp_path / name).stat().st_size <= 1024 for name in files)
    none_kept = AuditLog(tmp_path / "solo.jsonl", max_bytes=1024, backups=0)
    for i in range(30):
        none_kept.write({"n": i, "pad": "x" * 100})
    none_kept.close()
    assert sorted(p.name for p in tmp_path.glob("solo*")) == ["solo.jsonl"]


def test_a_loop_cut_inside_a_redacted_field_is_not_quoted(client, script, audit_path):
    """A runaway note quotes the looping text; inside a `Redact()` field that text is the
    secret, so the record leaves it out (the call was never read: any field may hold it)."""
    script.call = json.dumps([{"name": "pay_invoice", "arguments": {
        "invoice": "INV-0001", "iban": "DE" + "7" * 32, "amount": 5}}], separators=(",", ":"))
    resp = chat(client, tools=[PAY], tool_choice="required")
    assert resp.json()["choices"][0]["finish_reason"] == "length"
    assert resp.json()["strictcall"]["runaway"]["loop_cut"]["unit"] == "7"  # the client's own
    (record,) = records(audit_path)
    assert record["outcome"] == "cut_off"
    cut = record["runaway"]["loop_cut"]
    assert cut["kind"] == "value" and cut["unit"] == "[redacted]" and cut["repeats"] >= 4
