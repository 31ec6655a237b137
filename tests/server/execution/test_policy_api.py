"""The policy and selection through the chat API over a ScriptedEngine (the real tokenizer
and grammar matcher): what a caller may not use is not in the grammar, a denied tool asked
for by name is a 403, a hidden one is indistinguishable from a tool that does not exist,
approvals and idempotency keys come back with the calls, and every decision is a span
event and an audit record."""

from __future__ import annotations

import json

from tests.scripted import assert_problem
from tests.server.execution.conftest import audit, chat, who

REFUND = ("refund_order", {"order_id": "ORD-123", "amount": 50})
LOOKUP = ("lookup_order", {"order_id": "ORD-123"})


def calls_of(resp):
    assert resp.status_code == 200, resp.text
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]), c["id"])
            for c in resp.json()["choices"][0]["message"]["tool_calls"]]


def test_a_denied_tool_is_not_in_the_grammar(client, script):
    script.calls(REFUND)  # the guest tenant may not write: refund_order is left out
    resp = chat(client, ["lookup_order", "refund_order"], headers=who("guest"))
    # The matcher refused the tool's name itself: refund_order is not in the grammar.
    assert_problem(resp, 503, says="""after '[{"name":"' breaks the grammar""")
    script.calls(LOOKUP)
    resp = chat(client, ["lookup_order", "refund_order"], headers=who("guest"))
    assert calls_of(resp)[0][0] == "lookup_order"
    assert resp.json()["strictcall"]["tools"]["visible"] == ["lookup_order"]


def test_a_hidden_tool_is_not_in_the_grammar(client, script):
    script.calls(("charge_card", {"amount": 5}))
    resp = chat(client, ["lookup_order", "charge_card"], headers=who("acme", "support-lead"))
    assert_problem(resp, 503, says="breaks the grammar")
    resp = chat(client, ["lookup_order", "charge_card"], headers=who("acme", "admin"))
    assert calls_of(resp)[0][0] == "charge_card"  # admins see it


def test_asking_for_a_denied_tool_by_name_is_403(client):
    body = assert_problem(chat(client, ["lookup_order", "refund_order"], choice="refund_order",
                               headers=who("guest")), 403, param="tool_choice.function.name",
                          says="denies tool 'refund_order'")
    assert body["error"]["code"] == "tool_denied"
    assert_problem(chat(client, ["refund_order"], headers=who("guest")), 403,
                   says="every tool this request offers is denied")


def test_a_hidden_tool_is_answered_as_an_unknown_one(client):
    lead = who("acme", "support-lead")
    hidden = chat(client, ["lookup_order", "charge_card"], choice="charge_card", headers=lead)
    unknown = chat(client, ["lookup_order"], choice="no_such_tool", headers=lead)
    a, b = assert_problem(hidden, 400), assert_problem(unknown, 400)
    assert a["detail"].replace("charge_card", "X") == b["detail"].replace("no_such_tool", "X")
    for route in ("/v1/tools/{}/invoke", "/v1/contracts/{}/validate"):
        a = client.post(route.format("charge_card"), json={"arguments": {}}, headers=lead)
        b = client.post(route.format("no_such_tool"), json={"arguments": {}}, headers=lead)
        assert a.status_code == b.status_code == 404
        assert a.json()["detail"].replace("charge_card", "X") == \
            b.json()["detail"].replace("no_such_tool", "X")
    names = [c["name"] for c in client.get("/v1/contracts", headers=lead).json()["data"]]
    assert "charge_card" not in names and "lookup_order" in names


def test_the_catalog_listing_shows_metadata_and_this_callers_decision(client):
    data = {c["name"]: c for c in client.get("/v1/contracts", headers=who("guest"))
            .json()["data"]}
    assert data["refund_order"]["catalog"] == {"owner": "payments", "kind": "write",
                                               "risk": "high", "lifecycle": "active",
                                               "version": "1"}
    assert data["refund_order"]["policy"] == {"decision": "deny", "rule": 3}
    assert data["refund_order"]["executable"] and not data["old_lookup"]["executable"]
    assert data["ancient_lookup"]["catalog"]["lifecycle"] == "retired"


def test_approval_required_marks_the_call_with_its_fields(client, script):
    script.calls(REFUND)
    resp = chat(client, ["refund_order"], headers=who("acme", "support-agent"))
    (name, arguments, call_id), = calls_of(resp)
    (note,) = resp.json()["strictcall"]["calls"]
    assert note["id"] == call_id and resp.headers["X-StrictCall-Approval-Required"] == call_id
    assert note["approval_required"]["fields"] == {"order_id": "ORD-123", "amount": 50}
    assert note["idempotency_key"] == arguments["idempotency_key"]  # the Generated field


