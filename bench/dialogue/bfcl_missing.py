"""BFCL v4 multi-turn missing-parameter turns, StrictCall beside llama.cpp's `llama-server`
on the same real model: the turn where the user leaves out a value the call needs, whose
right answer is no call (BFCL's ground truth for it is empty: ask the user).

    strictcall-bench bfcl-missing [--data ~/.cache/strictcall/bfcl] [--model
        qwen2.5-coder-0.5b] [--limit 20] [--offset 0] [--systems
        strictcall-llamacpp,llama-server]
        [--grounding on,off,values] [--max-tokens 256] [--threads 1] [--save
        [--save-variant smollm2]]

The data is not in ../shared/evaldata (it holds the base category): get the two files of
the gorilla repository (berkeley-function-call-leaderboard/bfcl_eval/data/
BFCL_v4_multi_turn_miss_param.json and possible_answer/ of the same name) into `--data`,
the second named `possible_answer_BFCL_v4_multi_turn_miss_param.json`. The classes that
run the calls are the base category's (evaldata's func_source_code).

Each dialogue is replayed up to its first turn with an empty ground truth: the turns before
it as the user said them, each answered by its ground-truth calls (run on BFCL's own
classes, their results as tool messages), so every system meets the missing turn in the
same state. That turn is sent with the involved classes' functions as tools, tool_choice
"auto", greedy; `--grounding values` marks every integer and number parameter (and each
item of an array of them) grounded too (BFCL's missing value is often a count: "the last
several lines"). Per system and
setting, each answer is one of: asked (a text with a
question mark, or StrictCall's `needs_input`), called (acting on what the user did not
give; of those calls, the ones carrying a value nobody gave are invented: a string not
written in the conversation, a number written there neither in digits nor in words and not
its parameter's default, an array's items alike), a call written as text (an offered
function's name in JSON or call syntax in the text: no call a client can run, no question
either), other text, empty, cut off
(finish_reason "length"), error (a non-200 answer, counted against). With grounding on,
every free string parameter (and each item of an array of them) is marked
`x-strictcall-grounded` (bench/bfcl_multi_turn_data `marked_grounded`); the peer takes no
such mark and runs once.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from text_to_num import alpha2digit

from bench.accuracy.bfcl_peer import _gguf, served
from bench.common.results_file import add_save_flag, save
from bench.dialogue.bfcl_multi_turn_data import functions, tools
from bench.dialogue.bfcl_multi_turn_exec import DialogueBackends
from bench.speed.latency_workload import MODEL

CATEGORY = "BFCL_v4_multi_turn_miss_param.json"
SYSTEMS = ("strictcall-llamacpp", "llama-server")
DATA = Path("~/.cache/strictcall/bfcl")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench bfcl-missing", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--model", default="qwen2.5-coder-0.5b",
                   help="a GGUF file, or a name `strictcall fetch-model` knows")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0,
                   help="skip this many dialogues first (turns beyond the first 20 ones)")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--grounding", default="on,off")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    add_save_flag(p, variants=True)
    args = p.parse_args(argv)
    dialogues = load(args.data.expanduser(), args.limit, args.offset)
    gguf = _gguf(args.model)
    answers: list[dict[str, Any]] = []
    for system in args.systems.split(","):
        settings = args.grounding.split(",") if system.startswith("strictcall") else ["off"]
        answers += _run_system(system, settings, gguf, dialogues, args)
    rows = [summary(system, setting, [a for a in answers
                                      if (a["system"], a["grounding"]) == (system, setting)])
            for system, setting in dict.fromkeys((a["system"], a["grounding"])
                                                 for a in answers)]
    print(table(rows))
    if args.save:
        save("bfcl-missing", {"model": args.model, "gguf": gguf.name, "threads": args.threads,
                              "max_tokens": args.max_tokens,
                              "invented_judge": "strings and numbers", "rows": rows,
                              "answers": answers}, argv, variant=args.save_variant)
    return 0


def load(data: Path, limit: int, offset: int = 0
         ) -> list[tuple[dict[str, Any], list[list[str]], int]]:
    """(dialogue, ground truth per turn, the missing turn's index), at most `limit`, after
    the first `offset`."""
    question, truth = data / CATEGORY, data / f"possible_answer_{CATEGORY}"
    if not question.is_file() or not truth.is_file():
        raise SystemExit(f"no {question} or {truth}: get them from the gorilla repository "
                         "(see `strictcall-bench bfcl-missing --help`)")
    truths = {e["id"]: e["ground_truth"] for e in _lines(truth)}
    out = []
    for entry in _lines(question):
        turns = truths.get(entry["id"])
        missing = next((i for i, calls in enumerate(turns or []) if not calls), None)
        if turns is not None and missing is not None:
            out.append((entry, turns, missing))
    return out[offset:offset + limit]


def history(entry: dict[str, Any], truth: list[list[str]], missing: int
            ) -> list[dict[str, Any]]:
    """The turns before `missing`, each answered by its ground-truth calls and their
    results, then the missing turn's user message."""
    docs = {d["name"]: d for d in functions(entry["involved_classes"])}
    backends = DialogueBackends(entry)
    messages: list[dict[str, Any]] = []
    for index in range(missing):
        messages += entry["question"][index]
        calls = truth[index]
        if not calls:
            continue
        results = backends.run("truth", calls)
        ids = [f"call_{index}_{n}" for n in range(len(calls))]
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "type": "function", "function": {
                "name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in zip(ids, (parsed(c, docs) for c in calls),
                                            strict=True)]})
        messages += [{"role": "tool", "tool_call_id": i, "content": str(r)}
                     for i, r in zip(ids, results, strict=True)]
    asked: list[dict[str, Any]] = entry["question"][missing]
    return messages + asked


