"""Contracts through the real server and the `openai` client, on the embedded model."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from contracts import ContractRegistry
from tests.live import MODEL

pytestmark = pytest.mark.slow

PROMPTS = [
    ("open_dispute", "I was charged twice: 1 200,50 rub yesterday on my card ending 4417."),
    ("open_dispute", "Card 9921: a payment of 35.99 on 2026-11-20 was fraud."),
    ("reissue_card", "Reissue my card 4417, I will pick it up in Kazan at branch 101."),
    ("reissue_card", "I live in Moscow, please reissue card 5512 to branch 102."),
    ("search_products", "Find a lego set for kids under 40."),
    ("check_access_request_status", "What is the status of access request AR-004217?"),
    ("create_support_ticket", "Open an ops ticket: the VPN is down since 9am."),
]
# Contracts whose every rule the grammar enforces (check_access_request_status: one bounded
# pattern, no validator): any call the model can write is valid, so its valid path must be
# taken. The floor of the "valid or refused" checks: a server that always refuses fails.
GRAMMAR_DECIDES = {"check_access_request_status"}


@pytest.fixture(scope="module")
def registry():
    reg = ContractRegistry()
    reg.load("contracts.examples")
    return reg


@pytest.fixture(scope="module")
def answers(live_client) -> dict[int, object]:
    """Each prompt's answer (or the 422 it got), asked once for the module's tests."""
    def ask(prompt: tuple[str, str]) -> object:
        tool, text = prompt
        try:
            return live_client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": text}], max_tokens=200,
                tools=[{"type": "function", "function": {"name": tool}}],
                tool_choice="required", extra_headers={"X-Tenant-Id": "acme"})
        except openai.UnprocessableEntityError as exc:  # out of repair attempts: a problem
            return exc

    with ThreadPoolExecutor(4) as pool:
        return dict(enumerate(pool.map(ask, PROMPTS)))


def _kind(answer: object) -> str:
    if isinstance(answer, openai.UnprocessableEntityError):
        return "refused"
    choice = answer.choices[0]  # type: ignore[attr-defined]
    if choice.finish_reason == "length":
        return "cut_off"
    if (answer.model_extra.get("strictcall") or {}).get("needs_input"):  # type: ignore[attr-defined]
        return "question"
    return "call"


@pytest.mark.parametrize("index", range(len(PROMPTS)), ids=[t for t, _ in PROMPTS])
def test_every_returned_contract_call_satisfies_its_validators(answers, registry, index):
    tool, _ = PROMPTS[index]
    contract, answer = registry.get(tool), answers[index]
    kind = _kind(answer)
    if kind == "refused":
        problem = answer.response.json()
        assert answer.response.headers["content-type"].startswith("application/problem+json")
        assert problem["owner_action_required"] is True and problem["attempts"]
        assert problem["violations"], problem
        assert tool not in GRAMMAR_DECIDES, f"a call the grammar makes valid was refused: {problem}"
        return
    choice = answer.choices[0]
    if kind == "cut_off":
        assert not choice.message.tool_calls
        assert tool not in GRAMMAR_DECIDES, "a bounded call was cut off"
        return
    if kind == "question":  # a question about a value the prompt does not give
        needs = answer.model_extra["strictcall"]["needs_input"]
        assert choice.finish_reason == "stop" and not choice.message.tool_calls
        assert needs["tool"] == tool and needs["missing"] and choice.message.content
        return
    (call,) = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    # The returned arguments are the validated model's JSON: validating them again holds.
    contract.model.model_validate(arguments)
    for field in contract.runtime:
        assert field in arguments
    if "tenant_id" in contract.runtime:
        assert arguments["tenant_id"] == "acme"
    assert answer.model_extra["strictcall"]["contracts"][0]["tool"] == tool


def test_the_prompts_were_answered_not_only_refused(answers):
    """The per-prompt checks pass on a refusal or a cut-off too: so many answers must be
    calls or questions that a server refusing (or cutting off) everything fails here."""
    kinds = [_kind(answers[i]) for i in range(len(PROMPTS))]
    print(f"\ncontract prompts: {kinds}")
    assert len(kinds) == len(PROMPTS)
    # Observed (llama.cpp engine, greedy, 2026-12-02): 5 calls, 1 question and 1 refusal
    # (the Kazan branch, the rule only the validator holds) of 7.
    assert kinds.count("call") + kinds.count("question") >= 5, kinds


def test_branch_outside_the_city_is_repaired_or_refused(live_client):
    """The model is asked for a branch that is not in the city: never a silent pass."""
    try:
        resp = live_client.chat.completions.create(
            model=MODEL, max_tokens=200,
            messages=[{"role": "user", "content": "Reissue card 4417 for pickup in Kazan at "
                                                  "branch 101."}],
            tools=[{"type": "function", "function": {"name": "reissue_card"}}],
            tool_choice={"type": "function", "function": {"name": "reissue_card"}})
    except openai.UnprocessableEntityError as exc:
        assert "reissue_card" in str(exc)
        # Refused for the city rule, the one rule the grammar leaves to the validator.
        violations = exc.response.json()["violations"]
        assert violations and all(v["pointer"] == "/branch_id" and
                                  v["code"] == "semantic_mismatch" for v in violations), violations
        return
    args = json.loads(resp.choices[0].message.tool_calls[0].function.arguments)
    from contracts.examples import BRANCHES

    assert args["branch_id"] in BRANCHES[args["city"]]


def test_missing_tenant_header_is_a_readable_400(live_client):
    with pytest.raises(openai.BadRequestError, match="X-Tenant-Id"):
        live_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "ticket please"}],
            tools=[{"type": "function", "function": {"name": "create_support_ticket"}}],
            tool_choice="required")
