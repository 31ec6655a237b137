"""BFCL AST accuracy (simple_python, multiple, parallel) with and without the grammar: the
model's own text parsed for calls, constrained calls, and constrained calls after a reasoning
budget, each on the same questions against one real server on the embedded model, greedy.

    strictcall-bench bfcl [--limit 20] [--categories simple_python,multiple,parallel]
        [--settings unconstrained,constrained,reasoning] [--budgets 32,128]
        [--max-tokens 256] [--model DIR] [--out bench/results/scratch/bfcl.json]
        [--server-args "--no-jump-forward"]

Settings (alternating per question, same server):
- unconstrained: no `tools` (nothing is constrained) and, as the system turn, the prompt the
  server writes for tool_choice="required" with `--tool-prompt full` (it shows the call
  syntax, which the grammar writes otherwise); the calls are parsed from the text leniently:
  the JSON list inside <tool_call>...</tool_call> (the closing tag optional), or a bare JSON
  list or object; anything else is no valid call.
- constrained: the question's functions as `tools`, tool_choice="required".
- reasoning-N (one per budget): constrained, plus the `reasoning_budget` strictcall option of
  N tokens. A server that answers 400 for the option is recorded as "unsupported".
- tool-prompt-STYLE (full, compact or none): constrained, with the tools written into the
  prompt that way (the `tool_prompt` strictcall option; `--tool-prompt` on the server).

Per category and setting: BFCL AST accuracy, valid-call rate (unconstrained: the parsed calls
name the question's functions and validate against their schemas; constrained: finish_reason
"tool_calls"), cut-off rate, mean latency (s, end to end), median prompt tokens, mean
completion tokens and, where the server reports them, mean reasoning tokens.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, get_args

import jsonschema
import openai

from bench.accuracy.bfcl_ast import check, described, load, with_instructions
from bench.common.results_file import add_save_flag, save
from grammars import bfcl_to_json_schema
from server.formats.smollm2 import CALL_CLOSE, CALL_OPEN, tools_instructions
from server.options import ToolStyle
from server.process import ServerProcess

CATEGORIES = ("simple_python", "multiple", "parallel")
SETTINGS = ("unconstrained", "constrained", "reasoning")
MODEL = "m"
_DECODER = json.JSONDecoder()

Call = tuple[str, dict[str, Any]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench bfcl", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=20, help="questions per category")
    p.add_argument("--categories", default=",".join(CATEGORIES))
    p.add_argument("--settings", default=",".join(SETTINGS),
                   help="of unconstrained, constrained, reasoning (one per budget)")
    p.add_argument("--budgets", default="32,128", help="reasoning budgets, in tokens")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--model", help="model directory (default: the embedded model)")
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/bfcl.json"))
    p.add_argument("--server-args", default="",
                   help="extra `strictcall serve` flags, e.g. '--no-jump-forward' or "
                        "'--engine torch'")
    add_save_flag(p)
    args = p.parse_args(argv)
    settings = settings_from(args.settings, args.budgets)
    rows, samples = _run(args, settings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {
        "limit": args.limit, "categories": args.categories, "settings": list(settings),
        "max_tokens": args.max_tokens, "model": args.model or "embedded",
        "server_args": args.server_args},
        "rows": rows, "samples": samples}, indent=2))
    print(table(rows))
    print(f"report: {args.out}", file=sys.stderr)
    if args.save:
        save("bfcl", {"settings": list(settings), "max_tokens": args.max_tokens,
                      "model": args.model or "embedded", "rows": rows}, argv)
    return 0


def settings_from(names: str, budgets: str) -> dict[str, dict[str, Any] | None]:
    """Setting name -> the request's `strictcall` options (None: unconstrained)."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in names.split(","):
        if name == "unconstrained":
            out[name] = None
        elif name == "constrained":
            out[name] = {}
        elif name == "reasoning":
            out.update({f"reasoning-{int(n)}": {"reasoning_budget": int(n)}
                        for n in budgets.split(",")})
        elif name.removeprefix("tool-prompt-") in get_args(ToolStyle):
            out[name] = {"tool_prompt": name.removeprefix("tool-prompt-")}
        else:
            raise SystemExit(f"unknown setting {name!r}: use {', '.join(SETTINGS)} or "
                             "tool-prompt-full|compact|none")
    return out


