"""Contracts through the HTTP API over a ScriptedEngine: repair, 422 problems, runtime fields,
the validate endpoint."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from fastapi.testclient import TestClient

from contracts import Violation, clock
from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.errors import problem_type
from server.pipeline.checking.repair import repair_schema
from server.settings import Settings
from server.wiring import load_contracts
from tests.scripted import assert_problem

REPAIR_MARK = "is not valid yet"


class Script:
    """First decode answers `first`; repair decodes answer `repairs` in turn."""

    def __init__(self) -> None:
        self.first = ""
        self.repairs: list[str] = []

    def __call__(self, prompt: str) -> str:
        if REPAIR_MARK in prompt.rsplit("<|im_start|>user", 1)[-1]:
            return self.repairs.pop(0)
        return self.first


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def client(scripted, script):
    with scripted(script, contracts=["contracts.examples"]) as c:
        yield c


# What a customer said, for the grounded fields of open_dispute: the values a call may copy.
# (Dates in the future are no operation date: with grounding on, the grammar never offers
# them, so the repair tests below turn grounding off to reach the validator at all.)
DISPUTE = ("My card ending 4417 was charged 10 on 2099-01-01 (or was it 2098-01-01 or "
           "2097-01-01?) and I did not make it.")
UNGROUNDED = {"grounding": False}
YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()


def call(client, tool, *, headers=None, said="help", **extra):
    body = {"model": "scripted", "messages": [{"role": "user", "content": said}],
            "tools": [{"type": "function", "function": {"name": tool}}],
            "tool_choice": "required", **extra}
    return client.post("/v1/chat/completions", json=body, headers=headers or {})


def only_call(resp):
    assert resp.status_code == 200, resp.text
    (tc,) = resp.json()["choices"][0]["message"]["tool_calls"]
    return tc["function"]["name"], json.loads(tc["function"]["arguments"])


def test_contracts_are_warmed_at_startup(client, script):
    script.first = '[{"name":"search_products","arguments":{"query":"lego","category":"toys"}}]'
    stats = client.get("/health").json()["grammar_cache"]
    assert stats["entries"] == 32 and stats["misses"] == 32  # 8 contracts x 4 call grammars
    resp = call(client, "search_products")  # the first request finds its grammar compiled
    assert resp.headers["X-StrictCall-Grammar-Cache"] == "hit"
    script.first = '[]'  # the "auto" decision pass is warm too
    auto = client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "search_products"}}]})
    assert auto.headers["X-StrictCall-Grammar-Cache"] == "hit"


@pytest.mark.parametrize("reasoning", [0, None])  # None: the family's default (it thinks)
def test_a_family_server_warms_the_grammars_its_requests_use(model_dir, script, reasoning):
    """Warm-up plans as requests do, in the served family's syntax and under its reasoning
    default: a Qwen3 server's first contract request finds its grammar compiled, forced
    and "auto" (warming SmolLM2's list grammars left it cold)."""
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"],
                        model_format="qwen_3", reasoning=reasoning)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, script))
    script.first = ("A search.\n</think>\n\n" if reasoning is None else "") + (
        '<tool_call>\n{"name": "search_products", "arguments": {"query": "lego", '
        '"category": "toys", "max_price": null}}\n</tool_call>')
    with TestClient(app) as c:
        warmed = c.get("/health").json()["grammar_cache"]["entries"]
        assert warmed >= 8  # each of the 8 contracts at least once
        forced = call(c, "search_products")
        assert forced.status_code == 200, forced.text
        assert forced.headers["X-StrictCall-Grammar-Cache"] == "hit"
        auto = c.post("/v1/chat/completions", json={
            "model": "scripted", "messages": [{"role": "user", "content": "lego, toys"}],
            "tools": [{"type": "function", "function": {"name": "search_products"}}]})
        assert auto.status_code == 200, auto.text
        assert auto.headers["X-StrictCall-Grammar-Cache"] == "hit"
        assert c.get("/health").json()["grammar_cache"]["entries"] == warmed


