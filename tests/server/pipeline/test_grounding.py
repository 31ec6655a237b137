"""Grounded fields over a ScriptedEngine: the candidates the conversation gives (through the
contract's own normalizing, only decoration taken off, a longer span's value winning), the
grammar that holds only those (or null), the question where nothing was given, client
schemas' `x-strictcall-grounded` / `x-strictcall-ask`, and the report of it all."""

from __future__ import annotations

import pytest

from contracts import contract_of
from contracts.examples import OpenDispute
from server.pipeline.grounding import draft_lines, ground

DISPUTE = "вчера с карты •• 4417 списали 1 200,50 ₽ дважды, верните вторую"


def _candidates(*texts: str) -> dict:
    contract = contract_of(OpenDispute)
    return ground(contract.schema(), contract, list(texts)).candidates()


def test_candidates_are_the_users_values_normalized():
    assert _candidates(DISPUTE) == {"card_last4": ("4417",), "operation_date": ("вчера",),
                                    "amount": ("4417", "1200.50"),
                                    "original_operation_id": ()}


def test_the_candidates_are_drafts_written_as_a_call_writes_them():
    contract = contract_of(OpenDispute)
    grounding = ground(contract.schema(), contract, [DISPUTE])
    lines = draft_lines({"open_dispute": grounding})
    assert '"amount":"1200.50"' in lines and '"amount": "1200.50"' in lines
    assert '"operation_date":"вчера"' in lines
    assert not [line for line in lines if line.startswith('"original_operation_id"')]
    assert draft_lines({}) == ()


@pytest.mark.parametrize("text, field, kept, dropped", [
    ("card •• 4417", "card_last4", "4417", None),
    ("paid 1 200,50 ₽", "card_last4", None, "0050"),  # digits taken: no card number
    ("paid 1 200,50 ₽", "amount", "1200.50", "1"),  # the longer span's value wins
    ("ref OP-204518 ok", "amount", None, "204518"),  # part of a longer word
    ("card 4417: 10 charged", "amount", "10", "441710"),  # ":" parts two values
    ("The first one was OP-204518.", "original_operation_id", "OP-204518", None),
    ("Вчера, в обед", "operation_date", "вчера", None),
])
def test_what_is_kept_and_what_is_not(text, field, kept, dropped):
    found = _candidates(text)[field]
    if kept is not None:
        assert kept in found
    if dropped is not None:
        assert dropped not in found


class Script:
    def __init__(self) -> None:
        self.reply = ""

    def __call__(self, prompt: str) -> str:
        return self.reply


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def client(scripted, script):
    with scripted(script, contracts=["contracts.examples"]) as c:
        yield c


ORDER = {"type": "function", "function": {"name": "track_order", "parameters": {
    "type": "object", "properties": {
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$",
                     "x-strictcall-grounded": True,
                     "x-strictcall-ask": "What is your order number? It starts with ORD-."},
        "carrier": {"type": "string", "enum": ["dhl", "ups"], "x-strictcall-grounded": True},
        "note": {"type": "string", "maxLength": 40}},
    "required": ["order_id", "carrier"]}}}


def _ask(client, said: str, **extra):
    return client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": said}],
        "tools": [ORDER], "tool_choice": "required", **extra})


def test_a_client_schemas_grounded_fields_copy_or_ask(client, script):
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-10442",'
                    '"carrier":"dhl","note":"late"}}]')
    resp = _ask(client, "Where is ORD-10442? It went with DHL.")
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-StrictCall-Enforcement"].endswith(
        "grounded: track_order#/order_id=1 track_order#/carrier=1")
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == \
        '{"order_id":"ORD-10442","carrier":"dhl","note":"late"}'
    # An id nobody gave cannot even be written: the grammar refuses it at its first digit.
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-99999",'
                    '"carrier":"dhl"}}]')
    refused = _ask(client, "Where is ORD-10442? It went with DHL.")
    assert refused.status_code == 503 and "breaks the grammar" in refused.text
    # Not given: the question the schema asks, with what was collected.
    script.reply = ('[{"name":"track_order","arguments":{"order_id":null,"carrier":"ups"}}]')
    asked = _ask(client, "My parcel sent by UPS is late.")
    body = asked.json()
    assert body["choices"][0]["message"]["content"] == \
        "What is your order number? It starts with ORD-."
    assert body["strictcall"]["needs_input"] == {
        "tool": "track_order", "collected": {"carrier": "ups"},
        "missing": [{"field": "/order_id",
                     "question": "What is your order number? It starts with ORD-."}]}


def test_grounding_off_lets_the_model_write_anything_the_schema_takes(client, script):
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-99999",'
                    '"carrier":"dhl"}}]')
    resp = _ask(client, "My parcel is late.", strictcall={"grounding": False})
    assert resp.status_code == 200, resp.text
    assert "grounded" not in resp.headers["X-StrictCall-Enforcement"]


def test_the_compile_endpoint_grounds_in_the_messages_it_is_given(client):
    schema = ORDER["function"]["parameters"]
    body = client.post("/v1/grammars/compile", json={
        "schema": schema, "messages": [
            {"role": "system", "content": "ORD-00000 is an example."},  # not evidence
            {"role": "user", "content": "ORD-10442 or ORD-10443, whichever shipped"}]}).json()
    assert body["grounding"] == {"fields": {"order_id": 2, "carrier": 0}}
    grounded = [k for k in body["enforcement"]["keywords"]
                if k["keyword"] == "x-strictcall-grounded"]
    assert [k["pointer"] for k in grounded] == ["/properties/order_id", "/properties/carrier"]
    bad = client.post("/v1/grammars/compile", json={"schema": schema, "messages": [{}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"].startswith("messages[0]")
