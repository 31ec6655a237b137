"""Dialogues: a scenario's conversation turn by turn against any OpenAI-compatible server,
chained by `previous_response_id` (Responses API) or by a `strictcall.session` with the
client keeping the messages (Chat Completions), each turn scored against its expected
outcome (a question about given fields, a call with given values, a confirmation).

Measured per dialogue, and summed per tool (server/eval/report.py):
- turns to a complete call: the turn whose answer is the first call to the tool;
- questions asked, and how many by meaning: a question that names a field by its bare
  identifier ("provide original_operation_id": a name with an underscore, verbatim) is not;
- values lost to overwrites: a value the server showed (in a call, or as collected for a
  question) that a later turn shows as missing or null (up to a turn the scenario marks
  `new_intent`, where the user starts another call of the tool);
- silent changes: a value a later turn shows different, with no change or confirmation
  reported for it (`strictcall.slots.changed` / `confirm`; other servers report none);
- per field, against the turn's `gold` (each field's value as the user has given it so far,
  written by hand in the scenario file, never computed by the server under test):
  correct; asked although given; asked while missing (right); invented (a value where
  nobody gave one); wrong (another value than the one given); changed (a value that moved
  while the user changed nothing); left out (a given value the answer does not show: an
  optional field written null); not shown (nothing given, nothing shown); confirming (a
  confirmation question about a value the user just changed).
A server without StrictCall's extension is scored on what its answers show: a question is
any answer without a call, a confirmation too."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from server.eval.judge import asked_fields, dated, judge_fields
from server.eval.runner import Params, offered_tools, same
from server.eval.scenarios import Dialogue, DialogueTurn, ScenarioFile


@dataclass(frozen=True)
class Reply:
    calls: list[tuple[str, Any]]
    text: str
    extension: dict[str, Any]
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class TurnOutcome:
    turn: int
    expected: str
    got: str  # call | question | confirm | error
    passed: bool
    field_errors: list[str]
    questions: int  # how many the answer asked (their text is not kept: it may hold what
    named: list[str]  # the user said); the fields one of them named by identifier
    seconds: float
    error: str | None = None
    gold: dict[str, str] = field(default_factory=dict)  # field -> its GOLD_MEASURES one


@dataclass(frozen=True)
class DialogueOutcome:
    dialogue: str
    tool: str
    tool_class: str
    api: str
    language: str
    turns_sha: str  # the user's text only as a hash
    turns: list[TurnOutcome]
    turns_to_call: int | None
    questions: int
    by_meaning: int
    lost: list[str] = field(default_factory=list)  # "turn 3: /amount"
    silent: list[str] = field(default_factory=list)  # "turn 3: /amount 1200.50 -> 1300"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_dialogues(client: httpx.Client, spec: ScenarioFile, params: Params,
                  tools: dict[str, dict[str, Any]]) -> list[DialogueOutcome]:
    offered = offered_tools(spec.tools, tools)
    fields = _field_names(tools.get(spec.tool))
    return [_run(client, spec, d, params, offered, fields) for d in spec.dialogues]


def _run(client: httpx.Client, spec: ScenarioFile, dialogue: Dialogue, params: Params,
         offered: list[dict[str, Any]], fields: list[str]) -> DialogueOutcome:
    talk = (_Responses if dialogue.api == "responses" else _Chat)(
        client, spec, dialogue, params, offered)
    scored = _Scoring(spec.tool, fields)
    for n, turn in enumerate(dialogue.turns, start=1):
        scored.add(n, turn, talk.send(turn))
    text = json.dumps([t.model_dump(exclude={"expect"}) for t in dialogue.turns],
                      ensure_ascii=False)
    return DialogueOutcome(dialogue.id, spec.tool, spec.tool_class, dialogue.api,
                           dialogue.language,
                           hashlib.sha256(text.encode()).hexdigest()[:12], scored.turns,
                           scored.first_call, scored.asked, scored.by_meaning, scored.lost,
                           scored.silent)


class _Scoring:
    """The turns so far, and the values the server has shown for the tool."""

    def __init__(self, tool: str, fields: list[str]) -> None:
        self.tool, self.fields = tool, fields
        self.turns: list[TurnOutcome] = []
        self.known: dict[str, Any] = {}
        self.first_call: int | None = None
        self.asked = self.by_meaning = 0
        self.lost: list[str] = []
        self.silent: list[str] = []
        self.previous: tuple[dict[str, Any], dict[str, Any]] = ({}, {})  # (gold, shown)

    def add(self, n: int, turn: DialogueTurn, reply: Reply) -> None:
        got = _kind(reply, self.tool)
        questions = _questions(reply) if got in ("question", "confirm") else []
        named = sorted({f for q in questions for f in _named_fields(q, self.fields)})
        self.asked += len(questions)
        self.by_meaning += sum(not _named_fields(q, self.fields) for q in questions)
        if got == "call" and self.first_call is None:
            self.first_call = n
        passed, errors = _judge(turn, got, reply, self.tool)
        shown = _shown(reply, self.tool, got)
        if shown is not None and self.fields:  # the fields a model writes, not the server's
            shown = {k: v for k, v in shown.items() if k in self.fields}
        if turn.new_intent:  # the user starts another call: nothing before carries over
            self.known = {}
        changed_by_user = {k for k, v in (turn.gold or {}).items()
                           if not same(dated(v), self.previous[0].get(k, dated(v)))}
        self._follow(n, shown, _reported(reply) | {f"/{k}" for k in changed_by_user})
        gold = self._gold(turn, reply, shown) if turn.gold is not None else {}
        self.turns.append(TurnOutcome(n, turn.expect.kind, got, passed, errors,
                                      len(questions), named, round(reply.seconds, 4),
                                      reply.error, gold))

    def _gold(self, turn: DialogueTurn, reply: Reply,
              shown: dict[str, Any] | None) -> dict[str, str]:
        """Each gold field's measure in this turn (see the module's docstring)."""
        assert turn.gold is not None
        gold = {k: dated(v) for k, v in turn.gold.items()}
        asked, confirming = asked_fields(reply.extension)
        before_gold, before_shown = self.previous
        out = judge_fields(gold, shown or {}, asked=asked, confirming=confirming,
                           before_gold=before_gold, before_shown=before_shown)
        self.previous = (gold, {**before_shown, **{k: v for k, v in (shown or {}).items()
                                                   if v is not None}})
        return out

    def _follow(self, n: int, shown: dict[str, Any] | None, reported: set[str]) -> None:
        if shown is None:
            return
        for name, value in self.known.items():
            now = shown.get(name)
            if now is None:
                self.lost.append(f"turn {n}: /{name}")
            elif not same(now, value) and f"/{name}" not in reported:
                self.silent.append(f"turn {n}: /{name} {value} -> {now}")
        self.known.update({k: v for k, v in shown.items() if v is not None})


def _kind(reply: Reply, tool: str) -> str:
    if reply.error is not None:
        return "error"
    if any(name == tool for name, _ in reply.calls):
        return "call"
    slots = reply.extension.get("slots") or {}
    needs = reply.extension.get("needs_input") or {}
    return "confirm" if slots.get("confirm") or needs.get("confirm") else "question"


def _judge(turn: DialogueTurn, got: str, reply: Reply, tool: str) -> tuple[bool, list[str]]:
    want = turn.expect
    needs = reply.extension.get("needs_input") or {}
    if want.call is not None:
        if got != "call":
            return False, []
        args = next(a for name, a in reply.calls if name == tool)
        errors = _field_errors(want.call, args if isinstance(args, dict) else {})
        return not errors, errors
    if want.question is not None:
        asked = {m["field"].lstrip("/") for m in needs.get("missing") or ()}
        return got == "question" and (not needs or set(want.question) <= asked), []
    assert want.confirm is not None
    confirming = {c["field"].lstrip("/") for c in (reply.extension.get("slots") or {})
                  .get("confirm") or needs.get("confirm") or ()}
    plain = not reply.extension and got == "question"  # another server: no call will do
    return plain or (got == "confirm" and set(want.confirm) <= confirming), []


def _field_errors(want: dict[str, Any], args: dict[str, Any]) -> list[str]:
    wrong = []
    for name, expected in want.items():
        options = expected if isinstance(expected, list) else [expected]
        if name not in args or not any(same(args[name], dated(o)) for o in options):
            wrong.append(f"/{name}")
    return sorted(wrong)


def _shown(reply: Reply, tool: str, got: str) -> dict[str, Any] | None:
    """The tool's values as this answer shows them (None: it shows none)."""
    if got == "call":
        args = next(a for name, a in reply.calls if name == tool)
        return args if isinstance(args, dict) else {}
    slots = reply.extension.get("slots") or {}
    if slots.get("tool") == tool:
        return dict(slots.get("filled") or {})
    needs = reply.extension.get("needs_input") or {}
    return dict(needs.get("collected") or {}) if needs.get("tool") == tool else None