def test_each_write_call_gets_its_own_key_and_reads_none(client, script):
    script.calls(REFUND, ("refund_order", {"order_id": "ORD-124", "amount": 7}), LOOKUP)
    resp = chat(client, ["refund_order", "lookup_order"], headers=who("acme", "support-lead"))
    calls = calls_of(resp)
    notes = resp.json()["strictcall"]["calls"]
    assert [n["id"] for n in notes] == [c[2] for c in calls[:2]]  # the read has no note
    keys = {n["idempotency_key"] for n in notes}
    assert len(keys) == 2 and {c[1]["idempotency_key"] for c in calls[:2]} == keys
    assert "X-StrictCall-Approval-Required" not in resp.headers


def test_deprecated_tools_warn_and_retired_ones_are_never_offered(client, script):
    script.calls(("old_lookup", {"order_id": "ORD-123"}))
    resp = chat(client, ["old_lookup", "ancient_lookup"])
    assert calls_of(resp)[0][0] == "old_lookup"
    assert "'old_lookup' is deprecated" in resp.headers["Warning"]
    assert resp.json()["strictcall"]["tools"] == {"visible": ["old_lookup"],
                                                  "deprecated": ["old_lookup"]}
    script.calls(("ancient_lookup", {"order_id": "ORD-123"}))
    assert_problem(chat(client, ["old_lookup", "ancient_lookup"]), 503,
                   says="breaks the grammar")


def test_a_named_catalog_offers_its_most_relevant_tools(client, script):
    script.calls(REFUND)
    resp = chat(client, [], content="Refund order ORD-123: 50 back to the customer",
                headers=who("acme", "support-lead"),
                strictcall={"catalog": "orders", "select_k": 2})
    assert calls_of(resp)[0][0] == "refund_order"
    tools = resp.json()["strictcall"]["tools"]
    assert len(tools["visible"]) == 2 and tools["visible"][0] == "refund_order"
    # (out of 4: email_customers is denied)
    assert tools["selection"]["reason"] == "catalog" and tools["selection"]["out_of"] == 4
    assert_problem(chat(client, [], strictcall={"catalog": "nope"}), 400,
                   param="strictcall.catalog", says="this server has ['orders']")


def many(n):
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does thing number {i}.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
        for i in range(n)] + [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather forecast for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]


def test_over_the_budget_only_the_best_k_are_offered(app_client, script):
    script.calls(("get_weather", {"city": "Oslo"}))
    with app_client() as client:
        resp = chat(client, many(30), content="What is the weather forecast in Oslo?")
        assert calls_of(resp)[0][0] == "get_weather"
        tools = resp.json()["strictcall"]["tools"]
        assert tools["visible"][0] == "get_weather" and len(tools["visible"]) == 5
        assert tools["selection"]["reason"] == "over_budget"
    with app_client(tool_selection="off") as client:
        body = assert_problem(chat(client, many(30)), 400)
        assert body["error"]["code"] == "budget_exceeded"


def test_every_decision_is_a_span_event_and_an_audit_record(client, script, spans,
                                                            audit_path):
    script.calls(("open_urgent_ticket", {"request_id": "AR-004218", "summary": "blocked"}))
    script.repairs = ['{"request_id":"AR-004217"}']  # not stuck -> the stuck one
    resp = chat(client, ["open_urgent_ticket", "check_access_request_status"],
                headers=who("acme", "support-lead"),
                content="AR-004218 is blocked (or was it AR-004217?)",
                # Two ids the user gave: the model may pick (else the answer asks which).
                strictcall={"ambiguity": "model"})
    assert calls_of(resp)[0][1]["request_id"] == "AR-004217"
    (span,) = [s for s in spans[1].get_finished_spans() if s.name == "strictcall.chat"]
    events = [e.name for e in span.events]
    assert events == ["policy_decision", "policy_decision", "tool_selection_set_built",
                      "tool_call_decoded", "repaired"]
    first = dict(span.events[0].attributes)
    assert first["tool"] == "open_urgent_ticket" and first["decision"] == "allow"
    (record,) = audit(audit_path)
    assert record["tool_set"]["policy"]["open_urgent_ticket"]["decision"] == "allow"
    assert record["call_notes"][0]["idempotency_key"].startswith("idem_")
    spans[1].clear()
    script.calls(("lookup_order", {"order_id": "ORD-123"}))
    assert_problem(chat(client, ["refund_order"], headers=who("guest")), 403)
    (span,) = spans[1].get_finished_spans()
    assert [e.name for e in span.events][-1] == "rejected"
    assert span.status.status_code.name == "ERROR"


def test_with_api_keys_the_policy_reads_the_keys_identity(app_client, script, tmp_path):
    keys = tmp_path / "keys.yaml"
    keys.write_text("keys: [{key: sk-agent-0123456789abcdef, name: agent, tenant: acme, "
                    "roles: [chat, support-agent]}]")
    script.calls(REFUND)
    with app_client(api_keys_file=keys) as client:
        # The headers claim a lead in another tenant; the key says an agent of acme.
        headers = {"Authorization": "Bearer sk-agent-0123456789abcdef",
                   **who("other", "support-lead")}
        resp = chat(client, ["refund_order"], headers=headers)
        (note,) = resp.json()["strictcall"]["calls"]
        assert "approval_required" in note
        assert calls_of(resp)[0][1]["tenant_id"] == "acme"
