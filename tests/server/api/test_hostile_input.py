"""The hostile-input tier: one client's request must never freeze or exhaust a replica.

A real `strictcall serve` process (the embedded model, llama.cpp) gets requests built to
hurt it: backtracking patterns of several shapes in grounded, validated and response-format
schemas with messages made to trigger them, 10,000 messages, megabytes of digits and dates,
a deep Responses chain, streams that disconnect mid-decode. While each runs, `/health` and
`/livez` beside it must answer within `BESIDE_S` (the event loop is never held), and a plain
chat within `CHAT_BESIDE_S` (the engine keeps serving others); the hostile request must end
(a 4xx or a 200) within its deadline; and the process's memory must stay under
`MEMORY_BOUND_MIB` over what it held before. The figures are printed (run with -s) for the
closing notes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from server.process import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.long]

BESIDE_S = 2.0  # /health and /livez beside a hostile request answer within this
# A plain chat beside it shares the engine: it waits for the piece of the other prompt being
# prefilled, then decodes in one batch with the other's rows. Beside the deep Responses chain
# (2,600 tokens of context, one thread) a 64-token piece takes about 1 s and a decode step
# 0.2 s here, so the chat answers in 2-2.6 s; an engine held by one request misses this by
# minutes (the backtracking patterns below run for hours in a backtracking engine).
CHAT_BESIDE_S = 8.0
DEADLINE_S = 120.0  # a hostile request ends (4xx or 200) within this
MEMORY_BOUND_MIB = 600  # the server's RSS over what it held before the tier
MODEL = "hostile"
# Nested and overlapping quantifiers: hours in a backtracking engine on these texts.
BACKTRACKING = [
    (r"^(a+)+$", "a" * 48 + "!"),
    (r"^(a|aa)+$", "a" * 48 + "!"),
    (r"^([a-z0-9]+\s?)+@x$", "abc " * 24 + "!"),
    (r"^(\d+)*[a-z]$", "1" * 48 + "!"),
]


@pytest.fixture(scope="module")
def server(model_dir):
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--request-timeout-s", "90") as proc:
        proc.rss_before = _rss_mib(proc.pid)  # type: ignore[attr-defined]
        yield proc
        grown = _rss_mib(proc.pid) - proc.rss_before  # type: ignore[attr-defined]
        print(f"\nhostile tier: server RSS {proc.rss_before:.0f} MiB before, "  # type: ignore[attr-defined]
              f"+{grown:.0f} MiB after (bound {MEMORY_BOUND_MIB})")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _beside(server, hostile: Callable[[httpx.Client], httpx.Response], *,
            name: str) -> httpx.Response:
    """Run `hostile` while checking that /health and a plain chat answer within BESIDE_S;
    its response, which must have come within DEADLINE_S."""
    out: list[httpx.Response | BaseException] = []

    def run() -> None:
        try:
            with httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as client:
                out.append(hostile(client))
        except BaseException as exc:  # noqa: BLE001 - reported below
            out.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    slowest = {"/health": 0.0, "/livez": 0.0, "a plain chat": 0.0}
    bound = {"/health": BESIDE_S, "/livez": BESIDE_S, "a plain chat": CHAT_BESIDE_S}
    checks = 0
    with httpx.Client(base_url=server.base_url, timeout=CHAT_BESIDE_S + 1) as probe:
        while thread.is_alive() or checks == 0:
            for what, send in (("/health", lambda: probe.get("/health")),
                               ("/livez", lambda: probe.get("/livez")),
                               ("a plain chat", lambda: probe.post(
                                   "/v1/chat/completions", json={
                                       "model": MODEL, "max_tokens": 4,
                                       "messages": [{"role": "user", "content": "Hi."}]}))):
                began = time.monotonic()
                try:
                    answer = send()
                except httpx.TimeoutException:
                    pytest.fail(f"{name}: {what} beside it got no answer within "
                                f"{bound[what] + 1} s")
                took = time.monotonic() - began
                assert answer.status_code == 200, (name, answer.text[:300])
                slowest[what] = max(slowest[what], took)
            checks += 1
            if time.monotonic() - started > DEADLINE_S + 5:
                break
    thread.join(5)
    assert not thread.is_alive(), f"{name}: still running after {DEADLINE_S} s"
    for what, took in slowest.items():
        assert took <= bound[what], f"{name}: {what} beside it took {took:.2f} s"
    result = out[0]
    if isinstance(result, BaseException):
        raise result
    elapsed = time.monotonic() - started
    figures = ", ".join(f"{what} {took:.2f} s" for what, took in slowest.items())
    print(f"\n{name}: {result.status_code} in {elapsed:.2f} s; slowest beside it: {figures} "
          f"over {checks} rounds")
    assert result.status_code < 500, (name, result.text[:500])
    return result


def _tool(pattern: str) -> dict:
    return {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "required": ["code"], "properties": {"code": {
            "type": "string", "pattern": pattern, "x-strictcall-grounded": True}}}}}


@pytest.mark.parametrize(("pattern", "text"), BACKTRACKING)
def test_a_backtracking_pattern_in_a_grounded_tool_field(server, pattern, text):
    answer = _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 40, "tool_choice": "required", "tools": [_tool(pattern)],
        "messages": [{"role": "user", "content": f"Look up code {text} please, {text}"}]}),
        name=f"grounded {pattern}")
    assert answer.status_code == 200


@pytest.mark.parametrize("unit", ["1 ", "5 руб ", "двадцать пять тысяч "])
def test_a_message_of_numbers_past_the_context_is_refused_before_grounding(server, unit):
    """Grounding read such a message (11-18 s of CPU, 78 s for number words) before the
    prompt's length was checked; the messages' length is checked first."""
    text = unit * (24_000 // len(unit))
    answer = _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 20, "tools": [_amount_tool()],
        "messages": [{"role": "user", "content": text}]}), name=f"24,000 characters of {unit!r}")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == \
        "context_length_exceeded" and "the messages alone" in answer.json()["detail"]


def test_a_long_message_of_numbers_within_the_context_is_grounded(server):
    # (~4,400 characters: a longer prompt is mostly prefill on one thread, ~150 tokens/s here)
    text = "card 4417 paid 212.75 USD on 2026-11-30, not 4471 and " * 80
    answer = _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 20, "tools": [_amount_tool()],
        "messages": [{"role": "user", "content": text}]}), name="4,400 characters of numbers")
    assert answer.status_code == 200
    assert "grounded: pay#/amount" in answer.headers["X-StrictCall-Enforcement"]


def _amount_tool() -> dict:
    return {"type": "function", "function": {"name": "pay", "parameters": {
        "type": "object", "required": ["amount"], "properties": {"amount": {
            "type": "number", "x-strictcall-grounded": True}}}}}


@pytest.mark.parametrize(("pattern", "text"), BACKTRACKING[:2])
def test_a_backtracking_pattern_in_response_format_and_the_compile_endpoint(
        server, pattern, text):
    schema = {"type": "object", "required": ["s"], "properties": {
        "s": {"type": "string", "pattern": pattern, "maxLength": 60}}}
    _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 60, "messages": [{"role": "user", "content": text}],
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "s", "schema": schema}}}), name=f"response_format {pattern}")
    grounded = {"type": "object", "properties": {"s": {
        "type": "string", "pattern": pattern, "x-strictcall-grounded": True}}}
    answer = _beside(server, lambda c: c.post("/v1/grammars/compile", json={
        "schema": grounded, "messages": [{"role": "user", "content": f"{text} {text}"}]}),
        name=f"compile endpoint {pattern}")
    assert answer.status_code == 200


def test_a_lookahead_that_backtracks_is_checked_under_its_budget(server):
    """Not RE2 (a lookahead): the `regex` module under its time budget, for grounding and
    the validator alike."""
    pattern = r"^(?=a)(a|aa)+$"
    answer = _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 40, "tool_choice": "required", "tools": [_tool(pattern)],
        "messages": [{"role": "user", "content": "code " + "a" * 40 + "! " * 3}]}),
        name="lookahead under budget")
    assert answer.status_code in (200, 422)


def test_ten_thousand_messages(server):
    messages = [{"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"card {1000 + i % 9000}, on {i % 28 + 1}.11, 12{i % 10},50 ₽"}
                for i in range(10_000)]
    messages[-1] = {"role": "user", "content": "open a lookup for code abc"}
    _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 30, "tools": [_tool("^[a-z]+$")],
        "messages": messages}), name="10,000 messages")


@pytest.mark.parametrize("kind", ["digits", "dates"])
def test_megabytes_of_digits_and_dates(server, kind):
    unit = "4417 " if kind == "digits" else "30.11.2026 позавчера "
    text = unit * (3_500_000 // len(unit.encode()))  # 3.5 MB: under the 4 MiB body limit
    answer = _beside(server, lambda c: c.post("/v1/chat/completions", json={
        "model": MODEL, "max_tokens": 20, "tools": [_tool("^[0-9]{4}$")],
        "messages": [{"role": "user", "content": text}]}), name=f"3.5 MB of {kind}")
    assert answer.status_code in (200, 400, 413)


def test_ten_megabytes_is_refused_at_the_door(server):
    answer = _beside(server, lambda c: c.post(
        "/v1/chat/completions", content=json.dumps({
            "model": MODEL, "messages": [{"role": "user", "content": "7" * 10_000_000}]}),
        headers={"content-type": "application/json"}), name="10 MB body")
    assert answer.status_code == 413


def test_a_deep_responses_chain(server):
    def chain(client: httpx.Client) -> httpx.Response:
        previous = None
        answer = None
        for turn in range(40):
            body = {"model": MODEL, "max_output_tokens": 8, "store": True,
                    "input": f"turn {turn}: " + "note " * 40}
            if previous:
                body["previous_response_id"] = previous
            answer = client.post("/v1/responses", json=body)
            if answer.status_code != 200:
                return answer  # the chain's bound, as a 4xx
            previous = answer.json()["id"]
        assert answer is not None
        return answer
    _beside(server, chain, name="40-deep Responses chain")


def test_streams_that_disconnect_mid_decode(server):
    def disconnecting(client: httpx.Client) -> httpx.Response:
        for _ in range(6):
            with client.stream("POST", "/v1/chat/completions", json={
                    "model": MODEL, "max_tokens": 200, "stream": True,
                    "messages": [{"role": "user", "content": "Count to a hundred."}]}) as r:
                for n, _line in enumerate(r.iter_lines()):
                    if n >= 3:
                        break  # the client goes away mid-decode
        return client.get("/health")
    answer = _beside(server, disconnecting, name="6 streams dropped mid-decode")
    assert answer.status_code == 200


def test_memory_stays_bounded(server):
    grown = _rss_mib(server.pid) - server.rss_before
    assert grown < MEMORY_BOUND_MIB, f"the server grew {grown:.0f} MiB over the tier"
