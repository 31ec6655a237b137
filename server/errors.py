"""Service errors: one small hierarchy, rendered by one handler as RFC 9457 problem details
that also carry OpenAI's `error` envelope, so the `openai` SDK raises a readable exception."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A problem's `type` names its explanation in the docs: reference/problems/#<slug> (that page
# is generated from this module), so a client that follows it lands there. The address is
# fixed, not a setting: a type URI is the problem's identity, which clients compare, and it
# must not change from one deployment to the next. mkdocs.yml's site_url is the same address
# (tests/docsgen keeps the two alike); the slugs never change.
DOCS_URL = "https://strictcall.example/"
PROBLEMS_URL = DOCS_URL + "reference/problems/"


def problem_type(slug: str) -> str:
    """The RFC 9457 `type` of the problem `slug`: its section of the problems page."""
    return f"{PROBLEMS_URL}#{slug}"


def problem_slug(type_uri: str) -> str:
    """The slug a `type` URI names (what a client matches on)."""
    return type_uri.rpartition("#")[2]


class ServiceError(Exception):
    """An error this server did not expect: a bug. The response carries the request id
    (`X-Request-Id`); the server log has the traceback under it. Report it with that id."""

    status: int = 500
    slug: str = "internal-error"
    title: str = "Internal server error"
    openai_type: str = "server_error"
    retryable: bool = False
    retry_after_s: int = 1  # sent (body and Retry-After header) only when retryable

    def __init__(self, detail: str, *, param: str | None = None, code: str | None = None,
                 extensions: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.param = param
        self.code = code
        self.extensions = extensions or {}

    def problem(self, instance: str) -> dict[str, Any]:
        return {
            "type": problem_type(self.slug),
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
            "retryable": self.retryable,
            **({"retry_after": self.retry_after_s} if self.retryable else {}),
            **self.extensions,
            "error": {"message": self.detail, "type": self.openai_type,
                      "param": self.param, "code": self.code},
        }

    def headers(self) -> dict[str, str]:
        """Response headers the status calls for: when to retry, how to authenticate."""
        return {"Retry-After": str(self.retry_after_s)} if self.retryable else {}

    def anthropic_error(self, instance: str) -> dict[str, Any]:
        """Anthropic's error body (the Messages API); the problem details ride along under
        `strictcall`, since Anthropic's closed set of types cannot say "contract violated"."""
        problem = self.problem(instance)
        del problem["error"]
        if self.param:  # OpenAI's `error` had it; Anthropic's error object has no place
            problem["param"] = self.param
        fallback = "api_error" if self.status >= 500 else "invalid_request_error"
        return {"type": "error",
                "error": {"type": ANTHROPIC_TYPES.get(self.status, fallback),
                          "message": self.detail},
                "strictcall": problem}


# Anthropic's error type for each HTTP status it documents (its "overloaded" is 529; the
# same condition is 503 here, and keeps its status).
ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                   403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                   429: "rate_limit_error", 500: "api_error", 503: "overloaded_error",
                   504: "timeout_error",
                   529: "overloaded_error"}


class InvalidRequest(ServiceError):
    """The request is wrong: a field, a schema, a value over a limit, a missing header. The
    detail and `error.param` name the field (and the JSON Pointer inside a schema); fix the
    request, sending it again unchanged fails the same way."""

    status, slug, title, openai_type = 400, "invalid-request", "Invalid request", \
        "invalid_request_error"


class UnsupportedFeature(InvalidRequest):
    """A field or value this server refuses by name instead of ignoring it (`n > 1`,
    `logprobs`, a hosted tool, ...). The detail says what to send instead."""

    slug, title = "unsupported", "Not supported"


class ModelNotFound(ServiceError):
    """The request names a model this server does not serve: `GET /v1/models` lists the
    one it does."""

    status, slug, title, openai_type = 404, "model-not-found", "Model not found", \
        "invalid_request_error"


class RouteNotFound(ServiceError):
    """No such route, or no such contract (a tool the caller may not see answers the same)."""

    status, slug, title, openai_type = 404, "not-found", "Not found", "invalid_request_error"


class OutputInvalid(ServiceError):
    """Decoded output failed post-decode validation: never returned as if it were valid."""

    status, slug, title, openai_type = 422, "output-invalid", "Output failed validation", \
        "invalid_output_error"


class EngineFailure(ServiceError):
    """The engine failed while decoding this request, or a step hung past the watchdog
    (`--step-timeout-s`). Retry after `Retry-After`; another replica can answer, and
    `/health` says when this one serves again."""

    status, slug, title, retryable = 503, "engine-failure", "Engine failure", True


