"""Sessions' slots and stored responses as data and records: the merge that never lets a
missing or null value overwrite a filled one, expiry by an injected clock (no sleeps),
tenant scopes, and the compare-and-set that keeps two turns on two replicas from
overwriting each other unseen."""

from __future__ import annotations

import json

import pytest

from server.identity import Identity
from server.sessions import (
    Change,
    ResponseStore,
    SessionState,
    SessionStore,
    StoredResponse,
    ToolSlots,
    scope_of,
)
from server.sessions.sealing import Sealer
from server.state import MemoryStateStore


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


FILLED = ToolSlots({"card_last4": "4417", "amount": "1200.50"}, touched=10.0)


@pytest.mark.parametrize("given", [
    {},                                                  # the field left out
    {"card_last4": None, "amount": None},                # written as null ("not given")
    {"card_last4": None, "amount": "1200.50", "reason": "duplicate"},
])
def test_a_missing_or_null_value_never_overwrites_a_filled_one(given):
    merged = FILLED.filled_with(given)
    assert merged["card_last4"] == "4417" and merged["amount"] == "1200.50"
    assert {k: v for k, v in merged.items() if k not in FILLED.values} == \
        {k: v for k, v in given.items() if k not in FILLED.values}


def test_a_given_value_is_kept_as_given():
    """The merge fills gaps only; whether a different value is a change is the caller's
    (slotting) to report: it is never decided here, silently."""
    assert FILLED.filled_with({"amount": "1300.00"})["amount"] == "1300.00"


def test_slots_expire_a_ttl_after_their_last_turn():
    assert not FILLED.expired(10.0 + 1799.9, 1800)
    assert FILLED.expired(10.0 + 1800, 1800)


def test_state_round_trips_through_json():
    state = SessionState({"open_dispute": ToolSlots(
        {"amount": "1200.50"}, 5.0, (Change("/amount", "1200.50", "1300.00"),))},
        intent="open_dispute")
    again = SessionState.of(state.as_dict())
    assert again == state and again.slots("open_dispute").pending[0].name == "amount"
    assert SessionState.of(None) == SessionState()


def test_scopes_are_tenants_or_keys():
    acme = Identity("agent", "acme", ("chat",))
    other = Identity("ops", "acme", ("admin",))
    assert scope_of(acme) == scope_of(other) == "tenant:acme"  # one tenant, one scope
    assert scope_of(Identity("solo", None, ("chat",))) == "key:solo"
    assert scope_of(None) == ""  # no keys: everyone may call, one shared scope


def test_a_session_is_only_its_tenants():
    store = SessionStore(MemoryStateStore(), slot_ttl_s=1800)
    store.save("tenant:acme", "s1", lambda s: s.with_tool("open_dispute", FILLED))
    assert store.load("tenant:acme", "s1").state.slots("open_dispute") == FILLED
    assert store.load("tenant:globex", "s1").state == SessionState()  # same id, no slots
    assert store.load("tenant:globex", "s1").version is None


def test_a_save_applies_its_change_to_what_another_turn_wrote_meanwhile():
    records = MemoryStateStore()
    store = SessionStore(records, slot_ttl_s=1800)
    store.save("", "s", lambda s: s.with_tool("a", ToolSlots({"x": 1}, 1.0)))
    calls = []

    def update(state: SessionState) -> SessionState:
        calls.append(state)
        if len(calls) == 1:  # another replica writes between this read and write
            store.save("", "s", lambda s: s.with_tool("b", ToolSlots({"y": 2}, 2.0)))
        return state.with_tool("c", ToolSlots({"z": 3}, 3.0))

    final = store.save("", "s", update)
    assert len(calls) == 2 and set(final.tools) == {"a", "b", "c"}
    assert set(store.load("", "s").state.tools) == {"a", "b", "c"}


def test_the_session_clock_is_the_stores_unless_injected():
    clock = Clock(42.0)
    # The store's clock, read off the event loop and kept as an offset: no round trip.
    assert SessionStore(MemoryStateStore(clock), slot_ttl_s=1).now() == pytest.approx(42.0,
                                                                                      abs=1)
    assert SessionStore(MemoryStateStore(), slot_ttl_s=1, clock=clock).now() == 42.0


def _stored(id: str, n: int, chain: list[str] | None = None) -> StoredResponse:
    return StoredResponse({"id": id, "object": "response", "output": [
        {"id": f"msg_{n + 1}", "type": "message", "role": "assistant", "content": []}]},
        context=[], input=[{"id": f"msg_{n}"}], session="sess_1", chain=chain or [])


def test_stored_responses_are_scoped_kept_for_their_ttl_and_deleted():
    clock = Clock()
    store = ResponseStore(MemoryStateStore(clock), ttl_s=3600)
    store.keep("tenant:acme", _stored("resp_1", 1))
    found = store.get("tenant:acme", "resp_1")
    assert found is not None and found.session == "sess_1"
    assert [i["id"] for i in found.conversation()] == ["msg_1", "msg_2"]
    assert [i["id"] for i in found.input_items()] == ["msg_1"]
    assert store.get("tenant:globex", "resp_1") is None  # another tenant's: unknown
    assert not store.delete("tenant:globex", "resp_1")
    clock.now += 3599
    assert store.get("tenant:acme", "resp_1") is not None
    clock.now += 1
    assert store.get("tenant:acme", "resp_1") is None  # expired
    store.keep("tenant:acme", _stored("resp_2", 1))
    assert store.delete("tenant:acme", "resp_2") and store.get("tenant:acme", "resp_2") is None


