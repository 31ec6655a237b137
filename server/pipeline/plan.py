"""What a task asks for, decided before any decoding (pure): the request-level checks, each
tool's schema checked against the budgets and the grammar policy, the format-neutral `Ask`,
and its rendering in the model's format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contracts import Contract, ContractRegistry
from grammars import (
    Analysis,
    Budget,
    BudgetExceeded,
    EnforcementReport,
    GrammarError,
    GrammarPolicy,
    GrammarSpec,
    JsonSchemaSpec,
    ToolSpec,
    checked_client_schema,
    grounding_uses,
)
from server.dialogue import DialogueTurn, Grounding
from server.errors import InvalidRequest, UnsupportedFeature
from server.formats.base import Ask, AskedTool, ModelFormat, Rendering, UnsupportedFormat
from server.formats.instructions import json_instructions
from server.formats.reading import Mode, Reader
from server.options import AfterResults, AutoTools, ToolPrompt, ToolStyle
from server.pipeline.request_options import RequestOptions
from server.task import NamedTool, Task, answered_calls


@dataclass(frozen=True)
class Plan:
    rendering: Rendering
    # Per tool (and "" for the JSON answer): the JSON Schema the output is validated against.
    schemas: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # The request's tools that are registered contracts: their validators and repair apply.
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    # Which keyword of the request's schemas is enforced by what (None: nothing constrained).
    enforcement: EnforcementReport | None = None
    # "auto" decided by an empty call list: the plan that answers instead.
    fallback: Plan | None = None
    # Per tool with grounded, asked or confirmed fields: what they may take, and ask.
    groundings: Mapping[str, Grounding] = field(default_factory=dict)
    # Per tool: the schema the model writes to (grounded fields narrowed, a session's
    # filled slots pinned); repair too. The prompt shows the tool's own schema.
    written: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Its grammar holds this conversation's values: never written to the disk cache.
    conversational: bool = False
    # "auto" in an agent loop: the calls already answered since the user's last message
    # ({"name", "arguments"}), which the runaway guard does not let be written again.
    answered: tuple[dict[str, Any], ...] = ()

    @property
    def mode(self) -> Mode:
        return self.rendering.reader.mode

    def identifying(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Per tool, the argument paths that say which request a call is: its grounded
        fields (the values the user gives), else its required ones. A second call of the
        tool with the same values there is the first one again (the runaway guard)."""
        out = {}
        for name, schema in self.schemas.items():
            grounding = self.groundings.get(name)
            required = schema.get("required") if isinstance(schema, dict) else None
            paths = grounding.grounded if grounding is not None and grounding.grounded \
                else tuple((str(r),) for r in required or () if isinstance(r, str))
            if name and paths:
                out[name] = paths
        return out

    @property
    def reader(self) -> Reader:
        return self.rendering.reader

    @property
    def spec(self) -> GrammarSpec | None:
        return self.rendering.spec


@dataclass(frozen=True)
class _Tool:
    asked: AskedTool  # its schema: what the model writes (grounded fields narrowed)
    schema: dict[str, Any]  # what its arguments are validated against
    report: EnforcementReport
    contract: Contract | None = None
    grounding: Grounding = Grounding()


@dataclass(frozen=True)
class _Answer:
    spec: JsonSchemaSpec
    schema: dict[str, Any]
    report: EnforcementReport


