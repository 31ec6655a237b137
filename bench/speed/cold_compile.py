"""Time to the first usable grammar for a schema no one has sent before: `--cold-compile
wait` (xgrammar compiles, the request waits) against `bridge` (after a short wait, the
request decodes under llguidance's mask, with what that mask leaves to the validator reported
so; xgrammar goes on compiling for later requests). Over JSONSchemaBench, server defaults.

    strictcall-bench cold-compile ../shared/evaldata/jsonschemabench/* [--limit N]

Before either, the keyword layer checks the client's schema (its draft's metaschema, then the
keyword analysis): `check` is timed apart, and *from the schema* is check plus bridge, what a
request with that schema waits before its first masked token; its p99 is given again over
the schemas the server's default budgets admit (grammars/budgets.py: the others it refuses,
400, unless the operator raises the limit). Both numbers come from the same
compile, as the server runs it: the bridged path is timed to the grammar it hands out, and
xgrammar's compile by its own clock (what `wait` would have waited; it starts with the miss, or
for a long schema, `bridge_first`, after its bridge). Per category: schemas, how many the
bridge served, p50/p99 of each, and, for the bridged ones, the bridged mask's verdict beside
xgrammar's on every test instance of the schema: a valid instance it refuses is a harm the
validator cannot undo; an invalid one it lets through where xgrammar did not is the validator's
to refuse (and, on a schema whose keywords it reported as left to the validator, said so)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.results_file import add_save_flag, save
from grammars import (
    BRIDGE,
    Budget,
    BudgetExceeded,
    GrammarCache,
    GrammarError,
    GrammarPolicy,
    JsonSchemaSpec,
    bridge_demoted,
    is_bridged,
    make_backend,
)
from server.engines.memory import freeze_startup_heap
from server.pipeline.decode import compiled


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_category(folder: Path, backend: Any, policy: GrammarPolicy, *, limit: int | None,
                 wait_s: float, timeout_s: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    refused: Counter[str] = Counter()  # schemas the keyword layer refused, by why
    for path in sorted(folder.glob("*.json"))[:limit]:
        doc = json.loads(path.read_text())
        started = time.perf_counter()
        try:
            spec = JsonSchemaSpec.from_analysis(policy.check(doc["schema"]))
        except GrammarError as exc:  # the same in both modes: counted, not timed
            refused[_why(exc)] += 1
            continue
        check_ms = (time.perf_counter() - started) * 1000
        rows.append({"schema": path.name, "check_ms": check_ms,
                     "over_budget": _over_budget(doc["schema"]),
                     **_one(spec, doc.get("tests", []), backend, wait_s, timeout_s)})
    served = [r for r in rows if r["xgrammar_ms"] is not None or r["bridged"]]
    wait = [r["xgrammar_ms"] for r in served if r["xgrammar_ms"] is not None]
    first = [r["first_ms"] for r in served]
    checks = [c for r in served if r["bridged"] for c in r["checks"]]
    return {"category": folder.name, "schemas": len(rows), "served": len(served),
            "refused": sum(refused.values()), "refused_by": dict(refused.most_common(5)),
            "bridged": sum(r["bridged"] for r in rows),
            "wait_p50": _pct(wait, 0.5), "wait_p99": _pct(wait, 0.99),
            "bridge_p50": _pct(first, 0.5), "bridge_p99": _pct(first, 0.99),
            "check_p50": _pct([r["check_ms"] for r in rows], 0.5),
            "check_p99": _pct([r["check_ms"] for r in rows], 0.99),
            "from_schema_p99": _pct([r["check_ms"] + r["first_ms"] for r in served], 0.99),
            # What a server with its default budgets serves: the rest it refuses (400)
            # before checking, unless the operator raises the limit (STRICTCALL_MAX_...).
            "over_budget": dict(Counter(r["over_budget"] for r in rows if r["over_budget"])),
            "from_schema_p99_within_budgets": _pct(
                [r["check_ms"] + r["first_ms"] for r in served if not r["over_budget"]], 0.99),
            "demoted": sum(r["bridged"] and r["demoted"] > 0 for r in rows),
            "same_verdict": f"{sum(x == b for _, x, b in checks)} of {len(checks)}",
            # where they differ: a valid instance refused (the harm), an invalid one let
            # through (the validator's to refuse), or right where xgrammar was not
            "refused_valid": sum(v and x and not b for v, x, b in checks),
            "let_through": sum(not v and not x and b for v, x, b in checks),
            "bridge_right": sum(x != b and b == v for v, x, b in checks),
            "rows": rows}


def _over_budget(schema: Any) -> str | None:
    """The server's default budget a schema exceeds (its name), or None."""
    try:
        Budget().check_schema(schema, where="schema")
    except BudgetExceeded as exc:
        return exc.limit
    return None


