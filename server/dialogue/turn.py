"""The conversation layer's seam into the pipeline: a turn in, decisions out.

`Dialogue.begin(task, caller)` reads the request's conversation once (its evidence, date and
language) and its session's slots, and gives a `DialogueTurn`. The planner asks it, per
tool, for the schema the model writes to (grounded fields narrowed to what the conversation
holds, filled slots pinned or opened to a change) and the tool's `Grounding`, which says
what questions about it say; the checks give it each decoded call to merge with the slots
(a value put back, a change held for a yes, a question instead), and the answer to settle.
The prompt never changes: grounding and slots live in the grammar only."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts import Contract, ContractRegistry, clock
from grammars import GrammarError, checked_client_schema, narrowed_schema
from server.dialogue import language, reading
from server.dialogue.earlier import EarlierValues
from server.dialogue.evidence import Bounds, Evidence, evidence_of
from server.dialogue.grounding import Grounding, ground
from server.dialogue.language import identifier_words
from server.dialogue.marks import marked_fields
from server.dialogue.questions import NeedsInput, Wording
from server.dialogue.repeats import action_words, answered_yes, made_before
from server.dialogue.slots import SlotTurn
from server.dialogue.unsaid import unsaid
from server.dialogue.values import client_kind
from server.dialogue.which import thing_stems
from server.identity import Caller
from server.sessions import SessionStore, scope_of
from server.task import Task, ToolDef


@dataclass(frozen=True)
class ToolTurn:
    written: dict[str, Any]  # the schema the model writes to
    grounding: Grounding


@dataclass(frozen=True)
class Dialogue:
    """The conversation layer, built once per server."""

    store: SessionStore | None
    registry: ContractRegistry = field(default_factory=ContractRegistry)
    from_system: bool = True  # the system and developer messages are evidence too
    bounds: Bounds = Bounds()  # what of a conversation grounding reads

    @staticmethod
    def warm() -> None:
        """Load the libraries a conversation is read with (dateparser's and Babel's data,
        lingua's models, the stemmers): a second or so the first request would wait."""
        language.warm()
        reading.warm()

    async def begin(self, task: Task, caller: Caller) -> DialogueTurn:
        if not task.tools and task.options.session is None:  # plain chat, JSON answers
            return DialogueTurn(task, Evidence((), clock.today(), "en"), self.registry,
                                None)
        evidence = await asyncio.to_thread(evidence_of, task.turns,
                                           from_system=self.from_system, bounds=self.bounds)
        slots = None
        session = task.options.session
        if session is not None and self.store is not None:
            scope = scope_of(caller.identity)
            loaded = await asyncio.to_thread(self.store.load, scope, session)
            slots = await asyncio.to_thread(SlotTurn, self.store, self.registry, scope,
                                            session, loaded.state, task, evidence)
        return DialogueTurn(slots.task if slots is not None else task, evidence,
                            self.registry, slots)


class DialogueTurn:
    def __init__(self, task: Task, evidence: Evidence, registry: ContractRegistry,
                 slots: SlotTurn | None) -> None:
        self.task = task  # a confirmed change: its call named
        self.evidence = evidence
        self.registry = registry
        self.slots = slots
        self.wordings: dict[str, Wording] = {}
        # Per tool, the fields that tell one event from another (its grounded ones, else
        # its required ones): a new call sharing one with a filed call corrects it.
        self.identifying: dict[str, tuple[str, ...]] = {}
        self.grounded = False  # the request's tools were grounded (`strictcall.grounding`)

    @property
    def language(self) -> str:
        return self.evidence.language

    def tool(self, name: str, schema: dict[str, Any], contract: Contract | None, *,
             grounded: bool) -> ToolTurn:
        """What the model writes for tool `name` (`schema`: its arguments' schema; a
        contract's, or a client's the planner checked) in this turn."""
        if grounded:
            self.grounded = True
            grounding = self._ground(name, schema, contract)
        else:
            grounding = Grounding(language=self.language)
        self.wordings[name] = wording_of(grounding, schema)
        self.identifying[name] = tuple(dict.fromkeys(
            [p[0] for p in grounding.grounded if len(p) == 1]
            or [k for k in schema.get("required") or () if isinstance(k, str)]))
        pins = self.slots.narrowings(name, schema, grounding) if self.slots else []
        pinned = {p.path for p in pins}
        narrowings = [f.narrowing() for f in grounding.fields if f.path not in pinned]
        nullable = [p for p in grounding.asked if p not in pinned]
        if not narrowings and not pins and not nullable:
            return ToolTurn(schema, grounding)
        return ToolTurn(narrowed_schema(schema, [*narrowings, *pins], nullable=nullable,
                                        required=grounding.wanted_arrays), grounding)

    def _ground(self, name: str, schema: dict[str, Any], contract: Contract | None) -> Grounding:
        """Tool `name`'s fields read against this conversation (`grounding.ground`)."""
        return ground(schema, contract, self.evidence, since=self._last_call(name),
                      ask_between=self._user_chooses(schema, contract),
                      earlier=self._earlier, foreign=self._field_stems)

    def _user_chooses(self, schema: dict[str, Any], contract: Contract | None) -> bool:
        """Whether the user, not the model, chooses where the conversation gives a field
        more than one value: for a write (a contract's kind, a client schema's
        `x-strictcall-kind`), or where the request asks (`strictcall.ambiguity`)."""
        asked = self.task.options.ambiguity
        if asked is not None:
            return asked == "ask"
        kind = contract.catalog.kind if contract is not None \
            else schema.get("x-strictcall-kind")
        return kind == "write"

    def wording(self, name: str) -> Wording:
        return self.wordings.get(name) or Wording(self.language)

    @property
    def held_tools(self) -> set[str]:
        return self.slots.held_tools if self.slots is not None else set()

    def merge(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | NeedsInput:
        if self.slots is None:
            return arguments
        return self.slots.merge(name, arguments, self.wording(name),
                                self.identifying.get(name, ()))

    def repeats(self, name: str, arguments: dict[str, Any], schema: dict[str, Any],
                contract: Contract | None) -> NeedsInput | None:
        """The question where this call repeats, unasked, one an earlier exchange made with
        the same values (server/dialogue/repeats.py); None where it may be made."""
        kind = contract.catalog.kind if contract is not None else client_kind(schema)[0]
        values = None if kind == "read" else made_before(
            self.task.turns, name, arguments, action=lambda: self._action(name, contract))
        if values is None:
            return None
        wording = self.wording(name)
        question = wording.done_before(values)
        if answered_yes(self.task.turns, question.question):
            return None
        return NeedsInput(name, (question,), values, wording.language)

    def unsaid(self, calls: list[tuple[str, dict[str, Any]]],
               schemas: Mapping[str, dict[str, Any]], groundings: Mapping[str, Grounding]
               ) -> NeedsInput | None:
        """The question where the user's newest message means what it does not say and the
        `calls` (name, arguments) pass over it (server/dialogue/unsaid.py); None where they
        stand."""
        if not self.grounded:
            return None
        newest = next((t.text for t in reversed(self.task.turns) if t.role == "user"), "")
        return unsaid(newest, calls, schemas, groundings, self.wording,
                      left_out=lambda: self._left_out_groundings, described=self._described)

    def _described(self, name: str) -> str:
        """A tool's name and description (a contract's, else the client's)."""
        known = self.registry.get(name)
        tool = next((t for t in (*self.task.tools, *self.task.left_out) if t.name == name),
                    ToolDef(name))
        return " ".join(identifier_words(name)) + " " + (
            (known.description if known is not None else tool.description) or "")

    @functools.cached_property
    def _left_out_groundings(self) -> dict[str, Grounding]:
        """The groundings of the tools selection left out of the prompt (a client's schema
        that fails its check is skipped: it was never offered), their wordings kept."""
        out: dict[str, Grounding] = {}
        for tool in self.task.left_out:
            contract = self.registry.get(tool.name)
            try:
                schema = contract.schema() if contract is not None else checked_client_schema(
                    tool.parameters or {"type": "object"}, where=f"tool {tool.name!r}",
                    dialect="bfcl")
            except GrammarError:
                continue
            grounding = self._ground(tool.name, schema, contract)
            if grounding:
                self.wordings.setdefault(tool.name, wording_of(grounding, schema))
                out[tool.name] = grounding
        return out

    async def settle(self, schemas: dict[str, dict[str, Any]], calls: Any,
                     needs: dict[str, Any] | None) -> dict[str, Any] | None:
        """The session's `strictcall.slots` report (None: no session)."""
        if self.slots is None:
            return None
        return await self.slots.settle(schemas, calls, needs)

    def _action(self, name: str, contract: Contract | None) -> frozenset[str]:
        """The words that say tool `name`'s action and no other offered tool's."""
        def text(tool: ToolDef) -> str:
            known = self.registry.get(tool.name)
            return (known.description if known is not None else tool.description) or ""
        others = [s for t in (*self.task.tools, *self.task.left_out) if t.name != name
                  for s in (t.name, text(t))]
        mine = next((t for t in self.task.tools if t.name == name), ToolDef(name))
        return action_words(name, contract.description if contract is not None
                            else mine.description, others)

    @functools.cached_property
    def _field_stems(self) -> frozenset[str]:
        """The stems of the keys of every tool this request offers (a contract's, or a
        client's schema; shown or left out by selection): the things the tools take."""
        out: set[str] = set()
        for tool in (*self.task.tools, *self.task.left_out):
            contract = self.registry.get(tool.name)
            schema = contract.schema() if contract is not None else tool.parameters or {}
            for key in schema.get("properties") or {}:
                out |= thing_stems(str(key))
        return frozenset(out)

    @functools.cached_property
    def _earlier(self) -> EarlierValues:
        """The string values the conversation's earlier calls wrote, read once per turn."""
        return EarlierValues.of([(i, c.arguments) for i, t in enumerate(self.task.turns)
                                 if t.role == "assistant" for c in t.calls], self.evidence)

    def _last_call(self, name: str) -> int:
        """The turn of the last assistant call to `name` (-1: none)."""
        return max((i for i, t in enumerate(self.task.turns) if t.role == "assistant"
                    and any(c.name == name for c in t.calls)), default=-1)


def wording_of(grounding: Grounding, schema: dict[str, Any]) -> Wording:
    marks = grounding.marks or tuple(marked_fields(schema))
    descriptions = dict(grounding.descriptions)
    props = schema.get("properties") or {}
    for name, node in props.items():  # its description, else its title
        text = (node.get("description") or node.get("title")) if isinstance(node, dict) \
            else None
        if isinstance(text, str) and text.strip():
            descriptions.setdefault((name,), text)
    return Wording(grounding.language, {m.path: dict(m.ask) for m in marks if m.ask},
                   {m.path: dict(m.about) for m in marks if m.about}, descriptions,
                   {f.path: f.choices for f in grounding.fields if f.choices})
