"""One call into the engine, with the engine's own failures mapped to a retryable 503."""

from __future__ import annotations

from server.engines.base import Engine, GenerationRequest, GenerationResult
from server.errors import EngineFailure


async def decode(engine: Engine, request: GenerationRequest) -> GenerationResult:
    try:
        return await engine.generate(request)
    except Exception as exc:  # the engine's failure, not the request's: worth a retry
        raise EngineFailure(f"the engine failed on this request: {exc}") from exc
