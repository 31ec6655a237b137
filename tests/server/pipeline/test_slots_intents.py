"""Slots over a ScriptedEngine, continued: a correction goes to the field it names, a value
naming no field in two is a question, a reversible change is made and reported; slots
expire, reset and end with another write tool or a message opening another event; never
another tenant's; a session in streams and the Messages API; the session's ledger of filed
writes (a correction after a filed dispute confirmed, then filed once; another dispute on
the same card a new intent); a client tool marked high-risk held like a contract."""

from __future__ import annotations

import json
import uuid

import pytest

from server.identity import KeyRing
from tests.scripted import Replies, assert_problem
from tests.server.pipeline.test_slots import (
    DISPUTE,
    FIRST,
    FORCED,
    KEYS,
    KNOWN,
    NOV_30,
    TODAY,
    TOOLS,
    WEATHER,
    WHOLE,
    Dialogue,
    arguments,
    call,
    changed_amount,
    client,
    dispute,
    replies,
    slots,
)

__all__ = ["changed_amount", "client", "replies"]  # fixtures, shared with test_slots.py


HOTEL = {"type": "function", "function": {"name": "book_hotel"}}


def hotel(**values) -> str:
    order = ("city", "check_in", "nights", "guests")
    return call("book_hotel", **{k: values.get(k) for k in order})


def test_a_correction_changes_only_the_field_it_names(client, replies):
    """"make it 5 nights" on a booking for 2 nights and 2 guests: the nights change, the
    guests stay 2 (the grammar refuses 5 there); "we land at 7 am" changes neither."""
    talk = Dialogue(client, replies, f"hotel-{uuid.uuid4().hex}", tools=[HOTEL], choice=HOTEL)
    first = talk.send(hotel(city="Paris", nights=2, guests=2),
                      user="A hotel in Paris for 2 nights, 2 guests")
    assert [m["field"] for m in slots(first)["missing"]] == ["/check_in"]
    for guests in (5, 7):
        refused = talk.send(hotel(city="Paris", nights=5, guests=guests), status=503,
                            user="make it 5 nights; we land at 7 am")
        assert "breaks the grammar" in refused["detail"]
        talk.messages.pop()
    moved = talk.send(hotel(city="Paris", nights=5, guests=2),
                      user="make it 5 nights; we land at 7 am")
    assert slots(moved)["changed"] == [{"field": "/nights", "old": 2, "new": 5}]
    assert slots(moved)["filled"]["guests"] == 2
    landed = talk.send(hotel(city="Paris", nights=7, guests=2), status=503,
                       user="we land at 7 am")
    assert "breaks the grammar" in landed["detail"]


def test_a_value_that_names_no_field_in_two_fields_is_a_question(client, replies):
    talk = Dialogue(client, replies, f"hotel-{uuid.uuid4().hex}", tools=[HOTEL], choice=HOTEL)
    talk.send(hotel(city="Paris", nights=2, guests=2),
              user="A hotel in Paris for 2 nights, 2 guests")
    both = talk.send(hotel(city="Paris", nights=3, guests=3), user="hm, 3 actually")
    message = both["choices"][0]["message"]
    assert not message.get("tool_calls")
    (choose,) = both["strictcall"]["needs_input"]["choose"]
    assert choose["value"] == 3 and choose["fields"] == ["/nights", "/guests"]
    assert "number of nights or number of guests" in message["content"]
    assert slots(both)["filled"]["nights"] == 2 and slots(both)["filled"]["guests"] == 2
    one = talk.send(hotel(city="Paris", nights=2, guests=3), user="3 guests")
    assert slots(one)["changed"] == [{"field": "/guests", "old": 2, "new": 3}]


def test_a_reversible_change_replaces_the_value_and_says_so(client, replies):
    """A client tool (no catalog entry: reversible, the client runs it): a number the user
    restates becomes the new value (the model can neither keep the old one nor write a
    third); a free string is written freely; each change is in `slots.changed`."""
    talk = Dialogue(client, replies, "weather", tools=[WEATHER],
                    choice={"type": "function", "function": {"name": "get_weather"}})
    first = talk.send(call("get_weather", city="Paris", days=None), user="Weather in Paris?")
    assert [m["field"] for m in slots(first)["missing"]] == ["/days"]
    refused = talk.send(call("get_weather", city="London", days=3), status=503,
                        user="and what about London, for 2 days?")
    assert "breaks the grammar" in refused["detail"]  # 3: nobody said it
    talk.messages.pop()
    moved = talk.send(call("get_weather", city="London", days=2),
                      user="and what about London, for 2 days?")
    assert slots(moved)["changed"] == [{"field": "/city", "old": "Paris", "new": "London"}]
    assert arguments(moved) == {"city": "London", "days": 2}


