"""The stateful Responses API over a ScriptedEngine, driven by the official `openai` SDK
(over the app's TestClient): stored by default, chained with previous_response_id (the
earlier items are the new task's earlier turns), retrieved, listed and deleted in OpenAI's
shapes; store=false keeps nothing; an unknown or another tenant's id is OpenAI's 404 (400
previous_response_not_found when chained onto)."""

from __future__ import annotations

import openai
import pytest
from openai import OpenAI
from openai.types.responses import Response, ResponseItem

from server.identity import KeyRing
from tests.scripted import Replies, assert_problem

KEYS = [{"key": "sk-acme-agent-0123456789", "name": "agent", "tenant": "acme"},
        {"key": "sk-acme-other-0123456789", "name": "other", "tenant": "acme"},
        {"key": "sk-globex-agent-01234567", "name": "rival", "tenant": "globex"}]


@pytest.fixture(scope="module")
def replies():
    return Replies()


@pytest.fixture(scope="module")
def app_client(scripted, replies):
    with scripted(replies, state_url="memory://", app={"keys": KeyRing.of(KEYS)}) as c:
        yield c


def sdk(app_client, key: str = KEYS[0]["key"]) -> OpenAI:
    return OpenAI(base_url="http://testserver/v1", api_key=key, http_client=app_client,
                  max_retries=0)


@pytest.fixture()
def oai(app_client, replies):
    replies.text = "Hello."
    return sdk(app_client)


def test_a_response_is_stored_by_default_and_retrieved_as_it_was(oai):
    created = oai.responses.create(model="scripted", input="Hi there", instructions="Be brief")
    assert created.store is True and created.previous_response_id is None
    again = oai.responses.retrieve(created.id)
    assert again.model_dump() == created.model_dump()


def test_a_chained_request_starts_from_the_earlier_items(oai, app_client, replies):
    first = oai.responses.create(model="scripted", input="My name is Ada.",
                                 instructions="Only for the first turn")
    replies.text = "Nice to meet you."
    second = oai.responses.create(model="scripted", input="What is my name?",
                                  previous_response_id=first.id)
    assert second.previous_response_id == first.id
    prompt = app_client.app.state.pipeline.engine.prompts[-1]
    assert prompt.index("My name is Ada.") < prompt.index("Hello.") < \
        prompt.index("What is my name?")
    assert "Only for the first turn" not in prompt  # instructions are not carried over
    items = oai.responses.input_items.list(second.id, order="asc")
    assert [(i.type, getattr(i, "role", None)) for i in items.data] == [
        ("message", "user"), ("message", "assistant"), ("message", "user")]
    assert items.data[1].id == first.output[0].id  # the earlier output, as it was returned
    assert all(isinstance(i, ResponseItem.__args__) for i in items.data)  # the SDK's types


def test_function_calls_and_their_outputs_chain_too(oai, app_client, replies):
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    first = oai.responses.create(model="scripted", input="Weather in Paris?", tools=[weather],
                                 tool_choice="required")
    (call,) = first.output
    replies.text = "Sunny."
    second = oai.responses.create(model="scripted", previous_response_id=first.id,
                                  input=[{"type": "function_call_output",
                                          "call_id": call.call_id, "output": "21C, sunny"}],
                                  tools=[weather], tool_choice="none")
    assert second.output_text == "Sunny."
    prompt = app_client.app.state.pipeline.engine.prompts[-1]
    assert "Paris" in prompt and "21C, sunny" in prompt
    kinds = [i.type for i in oai.responses.input_items.list(second.id, order="asc").data]
    assert kinds == ["message", "function_call", "function_call_output"]


def test_input_items_page_by_cursor_newest_first(oai):
    previous = None
    for n in range(3):
        previous = oai.responses.create(model="scripted", input=f"turn {n}",
                                        previous_response_id=previous).id
    newest = oai.responses.input_items.list(previous, limit=2)
    assert newest.has_more and len(newest.data) == 2
    assert newest.data[0].content[0].text == "turn 2"  # desc by default, as OpenAI's
    everything = list(oai.responses.input_items.list(previous, limit=2))  # the SDK pages
    assert len(everything) == 5 and everything[-1].content[0].text == "turn 0"


def test_store_false_keeps_nothing(oai, app_client):
    kept_nothing = oai.responses.create(model="scripted", input="Hi", store=False)
    assert kept_nothing.store is False
    assert "slots" not in (kept_nothing.model_extra.get("strictcall") or {})  # no session
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(kept_nothing.id)
    with pytest.raises(openai.BadRequestError) as err:
        oai.responses.create(model="scripted", input="again",
                             previous_response_id=kept_nothing.id)
    assert err.value.code == "previous_response_not_found"
    assert app_client.app.state.responses.get("tenant:acme", kept_nothing.id) is None