def test_valid_call_passes_without_repair(client, script):
    script.first = '[{"name":"search_products","arguments":{"query":"lego","category":"toys"}}]'
    resp = call(client, "search_products")
    assert only_call(resp) == ("search_products",
                               {"query": "lego", "category": "toys", "max_price": None})
    assert resp.json()["strictcall"] == {
        "contracts": [{"tool": "search_products", "repaired": False, "attempts": 1}],
        "repaired": False}


def test_semantic_violation_is_repaired_on_the_failing_field_only(client, script):
    script.first = ('[{"name":"reissue_card","arguments":'
                    '{"card_last4":"4417","city":"Kazan","branch_id":101}}]')
    script.repairs = ['{"branch_id":302}']
    resp = call(client, "reissue_card")
    assert only_call(resp)[1] == {"card_last4": "4417", "city": "Kazan", "branch_id": 302}
    assert resp.json()["strictcall"]["repaired"] is True
    engine = client.app.state.pipeline.engine
    repair_prompt = engine.prompts[-1]
    assert "branch 101 is not in Kazan" in repair_prompt and "Allowed: 301, 302" in repair_prompt


def test_repair_grammar_allows_only_the_listed_values(client, script):
    script.first = ('[{"name":"reissue_card","arguments":'
                    '{"card_last4":"4417","city":"Kazan","branch_id":101}}]')
    script.repairs = ['{"branch_id":101}']  # not among the allowed: the grammar refuses it
    assert_problem(call(client, "reissue_card"), 503, says="breaks the grammar")


def test_out_of_attempts_is_a_422_problem_with_every_attempt(client, script):
    script.first = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    script.repairs = ['{"operation_date":"2098-01-01"}', '{"operation_date":"2097-01-01"}']
    resp = call(client, "open_dispute", said=DISPUTE, strictcall=UNGROUNDED)
    body = assert_problem(resp, 422, says="broke its contract after 3 attempt(s)")
    assert body["retryable"] is False and body["owner_action_required"] is True
    assert body["type"] == problem_type("contract-violation")
    assert body["instance"] == "/v1/chat/completions"
    assert [a["arguments"]["operation_date"] for a in body["attempts"]] == [
        "2099-01-01", "2098-01-01", "2097-01-01"]
    assert body["violations"][0]["code"] == "semantic_mismatch"
    assert body["violations"][0]["pointer"] == "/operation_date"


def test_per_request_attempt_budget(client, script):
    script.first = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    resp = call(client, "open_dispute", said=DISPUTE,
                strictcall={**UNGROUNDED, "max_repair_attempts": 0})
    body = assert_problem(resp, 422)
    assert len(body["attempts"]) == 1


def test_per_request_time_budget(client, script):
    script.first = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    resp = call(client, "open_dispute", said=DISPUTE,
                strictcall={**UNGROUNDED, "repair_timeout_s": 1e-9})
    assert len(assert_problem(resp, 422)["attempts"]) == 1  # no time left for a repair


def test_a_missing_value_is_asked_for_never_invented(client, script):
    """A duplicate needs the original operation's id, which nobody gave: no repair writes
    one (the grammar holds only what the conversation has, here nothing: null); the answer
    asks for it by meaning, with what was collected so far."""
    said = "Yesterday my card ending 4417 was charged 10 twice."
    script.first = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    f'"operation_date":"{YESTERDAY}","amount":"10","reason":"duplicate",'
                    '"original_operation_id":null}}]')
    script.repairs = ['{"original_operation_id":"OP-000042"}']  # must never be asked for
    resp = call(client, "open_dispute", said=said)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and not choice["message"]["tool_calls"]
    assert "Which of the two charges came first?" in choice["message"]["content"]
    needs = resp.json()["strictcall"]["needs_input"]
    assert needs["tool"] == "open_dispute"
    assert needs["missing"] == [{"field": "/original_operation_id",
                                 "question": choice["message"]["content"]}]
    assert needs["collected"]["card_last4"] == "4417" and needs["collected"]["amount"] == "10"
    assert needs["collected"]["operation_date"] == YESTERDAY  # "Yesterday", as a date
    assert script.repairs == ['{"original_operation_id":"OP-000042"}']  # no repair decode
    assert "OP-000042" not in resp.text


