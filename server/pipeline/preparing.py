"""The prepare stage: a task becomes a `Prepared` request, every 400 before anything
decodes. The model's name checked; the request's options resolved (the reasoning budget
fitted under max_tokens); the tools the caller may see offered; the conversation's turn
begun (server/dialogue); the plan made on the planner's threads; the prompt rendered in the
model's chat template; the sampling and token limits checked; the grammar compiled off the
event loop through the cache. Also the startup warm-up and the compile endpoint's schema,
planned the same way."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from contracts import ContractRegistry
from grammars import (
    Analysis,
    CompiledGrammar,
    GrammarCache,
    GrammarError,
    GrammarPolicy,
    JsonSchemaSpec,
    Lookup,
)
from server.dialogue import Dialogue, draft_lines, grounding_bounds
from server.engines.base import Engine, GenerationRequest, SamplingParams
from server.errors import InvalidRequest, ModelNotFound, ServiceError
from server.execution import ToolOffers, ToolPolicy, Tracing, contract_runtime
from server.formats.base import ModelFormat
from server.formats.history import alternating
from server.formats.reasoning import EFFORT_BUDGETS, budget_for, fitted
from server.identity import Caller
from server.metrics import Metrics
from server.pipeline.call_room import forced_call_tokens
from server.pipeline.checking.audit import AuditSink
from server.pipeline.decode import compiled
from server.pipeline.plan import Plan, Planner, plan_schema
from server.pipeline.prepared import CallContext, Decode, Prepared
from server.pipeline.prompt import with_instructions
from server.pipeline.request_options import RequestOptions
from server.pipeline.validation import new_answer_id
from server.ratelimit import Limiter
from server.sessions import SessionStore
from server.settings import Settings
from server.task import NamedTool, Task, ToolDef, Turn

log = logging.getLogger("strictcall.pipeline")

PLAN_WORKERS = 4  # planning is short CPU work; a few threads keep requests from queueing


@dataclass(frozen=True)
class Parts:
    """What a pipeline is built from, besides the engine, the cache and the settings."""

    policy: GrammarPolicy
    fmt: ModelFormat  # the served family's (server/formats/detect.py resolves it)
    registry: ContractRegistry | None = None
    metrics: Metrics | None = None
    rate_limits: Limiter | None = None  # tokens are charged to the caller's key
    audit: AuditSink | None = None  # one record per tool-call decision
    tool_policy: ToolPolicy | None = None  # who may see which tool
    tracing: Tracing | None = None  # the requests' OpenTelemetry spans
    sessions: SessionStore | None = None  # slots collected across turns (server/sessions)


class Preparer:
    def __init__(self, engine: Engine, cache: GrammarCache, settings: Settings,
                 parts: Parts, *, model_name: str) -> None:
        self.engine = engine
        self.cache = cache
        self.settings = settings
        self.format = parts.fmt
        self.rate_limits = parts.rate_limits
        self.model_name = model_name
        # What the backend's masks enforce under this server's policies: every schema,
        # the client's, a contract's or a repair's, is planned with it.
        self.policy = parts.policy
        self.registry = parts.registry or ContractRegistry()
        self.planner = Planner(self.registry, self.policy, self.format, settings.budget,
                               settings.max_calls, settings.auto_tools,
                               settings.after_results)
        self.tool_policy = parts.tool_policy or ToolPolicy()
        self.offers = ToolOffers(self.registry, self.tool_policy, settings.max_tools,
                                 settings.select_k, settings.tool_selection == "bm25")
        self.tracing = parts.tracing or Tracing()
        # The conversation: grounding, slots across turns, questions (server/dialogue).
        self.dialogue = Dialogue(parts.sessions, self.registry,
                                 from_system=settings.ground_from_system,
                                 bounds=grounding_bounds(settings))
        self._planning = concurrent.futures.ThreadPoolExecutor(
            max_workers=PLAN_WORKERS, thread_name_prefix="strictcall-plan")

    async def prepare(self, task: Task, caller: Caller) -> Prepared:
        trace = self.tracing.start("strictcall.chat", request_id=caller.request_id,
                                  model=task.model)
        try:
            self._check_model(task)
            options = RequestOptions.resolve(task.options, self.settings,
                                             reasoning=self._reasoning(task),
                                             steers=self.engine.steers)
            offer = self.offers.offer(task, self.tool_policy.principal(caller), trace,
                                      catalog=options.catalog, k=options.select_k)
            task = offer.task
            await self._check_length(task)  # before grounding reads the messages
            turn = await self.dialogue.begin(task, caller)
            task = turn.task  # a confirmed change: its call named
            # Off the event loop: checking a large client schema takes a while. On the
            # planner's own threads: never behind hung tool handlers or a stalled store.
            plan = await asyncio.get_running_loop().run_in_executor(
                self._planning, contextvars.copy_context().run, self.planner.plan, task,
                options, turn)
            messages = with_instructions(self.format.messages(task.turns),
                                         plan.rendering.instructions)
            step = await self._decode(task, plan, messages, options)
            runtime = {n: contract_runtime(c, caller) for n, c in plan.contracts.items()}
        except ServiceError as exc:
            trace.event("rejected", status=exc.status, detail=exc.detail[:300])
            trace.end(error=exc.slug)
            raise
        context = CallContext(caller=caller, offer=offer, trace=trace, runtime=runtime,
                              repair=options.repair, messages=tuple(messages),
                              charge=self._charger(caller), dialogue=turn)
        return Prepared(task=task, options=options, decode=step, context=context,
                        id=new_answer_id(), created=int(time.time()))

    async def _check_length(self, task: Task) -> None:
        """The messages alone past the context: refused before grounding and planning read
        them (a message of 20,000 numbers cost seconds of grounding before its 400). The
        whole prompt is checked again once rendered (`_decode`)."""
        texts = [t.text for t in task.turns if t.text]
        context = self.engine.max_context
        if sum(len(t) for t in texts) <= context:  # (a token is a character at least)
            return
        least = self.engine.fewest_tokens("".join(texts))
        if least <= context:
            least = await asyncio.to_thread(self.engine.fewest_message_tokens, texts)
        if least > context:
            raise InvalidRequest(f"the messages alone are at least {least} tokens; this "
                                 f"model's context is {context}. Shorten the messages.",
                                 param=task.names.messages, code="context_length_exceeded")

    def _charger(self, caller: Caller) -> Callable[[int], None] | None:
        """Charges tokens to the caller's key (None: no key, or no limits)."""
        limits, identity = self.rate_limits, caller.identity
        if limits is None or identity is None:
            return None
        return lambda tokens: limits.charge(identity, tokens)

    def warm(self) -> list[CompiledGrammar]:
        """Compile now the grammars a request naming one registered contract will look up,
        so none pays for them: planned as such requests are (this server's model format,
        policies and reasoning default), forced by name, required and "auto", with and
        without parallel calls, and the answer "auto" falls back to. A contract's grounded
        fields are narrowed per conversation: its grammar here is the one a conversation
        that holds none of their values gets. Blocking (startup)."""
        grammars: dict[int, CompiledGrammar] = {}
        for contract in self.registry:
            for choice in ("required", NamedTool(contract.name), "auto"):
                for parallel in (None, False):
                    task = Task(model=self.model_name, turns=(Turn("user", "warm-up"),),
                                tools=(ToolDef(contract.name),), tool_choice=choice,
                                parallel_tool_calls=parallel)
                    options = RequestOptions.resolve(task.options, self.settings,
                                                     reasoning=self._reasoning(task),
                                                     steers=self.engine.steers)
                    try:
                        plan: Plan | None = self.planner.plan(task, options)
                    except ServiceError as exc:  # its requests get the same 400
                        log.warning("not warmed: %s (%s)", contract.name, exc.detail)
                        continue
                    while plan is not None:
                        if plan.spec is not None:
                            try:
                                compiled = self.cache.get(plan.spec).grammar
                            except GrammarError as exc:  # its requests get the same 400
                                log.warning("not warmed: %s (%s)", contract.name, exc)
                            else:
                                grammars[id(compiled)] = compiled
                        plan = plan.fallback
        return list(grammars.values())

    async def compile_schema(self, schema: Any, *, where: str
                             ) -> tuple[JsonSchemaSpec, Analysis, Lookup]:
        """A client JSON Schema planned as a `response_format` is (400 if refused) and its
        grammar compiled or found compiled: the compile endpoint's."""
        spec, analysis = await asyncio.to_thread(
            plan_schema, schema, where=where, budget=self.settings.budget, policy=self.policy)
        lookup = await compiled(self.cache, spec, timeout_s=self.settings.compile_timeout_s,
                                param=where)
        return spec, analysis, lookup

    def _check_model(self, task: Task) -> None:
        if task.model != self.model_name:
            raise ModelNotFound(f"model {task.model!r} is not served here; this server "
                                f"serves {self.model_name!r} (see GET /v1/models)",
                                param=task.names.model, code="model_not_found")
        if not task.turns:
            raise InvalidRequest(f"{task.names.messages} holds no turn to answer; send at "
                                 "least one message with content", param=task.names.messages)

    def _reasoning(self, task: Task) -> int:
        """The task's free-reasoning budget in tokens (0: no reasoning pass): its own,
        else the largest its contracts ask for, else the server's default; fitted under
        the task's max_tokens, which counts the reasoning and the answer together (the
        default max_tokens adds the budget: `_sampling`)."""
        default = self.settings.reasoning
        if default is None:
            default = EFFORT_BUDGETS["medium"] if self.format.thinks else 0
        asked = [c.reasoning for t in task.tools
                 if (c := self.registry.get(t.name)) is not None and c.reasoning]
        if asked and task.tool_choice != "none":
            default = max(asked)
        tokens = task.options.reasoning_budget
        budget = budget_for(effort=task.reasoning_effort, tokens=tokens, default=default)
        limit, cap = task.max_tokens, self.settings.max_tokens_cap
        if limit is None and cap is not None and cap < self.settings.default_max_tokens + budget:
            limit = cap
        if limit is None or budget == 0:
            return budget
        # A forced call keeps at least the room it needs (server/pipeline/call_room.py).
        call = forced_call_tokens(task, self.registry, self.engine.encode) \
            if task.tools else 0
        if tokens is None:  # not given in tokens: cut to leave the answer its room
            return max(0, min(fitted(budget, max_tokens=limit), limit - call))
        if budget >= limit or (call and budget > limit - call):
            names = task.names
            needs = f"; the forced call needs about {call} tokens" if call else ""
            raise InvalidRequest(
                f"{names.options}.reasoning_budget ({budget}) must be less than "
                f"{names.max_tokens} ({limit}){needs}: the reasoning counts toward "
                f"{names.max_tokens}; raise {names.max_tokens} or lower the budget",
                param=f"{names.options}.reasoning_budget")
        return budget

    async def _decode(self, task: Task, plan: Plan, messages: list[dict[str, object]],
                      options: RequestOptions) -> Decode:
        rendering = plan.rendering
        prompt = self._render(task, messages, plan)
        # The prefill may already be there (a template that opens the thinking block).
        prefill = rendering.prefill
        if prefill.strip() and prompt.rstrip().endswith(prefill.strip()):
            prefill = ""
        least = self.engine.fewest_tokens(prompt + prefill)
        if least > self.engine.max_context:
            raise InvalidRequest(f"the prompt is at least {least} tokens; this model's context "
                                 f"is {self.engine.max_context}. Shorten the messages or tools.",
                                 param=task.names.messages, code="context_length_exceeded")
        prompt_ids = await asyncio.to_thread(self.engine.encode, prompt + prefill)
        # The limits, before any compile; a reasoning pass adds its budget to the default.
        sampling = self._sampling(task, len(prompt_ids),
                                  reasoning=options.reasoning if rendering.thinks else 0)
        lookup = await self._grammar(task, plan)  # before decoding: every 400 costs nothing
        request = GenerationRequest(prompt_ids, sampling, lookup.grammar if lookup else None,
                                    draft_texts=draft_lines(plan.groundings))
        fallback = None
        if plan.fallback is not None:
            answering = with_instructions(self.format.messages(task.turns),
                                          plan.fallback.rendering.instructions)
            fallback = replace(await self._decode(task, plan.fallback, answering, options),
                               decided_by=lookup)
        return Decode(plan, lookup, request, options.guards, fallback,
                      prompt_text=prompt + prefill)

    def _render(self, task: Task, messages: list[dict[str, object]], plan: Plan) -> str:
        """The prompt. A template that refuses the turns (Gemma 3 IT's own raises where they
        do not alternate user/assistant, as after a tool result) gets them as such a
        template takes them (server/formats/history.py `alternating`); refused again, a
        400 that quotes it."""
        from jinja2 import TemplateError

        rendering = plan.rendering
        kwargs = self.format.template_kwargs(reasoning=rendering.thinks)
        try:
            return self.engine.render_chat(messages, tools=rendering.template_tools, **kwargs)
        except TemplateError as exc:
            refused = exc
        if not any("tool_calls" in m for m in messages):  # turns written as text only
            try:
                return self.engine.render_chat(alternating(messages),
                                               tools=rendering.template_tools, **kwargs)
            except TemplateError as exc:
                refused = exc
        raise InvalidRequest(f"this model's chat template refuses these messages: "
                             f"{refused}; serve it with --chat-template FILE that takes them",
                             param=task.names.messages, code="chat_template_refused")

    async def _grammar(self, task: Task, plan: Plan) -> Lookup | None:
        if plan.spec is None:
            return None
        names = task.names  # a refusal names the schema the client sent
        # A seeded request waits for the backend's own grammar: the bridge's mask may allow
        # other tokens (whitespace, a bound left to the validator), so the same seed gave
        # another answer on a cold schema than on a warm one.
        bridge_wait_s = None if task.seed is not None else self.settings.bridge_wait_s
        return await compiled(self.cache, plan.spec, timeout_s=self.settings.compile_timeout_s,
                              bridge_wait_s=bridge_wait_s,
                              param=names.answer_schema if plan.mode == "json" else names.tools,
                              persist=not plan.conversational)

    def _sampling(self, task: Task, prompt_len: int, *, reasoning: int) -> SamplingParams:
        """The sampling, and the one check of the token limits: the server's cap, then the
        context left after the prompt. Without max_tokens the answer gets the server's
        default and the reasoning pass its budget (`reasoning`) on top."""
        names, context = task.names, self.engine.max_context
        asked, cap = task.max_tokens, self.settings.max_tokens_cap
        if cap is not None and asked is not None and asked > cap:
            raise InvalidRequest(f"{names.max_tokens}={asked} is above this server's cap of "
                                 f"{cap} tokens; ask for at most {cap}",
                                 param=names.max_tokens, code="max_tokens_cap")
        room = context - prompt_len
        if room < 1:
            raise InvalidRequest(f"the prompt is {prompt_len} tokens; this model's context is "
                                 f"{context}. Shorten the messages or tools.",
                                 param=names.messages, code="context_length_exceeded")
        if asked is not None and asked > room:
            raise InvalidRequest(f"{names.max_tokens}={asked} plus the {prompt_len}-token "
                                 f"prompt exceeds the {context}-token context; ask for at "
                                 f"most {room}", param=names.max_tokens,
                                 code="context_length_exceeded")
        temperature = task.temperature if task.temperature is not None \
            else self.settings.default_temperature
        default = min(room, self.settings.default_max_tokens + reasoning, cap or room)
        return SamplingParams(max_tokens=asked or default, temperature=temperature,
                              top_p=task.top_p if task.top_p is not None else 1.0,
                              seed=task.seed, stop=task.stop)
