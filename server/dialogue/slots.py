"""Slot filling across turns: a session's valid values per tool (server/sessions), collected
while a call waits for what the user has not said yet, and used by the next decode.

A filled field is *pinned* in the grammar the model writes to (its node becomes exactly its
value), so no decode can empty it or change it unseen; it moves only where the user's
newest message states another value *for it* (server/dialogue/pins.py).
A change to a reversible tool (a read; a write of low or medium risk) replaces the old
value and `strictcall.slots.changed` says so; to an irreversible tool (a write of high or
critical risk) the call is held back and the answer is a question that lists only the
fields that changed, with both values. The user's next message decides
(server/dialogue/replies.py), never the model.

Tool results fill empty fields (through grounding) but never change a filled one: that is
the user's to say. A completed call ends its intent: the tool's slots are dropped, and the
next call of it starts from the conversation (server/dialogue/grounding.py looks first at
what came after the last call). A completed call of an irreversible tool is kept as the
session's ledger (`ToolSlots.filed`): a new call of the tool that shares an identifying
value with it for each it changes (the user correcting the amount of a dispute just opened)
is held behind the same question as a change, listing only the fields that differ, and a
yes files it once; a call with the same values is never filed twice; one that changes more
than it shares is a new intent. Slots also expire `--slot-ttl-s` after the last turn about
their tool, are dropped by `strictcall.reset_slots` and by a message that opens another
event ("One more: ...", before the first was filed: the grounding of the new one starts
from that message, and what it refers back to), and are reset when a question about
another write tool moves the intent."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from contracts import ContractRegistry
from grammars import Narrowing
from server.dialogue.evidence import Evidence, Piece
from server.dialogue.grounding import Grounding
from server.dialogue.naming import (
    NEW_INTENT,
    OPENS_NEW_INTENT,
)
from server.dialogue.pins import Pins
from server.dialogue.questions import NeedsInput, Question, Wording
from server.dialogue.replies import verdict
from server.dialogue.values import (
    canon,
    ends_intent,
    normal,
    reversible,
    same,
    valid_normal,
)
from server.sessions import Change, SessionState, SessionStore, ToolSlots
from server.task import NamedTool, Task, Turn


class SlotTurn:
    """One request's slots: what it found (expired, reset, confirmed), the pins each tool's
    grammar gets, the merge of each decoded call, the state it saves."""

    def __init__(self, store: SessionStore, registry: ContractRegistry, scope: str,
                 session: str, stored: SessionState, task: Task, evidence: Evidence) -> None:
        self.store, self.registry = store, registry
        self.scope, self.session = scope, session
        self.now = store.now()
        self.today = evidence.today
        last = max((i for i, t in enumerate(task.turns) if t.role == "assistant"), default=-1)
        self.fresh = evidence.after(last)  # what the user wrote since the last answer
        self.fresh = replace(self.fresh, pieces=tuple(p for p in self.fresh.pieces
                                                      if p.source == "user"))
        self.digest = hashlib.sha256("\x1f".join(self.fresh.texts).encode()).hexdigest()[:16]
        self.expired: dict[str, list[str]] = {}  # tool -> its fields dropped for age
        self.reset: dict[str, Any] | None = None
        self.confirmed: dict[str, list[Change]] = {}  # changes confirmed by this message
        self.changed: dict[str, list[Change]] = {}  # reversible changes made by this turn
        self.proposed: dict[str, tuple[Change, ...]] = {}  # waiting for the user now
        self.loose: dict[str, dict[str, list[Any]]] = {}  # tool -> field -> values offered
        self.ended: list[str] = []  # tools whose call this answer made
        self.repeated: set[str] = set()  # tools whose filed call this answer repeated
        # Each client tool's schema as this request sent it (its x-strictcall-kind/-risk).
        self.schemas: dict[str, dict[str, Any]] = {
            t.name: t.parameters for t in task.tools if isinstance(t.parameters, dict)}
        self.reset_asked = bool(task.options.reset_slots)
        self.state = self._start(stored, notes=True)
        self.task = self._forced(task)

    # -- before the decode ----------------------------------------------------------------
    @property
    def held_tools(self) -> set[str]:
        """Tools whose calls may turn into a question or change: a stream shows nothing of
        them before the checks."""
        return {n for n, s in self.state.tools.items() if s.values or s.pending}

    def narrowings(self, name: str, schema: dict[str, Any], grounding: Grounding
                   ) -> list[Narrowing]:
        """Each filled field pinned, or opened to the values the newest message gives it
        (server/dialogue/pins.py)."""
        self.schemas[name] = schema
        slots = self.state.slots(name)
        props = schema.get("properties")
        if slots is None or not slots.values or slots.filed or not isinstance(props, dict):
            return []  # (a filed call's values pin nothing: a new call starts afresh)
        pins = Pins(self.registry, name, schema, self.fresh, self.today, grounding.marks)
        out = pins.narrowings(slots.values)
        if pins.loose:
            self.loose.setdefault(name, {}).update(pins.loose)
        return out

    # -- after the decode -----------------------------------------------------------------
    def merge(self, name: str, arguments: dict[str, Any], wording: Wording,
              identifying: Sequence[str] = ()) -> dict[str, Any] | NeedsInput:
        """A decoded call with the filled values it left out or nulled put back; a value
        written into two fields asked about; a changed value of an irreversible tool held
        back behind a confirmation question; a new call of an irreversible tool that shares
        `identifying` values with one this session filed held back the same way."""
        slots = self.state.slots(name)
        if slots is None:
            return arguments
        contract = self.registry.get(name)
        if slots.filed:
            return self._after_filed(name, slots, arguments, wording, identifying)
        merged = slots.filled_with(arguments)
        changes = [Change(f"/{f}", old, value) for f, old in slots.values.items()
                   if not same(value := normal(contract, f, merged[f], today=self.today),
                               old)]
        doubled = self._doubled(name, changes, merged)
        if doubled:
            kept = {**merged, **{c.name: c.old for cs in doubled for c in cs}}
            return NeedsInput(name, tuple(wording.choose(cs[0].new, [(c.name,) for c in cs])
                                          for cs in doubled), kept, wording.language)
        if reversible(contract, self.schemas.get(name)):
            self.changed[name] = changes
            return merged
        waiting = {c.field: c for c in (*slots.pending, *changes)}
        if not waiting:
            return merged
        self.proposed[name] = tuple(waiting.values())
        kept = {**merged, **{c.name: c.old for c in waiting.values()}}
        return NeedsInput(name, tuple(wording.changed((c.name,), c.old, c.new)
                                      for c in waiting.values()), kept, wording.language)

    def _after_filed(self, name: str, filed: ToolSlots, arguments: dict[str, Any],
                     wording: Wording, identifying: Sequence[str]) -> dict[str, Any] | NeedsInput:
        """A new call of a tool whose call this session filed (the ledger). Sharing fewer
        of the filed call's identifying values than it changes (none, or "another one, same
        card" with a new date and amount): another event, a new intent, made as it is.
        Sharing as many or more: a correction of the filed one ("sorry, the amount was
        1 300"), held until the user says yes to the fields that changed (listed alone,
        each with both values); the same values all over again: a repeat, never filed twice
        (the answer says so and asks what differs)."""
        contract = self.registry.get(name)
        given = {f: normal(contract, f, arguments[f], today=self.today)
                 for f in identifying if f in filed.values and arguments.get(f) is not None}
        shared = sum(same(v, filed.values[f]) for f, v in given.items())
        if not shared or shared < len(given) - shared:
            return arguments  # ("another one, same card": the date and amount are new)
        changes = [Change(f"/{f}", old, value) for f, old in filed.values.items()
                   if arguments.get(f) is not None
                   and not same(value := normal(contract, f, arguments[f], today=self.today),
                                old)]
        if changes and any(NEW_INTENT.search(t) for t in self.fresh.texts):
            return arguments  # the user says it is another one ("и ещё одна: ...")
        # A correction changes what the user's newest words state; what the model changed
        # besides (a reason it chose anew) stays as filed.
        schema = contract.schema() if contract is not None else self.schemas.get(name, {})
        pins = Pins(self.registry, name, schema, self.fresh, self.today)
        changes = [c for c in changes if pins.stated(c.name, filed.values, own=True)]
        kept = {**arguments, **filed.values}
        if not changes:
            self.repeated.add(name)
            return NeedsInput(name, (wording.filed_again(filed.values),), kept,
                              wording.language)
        self.proposed[name] = tuple(changes)
        return NeedsInput(name, tuple(wording.changed((c.name,), c.old, c.new)
                                      for c in changes), kept, wording.language)

    def _doubled(self, tool: str, changes: list[Change],
                 merged: dict[str, Any]) -> list[list[Change]]:
        """Changes that wrote one loose value (the message named no field) into several
        fields: the user is asked which one they meant."""
        loose = self.loose.get(tool, {})
        by_value: dict[str, list[Change]] = {}
        for change in changes:
            if any(same(merged[change.name], v) for v in loose.get(change.name, ())):
                by_value.setdefault(json.dumps(canon(merged[change.name]), default=str),
                                    []).append(change)
        return [cs for cs in by_value.values() if len(cs) > 1]

    async def settle(self, schemas: dict[str, dict[str, Any]], calls: Sequence[Any],
                     needs: dict[str, Any] | None) -> dict[str, Any]:
        """Save what this answer leaves in the slots; the `strictcall.slots` report.
        `schemas`: per tool, its arguments' schema (its fields are the slots); `calls`:
        the answer's calls (each `.name`, `.arguments`)."""
        self.schemas = {**schemas, **self.schemas}
        outcome = self._outcome(schemas, calls, needs)
        made = {c.name: self._kept(c.name, schemas, json.loads(c.arguments)) for c in calls}
        if outcome or self._started_something():
            self.state = await asyncio.to_thread(
                self.store.save, self.scope, self.session,
                lambda stored: self._apply(self._start(stored), outcome, made))
        turn_tool = next(iter(outcome), None) or self.state.intent
        return self._report(turn_tool, schemas, needs, made)

    def _outcome(self, schemas: dict[str, dict[str, Any]], calls: Sequence[Any],
                 needs: dict[str, Any] | None) -> dict[str, ToolSlots | None]:
        """Per tool this answer is about: its slots once the answer is given (None: a
        call was made, the intent is complete)."""
        out: dict[str, ToolSlots | None] = {call.name: None for call in calls}
        if needs is not None and needs["tool"] in schemas:
            tool = needs["tool"]
            earlier = self.state.slots(tool)
            asked = self.proposed.get(tool, ())
            if earlier is not None and earlier.filed and (asked or tool in self.repeated):
                # A correction of the filed call waits for a yes; a repeat changes nothing.
                out[tool] = replace(earlier, touched=self.now, pending=asked,
                                    asked_by=self.digest if asked else "")
                return out
            kept = earlier.values if earlier is not None and not earlier.filed else {}
            values = {**kept, **self._kept(tool, schemas, needs.get("collected") or {})}
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
            ok, value = valid_normal(contract, schema, field, value, today=self.today)
            if ok:
                out[field] = value
        return out

    def _apply(self, state: SessionState, outcome: dict[str, ToolSlots | None],
               made: dict[str, dict[str, Any]]) -> SessionState:
        for tool, slots in outcome.items():
            contract, schema = self.registry.get(tool), self.schemas.get(tool)
            moves = ends_intent(contract, schema)
            if moves and state.intent not in (None, tool):
                self.reset = {"why": "intent", "from": state.intent, "to": tool}
                state = SessionState()
            if slots is None:  # called: its slots end with the intent
                if tool not in self.ended:
                    self.ended.append(tool)
                # An irreversible call stays in the ledger: what a correction is held to.
                filed = None if reversible(contract, schema) \
                    else ToolSlots(made.get(tool, {}), self.now, filed=True)
                state = state.with_tool(tool, filed)
                if state.intent == tool:
                    state = replace(state, intent=None)
                continue
            if moves:
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
        opened = [t for t, s in state.tools.items() if not s.filed] \
            if self.fresh.texts and OPENS_NEW_INTENT.search(self.fresh.texts[0]) else []
        if opened:  # "One more: ...": an unfinished intent's values stay behind
            if notes:
                self.reset = {"why": "new_intent", "tools": sorted(opened)}
            for tool in opened:
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
            schema = contract.schema() if contract is not None else self.schemas.get(tool, {})
            values, waiting = dict(slots.values), []
            pins = Pins(self.registry, tool, schema, self.fresh, self.today)
            for change in slots.pending:
                stated = [canon(normal(contract, change.name, f.value, today=self.today))
                          for f in pins.stated(change.name, slots.values, own=True) or ()]
                said = verdict(self.fresh.texts, stated=stated, old=canon(change.old),
                               new=canon(change.new)) if self.fresh.texts else "unanswered"
                if said == "confirmed":
                    values[change.name] = change.new
                    if notes:
                        self.confirmed.setdefault(tool, []).append(change)
                elif said == "unanswered":
                    waiting.append(change)
            # A confirmed correction of a filed call reopens it: its values pinned, the
            # call made once more with the change (then filed again).
            confirmed = tool in self.confirmed or values != slots.values
            state = state.with_tool(tool, ToolSlots(values, slots.touched, tuple(waiting),
                                                    slots.asked_by if waiting else "",
                                                    filed=slots.filed and not confirmed))
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
                needs: dict[str, Any] | None, made: dict[str, dict[str, Any]]
                ) -> dict[str, Any]:
        """`strictcall.slots`: the session's slots for the tool this turn was about (for a
        call: the values it was made with, and `ended`)."""
        slots = self.state.slots(tool) if tool is not None else None
        ended = tool in self.ended
        filled = made.get(tool or "", {}) if ended else dict(slots.values) if slots else {}
        report: dict[str, Any] = {"session": self.session, "tool": tool, "filled": filled,
                                  "missing": self._missing(tool, schemas, needs),
                                  "changed": [c.as_dict() for c in
                                              [*self.confirmed.get(tool or "", []),
                                               *self.changed.get(tool or "", [])]],
                                  "confirm": [], "expired": self.expired,
                                  "reset": self.reset, "ended": ended}
        if needs is not None and tool in self.proposed:
            questions = {c["field"]: c["question"] for c in needs.get("confirm") or ()}
            report["confirm"] = [{**c.as_dict(), "question": questions.get(c.field)}
                                 for c in self.proposed[tool]]
        if slots is not None:
            report["expires_at"] = round(slots.touched + self.store.slot_ttl_s, 3)
        return report

    def _missing(self, tool: str | None, schemas: dict[str, dict[str, Any]],
                 needs: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The fields still to give, with their questions: this answer's (a call's: none)."""
        if needs is not None and needs.get("tool") == tool:
            return list(needs.get("missing") or ())
        return []


def fresh_user_texts(turns: tuple[Turn, ...]) -> list[str]:
    """What the user wrote since the last assistant turn: the only messages that may
    change a filled slot (or answer a confirmation question)."""
    last = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=-1)
    return [t.text for t in turns[last + 1:] if t.role == "user" and t.text]


__all__ = ["Piece", "Question", "SlotTurn", "fresh_user_texts"]