def test_runtime_fields_come_from_headers_never_from_the_model(client, script):
    script.first = ('[{"name":"create_support_ticket","arguments":'
                    '{"title":"VPN down","queue":"ops","description":"since 9am"}}]')
    resp = call(client, "create_support_ticket",
                headers={"X-Tenant-Id": "acme", "Idempotency-Key": "k-1"})
    args = only_call(resp)[1]
    assert args["tenant_id"] == "acme" and args["idempotency_key"] == "k-1"
    script.first = ('[{"name":"create_support_ticket","arguments":{"title":"VPN down",'
                    '"queue":"ops","description":"since 9am","tenant_id":"evil"}}]')
    assert_problem(call(client, "create_support_ticket", headers={"X-Tenant-Id": "acme"}),
                   503, says="breaks the grammar")


def test_missing_runtime_header_is_400_before_decoding(client, script):
    script.first = "unused"
    engine = client.app.state.pipeline.engine
    before = len(engine.prompts)
    assert_problem(call(client, "create_support_ticket"), 400, param="X-Tenant-Id",
                   says="X-Tenant-Id")
    assert len(engine.prompts) == before


def test_contract_is_authoritative_over_client_parameters(client, script):
    script.first = '[{"name":"check_access_request_status","arguments":{"request_id":"AR-000001"}}]'
    body = {"model": "scripted", "messages": [{"role": "user", "content": "AR-000001 status?"}],
            "tool_choice": "required", "tools": [{"type": "function", "function": {
                "name": "check_access_request_status", "parameters": {
                    "type": "object", "properties": {"anything": {"type": "string"}}}}}]}
    resp = client.post("/v1/chat/completions", json=body)
    assert only_call(resp)[1] == {"request_id": "AR-000001"}


def test_contracts_endpoint_lists_schemas(client):
    data = client.get("/v1/contracts").json()["data"]
    ticket = next(c for c in data if c["name"] == "create_support_ticket")
    assert "tenant_id" not in ticket["parameters"]["properties"]
    assert ticket["runtime_fields"]["tenant_id"] == {"source": "header",
                                                     "header": "X-Tenant-Id",
                                                     "claim": "tenant"}


MONTH_AGO = (clock.today() - dt.timedelta(days=30)).isoformat()  # never in the future


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"card_last4": "•• 4417", "operation_date": MONTH_AGO, "amount": "1 200,50 ₽",
      "reason": "Duplicate", "original_operation_id": "OP-123456"},
     {"card_last4": "4417", "operation_date": MONTH_AGO, "amount": "1200.50",
      "reason": "duplicate", "original_operation_id": "OP-123456"}),
])
def test_validate_endpoint_normalizes(client, arguments, expected):
    body = client.post("/v1/contracts/open_dispute/validate",
                       json={"arguments": arguments}).json()
    assert body == {"valid": True, "arguments": expected, "violations": []}


def test_validate_endpoint_explains(client):
    body = client.post("/v1/contracts/open_dispute/validate", json={"arguments": {
        "card_last4": "4417", "operation_date": "вчера", "amount": "5",
        "reason": "stolen"}}).json()
    assert body["valid"] is False and body["arguments"] is None
    (v,) = body["violations"]
    assert v["allowed"] == ["duplicate", "fraud", "not_received", "wrong_amount"]


def test_validate_endpoint_errors(client):
    assert_problem(client.post("/v1/contracts/nope/validate", json={"arguments": {}}), 404,
                   says="no contract named 'nope'")
    assert_problem(client.post("/v1/contracts/open_dispute/validate", json={}), 400,
                   param="arguments")


