"""What a chat request asks for: free text, one JSON value, or tool calls, and the grammar
spec that guarantees it. All request-level checks live here, before any decoding."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from contracts import Contract, ContractRegistry
from grammars import (Analysis, Budget, BudgetExceeded, EnforcementReport, GrammarError,
                      GrammarPolicy, GrammarSpec, JsonSchemaSpec, TextOrToolCallsSpec,
                      ToolCallsSpec, ToolSpec, checked_client_schema)
from server.protocol import (ChatCompletionRequest, NamedToolChoice, ResponseFormatJsonObject,
                                ResponseFormatJsonSchema, Tool)
from server.errors import InvalidRequest, UnsupportedFeature
from server.formats.families import GenericFormat, ModelFormat, UnsupportedFormat
from server.pipeline.modes import ListReader, Mode, Reader
from server.pipeline.schema_text import SchemaPrompt
from server.pipeline.prompt import (CALL_CLOSE, CALL_OPEN, ToolPrompt, ToolStyle,
                                    auto_instructions, decide_instructions, json_instructions,
                                    tools_instructions)


GENERIC_FORMAT = GenericFormat()


@dataclass(frozen=True)
class Plan:
    mode: Mode
    spec: GrammarSpec | None = None
    instructions: str | None = None
    prefill: str = ""  # written into the assistant turn before decoding starts
    # Per tool (or "" for the JSON value): the JSON Schema the output is validated against.
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The request's tools that are registered contracts: their validators and repair apply.
    contracts: dict[str, Contract] = field(default_factory=dict)
    # "auto" decided by an empty call list: the plan that answers instead (text or JSON).
    fallback: Plan | None = None
    # Which keyword of the request's schemas is enforced by what (None: nothing constrained).
    enforcement: EnforcementReport | None = None
    # How the decoded text reads (the model format's syntax; None: the SmolLM2 list).
    reader: Reader | None = None
    # The tools as the model's chat template takes them (`tools=`), for formats whose
    # template renders tools; their descriptions by name.
    template_tools: list[dict[str, Any]] | None = None
    descriptions: dict[str, str | None] = field(default_factory=dict)
    thinks: bool = False  # the decode opens with a free-reasoning pass

    def read_with(self) -> Reader:
        return self.reader if self.reader is not None else ListReader(self.mode)


def plan_request(req: ChatCompletionRequest, registry: ContractRegistry, *,
                 auto_tools: Literal["decide", "trigger"], budget: Budget,
                 policy: GrammarPolicy, max_calls: int | None,
                 schema_prompt: SchemaPrompt, fmt: ModelFormat = GENERIC_FORMAT,
                 reasoning: int = 0, tool_prompt: ToolPrompt = "auto") -> Plan:
    """`max_calls`: the server's limit on calls per response (None: none);
    `schema_prompt`: how a JSON answer's schema is written into the prompt; `tool_prompt`:
    how tools are, for a required or forced call; `fmt`: the
    model's format, which adapts the plan to its syntax; `reasoning`: the free-reasoning
    budget in tokens (0: none)."""
    if reasoning > 0 and req.stop and not req.tools and req.response_format is None:
        raise InvalidRequest("stop strings cannot end a free-text answer that follows a "
                             "reasoning pass; send stop without reasoning, or no stop",
                             param="stop")
    plan = _plan(req, registry, auto_tools="trigger" if reasoning > 0 else auto_tools,
                 budget=budget, policy=policy, max_calls=max_calls,
                 schema_prompt=schema_prompt, tool_prompt=tool_prompt)
    try:
        return fmt.adapt(plan, reasoning=reasoning)
    except UnsupportedFormat as exc:
        raise UnsupportedFeature(str(exc)) from None


def _plan(req: ChatCompletionRequest, registry: ContractRegistry, *,
          auto_tools: Literal["decide", "trigger"], budget: Budget, policy: GrammarPolicy,
          max_calls: int | None, schema_prompt: SchemaPrompt,
          tool_prompt: ToolPrompt = "auto") -> Plan:
    _refuse_unsupported(req)
    choice = req.tool_choice
    if not req.tools:
        if choice == "required" or isinstance(choice, NamedToolChoice):
            raise InvalidRequest("tool_choice asks for a tool call, but no tools were given",
                                 param="tool_choice")
        return _plan_format(req, budget, policy, schema_prompt)
    try:
        budget.check_tools(len(req.tools))
    except BudgetExceeded as exc:
        raise _over_budget(exc, param="tools") from None
    tools = _convert_tools(req.tools, registry, budget, policy)
    max_calls = 1 if req.parallel_tool_calls is False else max_calls
    if choice is None or choice == "auto":  # OpenAI's default when tools are given
        if auto_tools == "trigger":
            return _plan_tools(tools, min_calls=1, max_calls=max_calls, auto=True)
        decide = _plan_tools(tools, min_calls=0, max_calls=max_calls)
        return replace(decide, instructions=decide_instructions(_described(tools)),
                       fallback=_plan_format(req, budget, policy, schema_prompt))
    if choice == "none":
        return _plan_format(req, budget, policy, schema_prompt)
    if isinstance(choice, NamedToolChoice):
        if choice.function.name not in tools:
            raise InvalidRequest(f"tool_choice names unknown tool {choice.function.name!r}; "
                                 f"the request's tools are {sorted(tools)}",
                                 param="tool_choice.function.name")
        chosen = {choice.function.name: tools[choice.function.name]}
        # Forced: the model writes values only, so the tool's name and purpose suffice.
        return _plan_tools(chosen, min_calls=1, max_calls=1,
                           style="none" if tool_prompt == "auto" else tool_prompt)
    return _plan_tools(tools, min_calls=1, max_calls=max_calls,
                       style="full" if tool_prompt == "auto" else tool_prompt)


# Fields that would change the output and that this server does not implement: refused by
# name rather than silently ignored. (field, is it set in a way that matters?, what to do)
_REFUSED = (
    ("logprobs", lambda v: v is True, "send logprobs=false"),
    ("top_logprobs", lambda v: bool(v), "remove it"),
    ("frequency_penalty", lambda v: bool(v), "send 0 or remove it"),
    ("presence_penalty", lambda v: bool(v), "send 0 or remove it"),
    ("logit_bias", lambda v: bool(v), "remove it"),
    ("functions", lambda v: v is not None, "use `tools` instead"),
    ("function_call", lambda v: v is not None, "use `tool_choice` instead"),
    ("prediction", lambda v: v is not None, "remove it"),
    ("modalities", lambda v: v not in (None, ["text"]), "send ['text'] or remove it"),
    ("audio", lambda v: v is not None, "remove it"),
    ("web_search_options", lambda v: v is not None, "remove it"),
)


def _refuse_unsupported(req: ChatCompletionRequest) -> None:
    for name, matters, fix in _REFUSED:
        if matters(getattr(req, name)):
            raise UnsupportedFeature(f"{name} is not supported by this server; {fix}",
                                     param=name)
    if req.stream_options is not None and not req.stream:
        raise InvalidRequest("stream_options is only allowed with stream=true",
                             param="stream_options")
    if req.n is not None and req.n > 1:
        raise UnsupportedFeature("n > 1 is not supported; send n=1 and repeat the request",
                                 param="n")
    stops = [req.stop] if isinstance(req.stop, str) else (req.stop or [])
    if len(stops) > 4 or any(not s for s in stops):
        raise InvalidRequest("stop takes at most 4 non-empty strings", param="stop")


@dataclass(frozen=True)
class _Tool:
    spec: ToolSpec
    schema: dict[str, Any]
    description: str | None
    report: EnforcementReport
    contract: Contract | None = None


_NO_ARGUMENTS = {"type": "object", "properties": {}}


def _over_budget(exc: BudgetExceeded, *, param: str) -> InvalidRequest:
    return InvalidRequest(exc.render(), param=param, code="budget_exceeded",
                          extensions={"limit": exc.limit, "measured": exc.measured,
                                      "allowed": exc.allowed})


def _convert_tools(tools: list[Tool], registry: ContractRegistry, budget: Budget,
                   policy: GrammarPolicy) -> dict[str, _Tool]:
    out: dict[str, _Tool] = {}
    for i, tool in enumerate(tools):
        fn = tool.function
        if fn.name in out:
            raise InvalidRequest(f"tool name {fn.name!r} appears twice; names must be unique",
                                 param=f"tools[{i}].function.name")
        contract = registry.get(fn.name)
        try:
            # A registered contract is authoritative: its schema, not the client's.
            schema = contract.schema() if contract else checked_client_schema(
                fn.parameters or _NO_ARGUMENTS, where=f"the parameters of tool {fn.name!r}",
                dialect="bfcl")
            if contract is None:  # a registered contract is the operator's: trusted
                budget.check_schema(schema, where=f"the parameters of tool {fn.name!r}")
            analysis = policy.check(schema, where=f"the parameters of tool {fn.name!r}")
        except BudgetExceeded as exc:
            raise _over_budget(exc, param=f"tools[{i}].function.parameters") from None
        except GrammarError as exc:
            raise _schema_error(exc, param=f"tools[{i}].function.parameters") from None
        description = contract.description if contract else fn.description
        out[fn.name] = _Tool(ToolSpec.from_analysis(fn.name, analysis), schema, description,
                             analysis.report.prefixed(f"{fn.name}#"), contract)
    return out


def _schema_error(exc: GrammarError, *, param: str) -> InvalidRequest:
    extensions = {"keywords": exc.details} if exc.details else None
    return InvalidRequest(exc.render(), param=param, code="invalid_schema",
                          extensions=extensions)


def _described(tools: dict[str, _Tool]) -> list[dict[str, Any]]:
    return [{"name": n, "description": t.description or "", "parameters": t.schema}
            for n, t in tools.items()]


def _plan_tools(tools: dict[str, _Tool], *, min_calls: int, max_calls: int | None,
                auto: bool = False, style: ToolStyle = "full") -> Plan:
    described = _described(tools)
    calls = ToolCallsSpec(tuple(t.spec for t in tools.values()), min_calls=min_calls,
                          max_calls=max_calls)
    schemas = {n: t.schema for n, t in tools.items()}
    contracts = {n: t.contract for n, t in tools.items() if t.contract is not None}
    report = EnforcementReport.merge(next(iter(tools.values())).report.backend,
                                     [t.report for t in tools.values()])
    descriptions = {n: t.description for n, t in tools.items()}
    if auto:
        spec = TextOrToolCallsSpec(calls, begin=CALL_OPEN, end=CALL_CLOSE)
        return Plan("auto", spec, auto_instructions(described), "", schemas, contracts,
                    enforcement=report, descriptions=descriptions)
    return Plan("tools", calls, tools_instructions(described, style), CALL_OPEN, schemas,
                contracts, enforcement=report, descriptions=descriptions)


def _plan_format(req: ChatCompletionRequest, budget: Budget, policy: GrammarPolicy,
                 schema_prompt: SchemaPrompt) -> Plan:
    fmt = req.response_format
    if isinstance(fmt, ResponseFormatJsonSchema):
        schema, where = fmt.json_schema.schema_, "response_format.json_schema.schema"
    elif isinstance(fmt, ResponseFormatJsonObject):
        schema, where = {"type": "object"}, "response_format"
    else:
        return Plan("text")
    spec, analysis = plan_schema(schema, where=where, budget=budget, policy=policy)
    return Plan("json", spec, json_instructions(schema, schema_prompt), "", {"": schema},
                enforcement=analysis.report)


def plan_schema(schema: Any, *, where: str, budget: Budget,
                policy: GrammarPolicy) -> tuple[JsonSchemaSpec, Analysis]:
    """A client JSON Schema checked against the budgets and classified; 400 if refused."""
    try:
        schema = checked_client_schema(schema, where=where)
        budget.check_schema(schema, where=where)
        analysis = policy.check(schema, where=where)
    except BudgetExceeded as exc:
        raise _over_budget(exc, param=where) from None
    except GrammarError as exc:
        raise _schema_error(exc, param=where) from None
    return JsonSchemaSpec.from_analysis(analysis), analysis
