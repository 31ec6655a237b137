"""Slot filling across turns: a session's valid values per tool (server/sessions), used by
the decode and kept from one turn to the next.

Where the slots enter the decode: a filled field is *pinned* in the grammar the model
writes to (its node becomes exactly its value), so no decode can empty it or change it
unseen, and a tiny model cannot pick another candidate of an old message. It moves only
where the user's newest message states another value for it (found as grounded candidates
are, server/pipeline/grounding.py field_values): the node then holds only the new values
(the model chooses among several), because it is the user who changed it, not the model:
- a reversible tool (a read; a write of low or medium risk): the new value replaces the
  old, and `strictcall.slots.changed` says so;
- an irreversible tool (a write of high or critical risk): the call is held back and the
  answer is a question that shows both values. The user's next message decides
  (server/pipeline/confirmation.py), never the model.
Tool results fill empty fields (through grounding, as before) but never change a filled
one: that is the user's to say. Free-text fields (a plain string) cannot be evidenced by
a message: a reversible tool's are rewritten freely (a change is reported); an irreversible
tool's stay pinned until the slots are reset.

After the checks, merge again (`ToolSlots.filled_with`: a missing or null value never
overwrites a filled one, whatever the grammar was) and save what the answer leaves: a
call's arguments, or a question's collected values. Slots expire `--slot-ttl-s` after the
last turn about their tool, are dropped by `strictcall.reset_slots`, and are reset when a
call or question for another write tool ends the intent."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from dataclasses import replace
from typing import Any

from contracts import Contract, ContractRegistry
from server.identity import Caller
from server.pipeline.answer import Call
from server.pipeline.confirmation import verdict
from server.pipeline.grounding import Grounding, field_values
from server.pipeline.questions import NeedsInput, changed, missing
from server.pipeline.slot_values import (
    canon,
    ends_intent,
    normal,
    pinned,
    reversible,
    same,
    valid_normal,
    valid_value,
)
from server.sessions import Change, SessionState, SessionStore, ToolSlots, scope_of
from server.task import NamedTool, Task, Turn


class SlotFilling:
    """The pipeline's slot layer, built once; `begin` gives each session request its turn."""

    def __init__(self, store: SessionStore | None, registry: ContractRegistry) -> None:
        self.store = store
        self.registry = registry

    async def begin(self, task: Task, caller: Caller) -> SlotTurn | None:
        """The slot work of a request in a session (None: not in one)."""
        session = task.options.session
        if session is None or self.store is None:
            return None
        scope = scope_of(caller.identity)
        loaded = await asyncio.to_thread(self.store.load, scope, session)
        return SlotTurn(self.store, self.registry, scope, session, loaded.state, task)


