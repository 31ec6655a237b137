"""Ask, don't invent, through the real server process and the official clients on the
embedded model: the shipped `open_dispute` contract (card, date and amount grounded, the
original operation's id grounded and asked for) never comes back with a value nobody gave,
greedy or sampled; where the model reads a duplicate, the answer is the question about the
original operation, with what was collected; given the id in the next turn, the call is
whole and valid. The same question arrives on Chat Completions, Responses and Messages,
streamed or not."""

from __future__ import annotations

import datetime as dt
import json

import anthropic
import pytest
from openai import OpenAI

from contracts import clock
from tests.live import MODEL

pytestmark = pytest.mark.slow

# (With "twice" alone the 135M model picks "fraud" or "not_received" for the reason: no
# question to ask; tests/server/dialogue/test_conversation_e2e.py asks in Russian.)
DISPUTE = "yesterday my card •• 4417 was charged 1 200,50 twice, a duplicate: refund the " \
          "second one"
YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()
GIVEN = {"card_last4": "4417", "operation_date": YESTERDAY, "amount": "1200.50"}
TOOLS = [{"type": "function", "function": {"name": "open_dispute"}}]
FORCED = {"type": "function", "function": {"name": "open_dispute"}}
QUESTION = "Which of the two charges came first?"


def _dispute(live_client: OpenAI, messages: list[dict], **extra) -> dict:
    raw = live_client.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS, tool_choice=FORCED, max_tokens=200,
        **extra)
    return json.loads(raw.text)


def _what_came_back(body: dict) -> dict:
    """The call's arguments, or what the question says was collected (the question then
    asks for each field it left out)."""
    message = body["choices"][0]["message"]
    if message.get("tool_calls"):
        (call,) = message["tool_calls"]
        return json.loads(call["function"]["arguments"])
    needs = body["strictcall"]["needs_input"]
    assert needs["tool"] == "open_dispute" and needs["missing"]
    assert message["content"] == "\n".join(m["question"] for m in needs["missing"])
    return needs["collected"]


def test_greedy_asks_about_the_original_operation(live_client):
    body = _dispute(live_client, [{"role": "user", "content": DISPUTE}])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and not choice["message"].get("tool_calls")
    assert QUESTION in choice["message"]["content"]
    collected = _what_came_back(body)
    assert {k: collected.get(k) for k in GIVEN} == GIVEN


@pytest.mark.parametrize("seed", range(8))
def test_sampled_never_returns_a_value_nobody_gave(live_client, seed):
    """Temperature 1: the reason is the model's choice (and only a duplicate needs the
    original's id), but card, date and amount are the user's, and no id is made up."""
    body = _dispute(live_client, [{"role": "user", "content": DISPUTE}], temperature=1.0,
                    seed=seed)
    got = _what_came_back(body)  # a field it left "not given" is asked for, not made up
    assert {k: v for k, v in got.items() if k in GIVEN} == \
        {k: v for k, v in GIVEN.items() if k in got}, got
    assert got.get("original_operation_id") is None and "OP-" not in json.dumps(got)
    # Nor is what the user gave asked for: a server that asks for everything fails here.
    # (Before the one value the user's words give a required field was "given", the model
    # left the amount "not given" at seeds 1 and 6, and the user was asked for it.)
    needs = body.get("strictcall", {}).get("needs_input") or {}
    assert not {m["field"] for m in needs.get("missing", ())} & \
        {"/card_last4", "/operation_date", "/amount"}, needs


def test_given_the_id_in_the_next_turn_the_call_is_whole(live_client):
    turns = [{"role": "user", "content": DISPUTE},
             {"role": "assistant", "content": QUESTION},
             {"role": "user", "content": "The first one was OP-204518."}]
    body = _dispute(live_client, turns)
    message = body["choices"][0]["message"]
    assert body["choices"][0]["finish_reason"] == "tool_calls", message
    (call,) = message["tool_calls"]
    arguments = json.loads(call["function"]["arguments"])
    assert {k: arguments[k] for k in GIVEN} == GIVEN
    assert arguments["reason"] == "duplicate"
    assert arguments["original_operation_id"] == "OP-204518"


