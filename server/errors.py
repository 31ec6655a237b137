"""Service errors: one small hierarchy, rendered by one handler as RFC 9457 problem details
that also carry OpenAI's `error` envelope, so the `openai` SDK raises a readable exception."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
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
            "type": f"urn:strictcall:problem:{self.slug}",
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
    status, slug, title, openai_type = 400, "invalid-request", "Invalid request", \
        "invalid_request_error"


class UnsupportedFeature(InvalidRequest):
    slug, title = "unsupported", "Not supported"


class ModelNotFound(ServiceError):
    status, slug, title, openai_type = 404, "model-not-found", "Model not found", \
        "invalid_request_error"


class RouteNotFound(ServiceError):
    status, slug, title, openai_type = 404, "not-found", "Not found", "invalid_request_error"


class OutputInvalid(ServiceError):
    """Decoded output failed post-decode validation: never returned as if it were valid."""

    status, slug, title, openai_type = 422, "output-invalid", "Output failed validation", \
        "invalid_output_error"


class EngineFailure(ServiceError):
    status, slug, title, retryable = 503, "engine-failure", "Engine failure", True


class ContractViolation(ServiceError):
    """A contract call still broke its rules after the repair attempts: never a silent pass."""

    status, slug, title, openai_type = 422, "contract-violation", \
        "Tool call violates its contract", "invalid_output_error"

    def __init__(self, detail: str, **kwargs) -> None:
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
    status, slug, title, openai_type = 413, "body-too-large", "Request body too large", \
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

    def __init__(self, detail: str, *, retry_after_s: int, **kwargs) -> None:
        super().__init__(detail, code="rate_limit_exceeded", **kwargs)
        self.retry_after_s = retry_after_s


class Unavailable(ServiceError):
    """The engine is down, or the server is shutting down: another replica (or this one,
    later) can answer."""

    status, slug, title, retryable = 503, "unavailable", "Service unavailable", True


class RequestTimeout(ServiceError):
    """The request ran past the server's time limit and was cancelled."""

    status, slug, title, retryable = 504, "request-timeout", "Request time limit exceeded", True


class ArgumentsInvalid(ServiceError):
    """Arguments sent to run a tool break its contract: the handler was never called."""

    status, slug, title, openai_type = 422, "arguments-invalid", \
        "Arguments violate the tool's contract", "invalid_request_error"


class Conflict(ServiceError):
    """The request collides with what an idempotency key already recorded."""

    status, slug, title, openai_type = 409, "conflict", "Conflict", "invalid_request_error"


class InProgress(Conflict):
    """A call with the same idempotency key is running: ask again later."""

    slug, title, retryable = "in-progress", "Call in progress", True
