"""`bench schemas` reporting: per category, the summary of its schema records, and the
printed table."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from grammars import TIERS


def _reason(record: dict[str, Any]) -> str:
    if record.get("keywords"):
        keyword: str = record["keywords"][0]["keyword"]
        return "keyword " + keyword
    reason: str = record["reason"]
    return reason.split(":")[0]


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    compiled = [r for r in records if r["status"] == "compiled"]
    times = [r["compile_ms"] for r in compiled if r["compile_ms"] is not None]
    warm = [r["warm_ms"] for r in compiled]
    tests: Counter[str] = Counter()
    for r in compiled:
        tests.update(r.get("tests", {}))
    tiers: Counter[str] = Counter()
    for r in compiled:
        tiers.update(r.get("counts", {}))
    reasons = Counter(_reason(r) for r in records if r["status"] == "rejected")
    valid = tests["valid_accepted"] + tests["valid_refused"]
    invalid = tests["invalid_rejected"] + tests["invalid_accepted"]
    uncompiled = [r for r in records if r["status"] != "compiled"]
    return {
        "schemas": len(records), "compiled": len(compiled),
        "coverage": len(compiled) / len(records) if records else 0.0,
        "alone_coverage": sum(r["alone"] for r in records) / len(records) if records else 0.0,
        "compile_ms_p50": _quantile(times, 0.5), "compile_ms_p99": _quantile(times, 0.99),
        "warm_ms_p50": _quantile(warm, 0.5), "warm_ms_p99": _quantile(warm, 0.99),
        "valid_instances": valid, "valid_accepted": tests["valid_accepted"],
        "valid_refused_by_policy": tests["valid_refused_by_policy"],
        # Over every schema: the valid instances of the schemas that did not compile count
        # as not served (None where the records predate the count).
        "valid_instances_all": valid + tests["valid_refused_by_policy"] + sum(
            r["instances"]["valid"] for r in uncompiled) if all(
            "instances" in r for r in uncompiled) else None,
        "valid_in_uncompiled": sum(r["instances"]["valid"] for r in uncompiled) if all(
            "instances" in r for r in uncompiled) else None,
        "by_policy": dict(sum((Counter(r.get("by_policy", {})) for r in compiled),
                              Counter()).most_common()),
        "invalid_instances": invalid, "invalid_rejected": tests["invalid_rejected"],
        "invalid_caught_by_validator": tests["invalid_caught_by_validator"],
        "keywords": dict(tiers), "rejected_reasons": dict(reasons.most_common()),
        "over_budget": sum(1 for r in records if "over_budget" in r),
    }


def print_table(report: dict[str, Any]) -> None:
    head = (f"{'category':16} {'backend':14} {'schemas':>7} {'coverage':>8} {'alone':>6} "
            f"{'p50 ms':>7} {'p99 ms':>8} {'hit ms':>7} {'valid ok':>14} {'by policy':>9} "
            f"{'invalid rej':>14} {'unclassified':>12} {'over budget':>11}")
    print(head)
    print("-" * len(head))
    rows = []
    for name, data in report["backends"].items():
        for category, cat in data["categories"].items():
            rows.append((category, name, cat["summary"]))
    for category, name, s in sorted(rows, key=lambda r: (r[0], r[1])):
        valid = f"{_pct(s['valid_accepted'], s['valid_instances'])} /{s['valid_instances']}"
        invalid = f"{_pct(s['invalid_rejected'], s['invalid_instances'])} " \
                  f"/{s['invalid_instances']}"
        print(f"{category:16} {name:14} {s['schemas']:7} {100 * s['coverage']:7.1f}% "
              f"{100 * s['alone_coverage']:5.1f}% {s['compile_ms_p50']:7.2f} "
              f"{s['compile_ms_p99']:8.1f} {s['warm_ms_p50']:7.3f} {valid:>14} "
              f"{s.get('valid_refused_by_policy', 0):9} {invalid:>14} "
              f"{s['keywords'].get('unclassified', 0):12} {s['over_budget']:11}")
    print("\nvalid instances refused by policy, by the policy that alone refuses each:")
    for category, name, s in sorted(rows, key=lambda r: (r[0], r[1])):
        split = ", ".join(f"{k}={v}" for k, v in s.get("by_policy", {}).items())
        print(f"  {category:16} {name:14} {split or 'none'}")
    print("\ntiers of keyword occurrences in compiled schemas, and why schemas were rejected:")
    for category, name, s in sorted(rows, key=lambda r: (r[0], r[1])):
        tiers = ", ".join(f"{t}={s['keywords'].get(t, 0)}" for t in TIERS)
        reasons = "; ".join(f"{k} {v}" for k, v in list(s["rejected_reasons"].items())[:4])
        print(f"  {category:16} {name:14} {tiers} | {reasons or 'none rejected'}")