def _why(exc: GrammarError) -> str:
    """What refused a schema: its first rejected keyword, else the error's kind."""
    keywords = [d["keyword"] for d in exc.details if d.get("keyword")]
    return f"'{keywords[0]}'" if keywords else type(exc).__name__


def _one(spec: JsonSchemaSpec, tests: list[dict[str, Any]], backend: Any, wait_s: float,
         timeout_s: float) -> dict[str, Any]:
    cache = GrammarCache(backend, compile_workers=1)
    started = time.perf_counter()
    async def first() -> tuple[Any, float]:  # timed when it is handed out, not when the
        found = await compiled(cache, spec, timeout_s=timeout_s, bridge_wait_s=wait_s)
        return found, time.perf_counter()  # loop closes (after a losing bridge's thread)

    try:
        lookup, handed = asyncio.run(first())
        first_ms = (handed - started) * 1000
    except Exception:  # noqa: BLE001 - refused or timed out: counted as not served
        lookup, first_ms = None, None
    primary = cache.submit(spec)  # the compile `compiled` started (or its cached grammar)
    try:
        # What `wait` waits: xgrammar's compile (a long schema's starts after its bridge).
        xgrammar_ms = primary.result(timeout=timeout_s).grammar.compile_seconds * 1000
    except Exception:  # noqa: BLE001 - a timeout or a refusal: xgrammar's time is then unknown
        xgrammar_ms = None
    checks = []  # (valid?, xgrammar's verdict, the bridged mask's) per test instance
    left = len(bridge_demoted(lookup.grammar)) if lookup is not None else 0
    if lookup is not None and is_bridged(lookup.grammar) and xgrammar_ms is not None:
        final = primary.result().grammar
        for test in tests:
            text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
            checks.append((test["valid"], backend.accepts(final, text),
                           backend.accepts(lookup.grammar, text)))
    cache.close()
    return {"bridged": lookup is not None and is_bridged(lookup.grammar),
            "first_ms": first_ms if first_ms is not None else xgrammar_ms,
            "xgrammar_ms": xgrammar_ms, "demoted": left, "checks": checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strictcall-bench cold-compile",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, default=None, help="first N schemas per folder")
    parser.add_argument("--wait-ms", type=float, default=25.0,
                        help="how long a miss waits for xgrammar before the bridge")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/scratch/cold_compile.json"))
    add_save_flag(parser)
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from server.model_store import ensure_embedded_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model())
    backend = make_backend(BRIDGE, tokenizer, vocab_size=len(tokenizer),
                           stop_token_ids=[tokenizer.eos_token_id])
    policy = GrammarPolicy.for_backend(backend)
    # As the server does once started: what start-up left alive (about 200,000 objects of
    # transformers, xgrammar and the tokenizer here) out of the collector's walk, which
    # otherwise added 110-130 ms to a large schema's check whenever a full collection fell
    # inside it (config.json: 56 ms with the collector off, 59-189 ms with it on).
    freeze_startup_heap()
    results = []
    for folder in args.dirs:
        started = time.perf_counter()
        results.append(run_category(folder, backend, policy, limit=args.limit,
                                    wait_s=args.wait_ms / 1000, timeout_s=args.timeout))
        print(f"{folder.name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"dirs": [str(d) for d in args.dirs],
                                                          "out": str(args.out)},
                                    "categories": results}, indent=1, default=str))
    print("| category | schemas | bridged (validator gets more) | check p50 / p99 ms | "
          "wait p50 / p99 ms | bridge p50 / p99 ms | from the schema p99 ms | within the default "
          "budgets (over them) | bridged mask: "
          "same verdict as xgrammar's | valid refused | invalid let through | right where "
          "xgrammar was not |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        why = ", ".join(f"{k} {n}" for k, n in r["refused_by"].items())
        refused = f" ({r['refused']} refused: {why})" if r["refused"] else ""
        print(f"| {r['category']} | {r['served']} of {r['schemas']}{refused} | "
              f"{r['bridged']} ({r['demoted']}) | {r['check_p50']:.1f} / {r['check_p99']:.0f} | "
              f"{r['wait_p50']:.1f} / {r['wait_p99']:.0f} | "
              f"{r['bridge_p50']:.1f} / {r['bridge_p99']:.0f} | {r['from_schema_p99']:.0f} | "
              f"{r['from_schema_p99_within_budgets']:.0f} ({sum(r['over_budget'].values())}) | "
              f"{r['same_verdict']} | "
              f"{r['refused_valid']} | {r['let_through']} | {r['bridge_right']} |")
    if args.save:
        save("cold-compile", {"wait_ms": args.wait_ms, "limit": args.limit,
                              "categories": results}, argv)
    print(f"\nmedian over categories of bridge p99: "
          f"{statistics.median(r['bridge_p99'] for r in results):.0f} ms; report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
