"""BFCL AST accuracy side by side with llama.cpp's own `llama-server`, on the same real
model: StrictCall's llama.cpp engine and `llama-server --jinja`, each started on the same
GGUF with the same threads, asked the same questions in turn.

    strictcall-bench bfcl-peer [--model qwen2.5-coder-0.5b] [--limit 20]
        [--categories simple_python,multiple,parallel] [--max-tokens 256] [--threads 1]
        [--systems strictcall-llamacpp,llama-server] [--save]

Each question's functions (converted from BFCL's dialect to JSON Schema, the same text for
both) go as `tools` with `tool_choice: "required"`, greedy. Per system and category:
questions asked; calls returned (finish_reason "tool_calls" with at least one call);
valid (every call names an offered function and its arguments validate against its
schema, checked here with jsonschema, not by either server); cut off (finish_reason
"length"); AST-correct (BFCL's own checker, bench/accuracy/bfcl_ast.py); errors (a non-200
answer, counted against); mean seconds end to end. `--save` writes every answer's row.
The peer needs `make setup-peers`; a model whose chat template renders tools (the
Qwen2.5 GGUFs do; SmolLM2's does not, so the peer would never see them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.accuracy.bfcl import _tool_calls, schema_valid
from bench.accuracy.bfcl_ast import check, load
from bench.common.results_file import add_save_flag, save
from bench.speed.latency_systems import RunningServer, Skipped, Where, launch_for
from bench.speed.latency_workload import MODEL
from grammars import bfcl_to_json_schema

CATEGORIES = ("simple_python", "multiple", "parallel")
SYSTEMS = ("strictcall-llamacpp", "llama-server")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench bfcl-peer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b",
                   help="a GGUF file, or a name `strictcall fetch-model` knows")
    p.add_argument("--limit", type=int, default=20, help="questions per category")
    p.add_argument("--categories", default=",".join(CATEGORIES))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    add_save_flag(p)
    args = p.parse_args(argv)
    gguf = _gguf(args.model)
    rows: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    for system in args.systems.split(","):
        got = _run_system(system, gguf, args)
        answers += got
        rows += [_summary(system, c, [a for a in got if a["category"] == c])
                 for c in args.categories.split(",")]
    print(table(rows))
    if args.save:
        save("bfcl-peer", {"model": args.model, "gguf": gguf.name, "threads": args.threads,
                           "max_tokens": args.max_tokens, "rows": rows, "answers": answers},
             argv)
    return 0


def _gguf(model: str) -> Path:
    """A GGUF file, or the GGUF of a model `strictcall fetch-model` knows by name (the
    embedded smollm2-135m-instruct, the Qwen2.5 and Gemma ones)."""
    from server.model_store import MODELS, find_gguf, is_model_name

    if is_model_name(model):
        gguf = find_gguf(found) if (found := MODELS[model](None)).is_dir() else found
        if gguf is not None:
            return gguf
    path = Path(model).expanduser()
    if not path.is_file():
        raise SystemExit(f"--model {model!r} is neither a GGUF file nor one of "
                         f"{sorted(MODELS)}")
    return path


@contextlib.contextmanager
def served(system: str, gguf: Path, threads: int) -> Iterator[httpx.Client]:
    """A client of `system` (StrictCall's llama.cpp engine or `llama-server`) started on
    `gguf` with `threads` threads; SystemExit with the install hint where it cannot start."""
    where = Where(model_dir=gguf.parent, gguf=gguf, vllm_python=Path(sys.executable),
                  llamacpp_python=Path(sys.executable), threads=threads,
                  server_args=("--model", str(gguf)))
    try:
        launch = launch_for(system, where)
    except Skipped as exc:
        raise SystemExit(f"{system}: {exc.reason} ({exc.install})") from None
    scratch = Path(tempfile.mkdtemp(prefix=f"{system}-"))
    with RunningServer(launch, startup_s=300, scratch=scratch) as server, \
            httpx.Client(base_url=server.base_url, timeout=600) as client:
        yield client


def _run_system(system: str, gguf: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with served(system, gguf, args.threads) as client:
        for category in args.categories.split(","):
            for question, answer in load(category, args.limit):
                one = _ask(client, question, answer, args.max_tokens)
                out.append({"system": system, "category": category, "id": question["id"],
                            **one})
                print(f"{system} {category} {question['id']}: {one['finish']} "
                      f"correct={one['correct']}", file=sys.stderr, flush=True)
    return out


def _ask(client: httpx.Client, question: dict[str, Any], answer: dict[str, Any],
         max_tokens: int) -> dict[str, Any]:
    functions = question["function"]
    tools = [{"type": "function", "function": {
        "name": f["name"], "description": f.get("description", ""),
        "parameters": bfcl_to_json_schema(f["parameters"])}} for f in functions]
    start = time.perf_counter()
    response = client.post("/v1/chat/completions", json={
        "model": MODEL, "messages": list(question["question"][0]), "tools": tools,
        "tool_choice": "required", "max_tokens": max_tokens, "temperature": 0})
    seconds = time.perf_counter() - start
    if response.status_code != 200:
        return {"status": response.status_code, "finish": None, "calls": 0, "valid": False,
                "correct": False, "seconds": seconds, "text": response.text[:300]}
    choice = response.json()["choices"][0]
    message = choice["message"]
    raw = message.get("tool_calls") or []
    calls = _tool_calls([_Call(c) for c in raw]) if raw else None
    return {"status": 200, "finish": choice["finish_reason"], "calls": len(raw),
            "valid": calls is not None and schema_valid(calls, functions),
            "correct": calls is not None and check(calls, answer), "seconds": seconds,
            "tokens": (response.json().get("usage") or {}).get("completion_tokens"),
            "content": (message.get("content") or "")[:300],
            "arguments": [c["function"]["arguments"] for c in raw][:4]}


class _Call:
    """A wire tool call read as the openai client's objects are (bench.accuracy.bfcl reads
    those)."""

    def __init__(self, wire: dict[str, Any]) -> None:
        self.function = type("F", (), {"name": wire["function"]["name"],
                                       "arguments": wire["function"]["arguments"]})()


def _summary(system: str, category: str, answers: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(answers)
    timed = [a["seconds"] for a in answers if a["status"] == 200]
    return {"system": system, "category": category, "n": n,
            "errors": sum(a["status"] != 200 for a in answers),
            "calls_returned": sum(a["finish"] == "tool_calls" and a["calls"] > 0
                                  for a in answers),
            "valid": sum(a["valid"] for a in answers),
            "invalid_returned": sum(a["calls"] > 0 and not a["valid"] for a in answers),
            "cut_off": sum(a["finish"] == "length" for a in answers),
            "ast_correct": sum(a["correct"] for a in answers),
            "mean_s": round(statistics.mean(timed), 2) if timed else None}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | category | n | calls returned | valid | invalid returned | cut off | "
             "AST-correct | errors | mean s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['category']} | {r['n']} | {r['calls_returned']} "
                     f"| {r['valid']} | {r['invalid_returned']} | {r['cut_off']} | "
                     f"{r['ast_correct']} | {r['errors']} | {r['mean_s']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
