"""The tokens a forced call needs at the least, so that a free reasoning pass before it can
never take them: the call's skeleton (its tool's name and the required keys, as the grammar
writes them) through the model's tokenizer, and an allowance per required value. A
reasoning budget is cut to leave the call this room (a requested one that leaves less is a
400 that says so); the call itself may still run longer, and then ends as an honest
`length`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from contracts import ContractRegistry
from server.task import NamedTool, Task, ToolDef

VALUE_TOKENS = 8  # a value's allowance: a date, an amount, an id of a few pieces
MAX_REQUIRED = 32  # keys counted per object (a larger schema is no estimate's business)


def forced_call_tokens(task: Task, registry: ContractRegistry,
                       encode: Callable[[str], Sequence[int]]) -> int:
    """The fewest tokens the call a forced request must write needs (0: the request
    forces no call). Required: the largest of its tools' (the model may write any)."""
    choice = task.tool_choice
    if isinstance(choice, NamedTool):
        tools = [t for t in task.tools if t.name == choice.name]
    elif choice == "required":
        tools = list(task.tools)
    else:
        return 0
    return max((_tokens(t, registry, encode) for t in tools), default=0)


def _tokens(tool: ToolDef, registry: ContractRegistry,
            encode: Callable[[str], Sequence[int]]) -> int:
    contract = registry.get(tool.name)
    schema = contract.schema() if contract is not None else tool.parameters
    keys = _required(schema if isinstance(schema, dict) else {})
    skeleton = json.dumps({"name": tool.name, "arguments": dict.fromkeys(keys)},
                          ensure_ascii=False, separators=(",", ":"))
    return len(encode(skeleton)) + VALUE_TOKENS * len(keys)


def _required(schema: dict[str, Any]) -> list[str]:
    required = schema.get("required")
    props = schema.get("properties")
    if not isinstance(required, list) or not isinstance(props, dict):
        return []
    return [k for k in required if isinstance(k, str) and k in props][:MAX_REQUIRED]
