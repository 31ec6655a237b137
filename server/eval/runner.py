"""Runs scenarios against any OpenAI-compatible server and scores each answer."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from server.eval.scenarios import Expectation, Scenario, ScenarioFile


@dataclass(frozen=True)
class Params:
    """Generation parameters sent with every case (recorded with the run)."""

    model: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = 256
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    scenario: str
    tool: str
    tool_class: str
    kind: str
    user_sha: str              # the user's text is not written anywhere, only its hash
    expected_tool: str | None
    called: list[str]
    tool_name_correct: bool
    correct: bool
    unneeded_call: bool
    field_errors: list[str]    # JSON Pointers of the fields that missed
    seconds: float
    error: str | None = None
    # The calls as returned, normalized: each argument's value as a short hash (the run
    # holds no user text), so two runs compare per scenario and per field.
    calls: list[dict[str, Any]] = field(default_factory=list)
    # Hard-fail classes, each a failure whatever the rates: see HARD_FAILS.
    hard_fails: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def offered_tools(names: list[str], tools: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The file's tools as a request offers them: each one's definition where it is known,
    else its name alone (a registered contract's)."""
    return [tools.get(name) or {"type": "function", "function": {"name": name}}
            for name in names]


# What fails a model change outright, whatever its rates: a call that breaks its tool's
# schema, a value the user never gave, a write called twice in one answer, and a question
# where the user had given everything.
HARD_FAILS = ("invalid_call", "invented_value", "write_called_twice",
              "question_where_all_given")


def run_file(client: httpx.Client, spec: ScenarioFile, params: Params,
             tools: dict[str, dict[str, Any]], *,
             runtime: dict[str, list[str]] | None = None) -> list[Outcome]:
    """`runtime`: per tool, the argument names the server adds to a call (not the
    model's), left out when a call is checked against the tool's schema."""
    offered = offered_tools(spec.tools, tools)
    return [_run_one(client, spec, case, params, offered, runtime or {})
            for case in spec.scenarios]


def _run_one(client: httpx.Client, spec: ScenarioFile, case: Scenario, params: Params,
             offered: list[dict[str, Any]], runtime: dict[str, list[str]]) -> Outcome:
    body: dict[str, Any] = {"model": params.model, "tools": offered,
                            "messages": [{"role": "user", "content": case.user}],
                            **{k: v for k, v in (("temperature", params.temperature),
                                                 ("top_p", params.top_p),
                                                 ("max_tokens", params.max_tokens))
                               if v is not None}, **params.extra_body}
    started = time.perf_counter()
    error, calls, asked = None, [], False
    try:
        resp = client.post("/chat/completions", json=body, headers=spec.headers)
        if resp.status_code >= 400:
            error = f"HTTP {resp.status_code}: {_detail(resp)}"
        else:
            message = resp.json()["choices"][0]["message"]
            calls = [(c["function"]["name"], _without(
                _arguments(c["function"]["arguments"]), runtime.get(c["function"]["name"])))
                     for c in message.get("tool_calls") or []]
            asked = not calls and bool((message.get("content") or "").strip())
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in offered
               if isinstance(t["function"].get("parameters"), dict)}
    return score(spec, case, calls, seconds=seconds, error=error, schemas=schemas,
                 asked=asked)


def hard_fails(spec: ScenarioFile, case: Scenario, calls: list[tuple[str, Any]], *,
               schemas: dict[str, dict[str, Any]], asked: bool) -> list[str]:
    """The HARD_FAILS classes this answer falls in. Every returned call is checked against
    its tool's schema, not only the fields the scenario expects."""
    from grammars import validator_for

    out = set()
    for name, arguments in calls:
        schema = schemas.get(name)
        if not isinstance(arguments, dict) or schema is not None and \
                not validator_for(schema).is_valid(arguments):
            out.add("invalid_call")
        if isinstance(arguments, dict) and any(
                arguments.get(k) not in (None, "") for k in case.expect.absent):
            out.add("invented_value")
    names = [name for name, _ in calls]
    if spec.tool_class == "write" and len(names) != len(set(names)):
        out.add("write_called_twice")
    if case.kind == "positive" and case.expect.tool is not None and asked \
            and not case.expect.absent:
        out.add("question_where_all_given")
    return sorted(out)


def score(spec: ScenarioFile, case: Scenario, calls: list[tuple[str, Any]], *,
          seconds: float = 0.0, error: str | None = None,
          schemas: dict[str, dict[str, Any]] | None = None, asked: bool = False) -> Outcome:
    want = case.expect
    names = [name for name, _ in calls]
    if want.tool is None:
        name_ok, errors = not calls, []
    else:
        first = next((args for name, args in calls if name == want.tool), None)
        name_ok = first is not None
        errors = _field_errors(want, first) if name_ok else []
    correct = error is None and name_ok and not errors and \
        (want.tool is None or names.count(want.tool) == len(names))
    return Outcome(case.id, spec.tool, spec.tool_class, case.kind,
                   hashlib.sha256(case.user.encode()).hexdigest()[:12], want.tool, names,
                   name_ok and error is None, correct,
                   bool(calls) and want.tool is None, errors, round(seconds, 4), error,
                   [normalized(n, a) for n, a in calls],
                   hard_fails(spec, case, calls, schemas=schemas or {}, asked=asked))


def _field_errors(want: Expectation, args: Any) -> list[str]:
    args = args if isinstance(args, dict) else {}
    wrong = [k for k, v in want.fields.items() if k not in args or not same(args[k], v)]
    wrong += [k for k, vs in want.one_of.items()
              if k not in args or not any(same(args[k], v) for v in vs)]
    wrong += [k for k in want.present if k not in args]
    return sorted(f"/{k}" for k in set(wrong))


def same(got: Any, want: Any) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return " ".join(got.lower().split()) == " ".join(want.lower().split())
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) \
            and not isinstance(got, bool):
        return float(got) == float(want)
    return bool(got == want)


def normalized(name: str, arguments: Any) -> dict[str, Any]:
    """A call as a run keeps it: its tool, and each argument's value hashed (the same value
    gives the same hash in every run, the text itself is never written)."""
    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]
    return {"name": name, "arguments": {k: digest(v) for k, v in sorted(arguments.items())}
            if isinstance(arguments, dict) else digest(arguments)}


def _without(arguments: Any, names: list[str] | None) -> Any:
    """A call's arguments less the server's runtime fields (what the model wrote)."""
    if not names or not isinstance(arguments, dict):
        return arguments
    return {k: v for k, v in arguments.items() if k not in names}


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    return str(body.get("detail") or body.get("error", {}).get("message") or body)[:200]
