"""`strictcall eval`: contract scenarios as a regression gate for a model or provider change.

    strictcall eval contracts/scenarios/*.yaml --url http://127.0.0.1:8000/v1 --model M \
        [--out run.json] [--baseline earlier.json] [--threshold-read 0.05] \
        [--threshold-write 0.0] [--temperature T] [--extra-body JSON]

Sends each scenario to the server (this one or any OpenAI-compatible URL), scores the
answer, runs each file's dialogues turn by turn (server/eval/dialogues.py), prints a table
per tool (and one for the dialogues) and writes the run: model, generation parameters, schema
versions, scenario ids and results (each scenario's calls, normalized), with user text only
as a hash. Every returned call is checked against its tool's schema. Exits 1 on any hard
fail (an invalid call, an invented value, a write called twice, a question where all was
given: runner.HARD_FAILS), and with `--baseline` when a tool class's correct-call rate fell
by more than its threshold; the scenarios that changed either way are listed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx

from server.eval.dialogues import run_dialogues
from server.eval.report import (
    compare,
    dialogue_markdown,
    gold_markdown,
    hard_failures,
    markdown,
    scenario_changes,
    summarize,
    summarize_dialogues,
    summarize_gold,
)
from server.eval.runner import Params, run_file
from server.eval.scenarios import ScenarioError, load

__all__ = ["ScenarioError", "add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, help="scenario files (.yaml, .jsonl)")
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1",
                        help="the server's OpenAI base URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", dest="api_key", default="-")
    parser.add_argument("--out", type=Path, default=Path("eval-run.json"))
    parser.add_argument("--baseline", type=Path, help="an earlier run to compare with")
    parser.add_argument("--threshold-read", dest="threshold_read", type=float, default=0.05,
                        help="largest allowed drop in read tools' correct-call rate")
    parser.add_argument("--threshold-write", dest="threshold_write", type=float, default=0.0,
                        help="largest allowed drop in write tools' correct-call rate")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", dest="top_p", type=float)
    parser.add_argument("--max-tokens", dest="max_tokens", type=int, default=256)
    parser.add_argument("--extra-body", dest="extra_body", type=json.loads, default={},
                        help='JSON merged into each request, e.g. \'{"strictcall": '
                             '{"max_repair_attempts": 0}}\'')


def run(args: argparse.Namespace) -> int:
    """Raises ScenarioError for an unreadable file; returns the exit status."""
    specs = [(path, load(path)) for path in args.files]
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    params = Params(args.model, args.temperature, args.top_p, args.max_tokens,
                    args.extra_body)
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=600) as client:
        tools, versions, runtime = _catalog(client)
        outcomes = [o for _, spec in specs
                    for o in run_file(client, spec, params, tools, runtime=runtime)]
        dialogues = [o for _, spec in specs for o in run_dialogues(client, spec, params, tools)]
    record = {"created": int(time.time()), "url": args.url,
              "params": {"model": params.model, "temperature": params.temperature,
                         "top_p": params.top_p, "max_tokens": params.max_tokens,
                         "extra_body": params.extra_body},
              "schema_versions": {s.tool: versions.get(s.tool, "unknown") for _, s in specs},
              "scenario_files": {str(p): [c.id for c in s.scenarios] for p, s in specs},
              "results": [o.to_json() for o in outcomes], "summary": summarize(outcomes),
              "dialogues": [o.to_json() for o in dialogues],
              "dialogue_summary": summarize_dialogues(dialogues),
              "gold_summary": summarize_gold(dialogues)}
    args.out.write_text(json.dumps(record, indent=1))
    print(markdown(record, baseline))
    if dialogues:
        print("\ndialogues:\n" + dialogue_markdown(record["dialogue_summary"]))
        print("\nfields against the dialogues' hand-written values, per language:\n"
              + gold_markdown(record["gold_summary"]))
    print(f"\nrun written to {args.out}")
    failures = [f"HARD FAIL: {line}" for line in hard_failures(record)]
    if baseline is not None:
        for line in scenario_changes(record, baseline):
            print(f"changed: {line}")
        failures += [f"REGRESSION: {line}" for line in compare(
            record, baseline, {"read": args.threshold_read, "write": args.threshold_write})]
    for failure in failures:
        print(failure)
    return 1 if failures else 0


def _catalog(client: httpx.Client) -> tuple[dict[str, dict[str, Any]], dict[str, str],
                                            dict[str, list[str]]]:
    """The server's registered contracts (StrictCall): tool specs to offer, a version
    (hash of each contract's snapshot), and the runtime fields the server adds to each
    call's arguments (a tenant from a header, an idempotency key), which the model never
    writes. Other servers: none, tools are offered by name."""
    try:
        resp = client.get("/contracts")
        data = resp.json()["data"] if resp.status_code == 200 else []
    except (httpx.HTTPError, ValueError, KeyError):
        data = []
    tools = {c["name"]: {"type": "function", "function": {
        "name": c["name"], "description": c["description"], "parameters": c["parameters"]}}
        for c in data}
    versions = {c["name"]: hashlib.sha256(json.dumps(c, sort_keys=True).encode())
                .hexdigest()[:16] for c in data}
    runtime = {c["name"]: sorted(c.get("runtime_fields") or ()) for c in data}
    return tools, versions, runtime
