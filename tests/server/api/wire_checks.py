"""What every answer of the server must look like, whatever a fuzzer sent: the checks the
OpenAPI fuzz test (test_openapi_fuzz.py) applies to each response. Kept apart from the test
so their own unit tests (test_wire_checks.py) run in the fast tier."""

from __future__ import annotations

import json
import re
from typing import Any

PROBLEM = "application/problem+json"
# Routes that answer errors in Anthropic's shape (server/api/errors.py, ANTHROPIC_ROUTES).
ANTHROPIC_ROUTES = ("/v1/messages",)
# Bounds for generated bodies, so a fuzzed generation request decodes a few tokens, not the
# context: a fuzzer hunts for crashes in parsing and planning, not in long decodes.
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
TOKEN_BOUND = 8
# The 5xx a client may get by design, each with Retry-After: shedding and shutdown (503
# unavailable) and the request time limit (504). An engine failure is a 503 too, but a
# request that makes the engine fail is a bug the fuzzer is here to find.
DELIBERATE = ("unavailable", "request-timeout")
# What a stream's final error event says when a bug, not the request, ended it.
STREAM_BUGS = ("internal-error", "engine-failure")


def wire_problems(path: str, status: int, headers: dict[str, str], body: bytes) -> list[str]:
    """Why this response breaks the server's error contract; [] when it keeps it.

    5xx: only a shed (503 unavailable) or a request time limit (504), with Retry-After, is
    deliberate; anything else is a bug. 4xx: problem+json with OpenAI's `error` object, or
    Anthropic's error body on its routes; never a bare FastAPI `detail`. A stream (200):
    no error event from a bug."""
    lowered = {k.lower(): v for k, v in headers.items()}
    media = lowered.get("content-type", "").split(";")[0].strip()
    if status < 400:
        return _stream_problems(body) if media == "text/event-stream" else []
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return [f"{status} body is not JSON: {body[:120]!r}"]
    if not isinstance(parsed, dict):
        return [f"{status} body is not a JSON object"]
    anthropic = any(path == r or path.startswith(r + "/") for r in ANTHROPIC_ROUTES)
    found = _anthropic_problems(status, media, parsed) if anthropic \
        else _problem_json_problems(status, media, parsed)
    if status >= 500:
        problem = parsed.get("strictcall", {}) if anthropic else parsed
        kind = str(problem.get("type", "")).rpartition("#")[2] if isinstance(problem, dict) \
            else ""
        if status not in (503, 504) or kind not in DELIBERATE or "retry-after" not in lowered:
            found.insert(0, f"{status} {kind or 'untyped'} (a 5xx that is no shed or time "
                            "limit, or lacks Retry-After)")
    return found


def _stream_problems(body: bytes) -> list[str]:
    """A stream that started, then met a bug, ends with an error event naming it (each API
    in its own event shape; the problem's slug or code is in all of them)."""
    return [f"stream ended in an {marker} event" for marker in STREAM_BUGS
            if marker.encode() in body]


def _problem_json_problems(status: int, media: str, body: dict[str, Any]) -> list[str]:
    found = []
    if media != PROBLEM:
        found.append(f"{status} is {media or 'untyped'}, not {PROBLEM}")
    if body.get("status") != status:
        found.append(f"{status} problem says status {body.get('status')!r}")
    for field in ("type", "title", "detail"):
        if not isinstance(body.get(field), str):
            found.append(f"{status} problem lacks a string {field!r}")
    error = body.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        found.append(f"{status} problem lacks OpenAI's error.message")
    return found


def _anthropic_problems(status: int, media: str, body: dict[str, Any]) -> list[str]:
    found = []
    if media != "application/json":
        found.append(f"{status} on an Anthropic route is {media or 'untyped'}")
    error = body.get("error")
    if body.get("type") != "error" or not isinstance(error, dict) \
            or not isinstance(error.get("type"), str) \
            or not isinstance(error.get("message"), str):
        found.append(f"{status} is not Anthropic's error body")
    return found


def bound_tokens(body: Any) -> Any:
    """`body` with every token budget it names lowered to TOKEN_BOUND (reasoning budgets to
    0), so a generated request decodes a few tokens. Values that are not positive integers
    are left alone: they are what a fuzzer is for."""
    if not isinstance(body, dict):
        return body
    out = dict(body)
    for name in TOKEN_FIELDS:
        value = out.get(name)
        if _positive_int(value) and value > TOKEN_BOUND:
            out[name] = TOKEN_BOUND
    options = out.get("strictcall")
    if isinstance(options, dict) and _positive_int(options.get("reasoning_budget")):
        out["strictcall"] = {**options, "reasoning_budget": 0}
    return out


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# A traceback, a source location or a path into the server's files: never in an answer.
_LEAK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]*\", line [0-9]+"
                   r"|site-packages|(?:/[\w.+-]+)+/[\w+-]+\.(?:py|pyc|cc|cpp|h|hpp|so|rs)\b")
# The 4xx that answer a request's content, so must say which part: 400, and a 422 for
# arguments that break a contract (other 422s are about the model's output, not the
# request; 404, 409, 413 and 429 are about routes, keys, sizes and rates).
_NAMED = {400: None, 422: "arguments-invalid"}


def leak_problems(status: int, body: bytes) -> list[str]:
    """A traceback or a server file path in an error answer (or in a stream's error
    event). Successful answers carry the model's text, which may say anything."""
    text = body.decode("utf-8", "replace")
    if status < 400:  # a stream: only its error events
        text = "\n".join(line for line in text.splitlines() if "error" in line)
    found = _LEAK.search(text)
    return [f"{status} body leaks {found.group(0)[:80]!r}"] if found else []


def unnamed_parameter(status: int, body: bytes) -> list[str]:
    """A 400 (or a 422 arguments-invalid) that names no parameter: OpenAI's `error.param`,
    or on Anthropic's routes the problem's `param` (under `strictcall`)."""
    if status not in _NAMED:
        return []
    try:
        parsed = json.loads(body)
    except ValueError:
        return []  # wire_problems says so
    if not isinstance(parsed, dict):
        return []
    anthropic = isinstance(parsed.get("strictcall"), dict)
    problem = parsed["strictcall"] if anthropic else parsed
    kind = str(problem.get("type", "")).rpartition("#")[2]
    if _NAMED[status] is not None and kind != _NAMED[status]:
        return []
    error = parsed.get("error") if isinstance(parsed.get("error"), dict) else {}
    param = problem.get("param") if anthropic else error.get("param")
    if isinstance(param, str) and param.strip():
        return []
    return [f"{status} {kind} names no parameter: {str(error.get('message'))[:100]!r}"]