def parsed(call: str, docs: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """`cd(folder='document')` as (name, arguments); positional arguments named by the
    function doc's parameter order (`sort('final_report.pdf')`)."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), call
    name = node.func.id
    order = list((docs.get(name, {}).get("parameters") or {}).get("properties", {}))
    arguments = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    return name, arguments


def _run_system(system: str, settings: list[str], gguf: Path,
                dialogues: list[tuple[dict[str, Any], list[list[str]], int]],
                args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with served(system, gguf, args.threads) as client:
        for entry, truth, missing in dialogues:
            messages = history(entry, truth, missing)
            for setting in settings:
                one = ask(client, entry, messages, grounded=setting in ("on", "values"),
                          numbers=setting == "values", max_tokens=args.max_tokens,
                          strictcall=system != "llama-server")
                out.append({"system": system, "grounding": setting, "id": entry["id"],
                            "turn": missing, **one})
                print(f"{system} grounding={setting} {entry['id']}: {one['verdict']}"
                      + "".join(f" {c}" for c in one.get("calls") or ()),
                      file=sys.stderr, flush=True)
    return out


def ask(client: httpx.Client, entry: dict[str, Any], messages: list[dict[str, Any]], *,
        grounded: bool, max_tokens: int, strictcall: bool,
        numbers: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
        "tools": tools(functions(entry["involved_classes"]), grounded=grounded,
                       numbers=numbers),
        "tool_choice": "auto"}
    if strictcall:
        body["strictcall"] = {"grounding": grounded}
    start = time.perf_counter()
    response = client.post("/v1/chat/completions", json=body)
    seconds = round(time.perf_counter() - start, 2)
    if response.status_code != 200:
        return {"status": response.status_code, "verdict": "error", "seconds": seconds,
                "text": response.text[:300]}
    answer = response.json()
    choice = answer["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    offered = {t["function"]["name"]: t["function"].get("parameters") or {}
               for t in body["tools"]}
    invented = [v for c in calls for v in invented_values(
        c["function"]["arguments"], messages, offered.get(c["function"]["name"], {}))]
    text = choice["message"].get("content") or ""
    question = "needs_input" in (answer.get("strictcall") or {})
    verdict = "cut_off" if choice["finish_reason"] == "length" else "called" if calls \
        else "question" if question \
        else text_kind(text, {t["function"]["name"] for t in body["tools"]})
    return {"status": 200, "verdict": verdict, "seconds": seconds, "question": question,
            "calls": [f"{c['function']['name']}({c['function']['arguments']})"
                      for c in calls][:4], "invented": invented[:8],
            "text": (choice["message"].get("content") or "")[:300]}


def text_kind(text: str, names: set[str]) -> str:
    """A text answer, judged: "question" (it asks: a question mark), "call_as_text" (a
    call written into the text: an offered function's name beside JSON or a call's
    parentheses, the way the 0.5B and llama-server write them), "empty", else "text"."""
    stripped = text.strip()
    if not stripped:
        return "empty"
    written = re.compile(r"(?:\\?[\"']name\\?[\"']\s*:\s*\\?[\"']|\b)(" +
                         "|".join(map(re.escape, sorted(names, key=len, reverse=True))) +
                         r")\b(?:\\?[\"']|\s*\()") if names else None
    if written is not None and (written.search(stripped) and ("{" in stripped
                                                              or "(" in stripped)):
        return "call_as_text"
    return "question" if "?" in stripped else "text"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def invented_values(arguments: str, messages: list[dict[str, Any]],
                    parameters: dict[str, Any]) -> list[Any]:
    """The values of one call's `arguments` that nobody gave: a string the conversation
    (`messages`, tool results included) does not hold; a number it writes neither in
    digits nor in English words ("five", "twenty") that is not its parameter's default
    (omitting it gives the same); each item of an array alike. Booleans are a choice the
    tool offers, not a value the user must give: never counted."""
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return [arguments]
    if not isinstance(values, dict):
        return []
    said = json.dumps(messages, ensure_ascii=False).casefold()
    texts = "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
    numbers = {float(n) for n in _NUMBER.findall(alpha2digit(texts, "en", threshold=0))}
    properties = parameters.get("properties") or {}
    out: list[Any] = []
    for name, value in values.items():
        default = (properties.get(name) or {}).get("default")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool):
                continue
            unsaid = item.strip() != "" and item.casefold() not in said \
                if isinstance(item, str) else isinstance(item, int | float) \
                and float(item) not in numbers and item != default
            if unsaid:
                out.append(item)
    return out


KINDS = ("question", "called", "call_as_text", "text", "empty", "cut_off", "error")


def summary(system: str, setting: str, answers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"system": system, "grounding": setting, "n": len(answers),
            **{kind: sum(a["verdict"] == kind for a in answers) for kind in KINDS},
            "strictcall_questions": sum(bool(a.get("question")) for a in answers),
            "invented": sum(bool(a.get("invented")) for a in answers)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | grounding | n | asked (a question) | of them StrictCall's | called | "
             "calls with an invented value | a call written as text | other text | empty | "
             "cut off | errors |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['system']} | {r['grounding']} | {r['n']} | {r['question']} | "
              f"{r['strictcall_questions']} | {r['called']} | {r['invented']} | "
              f"{r['call_as_text']} | {r['text']} | {r['empty']} | {r['cut_off']} | "
              f"{r['error']} |" for r in rows]
    return "\n".join(lines)


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