def test_repair_schema_narrows_and_requires():
    schema = load_contracts(["contracts.examples"]).get("open_dispute").schema()
    violations = (
        Violation("/original_operation_id", "cross_field", None, "an id", "needed"),
        Violation("/reason", "invalid_enum", "x", ["fraud", "duplicate"], "bad"),
    )
    out = repair_schema(schema, violations)
    assert out["required"] == ["original_operation_id", "reason"]
    assert out["properties"]["reason"] == {"enum": ["fraud", "duplicate"]}
    original = out["properties"]["original_operation_id"]  # never forced: null stays
    assert {"type": "null"} in original["anyOf"]
    # A violation that names no field asks for nothing to be written again.
    whole = repair_schema(schema, (Violation("", "cross_field", None, None, "no"),))
    assert whole["properties"] == {} and whole["required"] == []


def test_a_rule_with_a_schema_of_its_own_narrows_the_repair_to_it():
    """A past check-in: its rule gives the dates on or after today as a pattern, which the
    repair decodes under in place of the format (a format beside a pattern is followed
    alone); the problem's violation does not show it."""
    contract = load_contracts(["contracts.examples"]).get("book_hotel")
    today = clock.today()
    outcome = contract.validate({"city": "Paris", "check_in": "2012-02-20", "nights": 2,
                                 "guests": 2}, runtime={}, today=today)
    (violation,) = outcome.violations
    assert violation.pointer == "/check_in" and violation.grammar is not None
    assert "grammar" not in violation.as_dict()
    node = repair_schema(contract.schema(), (violation,))["properties"]["check_in"]
    assert "format" not in node and node["pattern"] == violation.grammar["pattern"]
    pattern = re.compile(node["pattern"])
    assert pattern.match(today.isoformat()) and not pattern.match("2012-02-20")
    assert not pattern.match((today - dt.timedelta(days=1)).isoformat())
    kept = repair_schema(contract.schema(), (violation,), keep_null=["check_in"])
    assert {"type": "null"} in kept["properties"]["check_in"]["anyOf"]


def test_repair_prompt_writes_the_call_in_the_models_own_syntax(model_dir, script):
    """A repair prompt shows the model its earlier call as the model's format writes calls
    (here Qwen3's, with a template that does not render tools), never SmolLM2's list."""
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"],
                        model_format="qwen_3", reasoning=0)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, script))
    script.first = ('<tool_call>\n{"name": "reissue_card", "arguments": {"card_last4": "4417", '
                    '"city": "Kazan", "branch_id": 101}}\n</tool_call>')
    script.repairs = ['{"branch_id":302}']
    with TestClient(app) as c:
        resp = call(c, "reissue_card")
        assert only_call(resp)[1]["branch_id"] == 302
        repair_prompt = c.app.state.pipeline.engine.prompts[-1]
    assert '<tool_call>\n{"name": "reissue_card", "arguments": {"card_last4": "4417"' \
        in repair_prompt
    assert "<tool_call>[" not in repair_prompt


def test_what_repair_costs_is_counted(client, script):
    """Repair decodes are the request's own: in `usage` (with a `strictcall.repair`
    breakdown) and in the metrics, per tool and per field."""
    script.first = ('[{"name":"reissue_card","arguments":'
                    '{"card_last4":"4417","city":"Kazan","branch_id":101}}]')
    script.repairs = ['{"branch_id":302}']
    body = call(client, "reissue_card").json()
    repair = body["strictcall"]["repair"]
    assert repair["attempts"] == 1 and repair["prompt_tokens"] > 0 \
        and repair["completion_tokens"] > 0
    usage = body["usage"]
    first_prompt = usage["prompt_tokens"] - repair["prompt_tokens"]
    assert first_prompt > 0 and usage["total_tokens"] == \
        usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] > repair["completion_tokens"]
    metrics = client.get("/metrics").text
    assert 'strictcall:repair_tokens_total{tool="reissue_card"} ' \
        f'{float(repair["prompt_tokens"] + repair["completion_tokens"])}' in metrics
    assert 'strictcall:contract_first_attempts_total{tool="reissue_card",valid="false"} 1.0' \
        in metrics
    assert 'strictcall:contract_field_violations_total{code="semantic_mismatch",' \
        'pointer="/branch_id",tool="reissue_card"} 1.0' in metrics