TODAY = clock.today().isoformat()
# Each prompt with the value of each grounded field it gives, written by hand (None: the
# prompt gives none, so a value there is invented). Amounts as the contract writes them
# (contracts/examples.py amount_text: "1,200.50" is "1200.50", "15 000 ₽" is "15000").
DISPUTES = ("card_last4", "operation_date", "amount", "original_operation_id")
PROMPTS = [
    ("Yesterday my card ending 4417 was charged 1,200.50 twice at the coffee shop.",
     "open_dispute", ("4417", YESTERDAY, "1200.50", None)),
    ("Card 5555, I never received the parcel I paid 89.90 for on 2026-11-20.",
     "open_dispute", ("5555", "2026-11-20", "89.90", None)),
    ("Someone used my card •• 0001 for 15 000 ₽ today, that was not me!",
     "open_dispute", ("0001", TODAY, "15000", None)),
    ("вчера с карты 7788 списали 350 ₽, а товар не пришёл",
     "open_dispute", ("7788", YESTERDAY, "350", None)),
    ("Please dispute the payment, I did not make it.",
     "open_dispute", (None, None, None, None)),
    ("What is the status of access request AR-004217?",
     "check_access_request_status", ("AR-004217",)),
    ("Is my access request stuck? It is the payroll one.",
     "check_access_request_status", (None,)),
]
GROUNDED = {"open_dispute": DISPUTES, "check_access_request_status": ("request_id",)}


@pytest.mark.parametrize("seed", range(3))
def test_an_invented_identifier_cannot_be_decoded(live_client, seed):
    """Over many prompts, sampled: every grounded value that comes back, in a call or
    collected for a question, is the value the user gave that field (a value where the
    user gave none, or another value, is invented: "1" or "50" of "1,200.50" too); and
    values do come back, each the user's."""
    tools = [{"type": "function", "function": {"name": n}} for n in GROUNDED]
    given = 0
    for prompt, tool, gold in PROMPTS:
        raw = live_client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], tools=tools,
            tool_choice={"type": "function", "function": {"name": tool}}, temperature=1.0,
            seed=seed, max_tokens=200)
        body = json.loads(raw.text)
        message = body["choices"][0]["message"]
        found: list[tuple[str, dict]] = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []]
        needs = (body.get("strictcall") or {}).get("needs_input")
        if needs:
            found.append((needs["tool"], needs["collected"]))
        assert [name for name, _ in found] == [tool], body  # the call, or one question
        for name, expected in zip(GROUNDED[tool], gold, strict=True):
            value = found[0][1].get(name)
            assert value in (expected, None), (prompt, name, value, expected)
            given += value is not None
    # Not vacuous: the users' values came back, each its own field's. 13 are given; the
    # model leaves some "not given" (asked for) at temperature 1: 9 to 13 seen, seeds 0-14.
    assert given >= 6, given


def test_the_question_on_every_api_and_stream(live_client, live_server):
    """Chat Completions (plain, streamed), Responses (plain, streamed), Messages (plain,
    streamed): the question as the answer's text, `needs_input` in the extension."""
    stream = live_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": DISPUTE}], tools=TOOLS,
        tool_choice=FORCED, max_tokens=200, stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert QUESTION in text
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["strictcall"]["needs_input"]["tool"] == "open_dispute"

    tool = {"type": "function", "name": "open_dispute", "parameters": None}
    forced = {"type": "function", "name": "open_dispute"}
    response = live_client.responses.create(model=MODEL, input=DISPUTE, tools=[tool],
                                       tool_choice=forced, max_output_tokens=200)
    assert QUESTION in response.output_text
    assert [i.type for i in response.output] == ["message"]
    assert response.model_extra["strictcall"]["needs_input"]["collected"]["amount"] == \
        "1200.50"
    with live_client.responses.stream(model=MODEL, input=DISPUTE, tools=[tool],
                                 tool_choice=forced, max_output_tokens=200) as events:
        final = events.get_final_response()
    assert QUESTION in final.output_text

    with anthropic.Anthropic(base_url=live_server, api_key="unused", max_retries=0,
                             timeout=300) as claude:
        ask = {"messages": [{"role": "user", "content": DISPUTE}], "max_tokens": 200,
               "tools": [{"name": "open_dispute", "input_schema": {"type": "object"}}],
               "tool_choice": {"type": "tool", "name": "open_dispute"}, "model": MODEL}
        message = claude.messages.create(**ask)
        assert [b.type for b in message.content] == ["text"]
        assert QUESTION in message.content[0].text and message.stop_reason == "end_turn"
        assert message.model_extra["strictcall"]["needs_input"]["tool"] == "open_dispute"
        with claude.messages.stream(**ask) as events:
            streamed = events.get_final_message()
        assert QUESTION in streamed.content[0].text
