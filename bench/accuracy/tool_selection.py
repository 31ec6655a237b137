"""Tool selection on BFCL `multiple`: every function of the category in one catalog, and for
each question, is its correct function among the k tools the selector picks?

    strictcall-bench tool-selection [--ks 3,5,10] [--out bench/results/scratch/tool_selection.json]
        [--ast N [--max-tokens 128]]

Rows: BM25 over what the server matches on (name, description, parameter names and their
descriptions), two ablations (without parameter descriptions; name and description only),
and the baseline
of offering the catalog's first 20 tools (the 20-tool budget, no selection). Selection
recall is an upper bound on tool-name accuracy: a tool that is not offered cannot be
called. No model is needed.

A second table does the same on BFCL's multi-turn base category (evaldata): each turn with
calls, the dialogue's user turns so far as the query, and the server's weight for the
newest user message (`NEWEST_WEIGHT`) beside weight 0 (the dialogue's words alone): the
share of turns whose every called function is among the k offered, and of those
functions.

`--ast N` also asks a real server (the embedded model, greedy, tool_choice="required") the
first N questions in each setting: the question's own BFCL functions (BFCL's setting), the
whole catalog with the server's selection at each k (`strictcall.select_k`), and the
catalog's first 20 tools; it reports BFCL AST accuracy and tool-name accuracy."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.accuracy.bfcl_ast import load
from bench.common.results_file import add_save_flag, save
from bench.dialogue import bfcl_multi_turn_data
from server.execution.selection import NEWEST_WEIGHT, select, tool_text

Document = Callable[[dict[str, Any]], str]
DOCUMENTS: dict[str, Document] = {
    "bm25: name, description, parameter names and descriptions (served)": lambda f: tool_text(
        f["name"], f.get("description"), f.get("parameters")),
    "bm25: name, description, parameter names": lambda f: tool_text(
        f["name"], f.get("description"), f.get("parameters"), parameter_descriptions=False),
    "bm25: name, description": lambda f: tool_text(f["name"], f.get("description"), None),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench tool-selection", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ks", default="3,5,10")
    p.add_argument("--budget", type=int, default=20, help="the no-selection baseline's size")
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/tool_selection.json"))
    p.add_argument("--ast", type=int, default=0, metavar="N",
                   help="also measure AST accuracy through the model on N questions")
    p.add_argument("--max-tokens", type=int, default=128)
    add_save_flag(p)
    args = p.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    pairs = load("multiple")
    catalog = catalog_of(q for q, _ in pairs)
    rows = [measure(label, doc, catalog, pairs, ks) for label, doc in DOCUMENTS.items()]
    rows.append(first_n(catalog, pairs, args.budget))
    multi_turn = [measure_multi_turn(weight, ks) for weight in (0.0, 1.0, NEWEST_WEIGHT)]
    ast = []
    if args.ast:
        from bench.accuracy.tool_selection_ast import measure_ast
        ast = measure_ast(pairs[: args.ast], catalog, ks, budget=args.budget,
                          max_tokens=args.max_tokens)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    found = {"questions": len(pairs), "catalog": len(catalog), "ks": ks, "rows": rows,
             "ast": ast, "multi_turn": multi_turn}
    args.out.write_text(json.dumps(found, indent=2))
    if args.save:
        save("tool-selection", found, argv)
    print(table(rows, ks, len(pairs), len(catalog)))
    print("\n" + multi_turn_table(multi_turn, ks))
    if ast:
        print(f"\nthrough the embedded model, first {args.ast} questions:")
        print("| offered | AST accuracy | tool-name accuracy | errors |\n|---|---|---|---|")
        for row in ast:
            print(f"| {row['setting']} | {row['ast']:.3f} | {row['name']:.3f} | "
                  f"{row['errors']} |")
    print(f"report: {args.out}", file=sys.stderr)
    return 0


def catalog_of(questions: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every function of the questions, once by name, in order of first appearance."""
    catalog: dict[str, dict[str, Any]] = {}
    for question in questions:
        for function in question["function"]:
            catalog.setdefault(function["name"], function)
    return catalog


