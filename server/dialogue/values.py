"""What the slot layer asks of a tool and its values: whether a change to it can be undone,
whether calling it ends another tool's intent, the values its fields hold as a valid call
holds them, and when two values are the same."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from contracts import Contract
from grammars import validator_for

REVERSIBLE_RISKS = ("low", "medium")


KIND_KEY, RISK_KEY = "x-strictcall-kind", "x-strictcall-risk"


def reversible(contract: Contract | None, schema: dict[str, Any] | None = None) -> bool:
    """A read, or a write of low or medium risk (the contract's catalog entry): a changed
    value replaces the old one and the answer says so. A client tool is reversible unless
    its schema opts in (`x-strictcall-kind: "write"` with `x-strictcall-risk: "high"` or
    "critical"): StrictCall does not run it, the client does, and sees each change
    reported; opted in, it gets a contract's pins, confirmations and ledger."""
    if contract is None:
        kind, risk = client_kind(schema)
        return kind != "write" or risk in REVERSIBLE_RISKS
    return contract.catalog.kind == "read" or contract.catalog.risk in REVERSIBLE_RISKS


def ends_intent(contract: Contract | None, schema: dict[str, Any] | None = None) -> bool:
    """Whether a question about this tool means the conversation moved on to it (and the
    slots of the tool it was about are reset). A lookup serves the task at hand: reads and
    client tools (which StrictCall cannot tell apart from lookups, unless their schema says
    `x-strictcall-kind`) do not end it."""
    if contract is None:
        return client_kind(schema)[0] in ("write", "orchestration")
    return contract.catalog.kind != "read"


def client_kind(schema: dict[str, Any] | None) -> tuple[str | None, str]:
    """A client tool's kind and risk as its schema declares them (risk "medium" unless
    said, as a contract's)."""
    kind = (schema or {}).get(KIND_KEY)
    risk = (schema or {}).get(RISK_KEY)
    return (kind if kind in ("read", "write", "orchestration") else None,
            risk if risk in ("low", "medium", "high", "critical") else "medium")


def normal(contract: Contract | None, name: str, value: Any, *, today: dt.date) -> Any:
    """`value` as a valid call holds it (a contract's validators: "yesterday" is a date,
    "1 200,50" is "1200.50"); a client tool's value as it is."""
    if contract is None or value is None:
        return value
    ok, out = contract.fields.value((name,), value, context={"today": today})
    return out if ok else value


def valid_normal(contract: Contract | None, schema: dict[str, Any], name: str, value: Any,
                 *, today: dt.date) -> tuple[bool, Any]:
    """(whether `value` is a valid value of the field on its own, its normal form)."""
    if contract is not None:
        ok, out = contract.fields.value((name,), value, context={"today": today})
        return ok, out
    return valid_value(schema, name, value), value


def same(a: Any, b: Any) -> bool:
    """Two values of one field are the same value: equal, or numbers (or strings that spell
    numbers) of equal amount ("1200.50" and "1200.5")."""
    return bool(canon(a) == canon(b))


def canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, str)):
        try:
            return Decimal(str(value)).normalize()
        except InvalidOperation:
            return value
    return value


def valid_value(schema: dict[str, Any], name: str, value: Any) -> bool:
    """Whether `value` is one the tool's schema takes for `name` (a slot kept from an
    earlier version of a contract may no longer be). `schema` has been checked: a
    contract's, or a client's the planner accepted."""
    return bool(validator_for({**schema, "required": []}).is_valid({name: value}))


def leaves(value: Any) -> list[Any]:
    """The scalars inside a JSON value, in order: an object's values, an array's items."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]
