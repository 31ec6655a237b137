"""POST /v1/tools/{name}/invoke over handlers that succeed, fail, hang, crash after acting
and do part of the work: one normalized outcome each, reads retried, writes never, a
repeated write answered from the idempotency store, and arguments that break the contract
never reaching a handler."""

from __future__ import annotations

import json

import pytest

from server.errors import problem_type
from tests.scripted import assert_problem
from tests.server.execution.conftest import audit, chat, who
from tests.server.execution.exec_contracts import LEDGER

LEAD = who("acme", "support-lead")


def invoke(client, tool, arguments, *, key=None, headers=None):
    body = {"arguments": arguments, **({"idempotency_key": key} if key else {})}
    return client.post(f"/v1/tools/{tool}/invoke", json=body, headers=headers or LEAD)


def outcome(resp, status=200):
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["object"] == "tool.execution"
    return body


def test_a_read_is_retried_until_it_answers(client):
    body = outcome(invoke(client, "lookup_order", {"order_id": "ORD-123"}))
    assert (body["outcome"], body["attempts"], body["result"]["attempt"]) == ("succeeded", 2, 2)
    assert body["idempotency_key"] is None and LEDGER["lookup_order"] == 2


def test_a_handler_that_fails_without_acting_is_failed(client):
    body = outcome(invoke(client, "lookup_order", {"order_id": "ORD-404"}))
    assert body["outcome"] == "failed" and "no order ORD-404" in body["problem"]["detail"]
    assert body["attempts"] == 2  # the dropped connection retried, the refusal not


def test_a_read_that_hangs_times_out_after_its_retries(client):
    body = outcome(invoke(client, "slow_report", {"month": 3}))
    assert (body["outcome"], body["attempts"]) == ("timed_out", 2)
    assert LEDGER["hang_slow_report"] == 2


def test_a_write_that_hangs_is_side_effect_unknown_and_never_retried(client):
    body = outcome(invoke(client, "hang_write", {"entry": "x"}, key="idem-hang-1"))
    assert (body["outcome"], body["attempts"]) == ("side_effect_unknown", 1)
    assert LEDGER["hang_hang_write"] == 1


def test_a_write_needs_a_key_and_runs_once_per_key(client):
    assert_problem(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5}), 400,
                   param="idempotency_key", says="write tool")
    first = outcome(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5},
                           key="idem-refund-1"))
    again = outcome(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5},
                           key="idem-refund-1"))
    assert first["outcome"] == again["outcome"] == "succeeded"
    assert again["result"] == first["result"] and again["replayed"] and not first["replayed"]
    assert LEDGER["refund"] == 1
    assert_problem(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 6},
                          key="idem-refund-1"), 409, param="idempotency_key",
                   says="other arguments")
    failed = outcome(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5000},
                            key="idem-refund-2"))
    assert failed["outcome"] == "failed" and "manager" in failed["problem"]["detail"]


def test_a_crash_after_acting_refuses_retries_until_resolved(client, audit_path):
    admin = who("acme", "admin")
    first = outcome(invoke(client, "charge_card", {"amount": 10}, key="idem-charge-1",
                           headers=admin))
    assert first["outcome"] == "side_effect_unknown"
    # The exception's text is the audit log's, never the client's (nor the model's).
    assert "RuntimeError" not in json.dumps(first)
    assert first["problem"]["owner_action_required"] is True
    assert first["problem"]["retryable"] is False
    (executed,) = [r for r in audit(audit_path) if r.get("event") == "executed"]
    assert "RuntimeError" in executed["internal"]
    again = outcome(invoke(client, "charge_card", {"amount": 10}, key="idem-charge-1",
                           headers=admin))
    assert again["outcome"] == "side_effect_unknown" and again["replayed"]
    assert LEDGER["charge"] == 1  # the money moved once
    resolve = client.post("/v1/tools/charge_card/executions/idem-charge-1/resolve",
                          json={"outcome": "failed", "note": "no charge at the bank"},
                          headers=admin)
    assert resolve.status_code == 200, resolve.text
    outcome(invoke(client, "charge_card", {"amount": 10}, key="idem-charge-1", headers=admin))
    assert LEDGER["charge"] == 2  # resolved as never done: it may run again
    assert_problem(client.post("/v1/tools/lookup_order/executions/nope-1234/resolve",
                               json={"outcome": "failed", "note": "x"}, headers=admin), 409)


