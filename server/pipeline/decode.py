"""Calls into the engine and the grammar cache, with their failures mapped to service errors:
an engine failure is a retryable 503; a schema the backend refuses, or one that does not
compile within the timeout, is a 400."""

from __future__ import annotations

import asyncio

from grammars import GrammarCache, GrammarError, GrammarSpec, Lookup
from server.engines.base import Engine, GenerationRequest, GenerationResult
from server.errors import EngineFailure, InvalidRequest


async def compiled(cache: GrammarCache, spec: GrammarSpec, *, timeout_s: float) -> Lookup:
    """The compiled grammar, never compiled on the event loop. Shielded: a caller that gives
    up does not cancel a compilation other requests share; it finishes and is cached."""
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(cache.submit(spec))),
                                      timeout=timeout_s)
    except TimeoutError:
        raise InvalidRequest(f"compiling the grammar for this schema took longer than "
                             f"{timeout_s:g} s; simplify the schema (fewer unions, shallower "
                             "nesting, smaller enums)", code="grammar_timeout") from None
    except GrammarError as exc:
        raise InvalidRequest(exc.render(), code="invalid_schema") from None


async def decode(engine: Engine, request: GenerationRequest) -> GenerationResult:
    try:
        return await engine.generate(request)
    except Exception as exc:  # the engine's failure, not the request's: worth a retry
        raise EngineFailure(f"the engine failed on this request: {exc}") from exc
