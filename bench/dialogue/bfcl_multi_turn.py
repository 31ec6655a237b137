"""BFCL v4 multi-turn (multi_turn_base) replayed turn by turn against a StrictCall server,
scored by state as BFCL scores it, with grounding off and on.

    strictcall-bench bfcl-multi-turn [--limit 10] [--offset 0] [--every 1] [--max-steps 5]
        [--settings grounding-off,grounding-on] [--max-tokens 256] [--url URL]
        [--model DIR] [--server-args "..."] [--out bench/results/scratch/bfcl-multi-turn.json]
        [--save]

Each dialogue (read in place from ../shared/evaldata/bfcl/multi_turn) is sent through the
official `openai` client, greedy, tool_choice "auto", its involved classes' functions as
tools (JSON Schema converted from BFCL's dialect). Within a turn every call the model makes
runs on live instances of BFCL's own classes (bench/dialogue/bfcl_multi_turn_exec.py), its
result goes back as a tool message, and the model continues until it answers without a call or has
called in `--max-steps` requests (BFCL allows 20; a turn cut off there fails, as BFCL's forced
quit does). A turn is correct when the model's instances equal the ground truth's after it
and the ground truth's results are among the model's; a dialogue when every turn is.

Settings (alternating per dialogue, one server):
- grounding-off: the schemas as given, `strictcall.grounding: false`.
- grounding-on: every top-level string parameter without an enum marked
  `"x-strictcall-grounded": true` (values copied from the user's turns and tool results),
  `strictcall.grounding: true`.

Per setting: dialogues and turns correct, requests, calls made, questions (responses with
`strictcall.needs_input`: a call the server turned into a question), answers cut off at
`--max-tokens` (finish_reason "length": no call), turns cut at the step limit (and of those,
the ones whose state and results were right all the same), failed
requests by status and error code, median prompt tokens and latency per request, why turns
failed, and the server's deaths: a server this run started is killed past
`--max-server-gib` resident memory (rather than the machine's OOM killer choosing among
everyone's processes) and the next dialogue gets a new one (bench/common/server_guard.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

from bench.common.results_file import add_save_flag, save
from bench.common.server_guard import GuardedServer
from bench.dialogue.bfcl_multi_turn_data import call_string, functions, load, tools
from bench.dialogue.bfcl_multi_turn_exec import DialogueBackends, TurnChecks, score_turn

SETTINGS = {"grounding-off": False, "grounding-on": True}  # name -> grounded
MODEL = "m"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strictcall-bench bfcl-multi-turn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=10, help="dialogues (of 200)")
    p.add_argument("--offset", type=int, default=0, help="dialogues skipped first")
    p.add_argument("--every", type=int, default=1,
                   help="every k-th dialogue from the offset (the file is grouped by API "
                        "class; e.g. 8 spreads 25 dialogues over all 200)")
    p.add_argument("--max-steps", type=int, default=5,
                   help="requests with calls per turn before it is cut off (BFCL: 20)")
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--url", help="a running server (default: start one on the embedded "
                                 "model)")
    p.add_argument("--model", help="model directory (default: the embedded model)")
    p.add_argument("--server-args", default="", help="extra `strictcall serve` flags")
    p.add_argument("--max-server-gib", type=float, default=6.0,
                   help="the started server is killed past this resident memory (a death "
                        "in the report; the next dialogue gets a new server)")
    p.add_argument("--out", type=Path,
                   default=Path("bench/results/scratch/bfcl-multi-turn.json"))
    add_save_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = [s for s in args.settings.split(",") if s]
    if unknown := [s for s in settings if s not in SETTINGS]:
        raise SystemExit(f"unknown setting {unknown[0]!r}: use {', '.join(SETTINGS)}")
    shown = {"limit": args.limit, "offset": args.offset, "every": args.every,
             "max_steps": args.max_steps, "max_tokens": args.max_tokens,
             "max_server_gib": args.max_server_gib, "model": args.model or "embedded",
             "url": args.url, "server_args": args.server_args}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def report(records: list[dict[str, Any]], deaths: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
        rows = [summary(s, [r for r in records if r["setting"] == s],
                        [d for d in deaths if d["during"].endswith(f" {s}")])
                for s in settings]
        args.out.write_text(json.dumps({"args": shown, "rows": rows, "server_deaths": deaths,
                                        "dialogues": records}, indent=1))
        return rows

    # SIGTERM (timeout, kill) leaves through the `with` blocks: the server child goes too
    before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        records, deaths = run(args, settings, after_each=report)  # a stop keeps what ran
    finally:
        signal.signal(signal.SIGTERM, before)
    rows = report(records, deaths)
    print(table(rows))
    print(f"report: {args.out}", file=sys.stderr)
    if args.save:
        save("bfcl-multi-turn", {"args": shown, "rows": rows, "server_deaths": [
            {k: d[k] for k in ("during", "why")} for d in deaths],
            "dialogues": [verdicts(r) for r in records]}, argv)
    return 0


def run(args: argparse.Namespace, settings: list[str],
        after_each: Callable[[list[dict[str, Any]], list[dict[str, Any]]], object]
        = lambda records, deaths: None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every dialogue of the slice in every setting (alternating), against one server (a
    new one after a death); the records and the server's deaths. `after_each` sees them
    after each dialogue."""
    from tqdm import tqdm

    records: list[dict[str, Any]] = []
    with _server(args) as server, contextlib.ExitStack() as clients:
        replay = None
        for entry, truth in tqdm(load(args.limit, args.offset, args.every), desc="dialogues",
                                 file=sys.stderr):
            for setting in settings:
                server.during = f"{entry['id']} {setting}"
                if replay is None or not server.alive():
                    client = clients.enter_context(openai.OpenAI(
                        base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                        timeout=900))
                    model = MODEL if args.url is None else client.models.list().data[0].id
                    replay = DialogueReplay(client, model, max_steps=args.max_steps,
                                            max_tokens=args.max_tokens)
                records.append(replay.dialogue(entry, truth, setting))
            after_each(records, server.deaths)
    return records, server.deaths