def test_partial_work_is_partial(client):
    body = outcome(invoke(client, "email_customers", {"customers": ["a", "b"]},
                          key="idem-mail-1", headers=who("other")))
    assert body["outcome"] == "partial" and body["result"] == {"emailed": ["a"]}


@pytest.mark.parametrize("arguments", [{"order_id": "ORD-123", "amount": 0},
                                       {"order_id": "nope", "amount": 5},
                                       {"order_id": "ORD-123", "amount": 5, "tenant_id": "evil"},
                                       {"order_id": "ORD-123"}])
def test_arguments_that_break_the_contract_never_reach_the_handler(client, arguments):
    body = assert_problem(invoke(client, "refund_order", arguments, key="idem-bad-1"), 422)
    assert body["violations"] and LEDGER["refund"] == 0


def test_policy_applies_again_on_invoke(client):
    denied = assert_problem(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5},
                                   key="idem-guest-1", headers=who("guest")), 403)
    assert denied["outcome"] == "denied"
    waiting = outcome(invoke(client, "refund_order", {"order_id": "ORD-123", "amount": 5},
                             key="idem-agent-1", headers=who("acme", "support-agent")), 202)
    assert waiting["outcome"] == "approval_required"
    assert waiting["problem"]["fields"] == {"order_id": "ORD-123", "amount": 5}
    assert LEDGER["refund"] == 0
    assert_problem(invoke(client, "old_lookup", {"order_id": "ORD-123"}), 400,
                   says="has no handler")


def test_a_returned_call_runs_as_returned_once(client, script, spans, audit_path):
    script.calls(("refund_order", {"order_id": "ORD-123", "amount": 50}))
    resp = chat(client, ["refund_order"], headers=LEAD)
    call = resp.json()["choices"][0]["message"]["tool_calls"][0]
    key = resp.json()["strictcall"]["calls"][0]["idempotency_key"]
    arguments = json.loads(call["function"]["arguments"])  # tenant and key included
    for _ in range(2):
        body = outcome(client.post("/v1/tools/refund_order/invoke", json={
            "arguments": arguments}, headers={**LEAD, "Idempotency-Key": key}))
        assert body["outcome"] == "succeeded" and body["result"]["key"] == key
    assert LEDGER["refund"] == 1
    invokes = [s for s in spans[1].get_finished_spans() if s.name == "strictcall.tool.invoke"]
    executed = [e for s in invokes for e in s.events if e.name == "executed"]
    assert [e.attributes["replayed"] for e in executed] == [False, True]
    records = [r for r in audit(audit_path) if r.get("event") == "executed"]
    assert [r["outcome"] for r in records] == ["succeeded", "succeeded"]
    assert records[0]["arguments"]["tenant_id"] == "acme"


def test_a_result_that_breaks_its_output_contract_never_goes_back(client, audit_path):
    """A read whose result does not fit its `output` model has failed (a retry may help);
    the payload itself, a secret in it included, goes to neither client nor model."""
    body = outcome(invoke(client, "get_balance", {"account": "AC-001"}, headers=who("acme")))
    assert body["outcome"] == "failed" and body["result"] is None
    problem = body["problem"]
    assert problem["type"] == problem_type("tool-output-invalid")
    assert problem["retryable"] is True and problem["owner_action_required"] is False
    assert "/balance" in problem["detail"] and "SECRET" not in json.dumps(body)
    (executed,) = [r for r in audit(audit_path) if r.get("tool") == "get_balance"]
    assert "does not fit Balance" in executed["internal"]


def test_a_write_that_acted_with_a_wrong_result_needs_a_person(client):
    admin = who("acme", "admin")
    body = outcome(invoke(client, "send_transfer", {"account": "AC-001", "amount": 5},
                          key="idem-transfer-1", headers=admin))
    assert body["outcome"] == "side_effect_unknown" and body["result"] is None
    assert body["problem"]["owner_action_required"] is True
    assert "SECRET" not in json.dumps(body)
    again = outcome(invoke(client, "send_transfer", {"account": "AC-001", "amount": 5},
                           key="idem-transfer-1", headers=admin))
    assert again["replayed"] and LEDGER["transfer"] == 1  # never a second transfer
