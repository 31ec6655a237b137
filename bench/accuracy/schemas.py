"""Schema coverage and compliance over JSONSchemaBench (maskbench files), per grammar backend.

    strictcall-bench schemas ../shared/evaldata/jsonschemabench/* --out REPORT.json \
        [--backend xgrammar,llguidance,outlines] [--limit N]

Per schema: compiled or rejected (and why), compile time cold and warm (a cache hit), every
keyword's classification, and compliance: each `valid` test instance, re-serialized in the
grammar's canonical form (compact, properties in schema order), must be accepted by the mask
and by the post-decode validator; each `invalid` one must be rejected by at least one.
"Alone" is the raw backend on the raw schema, as a server without StrictCall's layer would
use it (xgrammar ignores keywords it does not enforce).

Prints, per category and backend: coverage, compile p50/p99, valid-accepted %,
invalid-rejected %, and counts of unclassified keywords (which must be zero). A valid instance
that only the server's generation policies refuse is counted apart, "by policy", not in
valid-accepted: the same schema's grammar under JSON Schema's reading (no strict objects,
patterns matched anywhere, untyped schemas of any type, number bounds, lengths and patterns
checked after decoding) accepts it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.accuracy.canonical import canonical_instance
from bench.accuracy.schema_summary import print_table, summarize
from bench.common.results_file import add_save_flag, save
from grammars import (
    JSON_SCHEMA_READING,
    POLICY_FLAGS,
    Budget,
    BudgetExceeded,
    CompiledGrammar,
    GrammarCache,
    GrammarError,
    GrammarPolicy,
    JsonSchemaSpec,
    check_schema,
    departures,
    iter_schema_nodes,
    validator_for,
    with_policies,
)
from grammars import make_backend as make_grammar_backend

__all__ = ["canonical_instance", "main", "print_table", "run_schema", "summarize"]


def run_schema(path: Path, backend: Any, cache: GrammarCache, *, alone: Any,
               timeout_s: float | None, table: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"file": path.name}
    doc = json.loads(path.read_text())
    schema, tests = doc["schema"], doc.get("tests", [])
    # Every schema's instances, compiled or not: coverage is over all of them.
    record["instances"] = {"valid": sum(bool(t["valid"]) for t in tests),
                           "invalid": sum(not t["valid"] for t in tests)}
    record["alone"] = alone(schema)
    try:  # the server's default budgets: counted, not applied (they are a server policy)
        if isinstance(schema, dict):
            Budget().check_schema(schema, where="the schema")
    except BudgetExceeded as exc:
        record["over_budget"] = exc.limit
    try:
        analysis = check_schema(schema, where="the schema", table=table)
    except GrammarError as exc:
        record["status"] = "rejected"
        record["reason"] = type(exc).__name__ + ": " + exc.message[:200]
        record["keywords"] = exc.details
        return record
    record["counts"] = analysis.report.counts()
    # Proof of "nothing dropped silently": every keyword present in the schema has a class.
    present = sum(len(node) for node, _ in iter_schema_nodes(schema))
    classified = sum(1 for u in analysis.report.uses if not u.implicit)
    record["counts"]["unclassified"] = present - classified
    record["validator_keywords"] = sorted({u.keyword for u in analysis.report.of("validator")})
    spec = JsonSchemaSpec.from_analysis(analysis)
    try:
        cold = cache.submit(spec).result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        record["status"] = "rejected"
        record["reason"] = f"compile timeout ({timeout_s:g} s)"
        return record
    except GrammarError as exc:
        record["status"] = "rejected"
        record["reason"] = "backend: " + exc.message[:200]
        return record
    warm = cache.get(spec)
    record.update(status="compiled", warm_ms=warm.seconds * 1000,
                  # An earlier schema of the category reduced to the same grammar: no
                  # compile of its own to time.
                  compile_ms=None if cold.hit else cold.grammar.compile_seconds * 1000)
    validator = validator_for(schema)
    grammar_root = analysis.grammar_schema
    outcome: Counter[str] = Counter()
    failures = []
    relaxed: dict[tuple[str, ...], Any] = {}  # grammars with policies off, on first need
    by_policy: Counter[str] = Counter()
    for test in tests:
        # In the order the compiled schema lists properties (its validator-tier unions out).
        text = json.dumps(canonical_instance(test["data"], grammar_root, grammar_root),
                          separators=(",", ":"), ensure_ascii=False)
        try:
            by_mask = backend.accepts(cold.grammar, text)
        except Exception:  # noqa: BLE001 - an instance the mask cannot even read
            by_mask = False
        try:
            by_validator = validator.is_valid(test["data"])
        except Exception:  # noqa: BLE001 - e.g. a remote $ref the validator cannot fetch
            by_validator = False
        if test["valid"]:
            ok = by_mask and by_validator
            if not by_mask and by_validator and departures(table):
                # Keys the schema does not list, a string with a pattern's match inside, a
                # type other than the keywords imply, a bounded number in many decimals,
                # escapes in a bounded string: valid JSON Schema, which the server's
                # policies do not generate.
                policy = _refusing_policy(backend, schema, table, test["data"], relaxed)
                if policy:
                    outcome["valid_refused_by_policy"] += 1
                    by_policy[policy] += 1
                    continue
            outcome["valid_accepted" if ok else "valid_refused"] += 1
            if not ok:
                failures.append({"instance": text[:300], "mask": by_mask,
                                 "validator": by_validator})
        else:
            ok = not (by_mask and by_validator)
            outcome["invalid_rejected" if ok else "invalid_accepted"] += 1
            if by_mask and not by_validator:
                outcome["invalid_caught_by_validator"] += 1
    record["tests"] = dict(outcome)
    if by_policy:
        record["by_policy"] = dict(by_policy)
    if failures:
        record["valid_refused"] = failures[:5]
    return record


def _refusing_policy(backend: Any, schema: Any, table: Any, value: Any,
                     relaxed: dict[tuple[str, ...], Any]) -> str | None:
    """Which policy alone refuses `value`: its name, names joined by "+" when turning off any
    one of them lets it through, "several" when only all off together do; None when even
    JSON Schema's reading refuses it (then it is no policy's doing)."""
    policies = departures(table)
    if not _accepts_relaxed(backend, schema, table, tuple(policies), value, relaxed):
        return None
    alone = [p for p in policies
             if _accepts_relaxed(backend, schema, table, (p,), value, relaxed)]
    return "+".join(alone) if alone else "several"


def _accepts_relaxed(backend: Any, schema: Any, table: Any, policies: tuple[str, ...],
                     value: Any, relaxed: dict[tuple[str, ...], Any]) -> bool:
    if policies not in relaxed:
        relaxed[policies] = _relaxed_grammar(backend, schema, with_policies(
            table, {p: JSON_SCHEMA_READING[p] for p in policies}))
    compiled = relaxed[policies]
    if not compiled:
        return False
    root = compiled.spec.json_schema()
    text = json.dumps(canonical_instance(value, root, root), separators=(",", ":"),
                      ensure_ascii=False)
    return bool(backend.accepts(compiled, text))


def _relaxed_grammar(backend: Any, schema: Any, table: Any) -> Any:
    """The schema's grammar under `table`'s policies. False where the backend has no such
    mode (outlines-core: strict objects only)."""
    spec = JsonSchemaSpec.from_analysis(check_schema(schema, table=table))
    try:
        handle = backend.compile_raw(spec.json_schema(), strict_objects=table.strict_objects)
    except Exception:  # noqa: BLE001 - a backend with strict objects only (outlines-core)
        return False
    return CompiledGrammar(spec, handle, 0.0, 0)


def make_backend(name: str, tokenizer: Any) -> Any:
    try:
        return make_grammar_backend(name, tokenizer, vocab_size=len(tokenizer),
                                    stop_token_ids=[tokenizer.eos_token_id])
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


# One worker process per backend: a compile that runs past the timeout is ended by ending
# its process (threads cannot be stopped), and the next schema gets a fresh one.
_WORKER: dict[str, Any] = {}


def _worker_init(name: str, policies: dict[str, Any]) -> None:
    from transformers import AutoTokenizer

    from server.model_store import ensure_embedded_model

    backend = make_backend(name, AutoTokenizer.from_pretrained(ensure_embedded_model()))
    try:
        policy = GrammarPolicy.for_backend(backend, policies)
    except ValueError:  # outlines-core: strict objects only (its table says so)
        policy = GrammarPolicy.for_backend(backend, {**policies, "strict_objects": True})
    table = policy.keywords
    _WORKER.update(backend=backend, table=table, alone=_alone(backend),
                   cache=GrammarCache(backend, compile_workers=1))


def _worker_run(path: str) -> dict[str, Any]:
    w = _WORKER
    return run_schema(Path(path), w["backend"], w["cache"], alone=w["alone"],
                      timeout_s=None, table=w["table"])


class _Runner:
    def __init__(self, name: str, policies: dict[str, Any]) -> None:
        self._args = (name, policies)
        self._pool = self._start()

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
            initargs=self._args)

    def info(self) -> tuple[str, str]:
        return self._pool.submit(_backend_info).result()

    def run(self, path: Path, timeout_s: float) -> dict[str, Any]:
        future = self._pool.submit(_worker_run, str(path))
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            for process in list(self._pool._processes.values()):
                process.kill()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = self._start()
            return {"file": path.name, "status": "rejected", "alone": False,
                    "reason": f"timeout: compile and checks ran past {timeout_s:g} s"}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _backend_info() -> tuple[str, str]:
    return _WORKER["backend"].name, _WORKER["backend"].version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strictcall-bench schemas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path, help="maskbench folders (one category each)")
    parser.add_argument("--out", type=Path,
                        default=Path("bench/results/scratch/schemas-report.json"))
    parser.add_argument("--backend", default="xgrammar",
                        help="comma-separated: xgrammar, llguidance, outlines (default xgrammar)")
    parser.add_argument("--limit", type=int, default=None, help="first N schemas per folder")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="per schema: compiles (ours and alone) and instance checks, s")
    for policy in POLICY_FLAGS:  # as the server's flags, from the same table
        if policy.choices is None:
            parser.add_argument(policy.flag, dest=policy.name, default=policy.default,
                                action=argparse.BooleanOptionalAction, help=policy.help)
        else:
            parser.add_argument(policy.flag, dest=policy.name, default=policy.default,
                                choices=policy.choices, help=policy.help)
    parser.add_argument("--json-schema-reading", action="store_true",
                        help="all of the above as JSON Schema reads a schema (strict objects "
                             "off, unknown keywords annotations, patterns search, implied "
                             "types off, number bounds and bounded strings validator)")
    add_save_flag(parser)
    args = parser.parse_args(argv)
    policies: dict[str, Any] = dict(JSON_SCHEMA_READING) if args.json_schema_reading else {
        f.name: getattr(args, f.name) for f in POLICY_FLAGS}

    report: dict[str, Any] = {"backends": {}, "args": {
        "dirs": [str(d) for d in args.dirs], "limit": args.limit, "timeout": args.timeout,
        **policies}}
    for name in args.backend.split(","):
        runner = _Runner(name.strip(), policies)
        backend_name, version = runner.info()
        per_category: dict[str, Any] = {}
        for folder in args.dirs:
            if not folder.is_dir():
                print(f"skipping {folder}: not a folder", file=sys.stderr)
                continue
            files = sorted(folder.glob("*.json"))[:args.limit]
            started = time.perf_counter()
            records = [runner.run(f, args.timeout) for f in files]
            summary = summarize(records)
            summary["seconds"] = time.perf_counter() - started
            per_category[folder.name] = {"summary": summary, "schemas": records}
            print(f"{backend_name}: {folder.name}: {len(files)} schemas in "
                  f"{summary['seconds']:.0f} s", file=sys.stderr)
            # Written after each category: a long run can be read while it goes on.
            report["backends"][backend_name] = {"version": version,
                                                "categories": per_category}
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=1, default=str))
        runner.close()
    print_table(report)
    print(f"\nfull report: {args.out}")
    if args.save:  # the summaries, and each schema's row (the full records stay in --out)
        save("schemas", {"args": report["args"], "backends": {
            name: {"version": b["version"], "categories": {
                c: {"summary": v["summary"], "rows": [_row(r) for r in v["schemas"]]}
                for c, v in b["categories"].items()}}
            for name, b in report["backends"].items()}}, argv)
    return 0


def _row(record: dict[str, Any]) -> dict[str, Any]:
    """A schema's outcome as the results file keeps it: its file, compiled or why not, its
    instances and what became of them, its compile times."""
    keep = ("file", "status", "reason", "instances", "tests", "by_policy", "compile_ms",
            "warm_ms", "alone", "over_budget", "validator_keywords")
    return {k: record[k] for k in keep if k in record}


def _alone(backend: Any) -> Any:
    """Whether the raw backend compiles the raw schema (no keyword layer, no budgets)."""
    def compiles(schema: Any) -> bool:
        try:
            backend.compile_raw(schema)
        except Exception:  # noqa: BLE001 - any refusal counts as not covered
            return False
        return True
    return compiles


if __name__ == "__main__":
    raise SystemExit(main())
