"""The fuzz test's own checks (wire_checks.py), on answers built by hand: a check that
passed everything would make the fuzz run prove nothing."""

from __future__ import annotations

import json

from server.errors import (
    ArgumentsInvalid,
    EngineFailure,
    InvalidRequest,
    OutputInvalid,
    RequestTimeout,
    Unavailable,
    problem_type,
)
from tests.server.api.wire_checks import (
    TOKEN_BOUND,
    bound_tokens,
    leak_problems,
    unnamed_parameter,
    wire_problems,
)

PROBLEM = {"content-type": "application/problem+json"}
ANTHROPIC = {"content-type": "application/json"}


def _answer(error, path: str = "/v1/chat/completions") -> tuple[int, dict, bytes]:
    anthropic = path == "/v1/messages"
    body = error.anthropic_error(path) if anthropic else error.problem(path)
    headers = {**(ANTHROPIC if anthropic else PROBLEM), **error.headers()}
    return error.status, headers, json.dumps(body).encode()


def test_the_servers_own_refusals_pass():
    for error in (InvalidRequest("no"), Unavailable("later"), RequestTimeout("slow")):
        for path in ("/v1/chat/completions", "/v1/messages"):
            status, headers, body = _answer(error, path)
            assert wire_problems(path, status, headers, body) == [], (error, path)


def test_an_engine_failure_is_a_finding():
    status, headers, body = _answer(EngineFailure("the engine failed"))
    assert "503 engine-failure" in wire_problems("/v1/chat/completions", status, headers,
                                                 body)[0]


def test_a_plain_500_a_bare_detail_and_a_missing_retry_after_are_findings():
    path = "/v1/chat/completions"
    assert wire_problems(path, 500, {"content-type": "text/plain"}, b"Internal Server Error")
    assert wire_problems(path, 422, {"content-type": "application/json"},
                         b'{"detail": [{"msg": "bad"}]}')
    status, headers, body = _answer(Unavailable("later"))
    assert wire_problems(path, status, {"content-type": headers["content-type"]}, body)


def test_the_anthropic_route_wants_its_own_shape():
    status, headers, body = _answer(InvalidRequest("no"), "/v1/chat/completions")
    assert wire_problems("/v1/messages", status, headers, body)  # problem+json there: wrong
    status, headers, body = _answer(InvalidRequest("no"), "/v1/messages")
    assert wire_problems("/v1/chat/completions", status, headers, body)


def test_successes_are_not_checked_but_streams_are():
    assert wire_problems("/v1/chat/completions", 200, {}, b"not even json") == []
    sse = {"content-type": "text/event-stream; charset=utf-8"}
    fine = b'data: {"choices": []}\n\ndata: [DONE]\n\n'
    assert wire_problems("/v1/chat/completions", 200, sse, fine) == []
    internal = json.dumps({"type": problem_type("internal-error")}).encode()
    broken = b"data: " + internal + b"\n\ndata: [DONE]\n\n"
    assert wire_problems("/v1/chat/completions", 200, sse, broken)


def test_token_budgets_are_lowered_and_odd_values_left_alone():
    body = {"max_tokens": 10_000, "max_output_tokens": 3, "max_completion_tokens": "9",
            "strictcall": {"reasoning_budget": 512}, "messages": []}
    assert bound_tokens(body) == {"max_tokens": TOKEN_BOUND, "max_output_tokens": 3,
                                  "max_completion_tokens": "9",
                                  "strictcall": {"reasoning_budget": 0}, "messages": []}
    assert bound_tokens([1, 2]) == [1, 2]
    assert bound_tokens({"max_tokens": True}) == {"max_tokens": True}


def test_a_traceback_or_a_server_path_in_an_error_is_a_finding():
    for leaked in ('Traceback (most recent call last):', 'File "/srv/app.py", line 3',
                   "at /project/cpp/json_schema_converter.cc:974", "/usr/lib/site-packages/x"):
        body = json.dumps({"detail": f"no: {leaked}"}).encode()
        assert leak_problems(400, body), leaked
    fine = json.dumps({"detail": "send ../../etc/passwd? no: 'a/b' at '/properties/a~1b'"})
    assert leak_problems(400, fine.encode()) == []
    # a success is the model's text, a stream's error events are checked
    assert leak_problems(200, b'{"content": "see /srv/app.py"}') == []
    assert leak_problems(200, b'data: {"error": "File \\"/srv/a.py\\", line 3"}\n\n')


def test_a_400_must_name_its_parameter():
    for path in ("/v1/chat/completions", "/v1/messages"):
        status, _, body = _answer(InvalidRequest("no", param="tools[0]"), path)
        assert unnamed_parameter(status, body) == [], path
        status, _, body = _answer(InvalidRequest("no"), path)
        assert unnamed_parameter(status, body), path
    status, _, body = _answer(ArgumentsInvalid("no"))
    assert unnamed_parameter(status, body)  # arguments that break a contract: which one?
    status, _, body = _answer(OutputInvalid("the model's output"))
    assert unnamed_parameter(status, body) == []  # about the output, not the request
