"""The one internal request: what to decode, in no API's wire format. Each API adapter
(server/api/<name>) translates its request into a `Task`: the conversation as turns, the
tools, what the answer must be, the sampling, the `strictcall` options, and the names its own
API gives the parameters, so that an error raised anywhere below names what that client
sent. Shared by the pipeline, the execution layer and the model formats."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from server.options import Effort, StrictCallOptions

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class EarlierCall:
    """A call an earlier assistant turn made."""

    id: str
    name: str
    arguments: Any  # the arguments as JSON, or their raw text where it is not JSON

    @classmethod
    def of(cls, id: str, name: str, arguments: str) -> EarlierCall:
        try:
            value: Any = json.loads(arguments)
        except json.JSONDecodeError:
            value = arguments
        return cls(id, name, value)


@dataclass(frozen=True)
class Turn:
    role: Role
    text: str
    calls: tuple[EarlierCall, ...] = ()  # an assistant turn's calls
    call_id: str | None = None  # a tool turn: the call whose result this is


def user_text(turns: tuple[Turn, ...] | list[Turn]) -> str:
    """What the user wrote, all turns joined (tool selection matches tools against it)."""
    return " ".join(t.text for t in turns if t.role == "user")


def answered_calls(turns: tuple[Turn, ...] | list[Turn]) -> tuple[EarlierCall, ...]:
    """The calls made since the user's last message whose results are in: an agent loop's
    work on the question the user asked last."""
    since = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), -1)
    later = turns[since + 1:]
    results = {t.call_id for t in later if t.role == "tool"}
    return tuple(c for t in later for c in t.calls if c.id in results)


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str | None = None
    # None: not sent (a registered contract's schema, or a function without arguments).
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True)
class NamedTool:
    """tool_choice naming one tool: the answer is one call to it."""

    name: str


ToolChoice = Literal["none", "auto", "required"] | NamedTool


@dataclass(frozen=True)
class JsonAnswer:
    """The answer is one JSON value under `schema` (a client JSON Schema, unchecked)."""

    schema: Any


@dataclass(frozen=True)
class WireNames:
    """How the client's API names the parameters the pipeline may refuse ({i}: a tool's
    index). The defaults are Chat Completions' names."""

    api: str = "the OpenAI chat completions API"
    model: str = "model"
    messages: str = "messages"
    max_tokens: str = "max_tokens"
    stop: str = "stop"
    tools: str = "tools"
    tool_name: str = "tools[{i}].function.name"
    tool_parameters: str = "tools[{i}].function.parameters"
    tool_choice: str = "tool_choice"
    tool_choice_name: str = "tool_choice.function.name"
    answer: str = "response_format"
    answer_schema: str = "response_format.json_schema.schema"
    options: str = "strictcall"

    def tool(self, field: Literal["name", "parameters"], i: int) -> str:
        template = self.tool_name if field == "name" else self.tool_parameters
        return template.format(i=i)


CHAT_NAMES = WireNames()


@dataclass(frozen=True)
class Task:
    model: str
    turns: tuple[Turn, ...]
    tools: tuple[ToolDef, ...] = ()
    # Tools the request offered that selection left out (server/execution/offer.py): not
    # shown, but their fields' words still say whose a name is ("tag 'news'").
    left_out: tuple[ToolDef, ...] = ()
    tool_choice: ToolChoice | None = None  # None: "auto" with tools, as in OpenAI's APIs
    parallel_tool_calls: bool | None = None
    answer: JsonAnswer | None = None  # None: free text
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    reasoning_effort: Effort | None = None
    options: StrictCallOptions = StrictCallOptions()
    names: WireNames = CHAT_NAMES

    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)
