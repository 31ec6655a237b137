"""The chat pipeline: plan -> grammar (cached, compiled off the event loop) -> prompt ->
constrained decode -> post-decode validation (and contract repair) -> OpenAI response.
`prepare` and `finish` are shared by the plain and the streaming paths."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, assert_never


from contracts import ContractRegistry
from grammars import EnforcementReport, GrammarCache, GrammarPolicy, Lookup
from server.engines.base import Engine, GenerationRequest, GenerationResult, SamplingParams
from server.identity import Caller
from server.metrics import Metrics
from server.errors import InvalidRequest, ModelNotFound, OutputInvalid, ServiceError
from server.execution import (Events, Offer, RequestTrace, ToolOffers, ToolPolicy,
                              contract_runtime)
from server.pipeline.audit import AuditSink, Decision
from server.pipeline.calls import (CallChecks, approval_header, new_call_id,  # noqa: F401
                                   parse_json, validate)
# (new_call_id: re-exported for the streaming path)
from server.pipeline.decode import compiled, decode
from server.formats.families import ModelFormat
from server.formats.reasoning import EFFORT_BUDGETS, budget_for
from server.pipeline.modes import Reading
from server.pipeline.plan import GENERIC_FORMAT, Plan, plan_request
from server.pipeline.prompt import template_messages
from server.pipeline.repair import RepairBudget, Repairer
from server.pipeline.runaway import GuardOptions, RunawayGuard, Trip
from server.pipeline.usage import reasoning_tokens, usage_of
from server.protocol import (ChatCompletion, ChatCompletionRequest, Choice,
                             CompletionTokensDetails, ResponseMessage, Usage)
from server.ratelimit import RateLimiter
from server.settings import Settings


@dataclass(frozen=True)
class Prepared:
    """Everything decided before decoding starts."""

    plan: Plan
    lookup: Lookup | None
    messages: list[dict[str, Any]]
    request: GenerationRequest
    runtime: dict[str, dict[str, Any]]
    budget: RepairBudget
    guards: GuardOptions = GuardOptions()
    fallback: Prepared | None = None  # tool_choice="auto" that decided on no call
    caller: Caller | None = None
    offered: tuple[str, ...] = ()  # the request's tool names (for the audit record)
    decided_by: Lookup | None = None  # a fallback's: the call grammar that chose no call
    offer: Offer | None = None  # the tools visible to this request (server/execution)
    trace: RequestTrace | None = None  # its OpenTelemetry span

    def headers(self) -> dict[str, str]:
        """Known before decoding: the deprecation warning of an offered tool."""
        return self.offer.headers() if self.offer is not None else {}

    def guard(self, engine: Engine) -> RunawayGuard | None:
        """A fresh runaway guard for one decode of this plan (constrained decodes only)."""
        if self.plan.spec is None or not self.guards.active:
            return None
        return RunawayGuard(self.plan.read_with(), engine.decode, options=self.guards)

    def guarded_request(self, guard: RunawayGuard | None) -> GenerationRequest:
        """The request, steered by `guard` where it steers."""
        if guard is None or self.guards.loop_guard != "steer":
            return self.request
        return replace(self.request, steer=guard.steer)

    def then(self, result: GenerationResult) -> Prepared | None:
        """What decodes next once this decode gave `result`: nothing (None), or, when
        "auto" decided on no call (an empty list), the fallback plan that answers instead."""
        if self.fallback is not None and result.grammar_complete \
                and parse_json(result.text) == []:
            return self.fallback
        return None


@dataclass(frozen=True)
class Completed:
    response: ChatCompletion
    grammar: Lookup | None
    enforcement: EnforcementReport | None = None
    # The execution layer's: a deprecated tool's warning, calls waiting for an approval.
    headers: dict[str, str] = field(default_factory=dict)


class ChatPipeline:
    def __init__(self, engine: Engine, cache: GrammarCache, settings: Settings, *,
                 policy: GrammarPolicy, registry: ContractRegistry | None = None,
                 metrics: Metrics | None = None, fmt: ModelFormat = GENERIC_FORMAT,
                 rate_limits: RateLimiter | None = None,
                 audit: AuditSink | None = None, tool_policy: ToolPolicy | None = None,
                 events: Events | None = None) -> None:
        self.engine = engine
        self.rate_limits = rate_limits  # tokens are charged to the caller's key per decode
        self.audit = audit  # one record per tool-call decision (server/pipeline/audit.py)
        self.format = fmt  # the model's tool-call and thinking syntax (server/formats)
        self.metrics = metrics
        self.cache = cache
        self.settings = settings
        # What the backend's masks enforce under this server's policies: every schema,
        # the client's, a contract's or a repair's, is planned with it.
        self.policy = policy
        self.registry = registry or ContractRegistry()
        self.repairer = Repairer(engine, cache, policy,
                                 compile_timeout_s=settings.compile_timeout_s)
        self.calls = CallChecks(self.repairer, metrics)
        # Who may see which tool, and which fit (server/execution): before every plan.
        self.tool_policy = tool_policy or ToolPolicy()
        self.offers = ToolOffers(self.registry, self.tool_policy, settings.max_tools,
                                 settings.select_k, settings.tool_selection == "bm25")
        self.events = events or Events()
        self.model_name = settings.served_model_name or engine.model_name

    async def complete(self, req: ChatCompletionRequest,
                       caller: Caller | None = None) -> Completed:
        first = await self.prepare(req, caller or Caller({}))
        result, trip = await self.run(first)
        prep, results = first, [result]
        while (following := prep.then(results[-1])) is not None:
            prep = following
            result, trip = await self.run(prep)
            results.append(result)
        choice, extension = await self.finish(prep, results[-1], trip)
        return Completed(self.response([choice], results, extension, prep), first.lookup,
                         first.plan.enforcement, {**first.headers(), **approval_header(extension)})

    async def prepare(self, req: ChatCompletionRequest, caller: Caller) -> Prepared:
        trace = self.events.start("strictcall.chat", request_id=caller.request_id,
                                  model=req.model)
        try:
            if req.model != self.model_name:
                raise ModelNotFound(f"model {req.model!r} is not served here; this server "
                                    f"serves {self.model_name!r} (see GET /v1/models)",
                                    param="model", code="model_not_found")
            asked, cap = req.max_completion_tokens or req.max_tokens, self.settings.max_tokens_cap
            if cap is not None and asked is not None and asked > cap:  # before any work
                raise InvalidRequest(f"max_tokens={asked} is above this server's cap of {cap} "
                                     f"tokens; ask for at most {cap}", param="max_tokens",
                                     code="max_tokens_cap")
            offer = self.offers.offer(req, self.tool_policy.principal(caller), trace,
                                      catalog=req.strictcall.catalog if req.strictcall else None,
                                      k=self._option(req, "select_k", "select_k"))
            req = offer.request
            # Off the event loop: checking a large client schema takes a while.
            plan = await asyncio.to_thread(
                plan_request, req, self.registry, auto_tools=self.settings.auto_tools,
                budget=self.settings.budget, policy=self.policy,
                max_calls=self.settings.max_calls,
                schema_prompt=self._option(req, "schema_prompt", "schema_prompt"),
                tool_prompt=self._option(req, "tool_prompt", "tool_prompt"),
                fmt=self.format, reasoning=self._reasoning(req))
            prep = await self._prepare(req, plan, caller)
        except ServiceError as exc:
            trace.event("rejected", status=exc.status, detail=exc.detail[:300])
            trace.end(error=exc.slug)
            raise
        fallback = replace(prep.fallback, offer=offer, trace=trace) if prep.fallback else None
        return replace(prep, offer=offer, trace=trace, fallback=fallback)

    def _reasoning(self, req: ChatCompletionRequest) -> int:
        """The request's free-reasoning budget in tokens (0: no reasoning pass): its own,
        else the largest its contracts ask for, else the server's default."""
        default = self.settings.reasoning
        if default is None:
            default = EFFORT_BUDGETS["medium"] if self.format.thinks else 0
        asked = [c.reasoning for t in req.tools or []
                 if (c := self.registry.get(t.function.name)) is not None and c.reasoning]
        if asked and req.tool_choice != "none":
            default = max(asked)
        tokens = req.strictcall.reasoning_budget if req.strictcall else None
        return budget_for(effort=req.reasoning_effort, tokens=tokens, default=default)

    async def _prepare(self, req: ChatCompletionRequest, plan: Plan,
                       caller: Caller) -> Prepared:
        runtime = {n: contract_runtime(c, caller) for n, c in plan.contracts.items()}
        lookup = await self._grammar(plan)  # before decoding: every 400 costs nothing
        messages = template_messages(req.messages, instructions=plan.instructions,
                                     structured=self.format.renders_tools)
        prompt = self.engine.render_chat(
            messages, tools=plan.template_tools,
            **self.format.template_kwargs(reasoning=plan.thinks))
        # The prefill may already be there (a template that opens the thinking block).
        prefill = plan.prefill if plan.prefill.strip() == "" \
            or not prompt.rstrip().endswith(plan.prefill.strip()) else ""
        prompt_ids = self.engine.encode(prompt + prefill)
        request = GenerationRequest(prompt_ids, self._sampling(req, len(prompt_ids)),
                                    lookup.grammar if lookup else None)
        fallback = replace(await self._prepare(req, plan.fallback, caller),
                           decided_by=lookup) if plan.fallback else None
        return Prepared(plan, lookup, messages, request, runtime, self._budget(req),
                        self._guards(req), fallback, caller,
                        tuple(t.function.name for t in req.tools or ()))

    async def run(self, prep: Prepared) -> tuple[GenerationResult, Trip | None]:
        """One decode of `prep` under its runaway guard: the result, and the guard's trip
        if it stopped the decode."""
        guard = prep.guard(self.engine)
        try:
            result = await decode(self.engine, prep.guarded_request(guard), guard=guard)
        except BaseException as exc:
            if prep.trace is not None:
                prep.trace.end(error=type(exc).__name__)
            raise
        identity = prep.caller.identity if prep.caller is not None else None
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

    async def finish(self, prep: Prepared, result: GenerationResult,
                     trip: Trip | None = None) -> tuple[Choice, dict[str, Any] | None]:
        """Post-decode checks on a finished decode: the choice to return, and the
        `strictcall` extension: the contract report when contracts were called, and what a
        runaway guard did."""
        plan = prep.plan
        complete = result.grammar_complete or plan.spec is None
        audit = None if self.audit is None or not prep.offered else Decision(
            self.audit, caller=prep.caller, model=self.model_name, offered=prep.offered,
            lookup=prep.decided_by or prep.lookup, contracts=plan.contracts, result=result,
            runaway=trip.note if trip is not None else None)
        try:
            reading = plan.read_with().read(result.text, complete=complete)
            if complete and reading.calls is not None:
                choice, extension = await self.calls.choice(prep, reading.calls,
                                                            reading.content, audit)
            else:
                choice, extension = _choice(plan, result, reading, complete=complete), None
                choice.stop_reason = self._stop_string(prep, result, choice)
        except ServiceError as exc:  # a 422, or a failed repair decode (503)
            if audit is not None:
                audit.rejected(exc)
            if prep.trace is not None:
                prep.trace.end(error=exc.slug)
            raise
        tools = prep.offer.extension() if prep.offer is not None else None
        if tools is not None:
            extension = {**(extension or {}), "tools": tools}
        if audit is not None:
            audit.tool_set(prep.offer)
            audit.finished(choice, complete=complete)
        if prep.trace is not None:
            prep.trace.end()
        if reading.reasoning is not None:
            choice.message.reasoning_content = choice.message.reasoning = reading.reasoning
        if trip is not None:
            extension = {**(extension or {}), "runaway": trip.note}
        return choice, extension

    def _stop_string(self, prep: Prepared, result: GenerationResult,
                     choice: Choice) -> str | None:
        """Which stop string ended the text, if one did. Engines cut the text before it but
        keep its tokens, so it starts what the tokens say beyond the text."""
        stops = prep.request.sampling.stop
        if not stops or choice.finish_reason != "stop" or result.text != choice.message.content:
            return None
        rest = self.engine.decode(result.token_ids)[len(result.text):]
        return next((stop for stop in stops if rest.startswith(stop)), None)

    def response(self, choices: list[Choice], results: list[GenerationResult],
                 extension: dict[str, Any] | None, prep: Prepared) -> ChatCompletion:
        return ChatCompletion(id=new_completion_id(), created=int(time.time()),
                              model=self.model_name, choices=choices,
                              usage=self.usage(prep, results), strictcall=extension)

    def usage(self, prep: Prepared, results: list[GenerationResult]) -> Usage:
        """Tokens of every decode the answer took, with the reasoning's share."""
        usage = usage_of(*results)
        end = prep.plan.read_with().reasoning_end if prep.plan.thinks else None
        if end is not None:
            usage.completion_tokens_details = CompletionTokensDetails(
                reasoning_tokens=reasoning_tokens(self.engine, results[-1].token_ids, end))
        return usage

    def with_token_callback(self, prep: Prepared, on_token) -> Prepared:  # noqa: ANN001
        return replace(prep, request=replace(prep.request, on_token=on_token))

    async def _grammar(self, plan: Plan) -> Lookup | None:
        if plan.spec is None:
            return None
        return await compiled(self.cache, plan.spec, timeout_s=self.settings.compile_timeout_s,
                              bridge_wait_s=self.settings.bridge_wait_s,
                              param="response_format.json_schema.schema"
                              if plan.mode == "json" else "tools")

    def _option(self, req: ChatCompletionRequest, name: str, setting: str) -> Any:
        """The request's `strictcall.<name>` when it sends one, else the server's setting."""
        asked = getattr(req.strictcall, name, None) if req.strictcall else None
        return getattr(self.settings, setting) if asked is None else asked

    def _guards(self, req: ChatCompletionRequest) -> GuardOptions:
        loops = self._option(req, "loop_guard", "loop_guard")
        if loops == "steer" and not self.engine.steers:
            loops = "stop"  # this engine does not choose tokens itself: stop is what is left
        return GuardOptions(dedupe_calls=self._option(req, "dedupe_calls", "dedupe_calls"),
                            loop_guard=loops)

    def _budget(self, req: ChatCompletionRequest) -> RepairBudget:
        return RepairBudget(self._option(req, "max_repair_attempts", "repair_attempts"),
                            self._option(req, "repair_timeout_s", "repair_seconds"))

    def _sampling(self, req: ChatCompletionRequest, prompt_len: int) -> SamplingParams:
        room = self.engine.max_context - prompt_len
        if room < 1:
            raise InvalidRequest(f"the prompt is {prompt_len} tokens; this model's context is "
                                 f"{self.engine.max_context}. Shorten the messages or tools.",
                                 param="messages", code="context_length_exceeded")
        asked = req.max_completion_tokens or req.max_tokens
        cap = self.settings.max_tokens_cap
        if asked is not None and asked > room:
            raise InvalidRequest(f"max_tokens={asked} plus the {prompt_len}-token prompt exceeds "
                                 f"the {self.engine.max_context}-token context; ask for at most "
                                 f"{room}", param="max_tokens", code="context_length_exceeded")
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        temperature = (req.temperature if req.temperature is not None
                       else self.settings.default_temperature)
        default = min(room, self.settings.default_max_tokens, cap or room)
        return SamplingParams(max_tokens=asked or default,
                              temperature=temperature,
                              top_p=req.top_p if req.top_p is not None else 1.0,
                              seed=req.seed, stop=stop)


def _choice(plan: Plan, result: GenerationResult, reading: Reading, *,
            complete: bool) -> Choice:
    """Text, JSON, and every cut-off output."""
    if not complete:
        # A cut-off constrained output is returned as text with finish_reason "length":
        # never as a tool call, never with a "stop" that would suggest it is complete.
        # (What follows the reasoning, if the reasoning ended; the reasoning is its own field.)
        return Choice(index=0, message=ResponseMessage(
            content=result.text[reading.answer_from:]), finish_reason="length")
    content = reading.content if reading.content is not None else ""
    match plan.mode:
        case "text" | "auto":
            return Choice(index=0, message=ResponseMessage(content=content),
                          finish_reason="length" if result.finish_reason == "length"
                          else "stop")
        case "json":
            validate(plan.schemas[""], parse_json(content), where="the response")
            return Choice(index=0, message=ResponseMessage(content=content),
                          finish_reason="stop")
        case "tools":  # a complete call array always reads as calls
            raise OutputInvalid("the decode completed the call grammar but no call was read")
        case _:
            assert_never(plan.mode)


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"
