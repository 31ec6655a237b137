"""Grounded fields, measured: what a model writes for values the user must give, with
grounding on and off, on support dialogues written like real chats (bench/data/
grounding_dialogues.yaml: dirty amounts, "вчера", card numbers with dots, two candidate ids
in one message, ids never given; English, Russian, German, Spanish).

    strictcall-bench grounding [--sampled 2] [--url URL] [--save]

Each dialogue's tool is forced (named tool_choice), against one real server on the embedded
model (or `--url`), greedy, then `--sampled` seeds at temperature 1. Per field, over every
answer (a call's arguments, or what a question collected):

    correct        the value the dialogue gives
    invented       a value found nowhere in the conversation, even after normalizing
    wrong_present  another value the conversation holds (an amount used as a card)
    asked_missing  a question where the dialogue never gives it (right)
    asked_present  a question where the dialogue gives it (the cost of asking)
    left_out       not given, in a call (an optional field)
and the end-to-end latency's median per setting."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.results_file import add_save_flag, save

DATA = Path(__file__).parent / "data" / "grounding_dialogues.yaml"
SETTINGS = {"grounding-on": True, "grounding-off": False}
MEASURES = ("correct", "invented", "wrong_present", "asked_missing", "asked_present",
            "left_out")


def load(path: Path = DATA, *, today: dt.date | None = None) -> list[dict[str, Any]]:
    """The dialogues, their relative dates (YESTERDAY, TODAY) made concrete."""
    today = today or dt.date.today()
    days = {"TODAY": today.isoformat(),
            "YESTERDAY": (today - dt.timedelta(days=1)).isoformat()}
    dialogues = yaml.safe_load(path.read_text())
    for d in dialogues:
        d["expect"] = {k: days.get(v, v) if isinstance(v, str) else v
                       for k, v in d["expect"].items()}
    return list(dialogues)


def outcome(body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """(the values that came back, the fields asked about) of one chat completion."""
    message = body["choices"][0]["message"]
    needs = (body.get("strictcall") or {}).get("needs_input")
    if needs:
        asked = {q["field"].lstrip("/") for q in needs.get("missing", [])} | \
            {q["field"].lstrip("/") for q in needs.get("confirm", [])}
        return dict(needs.get("collected") or {}), asked
    calls = message.get("tool_calls") or []
    return (json.loads(calls[0]["function"]["arguments"]) if calls else {}), set()


def score(expect: dict[str, Any], values: dict[str, Any], asked: set[str],
          present: Callable[[str, Any], bool]) -> dict[str, str]:
    """Each grounded field's measure; `present(field, value)`: the conversation holds it."""
    out: dict[str, str] = {}
    for name, want in expect.items():
        got = values.get(name)
        if name in asked:
            out[name] = "asked_missing" if want is None else "asked_present"
        elif got is None:
            out[name] = "left_out"
        elif want is not None and _same(got, want):
            out[name] = "correct"
        elif present(name, got):
            out[name] = "wrong_present"
        else:
            out[name] = "invented"
    return out


def _same(got: Any, want: Any) -> bool:
    return str(got).casefold() == str(want).casefold()


def table(rows: list[dict[str, Any]]) -> str:
    head = ["setting", "field", "answers", *MEASURES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in head) + " |")
    return "\n".join(lines)


def summarize(samples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    counts: dict[tuple[str, str], Counter[str]] = {}
    for s in samples:
        for name, measure in s["scores"].items():
            counts.setdefault((s["setting"], name), Counter())[measure] += 1
    rows = [{"setting": setting, "field": name, "answers": sum(c.values()),
             **{m: c.get(m, 0) for m in MEASURES}}
            for (setting, name), c in sorted(counts.items())]
    latency = {setting: round(statistics.median(
        s["seconds"] for s in samples if s["setting"] == setting), 3)
        for setting in {s["setting"] for s in samples}}
    return rows, latency


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench grounding", description=__doc__)
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

        with ServerProcess("--served-model-name", "m", "--contracts",
                           "contracts.examples") as server:
            samples = _run(server.base_url, dialogues, args.sampled)
    rows, latency = summarize(samples)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "strictcall-bench grounding " + " ".join(
        argv or sys.argv[1:]), "rows": rows, "latency_p50_s": latency,
        "samples": samples}, indent=2, ensure_ascii=False))
    if args.save:
        save("grounding", {"rows": rows, "latency_p50_s": latency}, argv)
    print(table(rows))
    print("\nlatency p50 (s): " + ", ".join(f"{k}={v}" for k, v in sorted(latency.items())))
    return 0


def _run(url: str, dialogues: list[dict[str, Any]], sampled: int) -> list[dict[str, Any]]:
    from openai import OpenAI

    from contracts import contract_of
    from contracts.examples import CheckAccessRequestStatus, OpenDispute

    contracts = {c.name: c for c in map(contract_of, (OpenDispute, CheckAccessRequestStatus))}
    client = OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key="-", max_retries=0,
                    timeout=600)
    model = client.models.list().data[0].id
    runs = [(0.0, None)] + [(1.0, seed) for seed in range(sampled)]
    samples = []
    for i, d in enumerate(dialogues):
        present = _presence(contracts[d["tool"]], d["turns"])
        for setting, on in SETTINGS.items():
            for temperature, seed in runs:
                started = time.perf_counter()
                raw = client.chat.completions.with_raw_response.create(
                    model=model, messages=d["turns"], max_tokens=200, temperature=temperature,
                    seed=seed, tools=[{"type": "function", "function": {"name": d["tool"]}}],
                    tool_choice={"type": "function", "function": {"name": d["tool"]}},
                    extra_body={"strictcall": {"grounding": on}})
                seconds = time.perf_counter() - started
                body = json.loads(raw.text) if raw.http_response.status_code == 200 else None
                values, asked = outcome(body) if body else ({}, set())
                samples.append({"dialogue": d["id"], "setting": setting, "seed": seed,
                                "seconds": round(seconds, 3), "values": values,
                                "asked": sorted(asked), "status":
                                raw.http_response.status_code,
                                "scores": score(d["expect"], values, asked, present)})
        print(f"\r{i + 1}/{len(dialogues)} dialogues", end="", file=sys.stderr)
    print(file=sys.stderr)
    return samples


def _presence(contract: Any, turns: list[dict[str, Any]]) -> Callable[[str, Any], bool]:
    """Whether a value is in the conversation: one of the field's candidates (spans through
    its normalizing, as the server finds them) or, as text, within what was said."""
    from server.pipeline.grounding import evidence, ground
    from server.task import Turn

    texts = evidence([Turn(t["role"], t.get("content") or "") for t in turns])
    found = ground(contract.schema(), contract, texts)
    context = {"today": dt.date.today()}
    normal: dict[str, set[str]] = {}
    for name, values in found.candidates().items():
        normal[name] = {str(contract.fields.normalized(name, v, context=context)[1])
                        for v in values} | {str(v) for v in values}
    core = "".join(c for c in " ".join(texts).casefold() if c.isalnum())

    def present(name: str, value: Any) -> bool:
        as_text = "".join(c for c in str(value).casefold() if c.isalnum())
        return str(value) in normal.get(name, set()) or (bool(as_text) and as_text in core)
    return present