@dataclass
class _RunningServer:
    """A server this run did not start (`--url`): never restarted."""

    base_url: str
    during: str = ""
    deaths: list[dict[str, Any]] = field(default_factory=list)

    def alive(self) -> bool:
        return True


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[GuardedServer | _RunningServer]:
    if args.url:
        yield _RunningServer(args.url.rstrip("/").removesuffix("/v1"))
        return
    server_args = ["--served-model-name", MODEL, *shlex.split(args.server_args)] + (
        ["--model", args.model] if args.model else [])
    with GuardedServer(*server_args, max_rss_gib=args.max_server_gib) as server:
        yield server


@dataclass(frozen=True)
class DialogueReplay:
    """Replays dialogues through one client: BFCL's FC inference loop, per turn."""

    client: openai.OpenAI
    model: str
    max_steps: int
    max_tokens: int

    def dialogue(self, entry: dict[str, Any], truth: list[list[str]], setting: str
                 ) -> dict[str, Any]:
        """One dialogue in one setting: each turn's requests and verdict."""
        grounded = SETTINGS[setting]
        offered = tools(functions(entry["involved_classes"]), grounded=grounded)
        backends = DialogueBackends(entry)
        messages: list[dict[str, Any]] = []
        model_results: list[str] = []
        turns = []
        for asked, truth_calls in zip(entry["question"], truth, strict=True):
            messages.extend(asked)
            steps, forced = self._turn(messages, offered, backends, grounded)
            model_results += [r for s in steps for r in s["results"]]
            checks = TurnChecks.after_turn(backends, model_results=model_results,
                                           truth_results=backends.run("truth", truth_calls))
            verdict = score_turn(
                truth_calls=truth_calls, model_calls=sum(len(s["results"]) for s in steps),
                forced_quit=forced, checks=checks, request_failed="error" in steps[-1])
            turns.append({"verdict": verdict, "truth": truth_calls, "steps": steps,
                          **asdict(checks)})
        return {"id": entry["id"], "setting": setting, "turns": turns,
                "correct": all(t["verdict"] == "correct" for t in turns)}

    def _turn(self, messages: list[dict[str, Any]], offered: list[dict[str, Any]],
              backends: DialogueBackends, grounded: bool) -> tuple[list[dict[str, Any]], bool]:
        """The turn's requests until an answer without a call; True with them when every one
        of `max_steps` requests called (cut off)."""
        names = {t["function"]["name"] for t in offered}
        steps = []
        for _ in range(self.max_steps):
            step, message = self._ask(messages, offered, grounded)
            steps.append(step)
            if message is None:
                return steps, False
            if not message.tool_calls:
                messages.append({"role": "assistant", "content": message.content or ""})
                return steps, False
            messages.append(message.model_dump(include={"role", "content", "tool_calls"},
                                               exclude_none=True))
            for call in message.tool_calls:
                result = self._execute(call.function, names, backends, step)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return steps, True

    def _execute(self, function: Any, names: set[str], backends: DialogueBackends,
                 step: dict[str, Any]) -> str:
        """Run one call on the model's instances, recorded in `step`; its result. A call
        that cannot be written as a call string is not run: its result is the error, in
        BFCL's words for a failed execution."""
        try:
            written = call_string(function.name, function.arguments, names)
        except ValueError as exc:
            step["not_run"].append(f"{function.name}({function.arguments})")
            return f"Error during execution: {exc}"
        (result,) = backends.run("model", [written])
        step["calls"].append(written)
        step["results"].append(result)
        return result

    def _ask(self, messages: list[dict[str, Any]], offered: list[dict[str, Any]],
             grounded: bool) -> tuple[dict[str, Any], Any]:
        """One request: its record, and the assistant message (None when it failed)."""
        start = time.perf_counter()
        try:
            resp = self.client.chat.completions.create(
                model=self.model, messages=cast(list[ChatCompletionMessageParam], messages),
                tools=cast(list[ChatCompletionToolUnionParam], offered), tool_choice="auto",
                temperature=0, max_tokens=self.max_tokens,
                extra_body={"strictcall": {"grounding": grounded}})
        except openai.APIStatusError as exc:
            return {"error": failure(exc), "message": str(exc.message)[:300], "calls": [],
                    "results": [], "not_run": []}, None
        except openai.APIConnectionError as exc:  # also a timeout: the server may be gone
            return {"error": f"no response ({type(exc).__name__})", "calls": [],
                    "results": [], "not_run": []}, None
        choice = resp.choices[0]
        extension = (resp.model_extra or {}).get("strictcall") or {}
        return {"seconds": round(time.perf_counter() - start, 3),
                "prompt_tokens": resp.usage.prompt_tokens if resp.usage else None,
                "finish": choice.finish_reason, "question": "needs_input" in extension,
                "text": (choice.message.content or "")[:300], "calls": [], "results": [],
                "not_run": []}, choice.message


