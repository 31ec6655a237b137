"""Token counts of an answer: every decode it took, and the reasoning's share. Apart from
the chat pipeline so that each stays readable; the pipeline re-exports them."""

from __future__ import annotations

from server.engines.base import Engine, GenerationResult
from server.protocol import PromptTokensDetails, Usage


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


def usage_of(*results: GenerationResult) -> Usage:
    """Tokens of every decode the answer took (two when "auto" decided on no call)."""
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    cached = sum(int(r.timings.get("prefix_reused_tokens", 0)) for r in results)
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=prompt + completion,
                 prompt_tokens_details=PromptTokensDetails(cached_tokens=cached))
