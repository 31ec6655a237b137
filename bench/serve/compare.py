"""`strictcall-bench serve compare A.json B.json`: two result files side by side, per target
and setting: each number as A -> B with the change in percent, and what differs between the
runs (the workload's hash, the machine, the load), since a difference there explains more
than any number."""

from __future__ import annotations

from typing import Any

from bench.common.markdown_table import cell, table

# (column, how to read it from a settings row)
METRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("req/s", ("requests_per_s",)), ("out tok/s", ("output_tokens_per_s",)),
    ("goodput/s", ("goodput_per_s",)),
    ("TTFT p50", ("ttft_ms", "p50")), ("TTFT p99", ("ttft_ms", "p99")),
    ("TPOT p50", ("tpot_ms", "p50")), ("ITL p99", ("itl_ms", "p99")),
    ("e2e p50", ("e2e_ms", "p50")), ("e2e p99", ("e2e_ms", "p99")),
    ("valid", ("valid",)), ("errors", ("error",)),
)


def pairs(a: dict[str, Any],
          b: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(target, setting, A's row, B's row) for the settings both ran. Targets pair by name;
    two files of one target each pair whatever the names (the same endpoint renamed, or
    vLLM in one file and StrictCall in the other)."""
    rows_b = {(r["target"], r["setting"]): r for r in b["settings"]}
    single = len({r["target"] for r in a["settings"]}) == 1 and \
        len({r["target"] for r in b["settings"]}) == 1
    out = []
    for r in a["settings"]:
        other = rows_b.get((r["target"], r["setting"]))
        if other is None and single:
            other = next((o for o in b["settings"] if o["setting"] == r["setting"]), None)
        if other is not None:
            name = r["target"] if other["target"] == r["target"] \
                else f"{r['target']} -> {other['target']}"
            out.append((name, r["setting"], r, other))
    return out


def value(row: dict[str, Any], path: tuple[str, ...]) -> float | None:
    got: Any = row
    for key in path:
        got = got.get(key) if isinstance(got, dict) else None
    return got if isinstance(got, int | float) else None


def change(a: float | None, b: float | None) -> float | None:
    """B against A in percent; None where either is missing or A is 0."""
    if a is None or b is None or a == 0:
        return None
    return 100 * (b - a) / a


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What the two runs did not share, in words."""
    notes = []
    if a["workload"]["hash"] != b["workload"]["hash"]:
        notes.append(f"different workloads (sha256 {a['workload']['hash'][:12]} against "
                     f"{b['workload']['hash'][:12]}): the requests differ")
    for key in ("host", "gpus", "cpus"):
        if a["machine"].get(key) != b["machine"].get(key):
            notes.append(f"machine {key}: {a['machine'].get(key)} against "
                         f"{b['machine'].get(key)}")
    for key in ("arrivals", "interleave", "max_tokens", "num_requests", "duration_s"):
        if a["load"].get(key) != b["load"].get(key):
            notes.append(f"load {key}: {a['load'].get(key)} against {b['load'].get(key)}")
    if a.get("slo") != b.get("slo"):
        notes.append(f"SLOs: {a.get('slo')} against {b.get('slo')} (goodput differs by "
                     "definition)")
    return notes


def markdown(a: dict[str, Any], b: dict[str, Any], *, names: tuple[str, str] = ("A", "B")
             ) -> str:
    matched = pairs(a, b)
    parts = [f"# strictcall-bench serve compare: {names[0]} -> {names[1]}", "",
             f"- {names[0]}: `{a['command']}` ({a['created']})",
             f"- {names[1]}: `{b['command']}` ({b['created']})", ""]
    notes = differences(a, b)
    parts += [f"Not alike: {note}." for note in notes] or ["Same workload, machine and load."]
    if not matched:
        return "\n".join(parts + ["", "No target and setting ran in both."]) + "\n"
    parts += ["", "Each cell: A -> B (change). Times in ms.", "", table(
        ["target", "setting", *(m for m, _ in METRICS)],
        [[target, setting, *(_cell(value(ra, path), value(rb, path)) for _, path in METRICS)]
         for target, setting, ra, rb in matched])]
    return "\n".join(parts) + "\n"


def _cell(a: float | None, b: float | None) -> str:
    moved = change(a, b)
    return f"{cell(a)} -> {cell(b)}" + ("" if moved is None else f" ({moved:+.0f}%)")
