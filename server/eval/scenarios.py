"""Contract scenarios: per tool, the cases a model must keep getting right.

A scenario file (YAML, or JSONL with one object per line and the file-level keys repeated)
names one tool, its class and the tools offered, then its cases:

    tool: search_products
    class: read            # read | write: each class has its own threshold
    tools: [search_products, create_support_ticket]   # offered with every case
    headers: {X-Tenant-Id: acme}                      # optional, sent with every case
    scenarios:
      - id: search-lego
        kind: positive     # positive | boundary | negative
        user: Find lego sets in toys under 50
        expect:
          tool: search_products           # null: no call is the right answer
          fields: {category: toys}        # equal (strings: case and spaces ignored)
          one_of: {max_price: [50, 50.0]} # any of these values
          present: [query]                # written, whatever the value
          absent: [max_price]             # not given: a value there is invented
    dialogues:             # optional: conversations, one expected outcome per turn
      - id: dispute-over-turns
        api: responses     # responses (chained by previous_response_id) | chat (a session)
        tool_choice: open_dispute   # a tool name, required, auto (default) or none
        options: {tool_prompt: compact}   # `strictcall` options sent with every turn
        turns:
          - user: yesterday my card 4417 was charged 1 200,50 twice
            expect: {question: [original_operation_id]}   # asks about these fields
          - tool_result: {name: find_operations, output: "OP-204518 ..."}  # a lookup's
            expect: {call: {amount: "1200.50", operation_date: "{yesterday}"}}
          - user: sorry, the amount was 1 300,00
            expect: {confirm: [amount]}   # a confirmation question about these fields
            gold: {amount: "1300.00", card_last4: "4417", original_operation_id: null}
    Expected values may say "{today}", "{yesterday}" or "{date:30.11}" (the run's dates;
    the latest 30 November that is not in the future); a list under `call` is any of its
    values. `gold` (optional, per turn): each field's value as the user has given it so
    far, written by hand; `language` (per dialogue) groups the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class Expectation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str | None
    fields: dict[str, Any] = Field(default_factory=dict)
    one_of: dict[str, list[Any]] = Field(default_factory=dict)
    present: list[str] = Field(default_factory=list)
    # Fields the user did not give: a call with a value there invented it (a hard fail).
    absent: list[str] = Field(default_factory=list)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["positive", "boundary", "negative"]
    user: str
    expect: Expectation


class ToolResult(BaseModel):
    """A lookup the agent made before the turn: its call and what it returned."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str


class TurnExpectation(BaseModel):
    """One of: a question about `question`'s fields, a call with `call`'s values, a
    confirmation question about `confirm`'s fields."""

    model_config = ConfigDict(extra="forbid")

    question: list[str] | None = None
    call: dict[str, Any] | None = None
    confirm: list[str] | None = None

    @model_validator(mode="after")
    def _one(self) -> TurnExpectation:
        if sum(x is not None for x in (self.question, self.call, self.confirm)) != 1:
            raise ValueError("expect exactly one of question, call, confirm")
        return self

    @property
    def kind(self) -> Literal["question", "call", "confirm"]:
        return "question" if self.question is not None else \
            "call" if self.call is not None else "confirm"


class DialogueTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    tool_result: ToolResult | None = None
    expect: TurnExpectation
    # Written by hand: each field's value as the conversation has given it after this turn
    # (null: not given yet). The judge compares what the server shows with it, field by
    # field (server/eval/dialogues.py), never with anything the server computes.
    gold: dict[str, Any] | None = None
    # The user starts another call of the tool here ("one more dispute"): values shown
    # before are not carried over (a completed call ends its intent).
    new_intent: bool = False

    @model_validator(mode="after")
    def _said(self) -> DialogueTurn:
        if self.user is None and self.tool_result is None:
            raise ValueError("a turn needs user text, a tool_result, or both")
        return self


class Dialogue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    api: Literal["responses", "chat"] = "responses"
    language: str = "en"  # the user's, for the per-language report
    tool_choice: str = "auto"
    options: dict[str, Any] = Field(default_factory=dict)
    turns: list[DialogueTurn] = Field(min_length=1)


class ScenarioFile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    tool: str
    tool_class: Literal["read", "write"] = Field(alias="class")
    tools: list[str] = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    scenarios: list[Scenario] = Field(min_length=1)
    dialogues: list[Dialogue] = Field(default_factory=list)


class ScenarioError(Exception):
    """A scenario file that cannot be read: the message names the file and the field."""


def load(path: Path) -> ScenarioFile:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"{path}: {exc.strerror}") from None
    try:
        raw = _parse(path, text)
        return ScenarioFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{path}: {where}: {first['msg']}") from None
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


def _parse(path: Path, text: str) -> Any:
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        if not rows:
            raise ValueError("no scenarios")
        head = {k: v for k, v in rows[0].items() if k in ("tool", "class", "tools", "headers")}
        return {**head, "scenarios": [{k: v for k, v in r.items() if k not in head}
                                      for r in rows]}
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{line}not valid YAML ({getattr(exc, 'problem', exc)})") from None
