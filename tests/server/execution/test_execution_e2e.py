"""The execution layer through a real server process on the embedded model, with the
`openai` client: each policy decision, tool selection, and each execution outcome of
POST /v1/tools/{name}/invoke, with the spans (--trace-file) and audit records it leaves."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from server.process import ServerProcess
from tests.live import MODEL

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
REFUND_ASK = "Please refund order ORD-123, amount 50, to the customer."


def who(tenant="acme", *roles):
    return {"X-Tenant-Id": tenant, "X-Roles": ",".join(roles)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tmp_path_factory.mktemp("exec")


@pytest.fixture(scope="module")
def server(model_dir, files):
    try:
        with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                           "--contracts", "contracts.examples",
                           "--contracts", "tests.server.execution.exec_contracts",
                           "--policy", str(HERE / "exec_policy.yaml"),
                           "--audit-log", str(files / "audit.jsonl"),
                           "--tools-db", str(files / "tools.sqlite3"),
                           "--trace-file", str(files / "spans.jsonl")) as proc:
            yield proc.base_url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0,
                       timeout=300) as c:
        yield c


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server, timeout=60) as c:
        yield c


def ask(client, tools, prompt, *, headers, choice="required", **strictcall):
    return client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=120,
        tools=[{"type": "function", "function": {"name": t}} for t in tools],
        tool_choice=choice, extra_headers=headers,
        extra_body={"strictcall": strictcall} if strictcall else None)


def calls(raw):
    resp = raw.parse()
    return [(c.function.name, json.loads(c.function.arguments))
            for c in resp.choices[0].message.tool_calls or []], resp.model_extra["strictcall"]


def test_allow_and_deny_decide_what_the_model_can_write(client):
    allowed, ext = calls(ask(client, ["lookup_order", "refund_order"], REFUND_ASK,
                             headers=who("acme", "support-lead")))
    assert ext["tools"]["visible"] == ["lookup_order", "refund_order"]
    denied, ext = calls(ask(client, ["lookup_order", "refund_order"], REFUND_ASK,
                            headers=who("guest")))
    assert ext["tools"]["visible"] == ["lookup_order"]
    assert [name for name, _ in denied] == ["lookup_order"] * len(denied) and denied
    with pytest.raises(openai.PermissionDeniedError) as raised:
        ask(client, ["lookup_order", "refund_order"], REFUND_ASK, headers=who("guest"),
            choice={"type": "function", "function": {"name": "refund_order"}})
    assert raised.value.response.json()["error"]["code"] == "tool_denied"


def test_hidden_is_answered_as_unknown(client):
    answers = []
    for name, tools in (("charge_card", ["lookup_order", "charge_card"]),
                        ("no_such_tool", ["lookup_order"])):
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, tools, "Charge 10", headers=who("acme", "support-lead"),
                choice={"type": "function", "function": {"name": name}})
        answers.append(raised.value.response.json()["detail"].replace(name, "X"))
    assert answers[0] == answers[1]


def test_approval_required_comes_back_marked(client):
    raw = ask(client, ["refund_order"], REFUND_ASK, headers=who("acme", "support-agent"))
    found, ext = calls(raw)
    (note,) = ext["calls"]
    assert raw.headers["X-StrictCall-Approval-Required"] == note["id"]
    assert set(note["approval_required"]["fields"]) == {"order_id", "amount"}
    assert found[0][1]["idempotency_key"] == note["idempotency_key"]


def test_a_catalog_offers_the_k_most_relevant_tools(client):
    found, ext = calls(ask(client, [], REFUND_ASK, headers=who("acme", "support-lead"),
                           catalog="orders", select_k=2))
    tools = ext["tools"]
    assert tools["selection"]["reason"] == "catalog" and len(tools["visible"]) == 2
    assert "refund_order" in tools["visible"]
    assert {name for name, _ in found} <= set(tools["visible"])


def test_over_the_budget_selection_keeps_the_relevant_tool(client):
    tools = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does thing number {i}.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
        for i in range(30)]
    tools.append({"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                                 "maxLength": 30}},
                       "required": ["city"]}}})
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather forecast for Oslo?"}],
        tools=tools, tool_choice="required", max_tokens=60)
    visible = resp.model_extra["strictcall"]["tools"]["visible"]
    assert visible[0] == "get_weather" and len(visible) == 5


def test_each_execution_outcome(client, http, files):
    raw = ask(client, ["refund_order"], REFUND_ASK, headers=who("acme", "support-lead"))
    (name, arguments), = calls(raw)[0]
    key = calls(raw)[1]["calls"][0]["idempotency_key"]
    lead = who("acme", "support-lead")

    def invoke(tool, args, key=None, headers=lead):
        resp = http.post(f"/v1/tools/{tool}/invoke", headers=headers,
                         json={"arguments": args, **({"idempotency_key": key} if key else {})})
        return resp.status_code, resp.json()

    status, first = invoke(name, arguments, key)
    assert status == 200 and first["outcome"] in ("succeeded", "failed"), first
    status, again = invoke(name, arguments, key)  # a duplicate: the first outcome, not a rerun
    assert again["replayed"] and again["result"] == first["result"]
    assert invoke("lookup_order", {"order_id": "ORD-404"})[1]["outcome"] == "failed"
    assert invoke("lookup_order", {"order_id": "ORD-123"})[1]["outcome"] == "succeeded"
    assert invoke("slow_report", {"month": 1})[1]["outcome"] == "timed_out"
    assert invoke("hang_write", {"entry": "a"}, "idem-e2e-hang")[1]["outcome"] == \
        "side_effect_unknown"
    admin = who("acme", "admin")
    crashed = invoke("charge_card", {"amount": 3}, "idem-e2e-charge", admin)[1]
    assert crashed["outcome"] == "side_effect_unknown"
    assert invoke("charge_card", {"amount": 3}, "idem-e2e-charge", admin)[1]["replayed"]
    assert invoke("email_customers", {"customers": ["a", "b"]}, "idem-e2e-mail",
                  who("other"))[1]["outcome"] == "partial"
    assert invoke("refund_order", {"order_id": "ORD-1", "amount": 5}, "idem-e2e-bad")[0] == 422
    status, denied = invoke("refund_order", {"order_id": "ORD-123", "amount": 5},
                            "idem-e2e-guest", who("guest"))
    assert (status, denied["outcome"]) == (403, "denied")
    status, waiting = invoke("refund_order", {"order_id": "ORD-123", "amount": 5},
                             "idem-e2e-agent", who("acme", "support-agent"))
    assert (status, waiting["outcome"]) == (202, "approval_required")
    records = [json.loads(line) for line in (files / "audit.jsonl").read_text().splitlines()]
    outcomes = [r["outcome"] for r in records if r.get("event") == "executed"]
    assert {"succeeded", "failed", "timed_out", "side_effect_unknown", "partial", "denied",
            "approval_required"} <= set(outcomes) | {first["outcome"]}
    spans = [json.loads(line) for line in (files / "spans.jsonl").read_text().splitlines()]
    events = {e["name"] for s in spans for e in s["events"]}
    assert {"tool_selection_set_built", "policy_decision", "tool_call_decoded", "validated",
            "rejected", "executed"} <= events