def test_slots_expire_after_the_ttl_by_the_injected_clock(client, replies):
    sessions = client.app.state.sessions
    now = [sessions.now()]
    sessions.clock = lambda: now[0]
    try:
        talk = Dialogue(client, replies, "expiring")
        talk.send(FIRST, user=DISPUTE)
        now[0] += 1799
        kept = talk.send(dispute(**KNOWN), user="yes, both at the coffee shop")
        assert slots(kept)["expired"] == {} and slots(kept)["filled"] == KNOWN
        now[0] += 1800
        talk.messages = []
        later = talk.send(dispute(card_last4="5555", operation_date=TODAY, amount="10",
                                  reason="duplicate"),
                          user="card 5555 was charged 10 twice today")
        assert slots(later)["expired"] == {"open_dispute": sorted(KNOWN)}
        assert slots(later)["filled"]["card_last4"] == "5555"  # no question: expired
        assert slots(later)["changed"] == [] and slots(later)["confirm"] == []
    finally:
        sessions.clock = sessions.records.now


def test_reset_slots_forgets_what_was_collected(client, replies):
    talk = Dialogue(client, replies, "resetting")
    talk.send(FIRST, user=DISPUTE)
    talk.messages = []
    fresh = talk.send(dispute(card_last4="5555", operation_date=TODAY, amount="10",
                              reason="duplicate"),
                      user="card 5555 was charged 10 twice today", reset_slots=True)
    assert slots(fresh)["reset"] == {"why": "reset_slots", "tools": ["open_dispute"]}
    assert slots(fresh)["filled"]["amount"] == "10" and slots(fresh)["confirm"] == []


def test_a_message_opening_another_event_drops_an_unfinished_ones_slots(client, replies):
    """The first dispute waits for its operation id; «и ещё одна: ...» is another dispute,
    not a change of the first: no question about changed fields, nothing of the first
    pinned, and the report says the slots were reset for a new intent."""
    talk = Dialogue(client, replies, "another-event")
    first = talk.send(FIRST, user=DISPUTE)
    assert slots(first)["filled"] == KNOWN
    other = talk.send(dispute(card_last4="5566", operation_date=TODAY, amount="89.90",
                              reason="duplicate"),
                      user="и ещё одна: сегодня с карты 5566 дважды списали 89,90 ₽")
    assert slots(other)["reset"] == {"why": "new_intent", "tools": ["open_dispute"]}
    assert slots(other)["confirm"] == [] and slots(other)["changed"] == []
    assert slots(other)["filled"]["card_last4"] == "5566"
    assert slots(other)["filled"]["amount"] == "89.90"
    still = Dialogue(client, replies, "same-event")
    still.send(FIRST, user=DISPUTE)
    kept = still.send(dispute(**KNOWN), user="я ещё не знаю номер операции")
    assert slots(kept)["reset"] is None and slots(kept)["filled"] == KNOWN


def test_another_write_tool_ends_the_intent_and_a_lookup_does_not(client, replies):
    talk = Dialogue(client, replies, "intent", choice="required")
    talk.send(FIRST, user=DISPUTE)
    look = talk.send(call("check_access_request_status", request_id="AR-004217"),
                     user="also, what is the status of AR-004217?")
    assert slots(look)["reset"] is None
    talk.messages = talk.messages[:-1]  # (no tool result needed for the next turn)
    still = talk.send(dispute(**KNOWN), user="back to my dispute")
    assert slots(still)["filled"] == KNOWN
    switched = talk.send(call("reissue_card", card_last4="4417", city="Kazan", branch_id=301),
                         user="forget it, reissue my card 4417 in Kazan at branch 301")
    assert slots(switched)["reset"] == {"why": "intent", "from": "open_dispute",
                                        "to": "reissue_card"}
    assert slots(switched)["tool"] == "reissue_card"
    talk.messages = []
    again = talk.send(dispute(card_last4="5555", operation_date=TODAY, amount="10",
                              reason="duplicate"), user="card 5555 charged 10 twice today")
    assert slots(again)["confirm"] == [] and slots(again)["filled"]["card_last4"] == "5555"


def test_a_session_is_never_another_tenants(scripted):
    replies = Replies()
    with scripted(replies, contracts=["contracts.examples"], state_url="memory://",
                  app={"keys": KeyRing.of(KEYS)}) as c:
        def talk(key: str) -> Dialogue:
            return Dialogue(c, replies, "shared-id",
                            headers={"Authorization": f"Bearer {key}"})

        talk(KEYS[0]["key"]).send(FIRST, user=DISPUTE)
        colleague = talk(KEYS[1]["key"]).send(dispute(**KNOWN), user="yes, both")
        assert slots(colleague)["filled"] == KNOWN  # same tenant, same session
        rival = talk(KEYS[2]["key"]).send(dispute(card_last4="5555", operation_date=TODAY,
                                                  amount="10", reason="duplicate"),
                                          user="card 5555 charged 10 twice today")
        assert slots(rival)["filled"]["card_last4"] == "5555"  # no 4417: nothing shared
        assert slots(rival)["confirm"] == []