_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Planner:
    """The server's side of planning, fixed at startup."""

    registry: ContractRegistry
    policy: GrammarPolicy  # what the backend's masks enforce under this server's policies
    fmt: ModelFormat
    budget: Budget = Budget()
    max_calls: int | None = None  # calls per response at most (None: no limit)
    auto_tools: AutoTools = "decide"
    after_results: AfterResults = "answer-first"

    def plan(self, task: Task, options: RequestOptions,
             dialogue: DialogueTurn | None = None) -> Plan:
        """`dialogue`: the conversation's turn, which narrows each tool's grammar to what
        the conversation holds (grounded fields, a session's slots)."""
        names = task.names
        _check_stops(task)
        if options.reasoning > 0 and task.stop and not task.tools and task.answer is None:
            raise InvalidRequest("stop strings cannot end a free-text answer that follows a "
                                 "reasoning pass; send stop without reasoning, or no stop",
                                 param=names.stop)
        answer = self._answer(task, options)
        tools = self._tools(task, grounded=options.grounding, dialogue=dialogue)
        ask = self._ask(task, options, tools, answer)
        try:
            rendering = self.fmt.render(ask)
        except UnsupportedFormat as exc:
            raise UnsupportedFeature(str(exc)) from None
        plan = _assemble(rendering, tools, answer)
        if ask.mode != "auto" or not ask.answered_calls:
            return plan
        return replace(plan, answered=tuple({"name": c.name, "arguments": c.arguments}
                                            for c in ask.answered_calls))

    def _ask(self, task: Task, options: RequestOptions, tools: dict[str, _Tool],
             answer: _Answer | None) -> Ask:
        names, choice = task.names, task.tool_choice
        base = Ask("json" if answer else "text", answer=answer.spec if answer else None,
                   instructions=json_instructions(answer.schema, options.schema_prompt)
                   if answer else None, reasoning=options.reasoning)
        if not tools or choice == "none":
            if choice == "required" or isinstance(choice, NamedTool):
                raise InvalidRequest("tool_choice asks for a tool call, but no tools were "
                                     "given", param=names.tool_choice)
            return base
        asked = tuple(t.asked for t in tools.values())
        max_calls = 1 if task.parallel_tool_calls is False else self.max_calls
        if choice is None or choice == "auto":  # OpenAI's default when tools are given
            answered = answered_calls(task.turns)
            return Ask("auto", asked, max_calls, base.answer, base.instructions,
                       reasoning=options.reasoning, auto=self._auto(options, answered),
                       answered_calls=answered)
        if isinstance(choice, NamedTool):
            if choice.name not in tools:
                raise InvalidRequest(f"tool_choice names unknown tool {choice.name!r}; the "
                                     f"request's tools are {sorted(tools)}",
                                     param=names.tool_choice_name)
            # Forced: the model writes values only, so the tool's name and purpose suffice.
            return Ask("tools", (tools[choice.name].asked,), 1,
                       tool_style=_style(options.tool_prompt, forced="none"),
                       reasoning=options.reasoning)
        return Ask("tools", asked, max_calls, tool_style=_style(options.tool_prompt,
                                                                forced="full"),
                   reasoning=options.reasoning)

    def _auto(self, options: RequestOptions, answered: tuple[object, ...]) -> AutoTools:
        """How tool_choice "auto" decides. The turn after a tool result starts in free text
        with the call grammar behind the model's own marker ("answer-first"): opening the
        call block there steers a small model into calling again (bench/dialogue/agent_loop.py)."""
        if options.reasoning > 0 or (answered and self.after_results == "answer-first"):
            return "trigger"
        return self.auto_tools

    def _tools(self, task: Task, *, grounded: bool,
               dialogue: DialogueTurn | None = None) -> dict[str, _Tool]:
        if not task.tools:
            return {}
        names = task.names
        try:
            self.budget.check_tools(len(task.tools))
        except BudgetExceeded as exc:
            raise _over_budget(exc, param=names.tools) from None
        out: dict[str, _Tool] = {}
        for i, tool in enumerate(task.tools):
            if tool.name in out:
                raise InvalidRequest(f"tool name {tool.name!r} appears twice; names must be "
                                     "unique", param=names.tool("name", i))
            out[tool.name] = self._tool(tool.name, tool.description, tool.parameters,
                                        param=names.tool("parameters", i), grounded=grounded,
                                        dialogue=dialogue)
        return out

    def _tool(self, name: str, description: str | None, parameters: dict[str, Any] | None,
              *, param: str, grounded: bool, dialogue: DialogueTurn | None = None) -> _Tool:
        """`grounded`: grounded fields take only what the conversation holds."""
        contract = self.registry.get(name)
        where = f"the parameters of tool {name!r}"
        try:
            # A registered contract is authoritative (and the operator's: trusted).
            if contract is not None:
                schema, description = contract.schema(), contract.description
            else:  # checked against the metaschema before anything else reads it
                schema = checked_client_schema(parameters or _NO_ARGUMENTS, where=where,
                                               dialect="bfcl")
                self.budget.check_schema(schema, where=where)
            written, grounding = schema, Grounding()
            if dialogue is not None:
                turn = dialogue.tool(name, schema, contract, grounded=grounded)
                written, grounding = turn.written, turn.grounding
            analysis = self.policy.check(written, where=where)
        except BudgetExceeded as exc:
            raise _over_budget(exc, param=param) from None
        except GrammarError as exc:
            raise _schema_error(exc, param=param) from None
        asked = AskedTool(name, written, ToolSpec.from_analysis(name, analysis), description,
                          shown=schema)
        report = EnforcementReport(analysis.report.backend, (
            *analysis.report.uses, *grounding_uses(grounding.report())))
        return _Tool(asked, schema, report.prefixed(f"{name}#"), contract, grounding)

    def _answer(self, task: Task, options: RequestOptions) -> _Answer | None:
        if task.answer is None:
            return None
        schema, where = task.answer.schema, task.names.answer_schema
        spec, analysis = plan_schema(schema, where=where, budget=self.budget,
                                     policy=self.policy)
        return _Answer(spec, schema, analysis.report)