def failure(exc: openai.APIStatusError) -> str:
    """A failed request as "<status> <error code>" (the OpenAI envelope's code, else type)."""
    return f"{exc.status_code} {exc.code or exc.type or 'error'}"


def summary(setting: str, records: list[dict[str, Any]],
            deaths: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """One setting's counts over its dialogues, and the server's deaths during them."""
    turns = [t for r in records for t in r["turns"]]
    steps = [s for t in turns for s in t["steps"]]
    answered = [s for s in steps if "error" not in s]
    prompts = [s["prompt_tokens"] for s in answered if s["prompt_tokens"] is not None]
    return {"setting": setting, "dialogues": len(records),
            "dialogues_correct": sum(r["correct"] for r in records),
            "turns": len(turns), "turns_correct": sum(t["verdict"] == "correct" for t in turns),
            "requests": len(steps), "calls": sum(len(s["calls"]) for s in steps),
            "calls_not_run": sum(len(s["not_run"]) for s in steps),
            "questions": sum(s["question"] for s in answered),
            "cut_off": sum(s["finish"] == "length" for s in answered),
            "step_limit": sum(t["verdict"] == "step limit" for t in turns),
            # BFCL fails a forced quit; this says how many of those had done the work
            "checks_pass_at_step_limit": sum(
                t["verdict"] == "step limit" and not t["state_differs"]
                and not t["results_missing"] for t in turns),
            "failed": dict(Counter(s["error"] for s in steps if "error" in s)),
            "verdicts": dict(Counter(t["verdict"] for t in turns)),
            "server_deaths": [f"{d['during'].rsplit(' ', 1)[0]}: {d['why']}" for d in deaths],
            "prompt_tokens_median": statistics.median(prompts) if prompts else None,
            "latency_s_median": statistics.median(s["seconds"] for s in answered)
            if answered else None}


def verdicts(record: dict[str, Any]) -> dict[str, Any]:
    """A dialogue's outcome in short, for the saved results: each turn's verdict and
    calls."""
    return {"id": record["id"], "setting": record["setting"], "correct": record["correct"],
            "turns": [{"verdict": t["verdict"], "calls": [c for s in t["steps"]
                                                         for c in s["calls"]]}
                      for t in record["turns"]]}


def table(rows: list[dict[str, Any]]) -> str:
    columns: dict[str, Callable[[dict[str, Any]], Any]] = {
        "setting": lambda r: r["setting"],
        "dialogues correct": lambda r: f"{r['dialogues_correct']} of {r['dialogues']}",
        "turns correct": lambda r: f"{r['turns_correct']} of {r['turns']}",
        "requests": lambda r: r["requests"], "calls": lambda r: r["calls"],
        "questions (needs_input)": lambda r: r["questions"],
        "cut off (max tokens)": lambda r: r["cut_off"],
        "turns cut at the step limit (state and results right)":
            lambda r: f"{r['step_limit']} ({r['checks_pass_at_step_limit']})",
        "failed requests": _failed_cell,
        "prompt tokens (median)": lambda r: _num(r["prompt_tokens_median"], ".0f"),
        "latency s (median)": lambda r: _num(r["latency_s_median"], ".2f")}
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(str(cell(r)) for cell in columns.values()) + " |"
              for r in rows]
    lines += ["", "| setting | why turns failed | the server died during |", "|---|---|---|"]
    for r in rows:
        wrong = sorted(((n, v) for v, n in r["verdicts"].items() if v != "correct"),
                       reverse=True)
        lines.append(f"| {r['setting']} | {', '.join(f'{v} {n}' for n, v in wrong) or '-'} | "
                     f"{'; '.join(r.get('server_deaths', [])) or '-'} |")
    return "\n".join(lines)


def _failed_cell(row: dict[str, Any]) -> str:
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(row["failed"].items()))
    return f"{sum(row['failed'].values())}" + (f" ({why})" if why else "")


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


if __name__ == "__main__":
    raise SystemExit(main())
