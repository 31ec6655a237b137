"""The dispute as a dialogue through the real server process and the official `openai`
client on the embedded model, chained by previous_response_id: the card, the date and the
amount said in turn 1 are pinned while the call waits for the original operation's id; a
turn 2 that changes the amount is a question showing both amounts, never a silent change,
and the user's "yes" fills the new amount; the id comes from the statement the agent looked
up, and the one call carries every value; a second dispute after it starts from the
conversation (a completed call ends its intent).

The model is tiny: greedy, and shown the tool's JSON Schema (`tool_prompt: full`). It
reads "twice, a duplicate" as `reason: duplicate` (with "twice" alone it picks "fraud" or
"not_received": a complete call at turn 1, no question). What does not depend on the model
is asserted as such: the values carried between turns are pinned by the grammar, and the
change is read by rule."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from openai import OpenAI

from contracts import clock
from tests.live import MODEL

pytestmark = pytest.mark.slow

YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()
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
    first, calls, slots = _turn(client, "yesterday my card •• 4417 was charged 1 200,50 "
                                        "twice, a duplicate: refund the second one", None)
    assert calls == [] and "came first" in first.output_text
    assert {k: slots["filled"].get(k) for k in TURN_1} == TURN_1

    second, calls, slots = _turn(client, "sorry, the amount was 1 300,00", first.id)
    assert calls == [], "a changed amount of an irreversible write must be confirmed"
    assert "1200.50" in second.output_text and "1300.00" in second.output_text
    assert [(c["field"], c["old"], c["new"]) for c in slots["confirm"]] == [
        ("/amount", "1200.50", "1300.00")]  # only the amount: the card stays as it was
    assert slots["filled"]["amount"] == "1200.50"  # unchanged until the user says so

    third, calls, slots = _turn(client, "yes", second.id)
    assert slots["changed"] == [{"field": "/amount", "old": "1200.50", "new": "1300.00"}]
    assert slots["filled"]["amount"] == "1300.00"
    turn_1 = {**TURN_1, "amount": "1300.00"}
    if calls:  # the model may read "yes" as no duplicate after all: then the call is whole
        (arguments,) = calls
    else:
        assert slots["missing"][0]["field"] == "/original_operation_id"
        looked, calls, slots = _turn(client, LOOKUP, third.id)
        # Two operations fit: the user chooses, not the model (a write's field).
        assert calls == [] and "OP-204518" in looked.output_text and \
            "OP-204519" in looked.output_text
        fourth, calls, slots = _turn(client, "the second, OP-204519", looked.id)
        (arguments,) = calls  # one valid call
        assert arguments["original_operation_id"] in ("OP-204518", "OP-204519")
        assert fourth.model_extra["strictcall"]["contracts"][0]["tool"] == "open_dispute"
        third = fourth
    assert {k: arguments[k] for k in turn_1} == turn_1  # pinned since turn 1, and changed
    assert slots["ended"] is True

    _, calls, slots = _turn(client, "one more: card 5555 was charged 89,90 today, not me",
                            third.id)
    shown = calls[0] if calls else slots["filled"]
    assert shown.get("card_last4") == "5555"  # nothing of the first call is pinned
    assert shown.get("amount") in ("89.90", None)
    items = client.responses.input_items.list(third.id, order="asc", limit=100)
    assert [i.type for i in items.data][0] == "message"