def _run(args: argparse.Namespace, settings: dict[str, dict[str, Any] | None]
         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from tqdm import tqdm

    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    unsupported: dict[str, str] = {}  # setting -> the server's 400 message
    answered: set[str] = set()  # settings the server has answered once
    server_args = ["--served-model-name", MODEL, *shlex.split(args.server_args)] + (
        ["--model", args.model] if args.model else [])
    with ServerProcess(*server_args) as server, openai.OpenAI(
            base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
            timeout=600) as client:
        for category in args.categories.split(","):
            for question, answer in tqdm(load(category, args.limit), desc=category,
                                         file=sys.stderr):
                for setting, options in settings.items():
                    got = samples.setdefault((category, setting), [])
                    if setting in unsupported:
                        continue
                    try:
                        one = _ask(client, question, answer, options, args.max_tokens)
                    except openai.BadRequestError as exc:
                        if options and "reasoning_budget" in options and \
                                setting not in answered:  # the option, not this question
                            unsupported[setting] = str(exc.message)
                            continue
                        one = _failed(exc)
                    except openai.APIStatusError as exc:
                        one = _failed(exc)
                    if one["status"] == "ok":
                        answered.add(setting)
                    got.append({"id": question["id"], "setting": setting, **one})
    rows = []
    for (category, setting), got in samples.items():
        rows.append(unsupported_row(category, setting, unsupported[setting])
                    if setting in unsupported else _summary(category, setting, got))
    return rows, [s for got in samples.values() for s in got]


def _ask(client: openai.OpenAI, question: dict[str, Any], answer: dict[str, Any],
         options: dict[str, Any] | None, max_tokens: int) -> dict[str, Any]:
    """One request in one setting; its outcome (status "ok")."""
    functions = question["function"]
    messages = list(question["question"][0])
    kwargs: dict[str, Any] = {}
    if options is None:  # unconstrained: the server's prompt for tools, and no tools
        messages = with_instructions(messages, tools_instructions(described(functions)))
    else:
        kwargs = {"tools": [{"type": "function", "function": f} for f in functions],
                  "tool_choice": "required"}
        if options:
            kwargs["extra_body"] = {"strictcall": options}
    start = time.perf_counter()
    resp = client.chat.completions.create(model=MODEL, messages=messages,
                                          max_tokens=max_tokens, temperature=0, **kwargs)
    seconds = time.perf_counter() - start
    choice = resp.choices[0]
    if options is None:
        text = choice.message.content or ""
        calls = parse_calls(text)
    else:
        text = json.dumps([[c.function.name, c.function.arguments]
                           for c in choice.message.tool_calls or []])
        calls = _tool_calls(choice.message.tool_calls or [])
    conforms = calls is not None and schema_valid(calls, functions)
    details = resp.usage.completion_tokens_details if resp.usage else None
    return {"status": "ok", "finish": choice.finish_reason,
            "valid": conforms if options is None else choice.finish_reason == "tool_calls",
            "schema_valid": conforms, "correct": calls is not None and check(calls, answer),
            "seconds": seconds, "tokens": resp.usage.completion_tokens if resp.usage else 0,
            "prompt_tokens": resp.usage.prompt_tokens if resp.usage else None,
            "reasoning_tokens": getattr(details, "reasoning_tokens", None),
            "reasoning_content": getattr(choice.message, "reasoning_content", None) is not None,
            "text": text[:500]}


def _failed(exc: openai.APIStatusError) -> dict[str, Any]:
    """A request the server refused or failed: no valid call, not timed."""
    return {"status": f"error {exc.status_code}", "valid": False, "schema_valid": False,
            "correct": False, "text": str(exc.message)[:500]}


def parse_calls(text: str) -> list[Call] | None:
    """The calls in a model's free text, read leniently: the JSON list (or one object) inside
    each <tool_call>...</tool_call> (the closing tag optional), else the first JSON list or
    object in the text; text after the JSON is ignored. None when there is no call or any
    item is not {"name": str, "arguments": object (or a JSON string of one)}."""
    if CALL_OPEN in text:
        blocks = [part.split(CALL_CLOSE, 1)[0] for part in text.split(CALL_OPEN)[1:]]
    else:
        blocks = [text]
    calls: list[Call] = []
    for block in blocks:
        value = _first_json(block)
        for item in value if isinstance(value, list) else [value]:
            call = _call(item)
            if call is None:
                return None
            calls.append(call)
    return calls or None


def _first_json(text: str) -> Any:
    """The JSON list or object that starts at the first `[` or `{` of `text`, else None."""
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return None
    try:
        return _DECODER.raw_decode(text, min(starts))[0]
    except json.JSONDecodeError:
        return None


def _call(item: Any) -> Call | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    arguments = item.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    return (item["name"], arguments) if isinstance(arguments, dict) else None


def _tool_calls(tool_calls: list[Any]) -> list[Call] | None:
    """The response's tool calls with their arguments decoded; None if none or any is not a
    JSON object."""
    calls = [_call({"name": c.function.name, "arguments": c.function.arguments})
             for c in tool_calls]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def schema_valid(calls: list[Call], functions: list[dict[str, Any]]) -> bool:
    """Whether each call names one of `functions` and its arguments validate against that
    function's parameters (converted to JSON Schema)."""
    schemas = {f["name"]: bfcl_to_json_schema(f["parameters"]) for f in functions}
    for name, arguments in calls:
        if name not in schemas:
            return False
        try:
            jsonschema.validate(arguments, schemas[name])
        except jsonschema.ValidationError:
            return False
    return bool(calls)


def _summary(category: str, setting: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(samples)
    ok = [s for s in samples if s["status"] == "ok"]
    reasoning = [s["reasoning_tokens"] for s in ok if s["reasoning_tokens"] is not None]
    prompts = [s["prompt_tokens"] for s in ok if s.get("prompt_tokens") is not None]
    return {"category": category, "setting": setting, "status": "ok", "n": n,
            "errors": n - len(ok),
            "ast_accuracy": sum(s["correct"] for s in samples) / n,
            "valid": sum(s["valid"] for s in samples) / n,
            "schema_valid": sum(s["schema_valid"] for s in samples) / n,
            "cut_off": sum(s.get("finish") == "length" for s in samples) / n,
            "mean_s": statistics.mean(s["seconds"] for s in ok) if ok else None,
            "mean_tokens": statistics.mean(s["tokens"] for s in ok) if ok else None,
            "prompt_tokens": statistics.median(prompts) if prompts else None,
            "mean_reasoning_tokens": statistics.mean(reasoning) if reasoning else None,
            "reasoning_content": sum(s["reasoning_content"] for s in ok) / n}


def unsupported_row(category: str, setting: str, message: str) -> dict[str, Any]:
    return {"category": category, "setting": setting, "status": "unsupported", "n": 0,
            "error": message}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| category | setting | n | AST accuracy | valid calls | cut off | mean s | "
             "prompt tokens (median) | mean tokens | mean reasoning tokens |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "unsupported":
            lines.append(f"| {r['category']} | {r['setting']} | - | unsupported | | | | | | |")
            continue
        lines.append(f"| {r['category']} | {r['setting']} | {r['n']} | "
                     f"{r['ast_accuracy']:.0%} | {r['valid']:.0%} | {r['cut_off']:.0%} | "
                     f"{_num(r['mean_s'], '.2f')} | {_num(r.get('prompt_tokens'), '.0f')} | "
                     f"{_num(r['mean_tokens'], '.1f')} | "
                     f"{_num(r['mean_reasoning_tokens'], '.1f')} |")
    return "\n".join(lines)


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


if __name__ == "__main__":
    raise SystemExit(main())