def _reported(reply: Reply) -> set[str]:
    slots = reply.extension.get("slots") or {}
    return {c["field"] for c in [*(slots.get("changed") or ()), *(slots.get("confirm") or ())]}


def _questions(reply: Reply) -> list[str]:
    needs = reply.extension.get("needs_input") or {}
    asked = [m["question"] for m in [*(needs.get("missing") or ()),
                                     *(needs.get("confirm") or ())] if m.get("question")]
    return asked or ([reply.text] if reply.text.strip() else [])


def _named_fields(question: str, fields: list[str]) -> list[str]:
    """The fields a question names by identifier (snake_case, verbatim): it asks by name,
    not by meaning."""
    return [f for f in fields if "_" in f and re.search(rf"\b{re.escape(f)}\b", question)]


def _field_names(tool: dict[str, Any] | None) -> list[str]:
    params = ((tool or {}).get("function") or {}).get("parameters") or {}
    return list(params.get("properties") or {})


class _Responses:
    """Turns chained by previous_response_id."""

    def __init__(self, client: httpx.Client, spec: ScenarioFile, dialogue: Dialogue,
                 params: Params, offered: list[dict[str, Any]]) -> None:
        self.client, self.spec, self.params = client, spec, params
        self.tools = [{"type": "function", **t["function"]} for t in offered]
        self.choice: Any = {"type": "function", "name": dialogue.tool_choice} \
            if dialogue.tool_choice not in ("auto", "required", "none") else dialogue.tool_choice
        self.options = dialogue.options
        self.previous: str | None = None

    def send(self, turn: DialogueTurn) -> Reply:
        items: list[dict[str, Any]] = []
        if turn.tool_result is not None:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            items += [{"type": "function_call", "call_id": call_id,
                       "name": turn.tool_result.name,
                       "arguments": json.dumps(turn.tool_result.arguments)},
                      {"type": "function_call_output", "call_id": call_id,
                       "output": turn.tool_result.output}]
        if turn.user is not None:
            items.append({"role": "user", "content": turn.user})
        body = {"model": self.params.model, "input": items, "tools": self.tools,
                "tool_choice": self.choice, "previous_response_id": self.previous,
                **_sampling(self.params, "max_output_tokens"), **self.params.extra_body}
        if self.options:
            body["strictcall"] = {**body.get("strictcall", {}), **self.options}
        answer, reply = _post(self.client, "/responses", body, self.spec.headers)
        if answer is not None:
            self.previous = answer["id"]
            calls = [(i["name"], _json(i["arguments"])) for i in answer.get("output", ())
                     if i.get("type") == "function_call"]
            text = "".join(p.get("text", "") for i in answer.get("output", ())
                           if i.get("type") == "message" for p in i.get("content", ()))
            reply = Reply(calls, text, answer.get("strictcall") or {}, reply.seconds)
        return reply


