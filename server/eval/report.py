"""Scenario results, aggregated per tool, per field and per tool class; compared with a
baseline run, class by class, against each class's threshold."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from server.eval.dialogues import DialogueOutcome
from server.eval.judge import GOLD_MEASURES
from server.eval.runner import Outcome


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    by_tool: dict[str, list[Outcome]] = defaultdict(list)
    by_class: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_tool[o.tool].append(o)
        by_class[o.tool_class].append(o)
    return {"tools": {tool: _stats(rows) for tool, rows in sorted(by_tool.items())},
            "classes": {c: _stats(rows) for c, rows in sorted(by_class.items())},
            "overall": _stats(outcomes)}


def _stats(rows: list[Outcome]) -> dict[str, Any]:
    n = len(rows)
    fields = Counter(path for o in rows for path in o.field_errors)
    return {"scenarios": n,
            "correct_call_rate": _rate(sum(o.correct for o in rows), n),
            "tool_name_accuracy": _rate(sum(o.tool_name_correct for o in rows), n),
            "calls_per_scenario": round(sum(len(o.called) for o in rows) / n, 3) if n else 0,
            "unneeded_calls": sum(o.unneeded_call for o in rows),
            "errors": sum(o.error is not None for o in rows),
            "hard_fails": dict(sorted(Counter(c for o in rows for c in o.hard_fails).items())),
            "field_errors": dict(sorted(fields.items())),
            "latency_s_mean": round(statistics.mean(o.seconds for o in rows), 3) if n else 0}


def _rate(k: int, n: int) -> float:
    return round(k / n, 4) if n else 0.0


def hard_failures(run: dict[str, Any]) -> list[str]:
    """Every hard fail of the run, one line each: a failure whatever the baseline."""
    return [f"{r['scenario']} ({r['tool']}): {kind}" for r in run["results"]
            for kind in r.get("hard_fails") or ()]


def scenario_changes(run: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Per scenario: right in the baseline and wrong now, or the other way, with the calls
    each run returned."""
    before = {r["scenario"]: r for r in baseline["results"]}
    lines = []
    for now in run["results"]:
        then = before.get(now["scenario"])
        if then is None or then["correct"] == now["correct"]:
            continue
        way = "now wrong" if then["correct"] else "now right"
        lines.append(f"{now['scenario']}: {way} (baseline {then.get('calls', then['called'])}"
                     f", now {now.get('calls', now['called'])})")
    return lines


def compare(run: dict[str, Any], baseline: dict[str, Any],
            thresholds: dict[str, float]) -> list[str]:
    """Failures: each tool class whose correct-call rate fell by more than its threshold
    (a drop, in rate points) below the baseline's."""
    failures = []
    base = baseline["summary"]["classes"]
    for name, stats in run["summary"]["classes"].items():
        if name not in base:
            continue
        drop = base[name]["correct_call_rate"] - stats["correct_call_rate"]
        if drop > thresholds.get(name, 0.0) + 1e-9:
            failures.append(f"{name} tools: correct-call rate {stats['correct_call_rate']:.1%}"
                            f" vs {base[name]['correct_call_rate']:.1%} in the baseline "
                            f"(a drop of {drop:.1%}, threshold {thresholds.get(name, 0):.1%})")
    return failures


def markdown(run: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    lines = ["| tool | scenarios | correct calls | tool name | calls/scenario | unneeded "
             "| field errors | mean s |" + (" baseline correct |" if baseline else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if baseline else "")]
    base_tools = baseline["summary"]["tools"] if baseline else {}
    for tool, s in run["summary"]["tools"].items():
        fields = ", ".join(f"{p} {n}" for p, n in s["field_errors"].items()) or "-"
        row = (f"| {tool} | {s['scenarios']} | {s['correct_call_rate']:.0%} | "
               f"{s['tool_name_accuracy']:.0%} | {s['calls_per_scenario']} | "
               f"{s['unneeded_calls']} | {fields} | {s['latency_s_mean']} |")
        if baseline:
            b = base_tools.get(tool)
            row += f" {b['correct_call_rate']:.0%} |" if b else " - |"
        lines.append(row)
    return "\n".join(lines)


def summarize_dialogues(outcomes: list[DialogueOutcome]) -> dict[str, Any]:
    """Per tool: the dialogues' turns passed, turns to a complete call, questions (and how
    many asked by meaning), values lost to overwrites, silent changes."""
    by_tool: dict[str, list[DialogueOutcome]] = defaultdict(list)
    for o in outcomes:
        by_tool[o.tool].append(o)
    return {tool: _dialogue_stats(rows) for tool, rows in sorted(by_tool.items())}


def _dialogue_stats(rows: list[DialogueOutcome]) -> dict[str, Any]:
    turns = [t for o in rows for t in o.turns]
    to_call = [o.turns_to_call for o in rows if o.turns_to_call is not None]
    return {"dialogues": len(rows), "turns": len(turns),
            "turns_passed": sum(t.passed for t in turns),
            "dialogues_passed": sum(all(t.passed for t in o.turns) for o in rows),
            "turns_to_call_mean": round(statistics.mean(to_call), 2) if to_call else None,
            "no_call": sum(o.turns_to_call is None for o in rows),
            "questions": sum(o.questions for o in rows),
            "questions_by_meaning": sum(o.by_meaning for o in rows),
            "lost_to_overwrite": sum(len(o.lost) for o in rows),
            "silent_changes": sum(len(o.silent) for o in rows),
            "errors": sum(t.error is not None for t in turns)}


def dialogue_markdown(summary: dict[str, Any]) -> str:
    lines = ["| tool | dialogues passed | turns passed | turns to a call | questions (by "
             "meaning) | values lost to overwrites | silent changes | errors |",
             "|---|---|---|---|---|---|---|---|"]
    for tool, s in summary.items():
        to_call = "-" if s["turns_to_call_mean"] is None else s["turns_to_call_mean"]
        if s["no_call"]:
            to_call = f"{to_call} ({s['no_call']} never)"
        lines.append(f"| {tool} | {s['dialogues_passed']}/{s['dialogues']} | "
                     f"{s['turns_passed']}/{s['turns']} | {to_call} | {s['questions']} "
                     f"({s['questions_by_meaning']}) | {s['lost_to_overwrite']} | "
                     f"{s['silent_changes']} | {s['errors']} |")
    return "\n".join(lines)


def summarize_gold(outcomes: list[DialogueOutcome]) -> dict[str, dict[str, int]]:
    """Per language: how many field-turns fell under each gold measure (the dialogues'
    hand-written values, server/eval/dialogues.py)."""
    out: dict[str, dict[str, int]] = {}
    for o in outcomes:
        counts = out.setdefault(o.language, dict.fromkeys(GOLD_MEASURES, 0))
        for t in o.turns:
            for measure in t.gold.values():
                counts[measure] += 1
    return {language: out[language] for language in sorted(out)}


def gold_markdown(summary: dict[str, dict[str, int]]) -> str:
    lines = ["| language | " + " | ".join(m.replace("_", " ") for m in GOLD_MEASURES) + " |",
             "|---|" + "---|" * len(GOLD_MEASURES)]
    for language, counts in summary.items():
        lines.append(f"| {language} | " + " | ".join(str(counts[m]) for m in GOLD_MEASURES)
                     + " |")
    return "\n".join(lines)
