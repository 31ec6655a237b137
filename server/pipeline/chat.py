"""The pipeline every API shares, as its stages in the order a request meets them:
prepare (server/pipeline/preparing.py: offer, dialogue, plan, prompt, grammar) -> decode
under the runaway guards (decode.py, guards/) -> the checks (checking/: validation, repair,
the dialogue's merge, the audit) -> an `Answer`, or the typed events of a streamed one
(stream.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from grammars import GrammarCache
from server.engines.base import Engine
from server.execution.service import owner_of
from server.identity import Caller
from server.pipeline.answer import Answer, Event
from server.pipeline.checking.checks import Finisher
from server.pipeline.decode import Decoder
from server.pipeline.prepared import Prepared
from server.pipeline.preparing import Parts, Preparer
from server.pipeline.stream import EventStream, Overdue
from server.settings import Settings
from server.task import Task

__all__ = ["ChatPipeline", "Parts"]


class ChatPipeline:
    def __init__(self, engine: Engine, cache: GrammarCache, settings: Settings,
                 parts: Parts) -> None:
        self.engine = engine
        self.cache = cache
        self.settings = settings
        self.model_name = settings.served_model_name or engine.model_name
        # The stages, in the order a request meets them.
        self.preparer = Preparer(engine, cache, settings, parts, model_name=self.model_name)
        self.decoder = Decoder(engine, rate_limits=parts.rate_limits, metrics=parts.metrics)
        self.finisher = Finisher.build(engine, cache, parts.policy, parts.fmt,
                                       metrics=parts.metrics, audit=parts.audit,
                                       model=self.model_name,
                                       compile_timeout_s=settings.compile_timeout_s)
        # What the APIs read of the server's setup (the compile endpoint and the warm-up
        # call the preparer itself).
        self.format, self.policy = parts.fmt, parts.policy
        self.registry, self.dialogue = self.preparer.registry, self.preparer.dialogue

    def owner_of(self, caller: Caller) -> str | None:
        """Whose idempotency keys a caller's are (its tenant, or its API key without one),
        as for its tool calls' keys."""
        return owner_of(self.preparer.tool_policy.principal(caller), caller)

    # -- the two ways an answer comes back ------------------------------------------------
    async def answer(self, task: Task, caller: Caller) -> Answer:
        return await self.complete(await self.prepare(task, caller))

    async def prepare(self, task: Task, caller: Caller) -> Prepared:
        """The request checked, planned, prompted and its grammar compiled."""
        return await self.preparer.prepare(task, caller)

    async def complete(self, prepared: Prepared) -> Answer:
        """Decode each step of the plan (a free reasoning pass may come before the
        constrained one), then check the last and answer."""
        step = prepared.decode
        result, trip = await self.decoder.run(step, prepared)
        results = [result]
        while (following := step.then(results[-1])) is not None:
            step = following
            result, trip = await self.decoder.run(step, prepared)
            results.append(result)
        checked = await self.finisher.finish(prepared, step, results[-1], trip)
        return self.finisher.answered(prepared, step, checked, results)

    def stream(self, prepared: Prepared, *, overdue: Overdue | None = None
               ) -> AsyncIterator[Event]:
        """The same stages told as typed events while tokens arrive."""
        return EventStream(self.decoder, self.finisher, prepared, overdue=overdue).events()
