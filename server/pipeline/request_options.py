"""A request's options, resolved once: what it asked for in `strictcall`, else the server's
setting. Everything downstream reads this one frozen object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from server.options import LoopGuard, SchemaPrompt, StrictCallOptions, ToolPrompt
from server.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class RepairBudget:
    attempts: int
    seconds: float


@dataclass(frozen=True)
class GuardOptions:
    """The runaway guards (server/pipeline/guards/runaway.py)."""

    dedupe_calls: bool = True
    loop_guard: LoopGuard = "stop"

    @property
    def active(self) -> bool:
        return self.dedupe_calls or self.loop_guard != "off"


@dataclass(frozen=True)
class RequestOptions:
    repair: RepairBudget
    guards: GuardOptions
    schema_prompt: SchemaPrompt
    tool_prompt: ToolPrompt
    reasoning: int  # the free-reasoning budget in tokens (0: no reasoning pass)
    catalog: str | None
    select_k: int
    grounding: bool = True  # grounded fields copied from the conversation

    @classmethod
    def resolve(cls, asked: StrictCallOptions, settings: Settings, *, reasoning: int,
                steers: bool) -> RequestOptions:
        """`reasoning`: the budget already resolved (server/pipeline/chat.py); `steers`:
        whether the engine chooses tokens itself (else "steer" falls back to "stop")."""
        loops = _or(asked.loop_guard, settings.loop_guard)
        if loops == "steer" and not steers:
            loops = "stop"
        return cls(
            repair=RepairBudget(_or(asked.max_repair_attempts, settings.repair_attempts),
                                _or(asked.repair_timeout_s, settings.repair_seconds)),
            guards=GuardOptions(_or(asked.dedupe_calls, settings.dedupe_calls), loops),
            schema_prompt=_or(asked.schema_prompt, settings.schema_prompt),
            tool_prompt=_or(asked.tool_prompt, settings.tool_prompt),
            reasoning=reasoning, catalog=asked.catalog,
            select_k=_or(asked.select_k, settings.select_k),
            grounding=_or(asked.grounding, settings.grounding))


def _or(asked: T | None, setting: T) -> T:
    return setting if asked is None else asked
