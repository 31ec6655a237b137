"""BFCL v4 multi-turn dialogues read in place from ../shared/evaldata/bfcl/multi_turn: the
dialogues with their ground truth, the involved classes' functions as OpenAI tools, and a
model's tool call as the call string BFCL executes (`cd(folder='document')`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.accuracy.bfcl_ast import EVALDATA
from grammars import bfcl_to_json_schema

MULTI_TURN = EVALDATA / "multi_turn"
CATEGORY = "multi_turn_base"
GROUNDED = "x-strictcall-grounded"
# BFCL's own mapping (bfcl_eval/constants/executable_backend_config.py): each class of the
# multi-turn suite, its function docs and the module of func_source_code/ that runs them.
CLASS_FILES = {
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api",
    "MessageAPI": "message_api", "TwitterAPI": "posting_api", "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot", "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}


def load(limit: int | None = None, offset: int = 0, every: int = 1, *,
         root: Path = MULTI_TURN) -> list[tuple[dict[str, Any], list[list[str]]]]:
    """(dialogue, ground truth: call strings per turn) pairs: every `every`-th from `offset`
    (the file is grouped by API class: a stride mixes them), at most `limit`."""
    entries = _lines(root / f"BFCL_v4_{CATEGORY}.json")
    truths = {a["id"]: a["ground_truth"]
              for a in _lines(root / "possible_answer" / f"BFCL_v4_{CATEGORY}.json")}
    pairs = [(e, truths[e["id"]]) for e in entries if e["id"] in truths][offset::every]
    return pairs[:limit] if limit is not None else pairs


def functions(involved_classes: list[str], *, root: Path = MULTI_TURN) -> list[dict[str, Any]]:
    """The involved classes' function docs (BFCL's dialect), in the classes' order, as BFCL
    offers them (it ignores an entry's `excluded_function`; only its miss-func category
    holds functions back)."""
    out = []
    for name in involved_classes:
        out.extend(_lines(root / "func_doc" / f"{CLASS_FILES[name]}.json"))
    return out


def tools(docs: list[dict[str, Any]], *, grounded: bool,
          numbers: bool = False) -> list[dict[str, Any]]:
    """`docs` as OpenAI tools with JSON Schema parameters (the project's converter from BFCL's
    dialect, so any OpenAI-compatible server takes them); BFCL's `response` schema is not part
    of a tool. `grounded`: every top-level string parameter without an enum is marked
    grounded, so its value must be copied from the conversation; `numbers`: every integer
    and number parameter too ("the last several lines" gives no count)."""
    out = []
    for doc in docs:
        parameters = bfcl_to_json_schema(doc["parameters"])
        if grounded:
            parameters = marked_grounded(parameters, numbers=numbers)
        out.append({"type": "function", "function": {
            "name": doc["name"], "description": doc.get("description", ""),
            "parameters": parameters}})
    return out


def marked_grounded(parameters: dict[str, Any], *, numbers: bool = False) -> dict[str, Any]:
    """Every free string parameter grounded, each item of an array of free strings too
    (mentions, tags); with `numbers`, integer and number parameters and their arrays' items
    (the numbers a mean is taken of)."""
    def value(prop: dict[str, Any]) -> bool:
        return _free_string(prop) or numbers and prop.get("type") in ("integer", "number")
    def marked(prop: dict[str, Any]) -> dict[str, Any]:
        if value(prop):
            return {**prop, GROUNDED: True}
        items = prop.get("items")
        if prop.get("type") == "array" and isinstance(items, dict) and value(items):
            return {**prop, "items": {**items, GROUNDED: True}}
        return prop
    properties = {name: marked(prop) if isinstance(prop, dict) else prop
                  for name, prop in parameters.get("properties", {}).items()}
    return {**parameters, "properties": properties}


def _free_string(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "string" and "enum" not in prop


def call_string(name: str, arguments: str, offered: set[str]) -> str:
    """A tool call as BFCL's FC handlers write it for execution (`convert_to_function_call`:
    `name(k=repr(v),...)`). ValueError when the name is not offered or the arguments are not
    a JSON object: such a call is never evaluated."""
    if name not in offered:
        raise ValueError(f"function {name!r} is not one of the offered tools")
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not JSON: {exc}") from None
    if not isinstance(values, dict):
        raise ValueError(f"arguments are not a JSON object: {arguments!r}")
    if not all(isinstance(k, str) and k.isidentifier() for k in values):
        raise ValueError(f"argument names must be identifiers: {sorted(values)!r}")
    return f"{name}({','.join(f'{k}={v!r}' for k, v in values.items())})"


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]
