"""Token counts of an answer: every decode it took, and the reasoning's share."""

from __future__ import annotations

from collections.abc import Sequence

from server.engines.base import Engine, GenerationResult
from server.pipeline.answer import RepairUsage, Usage
from server.pipeline.plan import Plan


def reasoning_tokens(engine: Engine, ids: tuple[int, ...], end: str) -> int:
    """How many of `ids` the reasoning took: up to and including the token that completes
    `end` (all of them when the reasoning never ended)."""
    low, high = 0, len(ids)  # the shortest prefix whose text holds the marker
    if end not in engine.decode(ids):
        return len(ids)
    while low < high:
        middle = (low + high) // 2
        if end in engine.decode(ids[:middle]):
            high = middle
        else:
            low = middle + 1
    return low


NO_REPAIR = RepairUsage()


def usage_of(engine: Engine, plan: Plan, results: Sequence[GenerationResult], *,
             repair: RepairUsage = NO_REPAIR) -> Usage:
    """Tokens of every decode the answer took (two when "auto" decided on no call; and
    every repair decode); `plan`: the last decode's, whose reasoning is counted."""
    end = plan.reader.reasoning_end if plan.rendering.thinks else None
    reasoning = None if end is None else reasoning_tokens(engine, results[-1].token_ids, end)
    return Usage(prompt_tokens=sum(r.prompt_tokens for r in results) + repair.prompt_tokens,
                 completion_tokens=sum(r.completion_tokens for r in results)
                 + repair.completion_tokens,
                 cached_tokens=sum(int(r.timings.get("prefix_reused_tokens", 0))
                                   for r in results),
                 reasoning_tokens=reasoning)
