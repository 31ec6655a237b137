"""Grounded fields, measured: what a model writes for values the user must give, with
grounding on and off, on support dialogues written like real chats (bench/dialogue/data/
grounding_dialogues.yaml: amounts as "1 200,50 ₽", "$1,200.50", "€2.300,00"; dates as
"вчера", "позавчера", "30.11", "last Friday"; ids inside compact JSON tool results; a
customer profile in the system message; ids never given; a correction of one of two
numbers of one type; English, Russian, German, Spanish).

    strictcall-bench grounding [--sampled 2] [--url URL] [--save]

Each dialogue's tool is forced (named tool_choice), against one real server on the embedded
model (or `--url`), greedy, then `--sampled` seeds at temperature 1. A dialogue is one
request (`turns`), or several in one session (`steps`, the client keeping the messages).
Every answer is judged field by field against the values the dialogue's author wrote by
hand for that point (`expect`), never by anything the server computes
(server/eval/dialogues.py `judge_fields`):

    correct        the value the user gave
    asked_given    a question about a value the user gave (the cost of asking)
    asked_missing  a question about a value nobody gave (right)
    invented       a value where nobody gave one
    wrong          another value than the one given (an amount used as a card)
    changed        a value that moved while the user changed nothing (steps only)
    left_out       a given value the answer does not show (an optional field written null)
    not_shown      nothing given and nothing shown
    confirming     a confirmation question about a value the user just changed
    error          the answer was no 200 (every field of it, counted against)
per setting and language, and per setting and field; and the end-to-end latency's median
per setting."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import openai
import yaml

from bench.common.results_file import add_save_flag, save
from server.eval.judge import GOLD_MEASURES, asked_fields, dated, judge_fields

DATA = Path(__file__).parent / "data" / "grounding_dialogues.yaml"
SETTINGS = {"grounding-on": True, "grounding-off": False}
# A non-200 answer is an error for each of its fields, counted against (never "not shown").
MEASURES = (*GOLD_MEASURES, "error")


def load(path: Path = DATA) -> list[dict[str, Any]]:
    """The dialogues, each as its steps (one step: one request), their dates (in the
    gold values and the messages: a system's "Today is {today}") made concrete for today
    ({today}, {yesterday}, {ago:N}, {date:DD.MM}, {next:DD.MM})."""
    dialogues = yaml.safe_load(path.read_text())
    for d in dialogues:
        steps = d.get("steps") or [{"messages": d["turns"], "expect": d["expect"]}]
        d["steps"] = [{**s, "messages": [{**m, "content": dated(m["content"])}
                                         for m in s["messages"]],
                       "expect": {k: dated(v) for k, v in s["expect"].items()}}
                      for s in steps]
    return list(dialogues)


def outcome(body: dict[str, Any]) -> tuple[dict[str, Any], set[str], set[str]]:
    """(the values an answer shows, the fields it asks for, the fields it asks to
    confirm) of one chat completion."""
    message = body["choices"][0]["message"]
    extension = body.get("strictcall") or {}
    needs = extension.get("needs_input")
    if needs:
        asked, confirming = asked_fields(extension)
        return dict(needs.get("collected") or {}), asked, confirming
    calls = message.get("tool_calls") or []
    return (json.loads(calls[0]["function"]["arguments"]) if calls else {}), set(), set()


def summarize(samples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                      dict[str, float]]:
    """Rows per (setting, language) and per (setting, field), and latency per setting."""
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for s in samples:
        for name, judged in s["scores"].items():
            measure = judged if s.get("status", 200) == 200 else "error"
            counts.setdefault((s["setting"], "language", s["language"]), Counter())[
                measure] += 1
            counts.setdefault((s["setting"], "field", name), Counter())[measure] += 1
    rows = [{"setting": setting, "by": by, "group": group, "answers": sum(c.values()),
             **{m: c.get(m, 0) for m in MEASURES}}
            for (setting, by, group), c in sorted(counts.items())]
    latency = {setting: round(statistics.median(
        s["seconds"] for s in samples if s["setting"] == setting), 3)
        for setting in {s["setting"] for s in samples}}
    return rows, latency


def table(rows: list[dict[str, Any]], *, by: str = "language") -> str:
    head = ["setting", by, "answers", *MEASURES]
    lines = ["| " + " | ".join(h.replace("_", " ") for h in head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        if r.get("by", "field") == by:  # (rows of earlier runs: by field only)
            group = r.get("group", r.get(by, ""))
            lines.append("| " + " | ".join(str(group if k == by else r.get(k, ""))
                                           for k in head) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench grounding", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sampled", type=int, default=2, help="seeds at temperature 1 besides "
                                                          "the greedy answer")
    p.add_argument("--url", help="a StrictCall server already running (default: start one "
                                 "on the embedded model with the example contracts)")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/grounding.json"))
    add_save_flag(p)
    args = p.parse_args(argv)
    dialogues = load(args.data)
    if args.url:
        samples = _run(args.url, dialogues, args.sampled)
    else:
        from server.process import ServerProcess

        with ServerProcess("--served-model-name", "m", "--contracts", "contracts.examples",
                           "--state-url", "memory://") as server:
            samples = _run(server.base_url, dialogues, args.sampled)
    rows, latency = summarize(samples)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "strictcall-bench grounding " + " ".join(
        argv or sys.argv[1:]), "rows": rows, "latency_p50_s": latency,
        "samples": samples}, indent=2, ensure_ascii=False))
    if args.save:
        # every answer's row: its dialogue, step, seed, status, values, questions, verdicts
        save("grounding", {"rows": rows, "latency_p50_s": latency, "samples": samples}, argv)
    print(table(rows, by="language") + "\n\n" + table(rows, by="field"))
    print("\nlatency p50 (s): " + ", ".join(f"{k}={v}" for k, v in sorted(latency.items())))
    return 0


def _run(url: str, dialogues: list[dict[str, Any]], sampled: int) -> list[dict[str, Any]]:
    from openai import OpenAI

    client = OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key="-", max_retries=0,
                    timeout=600)
    model = client.models.list().data[0].id
    runs = [(0.0, None)] + [(1.0, seed) for seed in range(sampled)]
    samples = []
    for i, d in enumerate(dialogues):
        for setting, on in SETTINGS.items():
            for temperature, seed in runs:
                samples += _dialogue(client, model, d, setting, on, temperature, seed)
        print(f"\r{i + 1}/{len(dialogues)} dialogues", end="", file=sys.stderr)
    print(file=sys.stderr)
    return samples


def _dialogue(client: Any, model: str, d: dict[str, Any], setting: str, on: bool,
              temperature: float, seed: int | None) -> list[dict[str, Any]]:
    """One dialogue's steps in one session; each answer judged against its step's gold."""
    session, messages, out = f"bench_{uuid.uuid4().hex}", [], []
    before: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    for n, step in enumerate(d["steps"], start=1):
        messages += step["messages"]
        started = time.perf_counter()
        try:
            raw = client.chat.completions.with_raw_response.create(
                model=model, messages=messages, max_tokens=200, temperature=temperature,
                seed=seed, tools=[{"type": "function", "function": {"name": d["tool"]}}],
                tool_choice={"type": "function", "function": {"name": d["tool"]}},
                extra_body={"strictcall": {"grounding": on, "session": session}})
            status, text = raw.http_response.status_code, raw.text
        except openai.APIStatusError as exc:  # (the client raises on a 4xx or 5xx: an
            status, text = exc.status_code, exc.response.text  # error, counted against)
        seconds = time.perf_counter() - started
        body = json.loads(text) if status == 200 else None
        shown, asked, confirming = outcome(body) if body else ({}, set(), set())
        if body is not None:
            message = body["choices"][0]["message"]
            messages = [*messages, {k: v for k, v in message.items()
                                    if k in ("role", "content", "tool_calls") and v}]
        scores = judge_fields(step["expect"], shown, asked=asked, confirming=confirming,
                              before_gold=before[0], before_shown=before[1])
        before = (step["expect"], {**before[1], **{k: v for k, v in shown.items()
                                                   if v is not None}})
        out.append({"dialogue": d["id"], "step": n, "language": d["language"],
                    "setting": setting, "seed": seed, "seconds": round(seconds, 3),
                    "values": shown, "asked": sorted(asked | confirming), "status": status,
                    "scores": scores})
    return out
