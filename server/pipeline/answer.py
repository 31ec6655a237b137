"""What the pipeline gives back, in no API's wire format: the answer, and the typed events a
streamed answer arrives as. Each API adapter renders these in its own shape.

A stream is: reasoning deltas, then text deltas, then per call a `CallStarted` (id and name
once decoded), its `ArgumentsDelta`s and a `CallDone` with the final arguments; then one
`Finished` with the whole answer. A contract call's arguments come in one delta, after
validation and repair (`CallStarted.held`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from grammars import EnforcementReport, Lookup

Finish = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # JSON text, validated (and normalized, for a contract)


@dataclass(frozen=True)
class RepairUsage:
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens whose KV cache came from an earlier request
    reasoning_tokens: int | None = None  # None: no reasoning pass

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, kw_only=True)
class Opening:
    """What an API needs of a request before its answer: known once the request is prepared
    (a stream's first frame carries it), nothing of how the pipeline prepared it."""

    id: str  # the answer's to come; adapters derive their own ids from it
    created: int
    prompt_tokens: int
    content_first: bool  # the answer may open with text (not only calls)
    grammar: Lookup | None  # the compiled grammar and its cache state (None: unconstrained)
    enforcement: EnforcementReport | None  # which keywords the grammar holds, which not
    headers: dict[str, str] = field(default_factory=dict)  # an offered tool's deprecation


@dataclass(frozen=True, kw_only=True)
class Answer:
    id: str  # unique; adapters derive their own ids from it
    created: int
    model: str
    content: str | None  # None: calls only
    calls: tuple[Call, ...]
    finish: Finish
    usage: Usage
    reasoning: str | None = None
    stop_string: str | None = None  # the stop string that ended the text, if one did
    # The `strictcall` extension: contract reports, runaway notes, tool selection.
    extension: dict[str, Any] | None = None
    # Headers known only once the answer is: calls waiting for an approval.
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class CallStarted:
    index: int
    id: str
    name: str
    held: bool = False  # a contract call: its arguments come whole, once validated


@dataclass(frozen=True)
class ArgumentsDelta:
    index: int
    text: str


@dataclass(frozen=True)
class CallDone:
    index: int
    call: Call


@dataclass(frozen=True)
class Finished:
    answer: Answer


Event = ReasoningDelta | TextDelta | CallStarted | ArgumentsDelta | CallDone | Finished
