"""Slots across turns, over a ScriptedEngine walked through the real grammar: a session's
filled values are pinned (a script that tries to null or change one is refused by the
grammar itself), tool results fill what is missing, a change goes only to the field the
user meant and is reported (reversible tool) or put to the user as a question showing both
values (irreversible), read in their language; a completed call ends the intent; slots
expire by an injected clock, are reset on request or when the intent moves to another
write tool, and are never another tenant's."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest

from contracts import clock
from tests.scripted import Replies

DISPUTE = "yesterday my card •• 4417 was charged 1 200,50 twice"
TODAY = clock.today().isoformat()
# "30.11": the latest 30 November that is not in the future (a dispute is about the past)
NOV_30 = max(d for d in (dt.date(clock.today().year - i, 11, 30) for i in (0, 1))
             if d <= clock.today()).isoformat()
YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()
ORDER = ("card_last4", "operation_date", "amount", "reason", "original_operation_id")
TOOLS = [{"type": "function", "function": {"name": n}} for n in
         ("open_dispute", "reissue_card", "check_access_request_status")]
FORCED = {"type": "function", "function": {"name": "open_dispute"}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "days": {"type": "integer", "minimum": 1, "x-strictcall-grounded": True}},
        "required": ["city", "days"]}}}
KEYS = [{"key": "sk-acme-agent-0123456789", "name": "agent", "tenant": "acme"},
        {"key": "sk-acme-other-0123456789", "name": "other", "tenant": "acme"},
        {"key": "sk-globex-agent-01234567", "name": "rival", "tenant": "globex"}]


def dispute(**values) -> str:
    arguments = {k: values.get(k) for k in ORDER}
    return '[{"name":"open_dispute","arguments":' + json.dumps(
        arguments, separators=(",", ":"), ensure_ascii=False) + "}]"


def call(name: str, **arguments) -> str:
    return json.dumps([{"name": name, "arguments": arguments}], separators=(",", ":"))


FIRST = dispute(card_last4="4417", operation_date=YESTERDAY, amount="1200.50",
                reason="duplicate")
KNOWN = {"card_last4": "4417", "operation_date": YESTERDAY, "amount": "1200.50",
         "reason": "duplicate"}
WHOLE = dispute(**KNOWN, original_operation_id="OP-204518")


@pytest.fixture(scope="module")
def replies():
    return Replies()


@pytest.fixture(scope="module")
def client(scripted, replies):
    with scripted(replies, contracts=["contracts.examples"], state_url="memory://") as c:
        yield c


class Dialogue:
    """One Chat Completions conversation in a session: the client keeps the messages."""

    def __init__(self, client, replies, session: str, *, tools=None, choice=None,
                 headers=None) -> None:
        self.client, self.replies, self.session = client, replies, session
        self.tools, self.choice = tools or TOOLS, choice or FORCED
        self.headers = headers or {}
        self.messages: list[dict] = []

    def send(self, reply: str, *, user: str | None = None, tool: str | None = None,
             status: int = 200, **options) -> dict:
        if user is not None:
            self.messages.append({"role": "user", "content": user})
        if tool is not None:  # a lookup the agent made: its call and result
            self.messages += [{"role": "assistant", "tool_calls": [{
                "id": "call_look", "type": "function",
                "function": {"name": "find_operations", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_look", "content": tool}]
        self.replies.text = reply
        resp = self.client.post("/v1/chat/completions", headers=self.headers, json={
            "model": "scripted", "messages": self.messages, "tools": self.tools,
            "tool_choice": self.choice,
            "strictcall": {"session": self.session, **options}})
        assert resp.status_code == status, resp.text
        if status != 200:
            return resp.json()
        body = resp.json()
        message = body["choices"][0]["message"]
        self.messages.append({k: v for k, v in message.items() if v is not None})
        return body


def slots(body: dict) -> dict:
    return body["strictcall"]["slots"]


def arguments(body: dict) -> dict:
    (c,) = body["choices"][0]["message"]["tool_calls"]
    return json.loads(c["function"]["arguments"])


def test_the_dispute_collects_its_arguments_over_three_turns(client, replies):
    talk = Dialogue(client, replies, "three-turns")
    first = talk.send(FIRST, user=DISPUTE)
    assert "came first" in first["choices"][0]["message"]["content"]
    assert slots(first)["filled"] == KNOWN
    assert [m["field"] for m in slots(first)["missing"]] == ["/original_operation_id"]
    second = talk.send(dispute(**KNOWN), user="yes, both at the coffee shop")
    assert slots(second)["filled"] == KNOWN and not second["choices"][0]["message"].get(
        "tool_calls")
    third = talk.send(WHOLE, tool="OP-204518 coffee shop 1 200,50 (the first one)")
    assert arguments(third) == {**KNOWN, "original_operation_id": "OP-204518"}
    assert slots(third)["missing"] == [] and slots(third)["changed"] == []
    assert slots(third)["ended"] is True  # the call completes the intent


def test_a_filled_value_cannot_be_decoded_as_null_or_changed_unseen(client, replies):
    """The grammar pins filled values: a model that writes null for the card, or another
    amount nobody said since, is refused by the mask itself (the scripted engine says
    which token broke the grammar), with grounding on or off."""
    talk = Dialogue(client, replies, "pinned")
    talk.send(FIRST, user=DISPUTE)
    for options in ({}, {"grounding": False}):
        nulled = talk.send(dispute(**{**KNOWN, "card_last4": None}), status=503,
                           user="yes, both at the coffee shop", **options)
        assert "breaks the grammar" in nulled["detail"]
        talk.messages.pop()
        other = talk.send(dispute(**{**KNOWN, "amount": "1200.00"}), status=503,
                          user="yes, both at the coffee shop", **options)
        assert "breaks the grammar" in other["detail"]
        talk.messages.pop()
    kept = talk.send(dispute(**KNOWN), user="yes, both at the coffee shop")
    assert slots(kept)["filled"] == KNOWN


def test_a_tool_result_fills_but_never_changes_a_filled_value(client, replies):
    talk = Dialogue(client, replies, "tool-result")
    talk.send(FIRST, user=DISPUTE)
    refused = talk.send(dispute(**{**KNOWN, "amount": "89.90"}, original_operation_id=
                                "OP-204518"), status=503,
                        tool="OP-204518 1 200,50; bookstore 89,90")
    assert "breaks the grammar" in refused["detail"]  # 89.90 is in the result, not said
    talk.messages = talk.messages[:-2]
    whole = talk.send(WHOLE, tool="OP-204518 1 200,50; bookstore 89,90")
    assert arguments(whole)["amount"] == "1200.50" and slots(whole)["changed"] == []


@pytest.fixture()
def changed_amount(client, replies):
    """A dispute waiting for the original operation's id, then the user changes the amount
    (and gives the id): the confirmation question."""
    talk = Dialogue(client, replies, f"change-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    asked = talk.send(dispute(**{**KNOWN, "amount": "1300.00"},
                              original_operation_id="OP-204518"),
                      user="sorry, the amount was 1 300,00; the first one was OP-204518")
    return talk, asked


def test_an_irreversible_change_is_a_question_showing_both_values(changed_amount):
    _, asked = changed_amount
    message = asked["choices"][0]["message"]
    assert not message.get("tool_calls") and asked["choices"][0]["finish_reason"] == "stop"
    assert "1200.50" in message["content"] and "1300.00" in message["content"]
    (waiting,) = slots(asked)["confirm"]  # only the field that changed, not the card
    assert {k: waiting[k] for k in ("field", "old", "new")} == \
        {"field": "/amount", "old": "1200.50", "new": "1300.00"}
    assert slots(asked)["filled"]["amount"] == "1200.50"  # not changed until confirmed
    assert slots(asked)["filled"]["original_operation_id"] == "OP-204518"  # collected
    assert asked["strictcall"]["needs_input"]["confirm"][0]["value"] == "1300.00"


def test_a_changed_amount_pins_the_card(changed_amount, client, replies):
    """The amount the user corrected is no card number: the card stays pinned."""
    talk, _ = changed_amount
    talk.messages.pop()
    refused = talk.send(dispute(**{**KNOWN, "amount": "1300.00", "card_last4": "1300"},
                                original_operation_id="OP-204518"), status=503,
                        user="sorry, the amount was 1 300,00; the first one was OP-204518")
    assert "breaks the grammar" in refused["detail"]


@pytest.mark.parametrize(("answer", "amount"), [
    ("yes", "1300.00"), ("да, верно", "1300.00"), ("Yes, no problem", "1300.00"),
    ("Да, не против", "1300.00"), ("go ahead", "1300.00"), ("1 300,00 is right", "1300.00"),
    ("no, keep the old one", "1200.50"), ("нет, оставьте как было", "1200.50"),
    ("it was 1 200,50 after all", "1200.50")])
def test_the_users_answer_decides_the_change(changed_amount, answer, amount):
    talk, _ = changed_amount
    done = talk.send(dispute(**{**KNOWN, "amount": amount}, original_operation_id="OP-204518"),
                     user=answer)
    assert arguments(done)["amount"] == amount and slots(done)["confirm"] == []
    assert slots(done)["changed"] == ([{"field": "/amount", "old": "1200.50",
                                        "new": "1300.00"}] if amount == "1300.00" else [])


@pytest.mark.parametrize("answer", ["what time is it?", "yes, no wait", "не знаю"])
def test_an_unclear_answer_is_asked_again_never_sent(changed_amount, answer):
    talk, _ = changed_amount
    again = talk.send(dispute(**KNOWN, original_operation_id="OP-204518"), user=answer)
    assert not again["choices"][0]["message"].get("tool_calls")
    assert slots(again)["confirm"][0]["new"] == "1300.00"


def test_a_third_value_is_the_next_change_to_confirm(changed_amount):
    talk, _ = changed_amount
    third = talk.send(dispute(**{**KNOWN, "amount": "1400.00"},
                              original_operation_id="OP-204518"),
                      user="hm, 1 400,00 actually")
    assert [c["new"] for c in slots(third)["confirm"]] == ["1400.00"]


def test_a_russian_dialogue_is_asked_and_confirmed_in_russian(client, replies):
    talk = Dialogue(client, replies, f"ru-{uuid.uuid4().hex}")
    first = talk.send(FIRST, user="вчера с карты •• 4417 списали 1 200,50 ₽ дважды")
    assert first["choices"][0]["message"]["content"].startswith("Какое из двух списаний")
    asked = talk.send(dispute(**{**KNOWN, "amount": "1300.00"},
                              original_operation_id="OP-204518"),
                      user="ой, сумма была 1 300,00, а первая операция OP-204518")
    question = asked["choices"][0]["message"]["content"]
    assert "сумма операции" in question and "да или нет" in question
    assert asked["strictcall"]["needs_input"]["language"] == "ru"
    done = talk.send(dispute(**{**KNOWN, "amount": "1300.00"},
                             original_operation_id="OP-204518"), user="Да, не против")
    assert arguments(done)["amount"] == "1300.00"


def test_a_value_restated_for_another_field_changes_nothing(client, replies):
    """"card 4417, I said": 4417 could be an amount, but it is the card's filled value, so
    it is no new amount (no confirmation question)."""
    talk = Dialogue(client, replies, f"restated-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    restated = talk.send(dispute(**KNOWN), user="card 4417, I said")
    assert slots(restated)["filled"] == KNOWN
    assert slots(restated)["changed"] == [] and slots(restated)["confirm"] == []
    refused = talk.send(dispute(**{**KNOWN, "amount": "4417"}), status=503,
                        user="card 4417, I said")
    assert "breaks the grammar" in refused["detail"]


def test_a_completed_call_ends_the_intent(client, replies):
    """The next dispute in the session starts from the conversation, not from the last
    call's arguments: its reason and ids are not pinned, "30.11" is no card, and "the same
    card" still finds the card from before."""
    talk = Dialogue(client, replies, f"second-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    first = talk.send(WHOLE, tool="OP-204518, the first one")
    assert slots(first)["ended"] is True
    second = talk.send(dispute(card_last4="4417", operation_date=NOV_30,
                               amount="89.90", reason="fraud"),
                       user="another one, same card: 89,90 on 30.11 that I never made")
    assert arguments(second) == {"card_last4": "4417", "operation_date": NOV_30,
                                 "amount": "89.90", "reason": "fraud",
                                 "original_operation_id": None}
    assert slots(second)["changed"] == [] and slots(second)["confirm"] == []
    talk.messages.pop()
    refused = talk.send(dispute(card_last4="3011", operation_date=NOV_30,
                                amount="89.90", reason="fraud"), status=503,
                        user="another one, same card: 89,90 on 30.11 that I never made")
    assert "breaks the grammar" in refused["detail"]  # a date is no card
