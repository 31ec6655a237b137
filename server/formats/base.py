"""The format seam. The pipeline decides what an answer must be in no format's terms (an
`Ask`); a model format renders it in its family's syntax (a `Rendering`: the grammar, the
prompt's instructions and prefill, the tools for the chat template, the reader) and renders
the conversation for the chat template. Nothing outside `server/formats` knows a call marker.

Adding a family is one module with a class that satisfies `ModelFormat`, and its tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from grammars import GrammarSpec, JsonSchemaSpec, ToolSpec
from server.formats.reading import Mode, Reader
from server.options import AutoTools, ToolStyle
from server.task import EarlierCall, Turn


class UnsupportedFormat(ValueError):
    """A format StrictCall cannot serve (its call syntax has no reader here)."""


@dataclass(frozen=True)
class AskedTool:
    name: str
    # The arguments' JSON Schema the model writes to: a format builds its grammar from it
    # (or from `spec`) and reads calls with it.
    schema: dict[str, Any]
    spec: ToolSpec  # the arguments' grammar, which the format puts in its call syntax
    description: str | None = None
    # The schema prompts and chat templates show (None: `schema`): the tool's own, before
    # the conversation narrowed its grammar (grounded fields, a session's slots), so a
    # prompt is the same with grounding on and off.
    shown: dict[str, Any] | None = None

    @property
    def prompt_schema(self) -> dict[str, Any]:
        """What the prompt says of the arguments: StrictCall's own `x-strictcall-*`
        annotations left out (they tell the server, not the model)."""
        shown: dict[str, Any] = _without_annotations(
            self.shown if self.shown is not None else self.schema)
        return shown

    def described(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description or "",
                "parameters": self.prompt_schema}


def _without_annotations(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_annotations(v) for k, v in node.items()
                if not (isinstance(k, str) and k.startswith("x-strictcall-"))}
    if isinstance(node, list):
        return [_without_annotations(v) for v in node]
    return node


@dataclass(frozen=True)
class Ask:
    """What the answer must be.

    mode "text": free text; "json": one JSON value (`answer`); "tools": at least one call
    to `tools`; "auto": calls, or else an answer (free text, or `answer` when set)."""

    mode: Mode
    tools: tuple[AskedTool, ...] = ()
    max_calls: int | None = None  # calls in one answer at most (None: no limit)
    answer: JsonSchemaSpec | None = None  # the JSON answer's grammar (None: free text)
    instructions: str | None = None  # what the prompt says about the answer's schema
    tool_style: ToolStyle = "full"  # how tools are written where the prompt lists them
    reasoning: int = 0  # the free-reasoning pass's budget in tokens (0: none)
    auto: AutoTools = "decide"
    # The calls of this turn already answered (their results are in the conversation): an
    # agent loop's turn after a tool result, which the format words as one.
    answered_calls: tuple[EarlierCall, ...] = ()

    def answered(self) -> Ask:
        """The ask for the answer alone (auto that decided on no call)."""
        return Ask("json" if self.answer is not None else "text", answer=self.answer,
                   instructions=self.instructions, reasoning=self.reasoning)


@dataclass(frozen=True)
class Rendering:
    """An ask in one format's syntax."""

    reader: Reader  # how the decode reads; its mode may differ from the ask's
    spec: GrammarSpec | None = None  # None: unconstrained
    instructions: str | None = None  # joined to the system turn
    prefill: str = ""  # written into the assistant turn before decoding starts
    # The tools as the chat template takes them (`tools=`), for templates that render them.
    template_tools: list[dict[str, Any]] | None = None
    thinks: bool = False  # the decode opens with a free-reasoning pass
    # An empty call list means "no call": this rendering then answers instead.
    fallback: Rendering | None = None
    # Keywords the format's grammar cannot hold, left to the validator after decoding:
    # ("tool#pointer" as the enforcement report writes it, why).
    checked_late: tuple[tuple[str, str], ...] = ()


class ModelFormat(Protocol):
    """A model family's prompt and output syntax."""

    @property
    def name(self) -> str: ...

    @property
    def thinks(self) -> bool:
        """Whether the family has a thinking block of its own (then it reasons by default)."""
        ...

    @property
    def skip_special_tokens(self) -> bool:
        """Whether output text may drop special tokens (False: its markers are ones)."""
        ...

    def render(self, ask: Ask) -> Rendering:
        """Raises UnsupportedFormat for an ask this format cannot serve."""
        ...

    def messages(self, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        """The conversation as the chat template's messages, earlier calls in this family's
        syntax (or as `tool_calls` for templates that render them)."""
        ...

    def template_kwargs(self, *, reasoning: bool) -> dict[str, Any]: ...