class _Chat:
    """Turns in a `strictcall.session`, the client keeping the messages."""

    def __init__(self, client: httpx.Client, spec: ScenarioFile, dialogue: Dialogue,
                 params: Params, offered: list[dict[str, Any]]) -> None:
        self.client, self.spec, self.params, self.tools = client, spec, params, offered
        self.choice: Any = {"type": "function", "function": {"name": dialogue.tool_choice}} \
            if dialogue.tool_choice not in ("auto", "required", "none") else dialogue.tool_choice
        self.options = {"session": f"eval_{uuid.uuid4().hex}", **dialogue.options}
        self.messages: list[dict[str, Any]] = []

    def send(self, turn: DialogueTurn) -> Reply:
        if turn.tool_result is not None:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            self.messages += [{"role": "assistant", "tool_calls": [{
                "id": call_id, "type": "function", "function": {
                    "name": turn.tool_result.name,
                    "arguments": json.dumps(turn.tool_result.arguments)}}]},
                {"role": "tool", "tool_call_id": call_id, "content": turn.tool_result.output}]
        if turn.user is not None:
            self.messages.append({"role": "user", "content": turn.user})
        body = {"model": self.params.model, "messages": self.messages, "tools": self.tools,
                "tool_choice": self.choice, **_sampling(self.params, "max_tokens"),
                **self.params.extra_body}
        body["strictcall"] = {**body.get("strictcall", {}), **self.options}
        answer, reply = _post(self.client, "/chat/completions", body, self.spec.headers)
        if answer is not None:
            message = answer["choices"][0]["message"]
            self.messages.append({k: v for k, v in message.items()
                                  if k in ("role", "content", "tool_calls") and v})
            calls = [(c["function"]["name"], _json(c["function"]["arguments"]))
                     for c in message.get("tool_calls") or ()]
            reply = Reply(calls, message.get("content") or "", answer.get("strictcall") or {},
                          reply.seconds)
        return reply


def _sampling(params: Params, max_name: str) -> dict[str, Any]:
    return {k: v for k, v in (("temperature", params.temperature), ("top_p", params.top_p),
                              (max_name, params.max_tokens)) if v is not None}


def _post(client: httpx.Client, path: str, body: dict[str, Any],
          headers: dict[str, str]) -> tuple[dict[str, Any] | None, Reply]:
    started = time.perf_counter()
    try:
        resp = client.post(path, json=body, headers=headers)
    except httpx.HTTPError as exc:
        return None, Reply([], "", {}, time.perf_counter() - started,
                           f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - started
    if resp.status_code >= 400:
        return None, Reply([], "", {}, seconds, f"HTTP {resp.status_code}: {resp.text[:200]}")
    return resp.json(), Reply([], "", {}, seconds)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
