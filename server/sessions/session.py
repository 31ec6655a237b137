"""A session's slots as data: per tool, the valid values collected so far, when the tool
was last talked about, and the changes waiting for the user's confirmation; and which tool
the conversation is about (its intent). Pure: no I/O, no clock of its own (the caller says
what time it is), so expiry is tested without sleeping.

The rules that hold whatever a model writes (server/dialogue/slots.py applies them):
- `filled_with` never lets a missing or null value replace a filled one;
- a value that differs from a filled one is a `Change`, never written silently: either
  applied and reported, or held in `pending` until the user confirms it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """A filled value the user changed: `field` is the JSON Pointer ("/amount")."""

    field: str
    old: Any
    new: Any

    @property
    def name(self) -> str:
        return self.field.removeprefix("/")

    def as_dict(self) -> JsonObject:
        return {"field": self.field, "old": self.old, "new": self.new}

    @classmethod
    def of(cls, raw: JsonObject) -> Change:
        return cls(str(raw["field"]), raw.get("old"), raw.get("new"))


@dataclass(frozen=True)
class ToolSlots:
    values: JsonObject  # field name -> its valid (normalized) value
    touched: float  # the store's clock when a turn was last about this tool
    pending: tuple[Change, ...] = ()  # changes to an irreversible tool, unconfirmed
    # Which messages asked about `pending` (a digest): the same messages sent again are a
    # retry of that turn, not the user's answer.
    asked_by: str = ""
    # The ledger: `values` are those of a call of an irreversible tool this session made
    # (server/dialogue/slots.py): a new call sharing its identifying values waits for a yes.
    filed: bool = False

    def expired(self, now: float, ttl_s: float) -> bool:
        return now - self.touched >= ttl_s

    def filled_with(self, given: JsonObject) -> JsonObject:
        """`given` (a decoded call's arguments) with every filled value it leaves out or
        sets to null taken from the slots: null never overwrites."""
        merged = dict(given)
        for name, value in self.values.items():
            if merged.get(name) is None:
                merged[name] = value
        return merged

    def as_dict(self) -> JsonObject:
        return {"values": self.values, "touched": self.touched,
                "pending": [c.as_dict() for c in self.pending], "asked_by": self.asked_by,
                **({"filed": True} if self.filed else {})}

    @classmethod
    def of(cls, raw: JsonObject) -> ToolSlots:
        return cls(dict(raw.get("values") or {}), float(raw.get("touched") or 0.0),
                   tuple(Change.of(c) for c in raw.get("pending") or ()),
                   str(raw.get("asked_by") or ""), bool(raw.get("filed")))


@dataclass(frozen=True)
class SessionState:
    """One session: each tool's slots, and the tool the conversation is about."""

    tools: dict[str, ToolSlots] = field(default_factory=dict)
    intent: str | None = None

    def slots(self, tool: str) -> ToolSlots | None:
        return self.tools.get(tool)

    def with_tool(self, tool: str, slots: ToolSlots | None) -> SessionState:
        tools = {n: s for n, s in self.tools.items() if n != tool}
        if slots is not None:
            tools[tool] = slots
        return replace(self, tools=tools)

    def only(self, keep: set[str]) -> SessionState:
        """The slots of the tools in `keep`; the others dropped."""
        return replace(self, tools={n: s for n, s in self.tools.items() if n in keep},
                       intent=self.intent if self.intent in keep else None)

    def as_dict(self) -> JsonObject:
        return {"tools": {n: s.as_dict() for n, s in self.tools.items()},
                "intent": self.intent}

    @classmethod
    def of(cls, raw: JsonObject | None) -> SessionState:
        if not raw:
            return cls()
        tools = raw.get("tools") or {}
        return cls({str(n): ToolSlots.of(s) for n, s in tools.items()},
                   raw.get("intent"))