class SlotTurn:
    """One request's slots: what it found (expired, reset, confirmed), the pins the planner
    writes into each tool's grammar, the merge of each decoded call, the state it saves."""

    def __init__(self, store: SessionStore, registry: ContractRegistry, scope: str,
                 session: str, stored: SessionState, task: Task) -> None:
        self.store, self.registry = store, registry
        self.scope, self.session = scope, session
        self.now = store.now()
        self.fresh = fresh_user_texts(task.turns)
        self.digest = hashlib.sha256("\x1f".join(self.fresh).encode()).hexdigest()[:16]
        self.expired: dict[str, list[str]] = {}  # tool -> its fields dropped for age
        self.reset: dict[str, Any] | None = None
        self.confirmed: dict[str, list[Change]] = {}  # changes confirmed by this message
        self.changed: dict[str, list[Change]] = {}  # reversible changes made by this turn
        self.proposed: dict[str, tuple[Change, ...]] = {}  # waiting for the user now
        self.reset_asked = bool(task.options.reset_slots)
        self.state = self._start(stored, notes=True)
        self.task = self._forced(task)

    # -- before the decode ----------------------------------------------------------------
    @property
    def held_tools(self) -> set[str]:
        """Tools whose calls may turn into a question or change: a stream shows nothing of
        them before the checks."""
        return {n for n, s in self.state.tools.items() if s.values or s.pending}

    def narrow(self, name: str, schema: dict[str, Any], contract: Contract | None,
               written: dict[str, Any]) -> dict[str, Any]:
        """`written` (the schema the model writes to) with each filled field pinned, or
        opened to the values the user's newest message gives it."""
        slots = self.state.slots(name)
        props = written.get("properties")
        if slots is None or not slots.values or not isinstance(props, dict):
            return written
        out = copy.deepcopy(written)
        required = list(out.get("required") or ())
        for field, old in slots.values.items():
            if field not in props or not valid_value(schema, field, old):
                continue
            allowed = self._allowed(schema, contract, field, slots.values)
            if allowed is None:
                continue  # a reversible tool's free text: written freely
            out["properties"][field] = pinned(props[field], allowed)
            required.append(field)
        out["required"] = [n for n in out["properties"] if n in required]
        return out

    def _allowed(self, schema: dict[str, Any], contract: Contract | None, field: str,
                 filled: dict[str, Any]) -> list[Any] | None:
        old = filled[field]
        new = self._stated(schema, contract, field, filled)
        if new is None:  # free text: no message can say it changed
            return None if reversible(contract) else [old]
        return new or [old]

    def _stated(self, schema: dict[str, Any], contract: Contract | None, field: str,
                filled: dict[str, Any]) -> list[Any] | None:
        """The values other than the filled one the user's newest message gives `field`
        (None: a plain string, which any words could be)."""
        old = filled[field]
        found = self._said(schema, contract, field, filled)
        if found is None:
            return None
        out: list[Any] = []
        for value in found:
            if not same(value, old) and not any(same(value, o) for o in out) \
                    and valid_value(schema, field, value):
                out.append(value)
        return out

    def _said(self, schema: dict[str, Any], contract: Contract | None, field: str,
              filled: dict[str, Any]) -> list[Any] | None:
        """The values (normalized) the user's newest message gives `field`, less those that
        are another filled field's value (`filled`): "card 4417, I said" restates the card,
        it does not make 4417 the amount. None: a plain string."""
        found = field_values(schema, contract, field, self.fresh)
        if found is None:
            return None
        others = [v for f, v in filled.items() if f != field]
        values = [normal(contract, field, v) for v in found]
        return [v for v in values if not any(same(v, o) for o in others)]

    # -- after the decode -----------------------------------------------------------------
    def merge(self, name: str, arguments: dict[str, Any],
              written: dict[str, Any]) -> dict[str, Any] | NeedsInput:
        """A decoded call with the filled values it left out or nulled put back; a changed
        value of an irreversible tool held back behind a confirmation question."""
        slots = self.state.slots(name)
        if slots is None:
            return arguments
        contract = self.registry.get(name)
        merged = slots.filled_with(arguments)
        changes = [Change(f"/{f}", old, value) for f, old in slots.values.items()
                   if not same(value := normal(contract, f, merged[f]), old)]
        if reversible(contract):
            self.changed[name] = changes
            return merged
        waiting = {c.field: c for c in (*slots.pending, *changes)}
        if not waiting:
            return merged
        self.proposed[name] = tuple(waiting.values())
        kept = {**merged, **{c.name: c.old for c in waiting.values()}}
        about = Grounding(descriptions=_descriptions(written))
        return NeedsInput(name, tuple(changed(c.name, c.old, c.new, about)
                                      for c in waiting.values()), kept)

    async def settle(self, schemas: dict[str, dict[str, Any]], calls: tuple[Call, ...],
                     needs: dict[str, Any] | None) -> dict[str, Any]:
        """Save what this answer leaves in the slots; the `strictcall.slots` report.
        `schemas`: per tool, the schema the model wrote to (its fields are the slots)."""
        outcome = self._outcome(schemas, calls, needs)
        if outcome or self._started_something():
            self.state = await asyncio.to_thread(
                self.store.save, self.scope, self.session,
                lambda stored: self._apply(self._start(stored), outcome))
        turn_tool = next(iter(outcome), None) or self.state.intent
        return self._report(turn_tool, schemas, needs)

    def _outcome(self, schemas: dict[str, dict[str, Any]], calls: tuple[Call, ...],
                 needs: dict[str, Any] | None) -> dict[str, ToolSlots]:
        """Per tool this answer is about: its slots once the answer is given."""
        out: dict[str, ToolSlots] = {}
        for call in calls:
            out[call.name] = ToolSlots(self._kept(call.name, schemas, json.loads(
                call.arguments)), self.now)
        if needs is not None and needs["tool"] in schemas:
            tool = needs["tool"]
            earlier = self.state.slots(tool)
            values = {**(earlier.values if earlier else {}),
                      **self._kept(tool, schemas, needs.get("collected") or {})}
            asked = self.proposed.get(tool, ())
            out[tool] = ToolSlots(values, self.now, asked, self.digest if asked else "")
        return out

    def _kept(self, tool: str, schemas: dict[str, dict[str, Any]],
              values: dict[str, Any]) -> dict[str, Any]:
        """The values a slot keeps: the fields the model writes (not server-filled ones),
        given and valid each on its own, normalized."""
        schema = schemas.get(tool, {})
        props = schema.get("properties") or {}
        contract = self.registry.get(tool)
        out = {}
        for field, value in values.items():
            if field not in props or value is None:
                continue
            ok, value = valid_normal(contract, schema, field, value)
            if ok:
                out[field] = value
        return out

    def _apply(self, state: SessionState, outcome: dict[str, ToolSlots]) -> SessionState:
        for tool, slots in outcome.items():
            if ends_intent(self.registry.get(tool)):
                if state.intent not in (None, tool):
                    self.reset = {"why": "intent", "from": state.intent, "to": tool}
                    state = SessionState()
                state = replace(state, intent=tool)
            state = state.with_tool(tool, slots)
        return state

    # -- at the start of the turn ---------------------------------------------------------
    def _start(self, stored: SessionState, *, notes: bool = False) -> SessionState:
        """The stored state as this turn begins: reset if asked, expired slots dropped, the
        user's answers to confirmation questions applied. `notes`: record what happened
        (once; a save after a conflict runs this again on the newer state)."""
        state = stored
        if self.reset_asked:
            if notes and stored.tools:
                self.reset = {"why": "reset_slots", "tools": sorted(stored.tools)}
            state = SessionState()
        for tool, slots in stored.tools.items():
            if tool in state.tools and slots.expired(self.now, self.store.slot_ttl_s):
                if notes:
                    self.expired[tool] = sorted(slots.values)
                state = state.with_tool(tool, None)
        if state.intent not in state.tools:
            state = replace(state, intent=None)
        return self._answered(state, notes=notes)

    def _answered(self, state: SessionState, *, notes: bool) -> SessionState:
        """Each change waiting for the user, read against their newest message: confirmed
        (the new value is filled), declined or superseded (dropped: the filled value
        stays), or still waiting."""
        for tool, slots in list(state.tools.items()):
            if not slots.pending or slots.asked_by == self.digest:
                continue  # nothing waiting, or the turn that asked, sent again (a retry)
            contract = self.registry.get(tool)
            schema = contract.schema() if contract is not None else {}
            values, waiting = dict(slots.values), []
            for change in slots.pending:
                stated = [canon(v) for v in
                          self._said(schema, contract, change.name, slots.values) or ()]
                said = verdict(self.fresh, stated=stated, old=canon(change.old),
                               new=canon(change.new)) if self.fresh else "unanswered"
                if said == "confirmed":
                    values[change.name] = change.new
                    if notes:
                        self.confirmed.setdefault(tool, []).append(change)
                elif said == "unanswered":
                    waiting.append(change)
            state = state.with_tool(tool, ToolSlots(values, slots.touched, tuple(waiting),
                                                    slots.asked_by if waiting else ""))
        return state

    def _forced(self, task: Task) -> Task:
        """A confirmed change: the answer is the call it waited for (tool_choice names
        it), whatever the model would decide about the word "yes"."""
        tools = [t for t in self.confirmed if t in task.tool_names()]
        if not tools or task.tool_choice == "none":
            return task
        return replace(task, tool_choice=NamedTool(tools[0]))

    def _started_something(self) -> bool:
        return bool(self.reset or self.expired or self.confirmed) or any(
            s.pending for s in self.state.tools.values())

    # -- the report -----------------------------------------------------------------------
    def _report(self, tool: str | None, schemas: dict[str, dict[str, Any]],
                needs: dict[str, Any] | None) -> dict[str, Any]:
        """`strictcall.slots`: the session's slots for the tool this turn was about."""
        slots = self.state.slots(tool) if tool is not None else None
        report: dict[str, Any] = {"session": self.session, "tool": tool,
                                  "filled": dict(slots.values) if slots else {},
                                  "missing": self._missing(tool, schemas, needs),
                                  "changed": [c.as_dict() for c in
                                              [*self.confirmed.get(tool or "", []),
                                               *self.changed.get(tool or "", [])]],
                                  "confirm": [], "expired": self.expired,
                                  "reset": self.reset}
        if needs is not None and tool in self.proposed:
            questions = {c["field"]: c["question"] for c in needs.get("confirm") or ()}
            report["confirm"] = [{**c.as_dict(), "question": questions.get(c.field)}
                                 for c in self.proposed[tool]]
        if slots is not None:
            report["expires_at"] = round(slots.touched + self.store.slot_ttl_s, 3)
        return report

    def _missing(self, tool: str | None, schemas: dict[str, dict[str, Any]],
                 needs: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The fields still to give, with their questions: this answer's, or the required
        ones not filled yet."""
        if needs is not None and needs.get("tool") == tool:
            return list(needs.get("missing") or ())
        schema = schemas.get(tool or "")
        slots = self.state.slots(tool or "")
        if schema is None or slots is None:
            return []
        about = Grounding(descriptions=_descriptions(schema))
        return [{"field": q.field, "question": q.question} for q in
                (missing(f, about) for f in schema.get("required") or ()
                 if f not in slots.values)]


def fresh_user_texts(turns: tuple[Turn, ...]) -> list[str]:
    """What the user wrote since the last assistant turn: the only messages that may
    change a filled slot (or answer a confirmation question)."""
    last = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=-1)
    return [t.text for t in turns[last + 1:] if t.role == "user" and t.text]


def _descriptions(schema: dict[str, Any]) -> dict[str, str]:
    props = schema.get("properties") or {}
    return {n: p["description"] for n, p in props.items()
            if isinstance(p, dict) and isinstance(p.get("description"), str)}
