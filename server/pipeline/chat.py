"""The pipeline every API shares, as its stages in the order a request meets them:
prepare (server/pipeline/preparing.py: offer, dialogue, plan, prompt, grammar) -> decode
under the runaway guards (decode.py, guards/) -> the checks (checking/: validation, repair,
the dialogue's merge, the audit) -> an `Answer`, or the typed events of a streamed one
(stream.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from grammars import Analysis, CompiledGrammar, GrammarCache, JsonSchemaSpec, Lookup
from server.engines.base import Engine, GenerationResult
from server.identity import Caller
from server.pipeline.answer import Answer, Event
from server.pipeline.checking.checks import Checked, Finisher
from server.pipeline.decode import decode
from server.pipeline.guards.runaway import Trip
from server.pipeline.prepared import Decode, Prepared
from server.pipeline.preparing import Parts, Preparer
from server.pipeline.stream import EventStream, Overdue
from server.pipeline.usage import usage_of
from server.settings import Settings
from server.task import Task

__all__ = ["ChatPipeline", "Parts"]


class ChatPipeline:
    def __init__(self, engine: Engine, cache: GrammarCache, settings: Settings,
                 parts: Parts) -> None:
        self.engine = engine
        self.cache = cache
        self.settings = settings
        self.metrics = parts.metrics
        self.rate_limits = parts.rate_limits
        self.model_name = settings.served_model_name or engine.model_name
        self.preparer = Preparer(engine, cache, settings, parts, model_name=self.model_name)
        self.finisher = Finisher.build(engine, cache, parts.policy, parts.fmt,
                                       metrics=parts.metrics, audit=parts.audit,
                                       model=self.model_name,
                                       compile_timeout_s=settings.compile_timeout_s)
        # What the APIs and the compile endpoint read of the server's setup.
        self.format, self.policy = parts.fmt, parts.policy
        self.registry, self.dialogue = self.preparer.registry, self.preparer.dialogue

    # -- the two ways an answer comes back ------------------------------------------------
    async def answer(self, task: Task, caller: Caller) -> Answer:
        return await self.complete(await self.prepare(task, caller))

    async def complete(self, prepared: Prepared) -> Answer:
        step = prepared.decode
        result, trip = await self.run(step, prepared)
        results = [result]
        while (following := step.then(results[-1])) is not None:
            step = following
            result, trip = await self.run(step, prepared)
            results.append(result)
        checked = await self.finish(prepared, step, results[-1], trip)
        return self.answered(prepared, step, checked, results)

    def stream(self, prepared: Prepared, *, overdue: Overdue | None = None
               ) -> AsyncIterator[Event]:
        return EventStream(self, prepared, overdue=overdue).events()

    # -- stages ---------------------------------------------------------------------------
    async def prepare(self, task: Task, caller: Caller) -> Prepared:
        return await self.preparer.prepare(task, caller)

    async def run(self, step: Decode, prepared: Prepared
                  ) -> tuple[GenerationResult, Trip | None]:
        """One decode under its runaway guard: the result, and the guard's trip if it
        stopped the decode. Its tokens are charged to the caller's key."""
        guard = step.guard(self.engine)
        try:
            result = await decode(self.engine, step.guarded(guard), guard=guard)
        except BaseException as exc:
            prepared.context.trace.end(error=type(exc).__name__)
            raise
        identity = prepared.context.caller.identity
        if self.rate_limits is not None and identity is not None:
            self.rate_limits.charge(identity, result.prompt_tokens + result.completion_tokens)
        if self.metrics is not None:
            t = result.timings
            self.metrics.decode(prompt_tokens=result.prompt_tokens,
                                generated=result.completion_tokens,
                                finish_reason=result.finish_reason, ttft_s=t.get("ttft_s"),
                                decode_s=t["e2e_s"] - t["ttft_s"] if "ttft_s" in t else None,
                                queue_s=t.get("queue_s"))
        return result, guard.trip if guard is not None else None

    async def finish(self, prepared: Prepared, step: Decode, result: GenerationResult,
                     trip: Trip | None, *, call_ids: Mapping[int, str] | None = None
                     ) -> Checked:
        """`call_ids`: the ids a stream already gave its calls, by index."""
        return await self.finisher.finish(prepared, step, result, trip, call_ids=call_ids)

    def answered(self, prepared: Prepared, step: Decode, checked: Checked,
                 results: list[GenerationResult]) -> Answer:
        return Answer(id=prepared.id, created=prepared.created, model=self.model_name,
                      content=checked.content, calls=checked.calls, finish=checked.finish,
                      usage=usage_of(self.engine, step.plan, results, repair=checked.repair),
                      reasoning=checked.reasoning, stop_string=checked.stop_string,
                      extension=checked.extension, headers=checked.headers)

    # -- the server's own --------------------------------------------------------------------
    def warm(self) -> list[CompiledGrammar]:
        """The grammars requests naming a contract will look up, compiled (startup)."""
        return self.preparer.warm()

    async def compile_schema(self, schema: Any, *, where: str
                             ) -> tuple[JsonSchemaSpec, Analysis, Lookup]:
        return await self.preparer.compile_schema(schema, where=where)