class FrozenClock:
    """The rate limiter's clock, held still: no bucket refills between two requests."""

    def __call__(self) -> float:
        return 1000.0


def test_repair_tokens_are_charged_to_the_callers_key(scripted, script, tmp_path):
    """The key's token bucket pays for the repair decode too. Its rate is set to what the
    first decode alone costs plus one token: were the repair not charged, a second request
    would still be admitted; charged, the bucket is below zero and the key gets a 429."""
    script.first = ('[{"name":"reissue_card","arguments":'
                    '{"card_last4":"4417","city":"Kazan","branch_id":101}}]')
    key = "sk-repair-0123456789abcdef"
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys: [{{key: {key}, name: repairing}}]\n")
    bearer = {"Authorization": f"Bearer {key}"}

    def repaired_call(c):
        script.repairs = ['{"branch_id":302}']
        resp = call(c, "reissue_card", headers=bearer)
        assert only_call(resp)[1]["branch_id"] == 302
        return resp.json()

    with scripted(script, contracts=["contracts.examples"], api_keys_file=keys,
                  tokens_per_minute=10**6) as c:
        body = repaired_call(c)
    repair = body["strictcall"]["repair"]
    repair_tokens = repair["prompt_tokens"] + repair["completion_tokens"]
    first_decode = body["usage"]["total_tokens"] - repair_tokens
    assert repair_tokens > 1 and first_decode > 0

    with scripted(script, contracts=["contracts.examples"], api_keys_file=keys,
                  tokens_per_minute=first_decode + 1) as c:
        c.app.state.rate_limits.clock = FrozenClock()
        again = repaired_call(c)
        assert again["usage"] == body["usage"]  # the same request, the same cost
        refused = call(c, "reissue_card", headers=bearer)
    assert_problem(refused, 429, says=f"{first_decode + 1} tokens per minute")


@pytest.fixture()
def honest(scripted, script):
    with scripted(script, contracts=["tests.server.pipeline.repair_contracts"]) as c:
        yield c


def test_a_value_a_rule_needs_is_asked_for_even_when_unmarked(honest, script):
    """`note` is optional and not marked: a rule needs it above 1000. Repair does not force
    the model to write one (it would be made up); the user is asked, by meaning."""
    script.first = ('[{"name":"send_transfer","arguments":'
                    '{"payee":"landlord","amount":1500,"note":null}}]')
    script.repairs = ['{"note":"rent"}']  # must never be asked for
    resp = call(honest, "send_transfer", said="send 1500 to my landlord")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert not body["choices"][0]["message"].get("tool_calls")
    needs = body["strictcall"]["needs_input"]
    assert needs["missing"] == [{"field": "/note", "question":
                                 "Please tell me: why the money is sent."}]
    assert needs["collected"] == {"payee": "landlord", "amount": 1500}
    assert script.repairs == ['{"note":"rent"}']  # no repair decode


def test_a_violation_that_names_no_field_redecodes_nothing(honest, script):
    script.first = '[{"name":"weekend_only","arguments":{"day":"monday","hours":2}}]'
    script.repairs = ['{"day":"saturday","hours":2}']  # must never be asked for
    body = assert_problem(call(honest, "weekend_only"), 422,
                          says="this only happens at weekends")
    assert len(body["attempts"]) == 1 and body["violations"][0]["pointer"] == ""
    assert script.repairs == ['{"day":"saturday","hours":2}']