def test_a_streamed_confirmation_is_text_without_a_call(changed_amount, client, replies):
    talk, _ = changed_amount
    talk.messages.pop()  # the same turn again (a retry), streamed: asked again, not taken
    #                      as the user's answer
    replies.text = dispute(**{**KNOWN, "amount": "1300.00"}, original_operation_id="OP-204518")
    with client.stream("POST", "/v1/chat/completions", json={
            "model": "scripted", "messages": talk.messages, "tools": TOOLS,
            "tool_choice": FORCED, "stream": True,
            "strictcall": {"session": talk.session}}) as resp:
        chunks = [json.loads(line[6:]) for line in resp.iter_lines()
                  if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert not any(d.get("tool_calls") for d in deltas)
    assert "1300.00" in "".join(d.get("content") or "" for d in deltas)
    assert chunks[-1]["strictcall"]["slots"]["confirm"][0]["new"] == "1300.00"


def test_the_messages_api_takes_a_session_too(client, replies):
    ask = {"model": "scripted", "max_tokens": 200, "strictcall": {"session": "claude"},
           "tools": [{"name": "open_dispute", "input_schema": {"type": "object"}}],
           "tool_choice": {"type": "tool", "name": "open_dispute"}}
    replies.text = FIRST
    first = client.post("/v1/messages", json={**ask, "messages": [
        {"role": "user", "content": DISPUTE}]}).json()
    assert first["strictcall"]["slots"]["filled"] == KNOWN
    replies.text = dispute(**KNOWN)
    second = client.post("/v1/messages", json={**ask, "messages": [
        {"role": "user", "content": "yes, both at the coffee shop"}]}).json()
    assert second["strictcall"]["slots"]["filled"] == KNOWN  # from the session alone


def test_a_bad_session_id_is_a_400_naming_it(client):
    resp = client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": "hi"}],
        "strictcall": {"session": "not a valid id!"}})
    assert_problem(resp, 400, param="strictcall.session")


