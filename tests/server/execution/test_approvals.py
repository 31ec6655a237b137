"""Approvals bound to what runs (server/execution/approvals.py): a support-agent's refund
is stored as an approval (id, exact arguments, key, who asked, expiry); a support-lead's
approval runs exactly those arguments once; other arguments under its key, a second
approval, a revoked or expired one are refused; another tenant cannot see it; each step
is in the audit log."""

from __future__ import annotations

from tests.scripted import assert_problem
from tests.server.execution.conftest import audit, who
from tests.server.execution.exec_contracts import LEDGER

AGENT, LEAD = who("acme", "support-agent"), who("acme", "support-lead")
REFUND = {"order_id": "ORD-123", "amount": 5}


def _ask(client, key: str, arguments=None) -> dict:
    resp = client.post("/v1/tools/refund_order/invoke", headers=AGENT,
                       json={"arguments": arguments or REFUND, "idempotency_key": key})
    assert resp.status_code == 202, resp.text
    return resp.json()["approval"]


def test_an_approval_runs_its_exact_arguments_once(client, audit_path):
    before = LEDGER["refund"]
    approval = _ask(client, "idem-approve-1")
    assert approval["state"] == "pending" and approval["id"].startswith("apr_")
    assert approval["fields"] == REFUND and approval["requested_by"]["roles"] == ["support-agent"]
    assert approval["expires_at"] > approval["created_at"]
    assert _ask(client, "idem-approve-1")["id"] == approval["id"]  # asked again: the same
    shown = client.get(f"/v1/approvals/{approval['id']}", headers=LEAD).json()
    assert shown["state"] == "pending" and LEDGER["refund"] == before
    # The agent cannot approve its own request: the policy does not allow it the tool.
    assert_problem(client.post(f"/v1/approvals/{approval['id']}/approve", headers=AGENT), 403)
    ran = client.post(f"/v1/approvals/{approval['id']}/approve", headers=LEAD)
    assert ran.status_code == 200, ran.text
    assert ran.json()["outcome"] == "succeeded" and ran.json()["approval"]["state"] == "used"
    assert LEDGER["refund"] == before + 1
    again = assert_problem(client.post(f"/v1/approvals/{approval['id']}/approve",
                                       headers=LEAD), 409)
    assert again["error"]["code"] == "approval_used" and LEDGER["refund"] == before + 1
    events = [r["event"] for r in audit(audit_path) if r.get("id") == approval["id"]]
    assert events[:1] == ["approval_requested"] and "approval_approved" in events


def test_other_arguments_under_an_approvals_key_are_refused(client):
    before = LEDGER["refund"]
    approval = _ask(client, "idem-approve-2")
    other = client.post("/v1/tools/refund_order/invoke", headers=LEAD, json={
        "arguments": {"order_id": "ORD-123", "amount": 500}, "idempotency_key": "idem-approve-2"})
    assert assert_problem(other, 409)["error"]["code"] == "approval_arguments_differ"
    assert LEDGER["refund"] == before
    # The lead invoking exactly the approved call uses the approval.
    same = client.post("/v1/tools/refund_order/invoke", headers=LEAD,
                       json={"arguments": REFUND, "idempotency_key": "idem-approve-2"})
    assert same.status_code == 200 and LEDGER["refund"] == before + 1
    used = client.get(f"/v1/approvals/{approval['id']}", headers=LEAD).json()
    assert used["state"] == "used"


def test_a_revoked_approval_runs_nothing_and_another_tenant_cannot_see_it(client):
    before = LEDGER["refund"]
    approval = _ask(client, "idem-approve-3")
    assert_problem(client.get(f"/v1/approvals/{approval['id']}",
                              headers=who("globex", "support-lead")), 404)
    revoked = client.post(f"/v1/approvals/{approval['id']}/revoke", headers=AGENT)
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    refused = assert_problem(client.post(f"/v1/approvals/{approval['id']}/approve",
                                         headers=LEAD), 409)
    assert refused["error"]["code"] == "approval_revoked" and LEDGER["refund"] == before
