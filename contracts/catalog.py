"""What the catalog knows about a tool besides its schema: who owns it, whether it reads or
writes, how risky it is, where it is in its life, and, optionally, how to run it.

    @tool(name="open_urgent_ticket", description="...", owner="support-platform",
          kind="write", risk="high", version="2", handler=open_ticket, timeout_s=5)

The server (server/execution) reads this: a `retired` tool is never offered, a `deprecated`
one is offered with a warning, a `write` call gets an idempotency key and is never retried
blindly. A handler is only a reference here; nothing in `contracts` runs it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["read", "write", "orchestration"]
Risk = Literal["low", "medium", "high", "critical"]
Lifecycle = Literal["active", "deprecated", "retired"]
KINDS: tuple[Kind, ...] = ("read", "write", "orchestration")
RISKS: tuple[Risk, ...] = ("low", "medium", "high", "critical")
LIFECYCLES: tuple[Lifecycle, ...] = ("active", "deprecated", "retired")


@dataclass(frozen=True)
class CatalogEntry:
    """A tool's catalog metadata. The default kind is `write`: a tool whose effects nobody
    declared is treated as one that may change something (keyed, never retried blindly)."""

    owner: str = "unowned"
    kind: Kind = "write"
    risk: Risk = "medium"
    lifecycle: Lifecycle = "active"
    version: str = "1"

    def as_dict(self) -> dict[str, str]:
        return {"owner": self.owner, "kind": self.kind, "risk": self.risk,
                "lifecycle": self.lifecycle, "version": self.version}


@dataclass(frozen=True)
class HttpHandler:
    """Run a call by POSTing `{"tool", "arguments", "idempotency_key"}` as JSON to `url`
    (the key also as the `Idempotency-Key` header). 2xx: succeeded, the JSON body is the
    result (`{"status": "partial", ...}`: partial); 4xx: failed, nothing was done; 5xx or no
    answer: the endpoint may have acted (a read is retried, a write is side_effect_unknown)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolContext:
    """What a Python handler gets beside the validated arguments."""

    tool: str
    idempotency_key: str | None  # set for write tools
    tenant: str | None
    roles: tuple[str, ...]
    attempt: int  # 1 for the first try; reads may be retried


class ToolFailed(Exception):
    """Raise in a handler when the call failed *without* acting (a missing record, a closed
    account): the outcome is `failed` with this detail. Any other exception from a write
    handler means it may have acted: `side_effect_unknown`."""

    def __init__(self, detail: str, *, retryable: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable


@dataclass(frozen=True)
class Partial:
    """Return from a handler that did part of the work: the outcome is `partial`."""

    result: Any
    detail: str


PythonHandler = Callable[[dict[str, Any], ToolContext], Any]  # may be async
Handler = PythonHandler | HttpHandler


@dataclass(frozen=True)
class ExecutionSpec:
    """How the server runs a tool: its handler, a time limit per attempt, and how many
    times a read may be retried after a timeout or an error (writes: never)."""

    handler: Handler
    timeout_s: float = 10.0
    retries: int = 2