def test_a_deleted_response_is_gone(oai):
    created = oai.responses.create(model="scripted", input="Hi")
    assert oai.responses.delete(created.id) is None  # the SDK reads OpenAI's 200 body
    for ask in (lambda: oai.responses.retrieve(created.id),
                lambda: oai.responses.delete(created.id),
                lambda: oai.responses.input_items.list(created.id)):
        with pytest.raises(openai.NotFoundError, match="not found"):
            ask()


@pytest.mark.parametrize("method,path", [
    ("get", "/v1/responses/resp_nope"), ("delete", "/v1/responses/resp_nope"),
    ("get", "/v1/responses/resp_nope/input_items")])
def test_an_unknown_id_is_openais_404(app_client, method, path):
    resp = getattr(app_client, method)(path, headers={
        "Authorization": f"Bearer {KEYS[0]['key']}"})
    body = assert_problem(resp, 404, says="Response with id 'resp_nope' not found.")
    assert body["error"]["type"] == "invalid_request_error"


def test_another_tenants_response_is_unknown_and_a_colleagues_is_shared(app_client):
    created = sdk(app_client).responses.create(model="scripted", input="Hi")
    rival = sdk(app_client, KEYS[2]["key"])
    with pytest.raises(openai.NotFoundError):
        rival.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        rival.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError) as err:
        rival.responses.create(model="scripted", input="x", previous_response_id=created.id)
    assert err.value.param == "previous_response_id"
    colleague = sdk(app_client, KEYS[1]["key"])
    assert colleague.responses.retrieve(created.id).id == created.id  # same tenant
    assert sdk(app_client).responses.retrieve(created.id).id == created.id  # still there


def test_a_streamed_response_is_stored_once_it_is_whole(oai):
    with oai.responses.stream(model="scripted", input="Hi") as events:
        final = events.get_final_response()
    stored = oai.responses.retrieve(final.id)
    assert stored.status == "completed" and stored.output_text == final.output_text
    chained = oai.responses.create(model="scripted", input="more",
                                   previous_response_id=final.id)
    assert chained.previous_response_id == final.id


def test_bad_cursors_and_stream_replays_are_400s(app_client, oai):
    created = oai.responses.create(model="scripted", input="Hi")
    auth = {"Authorization": f"Bearer {KEYS[0]['key']}"}
    assert_problem(app_client.get(f"/v1/responses/{created.id}/input_items",
                                  params={"after": "msg_nope"}, headers=auth), 400,
                   param="after")
    assert_problem(app_client.get(f"/v1/responses/{created.id}", params={"stream": "true"},
                                  headers=auth), 400, param="stream")
    assert Response.model_validate(app_client.get(f"/v1/responses/{created.id}",
                                                  headers=auth).json()).id == created.id


def test_the_chain_is_one_session(oai, replies):
    """Each response of a chain names the same session in `strictcall.slots`."""
    first = oai.responses.create(model="scripted", input="Hi")
    second = oai.responses.create(model="scripted", input="again",
                                  previous_response_id=first.id)
    one, two = (r.model_extra["strictcall"]["slots"]["session"] for r in (first, second))
    assert one == two and one.startswith("sess_")
    apart = oai.responses.create(model="scripted", input="Hi")
    assert apart.model_extra["strictcall"]["slots"]["session"] != one


def test_a_chain_is_bounded_in_depth_and_in_what_it_stores(scripted, replies):
    """A chain's reasoning items and tool results are stored though the prompt leaves
    some out, so the context check alone would never bound it: --max-chain and
    --max-body-bytes do, with a 400 that says to start a new chain."""
    replies.text = "Noted."
    with scripted(replies, state_url="memory://", max_chain=3) as c:
        oai = sdk(c)
        first = oai.responses.create(model="scripted", input="one")
        second = oai.responses.create(model="scripted", input="two",
                                      previous_response_id=first.id)
        third = oai.responses.create(model="scripted", input="three",
                                     previous_response_id=second.id)  # three: the most
        with pytest.raises(openai.BadRequestError) as refused:
            oai.responses.create(model="scripted", input="four",
                                 previous_response_id=third.id)
        assert refused.value.body["code"] == "chain_too_long"
    with scripted(replies, state_url="memory://", max_body_bytes=4000) as c:
        oai = sdk(c)
        big = oai.responses.create(model="scripted", input="note " * 770)  # 3,850 bytes
        with pytest.raises(openai.BadRequestError) as refused:
            oai.responses.create(model="scripted", input="more",
                                 previous_response_id=big.id)
        assert "bytes" in refused.value.message