def test_a_chain_references_its_earlier_turns_and_a_deleted_one_is_gone_from_it():
    clock = Clock()
    records = MemoryStateStore(clock)
    store = ResponseStore(records, ttl_s=3600)
    store.keep("t", _stored("resp_1", 1))
    clock.now += 3000
    store.keep("t", _stored("resp_2", 3, ["resp_1"]))
    store.keep("t", _stored("resp_3", 5, ["resp_1", "resp_2"]))
    third = store.get("t", "resp_3")
    assert [i["id"] for i in third.conversation()] == [f"msg_{i}" for i in range(1, 7)]
    stored = [r.value for (ns, _), r in records._records.items() if ns == "responses"]
    # Each item is stored once, however long the chain: referenced, never copied.
    assert sorted(len(v["input"]) + len(v["response"]["output"]) for v in stored) == [2, 2, 2]
    clock.now += 3000  # resp_1 would have expired by now; the later turns pushed it on
    assert [i["id"] for i in store.get("t", "resp_3").input_items()][:2] == ["msg_1", "msg_2"]
    assert store.delete("t", "resp_1")
    assert [i["id"] for i in store.get("t", "resp_3").conversation()] == [
        f"msg_{i}" for i in range(3, 7)]  # deleted: in no later response either


def test_redacted_values_are_stored_redacted_in_responses_and_sessions():
    from contracts import ContractRegistry

    registry = ContractRegistry()
    registry.load("contracts.examples")
    records = MemoryStateStore()
    responses = ResponseStore(records, ttl_s=60, contract_of=registry.get)
    call = {"id": "fc_1", "call_id": "call_4417", "type": "function_call",
            "name": "open_dispute",
            "arguments": '{"card_last4":"4417","amount":"12.50","reason":"duplicate"}'}
    said = {"id": "msg_1", "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "card 4417 was charged 12.50"}]}
    responses.keep("t", StoredResponse({"id": "resp_1", "output": [call]}, [], [said], None))
    kept = json.dumps(records._records[("responses", "t\x1fresp_1")].value)
    assert "4417" not in kept.replace("call_4417", "") and "12.50" in kept
    assert "call_4417" in kept  # ids are left as they are: the call's output still matches
    # A question instead of a call: the value is only in the session's slots report.
    question = {"id": "msg_2", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Which operation?"}]}
    responses.keep("t", StoredResponse({"id": "resp_2", "output": [question], "strictcall": {
        "slots": {"session": "s", "tool": "open_dispute", "filled": {"card_last4": "4417"},
                  "changed": [{"field": "/card_last4", "old": "4416", "new": "4417"}]},
        "contracts": [{"tool": "open_dispute", "attempts": 1, "repaired": False,
                       "arguments": {"card_last4": "4417"}}]}},
        [], [said], None))
    kept = json.dumps(records._records[("responses", "t\x1fresp_2")].value)
    assert "4417" not in kept and "4416" not in kept and "[redacted]" in kept
    slots = ToolSlots({"card_last4": "4417", "amount": "12.50"}, 1.0,
                      (Change("/card_last4", "4417", "4418"),))
    sessions = SessionStore(records, slot_ttl_s=60, contract_of=registry.get,
                            sealer=Sealer(b"shared by the replicas"))
    sessions.save("t", "s", lambda s: s.with_tool("open_dispute", slots))
    stored = json.dumps(records._records[("sessions", "t\x1fs")].value)
    assert "4417" not in stored and "4418" not in stored and "12.50" in stored
    assert sessions.load("t", "s").state.tools["open_dispute"] == slots  # opened for a turn
    shown = sessions.shown(sessions.load("t", "s").state).tools["open_dispute"]
    assert shown.values["card_last4"] == "[redacted]" and "4418" not in str(shown.pending)
    other = SessionStore(records, slot_ttl_s=60, contract_of=registry.get,
                         sealer=Sealer(b"another secret"))
    assert other.load("t", "s").state.tools["open_dispute"].values == {"amount": "12.50"}


def test_a_chained_response_starts_from_the_sealed_items_and_reads_show_them_scrubbed():
    """The card is "[redacted]" in the store and in every read, but a response chained onto
    the turn that said it still finds it (a second dispute with "the same card"); a store
    that cannot open the sealed copy continues from the scrubbed items."""
    from contracts import ContractRegistry

    registry = ContractRegistry()
    registry.load("contracts.examples")
    records = MemoryStateStore()
    responses = ResponseStore(records, ttl_s=60, contract_of=registry.get,
                              sealer=Sealer(b"shared by the replicas"))
    said = {"id": "msg_1", "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "card 4417 was charged 12.50"}]}
    call = {"id": "fc_1", "call_id": "call_1", "type": "function_call",
            "name": "open_dispute", "arguments": '{"card_last4":"4417"}'}
    responses.keep("t", StoredResponse({"id": "resp_1", "output": [call]}, [], [said], None))
    kept = json.dumps(records._records[("responses", "t\x1fresp_1")].value)
    assert "4417" not in kept
    assert "4417" not in json.dumps(responses.get("t", "resp_1").input_items())
    assert "4417" in json.dumps(responses.get("t", "resp_1", opened=True).conversation())
    stranger = ResponseStore(records, ttl_s=60, contract_of=registry.get,
                             sealer=Sealer(b"another secret"))
    assert "4417" not in json.dumps(stranger.get("t", "resp_1", opened=True).conversation())