def test_a_correction_after_a_filed_dispute_is_confirmed_then_filed_once(client, replies):
    """The ledger: after the dispute was filed, the user corrects its amount. The model's
    new call (same card and day, a new amount) is held: the answer asks about the amount
    alone, both values shown; "yes" files the corrected dispute, once. The same call again
    is never filed twice."""
    talk = Dialogue(client, replies, f"ledger-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    filed = talk.send(WHOLE, tool="OP-204518, the first one")
    assert slots(filed)["ended"] is True and arguments(filed)["amount"] == "1200.50"
    corrected = {**KNOWN, "amount": "1300.00"}
    # The model writes the reason anew too ("fraud"): the user changed only the amount.
    held = talk.send(dispute(**{**corrected, "reason": "fraud"}),
                     user="sorry, the amount was 1 300,00")
    message = held["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert "1200.50" in message["content"] and "1300.00" in message["content"]
    assert [(c["field"], c["old"], c["new"]) for c in slots(held)["confirm"]] == [
        ("/amount", "1200.50", "1300.00")]  # only the amount: card and day are the same
    yes = talk.send(dispute(**corrected, original_operation_id="OP-204518"), user="yes")
    assert arguments(yes)["amount"] == "1300.00" and slots(yes)["ended"] is True
    assert arguments(yes)["card_last4"] == "4417"
    again = talk.send(dispute(**corrected),  # (the lookup's ids were that intent's)
                      user="please file the dispute for 1 300,00")
    message = again["choices"][0]["message"]
    assert not message.get("tool_calls") and "already filed" in message["content"]


def test_another_dispute_on_the_same_card_is_a_new_intent_not_a_correction(client, replies):
    talk = Dialogue(client, replies, f"ledger-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    talk.send(WHOLE, tool="OP-204518, the first one")
    second = talk.send(dispute(card_last4="4417", operation_date=NOV_30, amount="89.90",
                               reason="fraud"),
                       user="another one, same card: 89,90 on 30.11 that I never made")
    assert arguments(second)["amount"] == "89.90" and slots(second)["confirm"] == []


def _room(marked: bool) -> dict:
    marks = {"x-strictcall-kind": "write", "x-strictcall-risk": "high"} if marked else {}
    return {"type": "function", "function": {"name": "reserve_room", "parameters": {
        "type": "object", **marks, "required": ["city", "nights"], "properties": {
            "city": {"type": "string", "enum": ["Paris", "Oslo"], "x-strictcall-grounded": True},
            "nights": {"type": "integer", "minimum": 1, "maximum": 30,
                       "x-strictcall-grounded": True, "description": "Number of nights"}}}}}


def _reserve(city: str, nights: int) -> str:
    return json.dumps([{"name": "reserve_room", "arguments": {"city": city, "nights": nights}}],
                      separators=(",", ":"))


@pytest.mark.parametrize("marked", [True, False], ids=["opted-in", "plain"])
def test_a_client_tool_marked_high_risk_is_held_like_a_contract(client, replies, marked):
    """A client tool's schema opts in with x-strictcall-kind and x-strictcall-risk: its
    filed call is kept in the ledger, and a correction waits for a yes. Without the marks
    the client runs its own tool and the second call is made as the model wrote it."""
    tool = _room(marked)
    talk = Dialogue(client, replies, f"room-{uuid.uuid4().hex}", tools=[tool],
                    choice={"type": "function", "function": {"name": "reserve_room"}})
    first = talk.send(_reserve("Paris", 2), user="a room in Paris for 2 nights")
    assert arguments(first) == {"city": "Paris", "nights": 2}
    second = talk.send(_reserve("Paris", 3), user="sorry, 3 nights")
    if not marked:
        assert arguments(second) == {"city": "Paris", "nights": 3}
        return
    assert not second["choices"][0]["message"].get("tool_calls")
    assert [(c["field"], c["old"], c["new"]) for c in slots(second)["confirm"]] == [
        ("/nights", 2, 3)]
    assert "number of nights" in second["choices"][0]["message"]["content"]
    third = talk.send(_reserve("Paris", 3), user="yes")
    assert arguments(third) == {"city": "Paris", "nights": 3}


def test_not_this_card_but_that_one_corrects_the_card_after_filing(client, replies):
    """«карта не 4417, а 4471» after the dispute was filed: 4417 is taken back and 4471 is
    the card's (its word named the value 4471 replaces), never the amount's. The model's
    call writing 4471 as the amount breaks the grammar; the one correcting the card is held
    behind a question about the card alone."""
    talk = Dialogue(client, replies, f"ledger-{uuid.uuid4().hex}")
    talk.send(FIRST, user=DISPUTE)
    talk.send(WHOLE, tool="OP-204518, the first one")
    said = "простите, карта не 4417, а 4471"
    wrong = talk.send(dispute(**{**KNOWN, "amount": "4471"}), user=said, status=503)
    assert "breaks the grammar" in wrong["detail"]
    talk.messages.pop()
    held = talk.send(dispute(**{**KNOWN, "card_last4": "4471"}), user=said)
    assert not held["choices"][0]["message"].get("tool_calls")
    assert [(c["field"], c["old"], c["new"]) for c in slots(held)["confirm"]] == [
        ("/card_last4", "4417", "4471")]


def test_guests_said_in_words_leave_the_nights_as_they_were(client, replies):
    """«Гостей будет двое» names the guests: the nights keep their 3, pinned (a call that
    writes 2 nights breaks the grammar)."""
    talk = Dialogue(client, replies, f"hotel-{uuid.uuid4().hex}", tools=[HOTEL], choice=HOTEL)
    talk.send(hotel(city="Sochi", nights=3), user="Гостиница в Sochi на 3 ночи")
    moved = talk.send(hotel(city="Sochi", nights=2, guests=2), user="Гостей будет двое",
                      status=503)
    assert "breaks the grammar" in moved["detail"]
    talk.messages.pop()
    kept = talk.send(hotel(city="Sochi", nights=3, guests=2), user="Гостей будет двое")
    assert slots(kept)["filled"]["nights"] == 3 and slots(kept)["filled"]["guests"] == 2
    assert slots(kept)["changed"] == []


def test_guests_said_as_a_collective_numeral_change_the_guests_even_as_the_nights_number(
        client, replies):
    """«И нас будет двое» with 2 nights and 1 guest filled: «двое» counts people, so the 2 is
    the guests' though the nights hold 2 too; the guests change, the nights stay."""
    talk = Dialogue(client, replies, f"hotel-{uuid.uuid4().hex}", tools=[HOTEL], choice=HOTEL)
    talk.send(hotel(city="Sochi", nights=2, guests=1), user="Отель в Sochi, 2 ночи, 1 гость")
    kept = talk.send(hotel(city="Sochi", nights=2, guests=1),
                     user="И нас будет двое.", status=503)
    assert "breaks the grammar" in kept["detail"]  # the old guest count: not what was said
    talk.messages.pop()
    moved = talk.send(hotel(city="Sochi", nights=2, guests=2),
                      user="И нас будет двое.")
    assert slots(moved)["filled"]["nights"] == 2 and slots(moved)["filled"]["guests"] == 2
