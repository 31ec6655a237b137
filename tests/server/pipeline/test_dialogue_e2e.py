"""The dispute as a dialogue through the real server process and the official `openai`
client on the embedded model, chained by previous_response_id: the card, the date and the
amount said in turn 1 reach the one call of turn 3, whose original operation id comes from
the statement the agent looked up; a turn 4 that changes the amount is a question showing
both amounts, never a silent new call, and the user's "yes" makes the call with it.

The model is tiny: greedy, and shown the tool's JSON Schema (`tool_prompt: full`). With
names and descriptions only (the server's default for a forced call) or the compact shape,
its greedy `reason` for "charged ... twice" is "not_received" or "fraud" (a complete call
at turn 1, no question), and with the compact shape it flips between "fraud" and
"duplicate" from one identical request to the next (the prefix cache's reused KV changes
the numerics); with the schema it read "duplicate" in every run here. What does not depend
on the model is asserted as such: the values carried between turns are pinned by the
grammar, and the change is read by rule."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from openai import OpenAI

from tests.live import MODEL

pytestmark = pytest.mark.slow

YESTERDAY = (dt.date.today() - dt.timedelta(days=1)).isoformat()
TURN_1 = {"card_last4": "4417", "operation_date": YESTERDAY, "amount": "1200.50"}
TOOLS = [{"type": "function", "name": "open_dispute", "parameters": None}]
FORCED = {"type": "function", "name": "open_dispute"}
STATEMENT = ("Card 4417, yesterday: OP-204518 coffee shop 1 200,50 (the first); "
             "OP-204519 coffee shop 1 200,50 (the second).")
LOOKUP = [{"type": "function_call", "call_id": "call_lookup", "name": "find_operations",
           "arguments": '{"card_last4": "4417"}'},
          {"type": "function_call_output", "call_id": "call_lookup", "output": STATEMENT}]


def _turn(client: OpenAI, said, previous: str | None):
    response = client.responses.create(
        model=MODEL, input=said, tools=TOOLS, tool_choice=FORCED, max_output_tokens=200,
        previous_response_id=previous, extra_body={"strictcall": {"tool_prompt": "full"}})
    calls = [json.loads(i.arguments) for i in response.output if i.type == "function_call"]
    slots = response.model_extra["strictcall"]["slots"]
    print(f"\n{json.dumps(said, ensure_ascii=False)[:70]} -> "
          f"{calls or response.output_text!r}")
    return response, calls, slots


def test_the_dispute_dialogue_over_previous_response_id(live_client):
    client = live_client
    first, calls, slots = _turn(client, "yesterday my card •• 4417 was charged "
                                             "1 200,50 twice", None)
    assert calls == [] and "came first" in first.output_text
    assert {k: slots["filled"].get(k) for k in TURN_1} == TURN_1
    second, calls, slots = _turn(client, "yes, both at the coffee shop", first.id)
    assert calls == [] and slots["missing"][0]["field"] == "/original_operation_id"
    third, calls, slots = _turn(client, LOOKUP, second.id)
    (arguments,) = calls  # one valid call
    assert {k: arguments[k] for k in TURN_1} == TURN_1  # from turn 1, pinned since
    assert arguments["reason"] == "duplicate"
    assert arguments["original_operation_id"] in ("OP-204518", "OP-204519")  # the statement's
    assert third.model_extra["strictcall"]["contracts"][0]["tool"] == "open_dispute"

    fourth, calls, slots = _turn(client, "sorry, the amount was 1 300,00", third.id)
    assert calls == [], "a changed amount of an irreversible write must not be a new call"
    assert "1200.50" in fourth.output_text and "1300.00" in fourth.output_text
    assert [(c["field"], c["old"], c["new"]) for c in slots["confirm"]] == [
        ("/amount", "1200.50", "1300.00")]
    assert slots["filled"]["amount"] == "1200.50"  # unchanged until the user says so

    _, calls, slots = _turn(client, "yes", fourth.id)
    (confirmed,) = calls
    assert confirmed == {**arguments, "amount": "1300.00"}
    assert slots["changed"] == [{"field": "/amount", "old": "1200.50", "new": "1300.00"}]
    items = client.responses.input_items.list(fourth.id, order="asc", limit=100)
    assert [i.type for i in items.data][:2] == ["message", "message"]
    assert len(items.data) == 8  # 4 inputs (the lookup is two), 3 earlier outputs, turn 4
