"""Agent loops on the embedded model through a real server and the `openai` client: does a
loop that calls a tool end in a text answer that uses the tool's result, within 3 model
turns? Each prompt is asked with tool_choice "auto" and "required" on its first turn (later
turns "auto", as the OpenAI Agents SDK resets it), with its one tool and with all the
tools, under each server setting compared (`--after-results`: what the turn after a tool
result is; `--dedupe-calls`: whether a call already answered may be written again).

    strictcall-bench agent-loop [--settings answer-first,auto] [--turns 3] [--save]

Counted per setting: runs that ended in text within the turns, answers that use the
result (its key value appears in the text), calls made again identical to one already
answered, and calls that fed a result into the next call of the same tool.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import openai
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolUnionParam,
)

from bench.common.results_file import add_save_flag, save
from server.process import ServerProcess

MODEL = "bench-model"
# The server settings compared, by name.
SETTINGS = {
    "answer-first": ["--after-results", "answer-first"],
    "answer-first-repeats": ["--after-results", "answer-first", "--no-dedupe-calls"],
    "auto": ["--after-results", "auto"],
    "auto-repeats": ["--after-results", "auto", "--no-dedupe-calls"],
}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], tuple[str, str]]  # arguments -> (result, its key value)

    def wire(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


def _weather(a: dict[str, Any]) -> tuple[str, str]:
    return f"{a['city']}: sunny, 21 C, for the next {a['days']} days", "21"


def _convert(a: dict[str, Any]) -> tuple[str, str]:
    value = f"{float(a['amount']) * 0.92:.2f}"
    return f"{a['amount']} {a['source']} = {value} {a['target']}", value


def _time(a: dict[str, Any]) -> tuple[str, str]:
    return f"It is 14:05 in {a['city']}", "14:05"


def _stock(a: dict[str, Any]) -> tuple[str, str]:
    return f"{a['symbol']} trades at 187.30 USD", "187.3"


def _string(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit}


TOOLS = {t.name: t for t in (
    Tool("get_weather", "Weather forecast for a city", {
        "type": "object", "properties": {
            "city": _string(40), "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"]}, _weather),
    Tool("convert_currency", "Convert an amount of money from one currency to another", {
        "type": "object", "properties": {
            "amount": {"type": "number", "minimum": 0, "maximum": 1000000},
            "source": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "target": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["amount", "source", "target"]}, _convert),
    Tool("get_time", "The current local time in a city", {
        "type": "object", "properties": {"city": _string(40)}, "required": ["city"]}, _time),
    Tool("get_stock_price", "The latest price of a stock by its ticker symbol", {
        "type": "object", "properties": {"symbol": {"type": "string", "pattern": "^[A-Z]{1,5}$"}},
        "required": ["symbol"]}, _stock),
)}
PROMPTS = {
    "get_weather": ["What's the weather in Oslo for the next 2 days?",
                    "Weather in Paris for the next 3 days?",
                    "Will it be sunny in Rome tomorrow?"],
    "convert_currency": ["Convert 100 USD to EUR.", "How much is 250 EUR in USD?",
                         "I have 40 GBP. How many JPY is that?"],
    "get_time": ["What time is it in Tokyo?", "Tell me the current time in New York.",
                 "What's the time in Berlin right now?"],
    "get_stock_price": ["What is the stock price of AAPL?", "How much does a share of MSFT cost?",
                        "Price of NVDA stock?"],
}


def run_loop(client: openai.OpenAI, prompt: str, tools: list[Tool], first_choice: str, *,
             turns: int, max_tokens: int) -> dict[str, Any]:
    """One agent loop: ask, run each call, feed its result back, until a text answer or
    `turns` model turns."""
    by_name = {t.name: t for t in tools}
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    answered: list[tuple[str, str]] = []  # (name, arguments) of each call run
    keys: list[str] = []
    row: dict[str, Any] = {"prompt": prompt, "choice": first_choice, "tools": len(tools),
                           "repeats": 0, "fed": 0, "calls": 0, "ended": False, "uses": False}
    for turn in range(turns):
        resp = client.chat.completions.create(
            model=MODEL, messages=cast(list[ChatCompletionMessageParam], messages),
            tools=cast(list[ChatCompletionToolUnionParam], [t.wire() for t in tools]),
            tool_choice=cast(ChatCompletionToolChoiceOptionParam,
                             first_choice if turn == 0 else "auto"), max_tokens=max_tokens)
        message = resp.choices[0].message
        calls = cast(list[ChatCompletionMessageFunctionToolCall], message.tool_calls or [])
        row["turns"] = turn + 1
        if not calls:
            text = message.content or ""
            row.update(ended=bool(text.strip()), uses=any(k in text for k in keys),
                       answer=text[:120], finish=resp.choices[0].finish_reason)
            return row
        messages.append({"role": "assistant", "content": message.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {
                "name": c.function.name, "arguments": c.function.arguments}} for c in calls]})
        for call in calls:
            row["calls"] += 1
            arguments = json.loads(call.function.arguments)
            canonical = (call.function.name, json.dumps(arguments, sort_keys=True))
            row["repeats"] += canonical in answered
            row["fed"] += _feeds(arguments, keys)
            answered.append(canonical)
            result, key = by_name[call.function.name].run(arguments)
            keys.append(key)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return row


def _feeds(arguments: dict[str, Any], keys: list[str]) -> bool:
    """Whether a call's arguments hold a result's key value (a converted amount converted
    again): as text, or as the number it is."""
    numbers = {float(k) for k in keys if k.replace(".", "", 1).isdigit()}
    return any(isinstance(v, int | float) and not isinstance(v, bool) and float(v) in numbers
               or isinstance(v, str) and any(k in v for k in keys) for v in arguments.values())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    ended = [r for r in rows if r["ended"]]
    return {"runs": n, "ended_in_text": len(ended),
            "used_the_result": sum(r["uses"] for r in rows),
            "mean_turns_when_ended": round(sum(r["turns"] for r in ended) / len(ended), 2)
            if ended else None,
            "calls": sum(r["calls"] for r in rows),
            "identical_repeats": sum(r["repeats"] for r in rows),
            "results_fed_into_calls": sum(r["fed"] for r in rows)}


def measure(setting: str, *, turns: int, max_tokens: int, model: str | None) -> dict[str, Any]:
    server_args = ["--served-model-name", MODEL, *SETTINGS[setting]]
    server_args += ["--model", model] if model else []
    rows = []
    with ServerProcess(*server_args) as server, openai.OpenAI(
            base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0,
            timeout=600) as client:
        for name, prompts in PROMPTS.items():
            for prompt in prompts:
                for tools in ([TOOLS[name]], list(TOOLS.values())):
                    for choice in ("auto", "required"):
                        rows.append(run_loop(client, prompt, tools, choice, turns=turns,
                                             max_tokens=max_tokens))
    by_choice = {c: summarize([r for r in rows if r["choice"] == c])
                 for c in ("auto", "required")}
    return {"setting": setting, "server_args": SETTINGS[setting], "all": summarize(rows),
            **by_choice,
            "one_tool": summarize([r for r in rows if r["tools"] == 1]),
            "all_tools": summarize([r for r in rows if r["tools"] > 1]), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--settings", default=",".join(SETTINGS),
                   help=f"which of {', '.join(SETTINGS)} to compare")
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--model")
    p.add_argument("--rows", help="write every run's row to this JSON file")
    add_save_flag(p)
    args = p.parse_args(argv)
    found = {"turns": args.turns, "settings": [
        measure(s, turns=args.turns, max_tokens=args.max_tokens, model=args.model)
        for s in args.settings.split(",")]}
    print(json.dumps([{k: v for k, v in s.items() if k != "rows"} for s in found["settings"]],
                     indent=1))
    if args.rows:
        with open(args.rows, "w") as f:
            json.dump(found, f, indent=1)
    if args.save:
        save("agent-loop", found, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
