"""Model formats: how a model family is prompted, what its output grammar is, and how its
output reads. `smollm2` is StrictCall's own format (tools described in the system turn, calls
as one JSON list in `<tool_call>`); the others are xgrammar's built-in families, whose
tool-call and reasoning syntax comes from `xgrammar.get_model_structural_tag`.

A format adapts a request's plan (built for the generic format by `pipeline.plan`): the
grammar, the prompt's tools and prefill, the reader. The reasoning pass is part of it: the
family's own thinking block where it has one, StrictCall's `<think>` segment otherwise."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from grammars import JsonSchemaSpec, StructuralTagSpec, TextOrToolCallsSpec, ToolCallsSpec
from server.formats.reader import TagReader
from server.formats.reasoning import (THINK_END, THINK_OPEN, reasoned, think_instructions,
                                      with_budget)
from server.formats.syntax import (READ_STYLES, FamilySyntax, family_syntax, function_tool,
                                   structural_tag)
from server.pipeline.modes import ListReader, ReasoningMarks
from server.pipeline.prompt import CALL_OPEN

if TYPE_CHECKING:
    from server.pipeline.plan import Plan

# xgrammar 0.2.9's built-in families (`xgrammar.builtin_structural_tag`).
XGRAMMAR_FAMILIES = ("llama", "qwen_3", "qwen_3_5", "qwen_3_coder", "deepseek_r1",
                     "deepseek_v3_1", "deepseek_v3_2", "deepseek_v4", "harmony", "glm_4_7",
                     "gemma_4", "kimi", "kimi_k3", "minimax", "minimax_m3", "cohere",
                     "exaone", "mimo")
GENERIC = "smollm2"


class UnsupportedFormat(ValueError):
    """A format StrictCall cannot serve (its call syntax has no reader here)."""


def _json_element(schema: dict[str, Any]) -> dict[str, Any]:
    # xgrammar requires >= 1: at most one whitespace character in a row
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1}


def _tight(node: Any) -> Any:
    """The family's tag with whitespace inside JSON arguments bounded (one character in a
    row, xgrammar's least): unbounded, a model can loop on whitespace to max_tokens."""
    if isinstance(node, dict):
        if node.get("type") == "json_schema" and node.get("max_whitespace_cnt") is None:
            node["max_whitespace_cnt"] = 1
        for value in node.values():
            _tight(value)
    elif isinstance(node, list):
        for value in node:
            _tight(value)
    return node