class ContractViolation(ServiceError):
    """A contract call still broke its rules after the repair attempts: never a silent pass."""

    status, slug, title, openai_type = 422, "contract-violation", \
        "Tool call violates its contract", "invalid_output_error"

    def __init__(self, detail: str, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.extensions.setdefault("owner_action_required", True)


class Unauthenticated(ServiceError):
    """No API key, or one this server does not know (the key itself is never repeated)."""

    status, slug, title, openai_type = 401, "unauthenticated", "Authentication required", \
        "authentication_error"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="strictcall"'}


class Forbidden(ServiceError):
    """A known key whose roles do not cover the route."""

    status, slug, title, openai_type = 403, "forbidden", "Not allowed for this key", \
        "permission_error"


class BodyTooLarge(ServiceError):
    """The body is over `--max-body-bytes`; it was refused before it was parsed. Send less."""

    status, slug, title, openai_type = 413, "body-too-large", "Request body too large", \
        "invalid_request_error"


class BodyTimeout(ServiceError):
    """The request body did not arrive whole within `--request-read-timeout-s`: a client
    that sends slowly holds no place for ever. Send the body at once."""

    status, slug, title, openai_type = 408, "body-timeout", "Request body too slow", \
        "invalid_request_error"


class Overloaded(ServiceError):
    """Every engine slot and queue place is taken: shed now, not an unbounded wait."""

    status, slug, title, openai_type, retryable = 429, "overloaded", "Server overloaded", \
        "rate_limit_error", True


class RateLimited(ServiceError):
    """An API key over its requests or tokens per minute (server/ratelimit.py): the same
    shape as `Overloaded`, with the wait its bucket needs to refill."""

    status, slug, title, openai_type, retryable = 429, "rate-limited", "Rate limit exceeded", \
        "rate_limit_error", True

    def __init__(self, detail: str, *, retry_after_s: int, **kwargs: Any) -> None:
        super().__init__(detail, code="rate_limit_exceeded", **kwargs)
        self.retry_after_s = retry_after_s


class Unavailable(ServiceError):
    """The engine is down, or the server is shutting down: another replica (or this one,
    later) can answer."""

    status, slug, title, retryable = 503, "unavailable", "Service unavailable", True


class StateUnavailable(Unavailable):
    """The state store (`--state-url`: the database that keeps idempotency keys, sessions and
    stored responses) did not answer in time, failed, or is full. Nothing that needed it was
    done: retry after `Retry-After`, on this replica or another."""

    slug, title = "state-unavailable", "State store unavailable"

    def __init__(self, detail: str, **kwargs: Any) -> None:
        super().__init__(detail, code="state_unavailable", **kwargs)
        self.retry_after_s = 2


class RequestTimeout(ServiceError):
    """The request ran past the server's time limit and was cancelled."""

    status, slug, title, retryable = 504, "request-timeout", "Request time limit exceeded", True


class ArgumentsInvalid(ServiceError):
    """Arguments sent to run a tool break its contract: the handler was never called."""

    status, slug, title, openai_type = 422, "arguments-invalid", \
        "Arguments violate the tool's contract", "invalid_request_error"


class Conflict(ServiceError):
    """The request collides with what an idempotency key already recorded: the same key with
    other arguments. Use a new key for a new call."""

    status, slug, title, openai_type = 409, "conflict", "Conflict", "invalid_request_error"


class InProgress(Conflict):
    """A call with the same idempotency key is running: ask again later."""

    slug, title, retryable = "in-progress", "Call in progress", True


@dataclass(frozen=True)
class OutcomeProblem:
    """A problem that describes how a tool's run ended (`POST /v1/tools/{name}/invoke`'s
    `problem` member, server/execution): not an error response but part of a 200, 202 or
    409 answer. `about` is its explanation on the problems page."""

    slug: str
    title: str
    about: str

    @property
    def type(self) -> str:
        return problem_type(self.slug)


TOOL_TIMED_OUT = OutcomeProblem(
    "tool-timed-out", "Tool timed out", "A read did not answer within its contract's "
    "`timeout_s` on any attempt (`outcome: timed_out`). Retrying later may succeed.")
TOOL_FAILED = OutcomeProblem(
    "tool-failed", "Tool failed", "The handler raised `contracts.ToolFailed` (it did not "
    "act), or its HTTP endpoint refused the call with a 4xx or could not be reached "
    "(`outcome: failed`). The detail is the handler's own words.")
TOOL_ERROR = OutcomeProblem(
    "tool-error", "Tool error", "A read's handler raised an unexpected error on every "
    "attempt (`outcome: failed`); the audit log has the error, the response does not.")
TOOL_PARTIAL = OutcomeProblem(
    "tool-partial", "Tool did part of the work", "The handler returned "
    "`contracts.Partial(result, detail)` (HTTP: `{\"status\": \"partial\"}`): `result` holds "
    "what was done, the detail what was not (`outcome: partial`).")
SIDE_EFFECT_UNKNOWN = OutcomeProblem(
    "side-effect-unknown", "Side effect unknown", "A write timed out, crashed, answered a 5xx "
    "or its replica stopped after it may have acted (`outcome: side_effect_unknown`). The "
    "idempotency key refuses to run again until someone checks the system it writes to and "
    "settles the key: `POST /v1/tools/{name}/executions/{key}/resolve`.")
TOOL_OUTPUT_INVALID = OutcomeProblem(
    "tool-output-invalid", "Tool result invalid", "The handler's result does not fit the "
    "contract's output model; the result is withheld. For a read the outcome is `failed` "
    "(retryable); for a write, which acted, `side_effect_unknown`.")
APPROVAL_REQUIRED = OutcomeProblem(
    "approval-required", "Approval required", "The tool policy wants a human approval before "
    "this call runs (a 202, or `strictcall.calls[].approval_required` on a decoded call). A "
    "caller the policy allows invokes the same arguments with the same idempotency key.")
OUTCOME_PROBLEMS = (TOOL_TIMED_OUT, TOOL_FAILED, TOOL_ERROR, TOOL_PARTIAL, SIDE_EFFECT_UNKNOWN,
                    TOOL_OUTPUT_INVALID, APPROVAL_REQUIRED)