def _assemble(rendering: Rendering, tools: dict[str, _Tool], answer: _Answer | None) -> Plan:
    answers = {"": answer.schema} if answer is not None else {}
    if rendering.reader.mode in ("text", "json"):
        return Plan(rendering, answers, enforcement=answer.report if answer else None)
    schemas = {**{n: t.schema for n, t in tools.items()}, **answers}
    contracts = {n: t.contract for n, t in tools.items() if t.contract is not None}
    first = next(iter(tools.values()))
    report = _checked_late(EnforcementReport.merge(first.report.backend,
                                                   [t.report for t in tools.values()]),
                           dict(rendering.checked_late))
    fallback = None if rendering.fallback is None else _assemble(rendering.fallback, {}, answer)
    groundings = {n: t.grounding for n, t in tools.items() if t.grounding}
    written = {n: t.asked.schema for n, t in tools.items()}
    # A grammar narrowed to this conversation's values serves this conversation only.
    conversational = any(t.asked.schema is not t.schema for t in tools.values())
    return Plan(rendering, schemas, contracts, report, fallback, groundings, written,
                conversational=conversational)


def _checked_late(report: EnforcementReport, late: dict[str, str]) -> EnforcementReport:
    """`report` with the keywords the format left to the validator in that tier."""
    if not late:
        return report
    return EnforcementReport(report.backend, tuple(
        u._replace(tier="validator", note=late[u.pointer])
        if u.pointer in late and u.tier == "grammar" else u for u in report.uses))


def _style(prompt: ToolPrompt, *, forced: ToolStyle) -> ToolStyle:
    return forced if prompt == "auto" else prompt


def _check_stops(task: Task) -> None:
    if len(task.stop) > 4 or any(not s for s in task.stop):
        raise InvalidRequest("stop takes at most 4 non-empty strings", param=task.names.stop)


def _over_budget(exc: BudgetExceeded, *, param: str) -> InvalidRequest:
    return InvalidRequest(exc.render(), param=param, code="budget_exceeded",
                          extensions={"limit": exc.limit, "measured": exc.measured,
                                      "allowed": exc.allowed})


def _schema_error(exc: GrammarError, *, param: str) -> InvalidRequest:
    extensions = {"keywords": exc.details} if exc.details else None
    return InvalidRequest(exc.render(), param=param, code="invalid_schema",
                          extensions=extensions)


def plan_schema(schema: Any, *, where: str, budget: Budget,
                policy: GrammarPolicy) -> tuple[JsonSchemaSpec, Analysis]:
    """A client JSON Schema checked against the budgets and classified; 400 if refused.
    `where` names it in the client's API (the error's `param`)."""
    try:
        schema = checked_client_schema(schema, where=where)
        budget.check_schema(schema, where=where)
        analysis = policy.check(schema, where=where)
    except BudgetExceeded as exc:
        raise _over_budget(exc, param=where) from None
    except GrammarError as exc:
        raise _schema_error(exc, param=where) from None
    return JsonSchemaSpec.from_analysis(analysis), analysis