def _wanted(answer: dict[str, Any]) -> set[str]:
    return {name for call in answer["ground_truth"] for name in call}


def _question_text(question: dict[str, Any]) -> str:
    return " ".join(m["content"] for m in question["question"][0] if m["role"] == "user")


def measure(label: str, document: Document, catalog: dict[str, dict[str, Any]],
            pairs: list[tuple[dict[str, Any], dict[str, Any]]], ks: list[int]) -> dict[str, Any]:
    docs = {name: document(f) for name, f in catalog.items()}
    hits = dict.fromkeys(ks, 0)
    for question, answer in pairs:
        picked = select(docs, _question_text(question), k=max(ks), reason="catalog").visible
        for k in ks:
            hits[k] += _wanted(answer) <= set(picked[:k])
    return {"method": label, **{f"recall@{k}": hits[k] / len(pairs) for k in ks}}


def first_n(catalog: dict[str, dict[str, Any]], pairs: list[tuple[dict[str, Any], dict[str, Any]]],
            n: int) -> dict[str, Any]:
    offered = set(list(catalog)[:n])
    found = sum(_wanted(answer) <= offered for _, answer in pairs)
    return {"method": f"first {n} of the catalog (no selection)", f"recall@{n}": found / len(pairs)}


def table(rows: list[dict[str, Any]], ks: list[int], questions: int, size: int) -> str:
    lines = [f"BFCL multiple: {questions} questions, one catalog of {size} functions",
             "| method | " + " | ".join(f"k={k}" for k in ks) + " | first 20 |",
             "|---|" + "---|" * (len(ks) + 1)]
    for row in rows:
        cells = [f"{row[f'recall@{k}']:.3f}" if f"recall@{k}" in row else "" for k in ks]
        last = next((f"{v:.3f}" for key, v in row.items()
                     if key.startswith("recall@") and int(key[7:]) not in ks), "")
        lines.append(f"| {row['method']} | " + " | ".join(cells) + f" | {last} |")
    return "\n".join(lines)


def measure_multi_turn(weight: float, ks: list[int]) -> dict[str, Any]:
    """Per turn of BFCL's multi-turn base category that calls functions: are they among the
    k tools selection offers (the involved classes' functions; the dialogue's user turns
    so far the query, the newest at `weight`)?"""
    turns = functions = 0
    whole, each = dict.fromkeys(ks, 0), dict.fromkeys(ks, 0)
    for entry, truth in bfcl_multi_turn_data.load():
        docs = {f["name"]: tool_text(f["name"], f.get("description"), f.get("parameters"))
                for f in bfcl_multi_turn_data.functions(entry["involved_classes"])}
        said: list[str] = []
        for turn, calls in zip(entry["question"], truth, strict=False):
            said += [m["content"] for m in turn if m["role"] == "user"]
            wanted = {c.split("(")[0] for c in calls} & set(docs)
            if not wanted or not said:
                continue
            picked = select(docs, " ".join(said), k=max(ks), reason="over_budget",
                            newest=said[-1], newest_weight=weight).visible
            turns += 1
            functions += len(wanted)
            for k in ks:
                whole[k] += wanted <= set(picked[:k])
                each[k] += len(wanted & set(picked[:k]))
    return {"newest_weight": weight, "turns": turns, "functions": functions,
            **{f"turns@{k}": whole[k] for k in ks}, **{f"functions@{k}": each[k] for k in ks}}


def multi_turn_table(rows: list[dict[str, Any]], ks: list[int]) -> str:
    first = rows[0]
    lines = [f"BFCL multi-turn base: {first['turns']} turns with calls, {first['functions']} "
             "functions called; turns with every called function offered (functions offered)",
             "| newest message's weight | " + " | ".join(f"k={k}" for k in ks) + " |",
             "|---|" + "---|" * len(ks)]
    for row in rows:
        served = " (served)" if row["newest_weight"] == NEWEST_WEIGHT else ""
        cells = [f"{row[f'turns@{k}']} of {row['turns']} ({row[f'functions@{k}']} of "
                 f"{row['functions']})" for k in ks]
        lines.append(f"| {row['newest_weight']:g}{served} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
