"""The chat pipeline: plan -> grammar (cached, compiled off the event loop) -> prompt ->
constrained decode -> post-decode validation -> OpenAI response."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jsonschema

from contracts import Contract, ContractRegistry, MissingRuntimeValue
from grammars import CompiledGrammar, GrammarCache, GrammarError, Lookup
from server.protocol import (ChatCompletion, ChatCompletionRequest, Choice, FunctionCall,
                                ResponseMessage, ToolCall, Usage)
from server.engines.base import Engine, GenerationRequest, GenerationResult, SamplingParams
from server.errors import ContractViolation, InvalidRequest, ModelNotFound, OutputInvalid
from server.pipeline.decode import decode
from server.pipeline.plan import Plan, plan_request
from server.pipeline.repair import Budget, Repairer
from server.pipeline.prompt import template_messages
from server.settings import Settings


@dataclass(frozen=True)
class Completed:
    response: ChatCompletion
    grammar: Lookup | None


class ChatPipeline:
    def __init__(self, engine: Engine, cache: GrammarCache, settings: Settings,
                 registry: ContractRegistry | None = None) -> None:
        self.engine = engine
        self.cache = cache
        self.settings = settings
        self.registry = registry or ContractRegistry()
        self.repairer = Repairer(engine, cache)
        self.model_name = settings.served_model_name or engine.model_name

    async def complete(self, req: ChatCompletionRequest,
                       headers: dict[str, str] | None = None) -> Completed:
        if req.model != self.model_name:
            raise ModelNotFound(f"model {req.model!r} is not served here; this server serves "
                                f"{self.model_name!r} (see GET /v1/models)", param="model",
                                code="model_not_found")
        plan = plan_request(req, self.registry)
        runtime = _runtime_values(plan, headers or {})  # before decoding: a 400 costs nothing
        lookup = await self._grammar(plan)
        messages = template_messages(req.messages, instructions=plan.instructions)
        prompt_ids = self.engine.encode(self.engine.render_chat(messages) + plan.prefill)
        sampling = self._sampling(req, len(prompt_ids))
        grammar: CompiledGrammar | None = lookup.grammar if lookup else None
        result = await decode(self.engine, GenerationRequest(prompt_ids, sampling, grammar))
        extension = None
        if plan.mode == "tools" and result.grammar_complete:
            choice, extension = await self._tool_choice(
                plan, result, messages=messages, runtime=runtime, budget=self._budget(req))
        else:
            choice = _choice(plan, result)
        usage = Usage(prompt_tokens=result.prompt_tokens,
                      completion_tokens=result.completion_tokens,
                      total_tokens=result.prompt_tokens + result.completion_tokens)
        response = ChatCompletion(id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time()),
                                  model=self.model_name, choices=[choice], usage=usage,
                                  strictcall=extension)
        return Completed(response, lookup)

    def _budget(self, req: ChatCompletionRequest) -> Budget:
        opts = req.strictcall
        attempts = opts.max_repair_attempts if opts and opts.max_repair_attempts is not None \
            else self.settings.repair_attempts
        seconds = opts.repair_timeout_s if opts and opts.repair_timeout_s is not None \
            else self.settings.repair_seconds
        return Budget(attempts, seconds)

    async def _tool_choice(self, plan: Plan, result: GenerationResult, *,
                           messages: list[dict[str, str]], runtime: dict[str, dict[str, Any]],
                           budget: Budget) -> tuple[Choice, dict[str, Any] | None]:
        calls, reports = [], []
        for call in _parse(result.text):
            name, arguments = call["name"], call["arguments"]
            _validate(plan.schemas[name], arguments, where=f"arguments of {name!r}")
            contract = plan.contracts.get(name)
            if contract is not None:
                report = await self.repairer.run(contract, arguments, messages=messages,
                                                 runtime=runtime[name], budget=budget)
                if report.arguments is None:
                    last = report.attempts[-1]["violations"]
                    raise ContractViolation(
                        f"the call to {name!r} broke its contract after "
                        f"{len(report.attempts)} attempt(s): {last[0]['message']}",
                        extensions={"violations": last, "attempts": report.attempts})
                arguments = report.arguments
                reports.append({"tool": name, "repaired": report.repaired,
                                "attempts": len(report.attempts)})
            calls.append(_tool_call(name, arguments))
        choice = Choice(index=0, message=ResponseMessage(content=None, tool_calls=calls),
                        finish_reason="tool_calls")
        if not reports:
            return choice, None
        return choice, {"contracts": reports,
                        "repaired": any(r["repaired"] for r in reports)}

    async def _grammar(self, plan: Plan) -> Lookup | None:
        if plan.spec is None:
            return None
        try:
            # Compiling can take from milliseconds to seconds: never on the event loop.
            return await asyncio.to_thread(self.cache.get, plan.spec)
        except GrammarError as exc:
            raise InvalidRequest(exc.render(), code="invalid_schema") from None

    def _sampling(self, req: ChatCompletionRequest, prompt_len: int) -> SamplingParams:
        room = self.engine.max_context - prompt_len
        if room < 1:
            raise InvalidRequest(f"the prompt is {prompt_len} tokens; this model's context is "
                                 f"{self.engine.max_context}. Shorten the messages or tools.",
                                 param="messages", code="context_length_exceeded")
        asked = req.max_completion_tokens or req.max_tokens
        if asked is not None and asked > room:
            raise InvalidRequest(f"max_tokens={asked} plus the {prompt_len}-token prompt exceeds "
                                 f"the {self.engine.max_context}-token context; ask for at most "
                                 f"{room}", param="max_tokens", code="context_length_exceeded")
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        temperature = (req.temperature if req.temperature is not None
                       else self.settings.default_temperature)
        return SamplingParams(max_tokens=asked or min(room, self.settings.default_max_tokens),
                              temperature=temperature,
                              top_p=req.top_p if req.top_p is not None else 1.0,
                              seed=req.seed, stop=stop)


def _runtime_values(plan: Plan, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {name: contract_runtime(c, headers) for name, c in plan.contracts.items()}


def contract_runtime(contract: Contract, headers: dict[str, str]) -> dict[str, Any]:
    """The server-filled fields of a contract call, or a 400 naming the missing header."""
    try:
        return contract.runtime_values(headers)
    except MissingRuntimeValue as exc:
        raise InvalidRequest(f"{exc}; send it with the request", param=exc.header,
                             code="missing_header") from None


def _choice(plan: Plan, result: GenerationResult) -> Choice:
    """Text, JSON, and every cut-off output."""
    cut_off = plan.spec is not None and not result.grammar_complete
    if plan.mode == "text" or cut_off:
        # A cut-off constrained output is returned as text with finish_reason "length":
        # never as a tool call, never with a "stop" that would suggest it is complete.
        reason = "length" if cut_off else result.finish_reason
        return Choice(index=0, message=ResponseMessage(content=result.text),
                      finish_reason="length" if reason == "length" else "stop")
    _validate(plan.schemas[""], _parse(result.text), where="the response")
    return Choice(index=0, message=ResponseMessage(content=result.text), finish_reason="stop")


def _tool_call(name: str, arguments: dict[str, Any]) -> ToolCall:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return ToolCall(id=f"call_{uuid.uuid4().hex[:24]}",
                    function=FunctionCall(name=name, arguments=text))


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:  # the grammar makes this unreachable; say so if not
        raise OutputInvalid(f"decoded output is not JSON ({exc.msg} at {exc.pos})") from None


def _validate(schema: dict[str, Any], value: Any, *, where: str) -> None:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = sorted(cls(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        violations = [{"pointer": "/" + "/".join(str(p) for p in e.absolute_path),
                       "message": e.message} for e in errors]
        raise OutputInvalid(f"{where} failed validation: {violations[0]['message']}",
                            extensions={"violations": violations})