def _calls_only(node: Any) -> Any:
    """A forced call (tool_choice required or named): the calls with nothing but a newline
    between them, where xgrammar's tag lets free text run around them (`triggered_tags`)."""
    if isinstance(node, dict):
        if node.get("type") == "triggered_tags":
            return {"type": "tags_with_separator", "tags": _calls_only(node["tags"]),
                    "separator": "\n", "at_least_one": True,
                    "stop_after_first": node.get("stop_after_first", False)}
        return {k: _calls_only(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_calls_only(v) for v in node]
    return node


@dataclass(frozen=True)
class GenericFormat:
    """StrictCall's own format (SmolLM2's function-calling data)."""

    name: str = GENERIC
    thinks: bool = False  # no thinking block of its own: the reasoning pass is prompted
    skip_special_tokens: bool = True
    renders_tools = False

    def template_kwargs(self, *, reasoning: bool) -> dict[str, Any]:
        return {}

    def adapt(self, plan: Plan, *, reasoning: int) -> Plan:
        if reasoning <= 0 or plan.spec is None and plan.mode != "text":
            return plan
        then = {"tools": "\n" + CALL_OPEN}.get(plan.mode, "\n")
        spec = plan.spec
        if isinstance(spec, ToolCallsSpec | JsonSchemaSpec):
            answer: dict[str, Any] | None = _json_element(spec.json_schema())
        elif isinstance(spec, TextOrToolCallsSpec):
            answer = spec.structural_tag()["format"]
        else:
            answer = None  # free text
        tag = reasoned(answer, end=THINK_END, then=then, budget=reasoning)
        instructions = think_instructions(plan.instructions)
        return replace(plan, spec=StructuralTagSpec.of(tag, label=f"{plan.mode}+reasoning"),
                       instructions=instructions, prefill=THINK_OPEN, thinks=True,
                       reader=ListReader(plan.mode, ReasoningMarks(THINK_END, then)),
                       fallback=None)


@dataclass(frozen=True)
class FamilyFormat:
    """One of xgrammar's built-in families."""

    name: str
    thinks: bool
    skip_special_tokens: bool = False  # markers may be special tokens: the reader needs them
    renders_tools: bool = True  # set from the model's chat template at startup

    def adapt(self, plan: Plan, *, reasoning: int) -> Plan:
        think = reasoning > 0
        if plan.mode in ("text", "json"):
            return self._answer(plan, reasoning)
        calls = plan.spec.calls if isinstance(plan.spec, TextOrToolCallsSpec) else plan.spec
        assert isinstance(calls, ToolCallsSpec)
        tools = [(t.name, json.loads(t.parameters_json)) for t in calls.tools]
        auto = plan.mode == "auto" or calls.min_calls == 0
        parallel = calls.max_calls is None or calls.max_calls > 1
        own_think = think and self.thinks
        tag = _tight(structural_tag(self.name, [function_tool(n, s) for n, s in tools],
                                    tool_choice="auto" if auto else "required",
                                    reasoning=own_think, parallel=parallel))
        if not auto:
            tag = _calls_only(tag)
        syntax = self.syntax(tools)
        instructions = plan.instructions if not self.renders_tools else None
        prefill = ""
        if own_think:
            tag = with_budget(tag, begin=syntax.think_begin or "",
                              end=syntax.think_end or THINK_END, budget=reasoning)
            prefill = self._think_prefill(syntax)
        elif think:  # no thinking block in this family: StrictCall's own, then its syntax
            tag = reasoned(tag["format"], end=THINK_END, budget=reasoning, then="\n")
            syntax = replace(syntax, think_begin="", think_end=THINK_END, think_then="\n")
            prefill = THINK_OPEN
            instructions = think_instructions(instructions)
        mode = "auto" if auto else "tools"
        return replace(plan, mode=mode, spec=StructuralTagSpec.of(tag, label=self.name),
                       instructions=instructions, prefill=prefill, fallback=None,
                       reader=TagReader(mode, syntax, thinks=think), thinks=think,
                       template_tools=[function_tool(n, s, plan.descriptions.get(n))
                                       for n, s in tools] if self.renders_tools else None)

    def _answer(self, plan: Plan, reasoning: int) -> Plan:
        """Text and JSON answers: the family's reasoning block (or StrictCall's), then the
        answer's own grammar."""
        syntax = self.syntax([])
        if reasoning <= 0:
            return replace(plan, reader=TagReader(plan.mode, syntax))
        answer = _json_element(plan.spec.json_schema()) \
            if isinstance(plan.spec, JsonSchemaSpec) else None
        if self.thinks and syntax.think_end is not None:
            begin, end, then = syntax.think_begin or "", syntax.think_end, syntax.think_then
            prefill, instructions = self._think_prefill(syntax), plan.instructions
        else:
            begin, end, then, prefill = "", THINK_END, "\n", THINK_OPEN
            instructions = think_instructions(plan.instructions)
            syntax = replace(syntax, think_begin="", think_end=end, think_then=then)
        tag = reasoned(answer, begin=begin, end=end, then=then, budget=reasoning)
        return replace(plan, spec=StructuralTagSpec.of(tag, label=f"{self.name}+reasoning"),
                       prefill=prefill, instructions=instructions, thinks=True,
                       reader=TagReader(plan.mode, syntax, thinks=True))

    @staticmethod
    def _think_prefill(syntax: FamilySyntax) -> str:
        """The opening the grammar expects the prompt to have written: `<think>` where the
        family's grammar starts inside the block (the template may or may not add it; the
        pipeline leaves it out when the rendered prompt already ends with it)."""
        return THINK_OPEN if syntax.think_begin == "" and syntax.think_end == THINK_END \
            else ""

    def syntax(self, tools: list[tuple[str, dict[str, Any]]]) -> FamilySyntax:
        syntax = family_syntax(self.name, tools)
        unread = syntax.styles - set(READ_STYLES)
        if unread:
            raise UnsupportedFormat(
                f"model format {self.name!r} writes arguments as {sorted(unread)}, which "
                f"StrictCall cannot read back yet; served formats: {sorted(SERVED)}")
        return syntax

    def template_kwargs(self, *, reasoning: bool) -> dict[str, Any]:
        # Qwen3's templates read enable_thinking; DeepSeek V3.1's read thinking.
        return {"enable_thinking": reasoning, "thinking": reasoning} if self.thinks else {}


def _served() -> dict[str, GenericFormat | FamilyFormat]:
    formats: dict[str, GenericFormat | FamilyFormat] = {GENERIC: GenericFormat()}
    probe = [("f", {"type": "object", "properties": {"x": {"type": "string"}}})]
    for name in XGRAMMAR_FAMILIES:
        try:
            syntax = family_syntax(name, probe)
        except Exception:  # noqa: BLE001 - a family this xgrammar does not ship
            continue
        if syntax.calls and syntax.styles <= set(READ_STYLES):
            formats[name] = FamilyFormat(name, thinks=syntax.think_end is not None)
    return formats


SERVED = _served()
ModelFormat = GenericFormat | FamilyFormat


def get_format(name: str) -> ModelFormat:
    if name in SERVED:
        return SERVED[name]
    if name in XGRAMMAR_FAMILIES:
        raise UnsupportedFormat(f"model format {name!r} is an xgrammar family whose call "
                                f"syntax StrictCall cannot read back yet; served: "
                                f"{sorted(SERVED)}")
    raise UnsupportedFormat(f"unknown model format {name!r}; use auto or one of "
                            f"{sorted(SERVED)}")
