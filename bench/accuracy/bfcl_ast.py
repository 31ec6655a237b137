"""BFCL's questions (read in place, their functions as JSON Schema tools) and its AST
check, written from the rules in ../shared/evaldata/README.md: the function name
matches; no required parameter is missing and none is unexpected; each value is among the
acceptable ones (an int where a float is expected is fine; strings compare lower-cased
without spaces and `,./-_*^`; lists and dicts element by element); `""` among the
acceptable values means the parameter may be left out; parallel calls match in any order."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from grammars import bfcl_to_json_schema

EVALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "evaldata" / "bfcl"
_STRIP = re.compile(r"[ ,./\-_*^]")


def load(category: str, limit: int | None = None, *, root: Path = EVALDATA
         ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(question, answer) pairs of BFCL v4 `category` (simple_python, multiple, parallel),
    read from `root` (BFCL's folder: the question files and possible_answer/)."""
    questions = _lines(root / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a for a in _lines(root / "possible_answer" /
                                          f"BFCL_v4_{category}.json")}
    pairs = [(q, answers[q["id"]]) for q in questions if q["id"] in answers]
    return pairs[:limit] if limit else pairs


def described(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL functions as the server describes tools in its prompt (JSON Schema parameters)."""
    return [{"name": f["name"], "description": f.get("description") or "",
             "parameters": bfcl_to_json_schema(f["parameters"])} for f in functions]


def with_instructions(messages: list[dict[str, Any]], instructions: str) -> list[dict[str, Any]]:
    """`instructions` joined to the system turn, or a system turn of their own, first (as the
    server joins them)."""
    if messages and messages[0]["role"] == "system":
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instructions}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instructions}, *messages]


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def check(calls: list[tuple[str, dict[str, Any]]], answer: dict[str, Any]) -> bool:
    """Whether the decoded calls (name, arguments) match the ground truth."""
    truth = answer["ground_truth"]
    if len(calls) != len(truth):
        return False
    for order in itertools.permutations(range(len(calls))):
        if all(_call_matches(calls[i], truth[j]) for j, i in enumerate(order)):
            return True
    return False


def _call_matches(call: tuple[str, dict[str, Any]], expected: dict[str, Any]) -> bool:
    name, arguments = call
    (want_name, params), = expected.items()
    if name != want_name or not isinstance(arguments, dict):
        return False
    if set(arguments) - set(params):
        return False  # an unexpected parameter
    for param, acceptable in params.items():
        if param not in arguments:
            if "" not in acceptable:
                return False  # a required one is missing
            continue
        if not any(_same(arguments[param], a) for a in acceptable if a != ""):
            return False
    return True


def _same(value: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(value, bool):
        return value is want
    if isinstance(want, float) and isinstance(value, int):
        return float(value) == want
    if isinstance(want, str) and isinstance(value, str):
        return _STRIP.sub("", value.lower()) == _STRIP.sub("", want.lower())
    if isinstance(want, list) and isinstance(value, list):
        return len(value) == len(want) and all(
            _same(v, w) for v, w in zip(value, want, strict=True))
    if isinstance(want, dict) and isinstance(value, dict):
        return set(value) <= set(want) and all(
            any(_same(value[k], w) for w in (want[k] if isinstance(want[k], list)
                                             else [want[k]]))
            for k in value)
    return type(value) is type(want) and value == want
