"""A write whose replica died mid-call (SIGKILL, a lost node) leaves its key `running`
forever: nobody is left to store its outcome. Once the key has been running longer than
the call could (its time limit and a grace), it is settled as `side_effect_unknown`: the
call may have acted, so it never runs again with that key until someone checks the system
it writes to and resolves the key. Until then, a retry is the retryable 409 "in progress"."""

from __future__ import annotations

from contracts import Contract
from server.errors import SIDE_EFFECT_UNKNOWN
from server.execution.runner import Execution, problem
from server.execution.store import IdempotencyStore, Scope, Stored

# Past its time limit a call's runner stores the outcome within moments; a key running
# this much longer has lost its replica.
STALE_GRACE_S = 5.0


def stale_after_s(contract: Contract) -> float:
    """How long a call of `contract` can be running (writes are tried once)."""
    timeout = contract.execution.timeout_s if contract.execution is not None else 0.0
    return timeout + STALE_GRACE_S


def settle_if_stale(store: IdempotencyStore, scope: Scope, contract: Contract) -> Stored | None:
    """The key's record settled as side_effect_unknown if it is stale; else None."""
    lost = Execution("side_effect_unknown", problem=problem(
        SIDE_EFFECT_UNKNOWN,
        f"the write {scope.tool!r} was still running when the server running it stopped "
        "answering; it may have acted, so it will not run again with this idempotency key "
        "until someone checks the system it writes to and resolves the key "
        "(POST /v1/tools/{name}/executions/{key}/resolve)"))
    return store.settle_stale(scope, older_than_s=stale_after_s(contract),
                              outcome=lost.as_dict())
