"""Approvals bound to what runs. A call the policy puts under `approval_required` is stored
as an approval: its id, the tool, the exact arguments (their fingerprint), the idempotency
key, who asked and when it expires (`--approval-ttl-s`). It runs only:

- when a caller the policy allows for the tool approves it (POST /v1/approvals/{id}/approve):
  exactly the stored arguments under the stored key, once; or
- when such a caller invokes the tool with the same arguments and key (the approval is used).

Other arguments under the approval's key are refused (409 `approval_arguments_differ`), as
are an approval revoked (POST /v1/approvals/{id}/revoke), expired or already used. Each
step is an audit record (server/execution/service.py). Approvals are kept in the state
store (namespace `approvals`), scoped by the owner of the idempotency keys: another tenant
cannot see or approve one."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from server.errors import Conflict, RouteNotFound
from server.state import StateStore
from server.state.records import VersionConflict

NAMESPACE = "approvals"
DEFAULT_TTL_S = 86400.0
State = Literal["pending", "used", "revoked"]


@dataclass(frozen=True)
class Approval:
    value: dict[str, Any]
    version: int

    @property
    def id(self) -> str:
        return str(self.value["id"])

    @property
    def state(self) -> State:
        state: State = self.value["state"]
        return state

    def public(self, *, now: float) -> dict[str, Any]:
        """What a caller is shown (the arguments as the audit log keeps them: redacted)."""
        shown = {k: self.value[k] for k in ("id", "tool", "idempotency_key", "fields",
                                            "requested_by", "created_at", "expires_at")}
        state = "expired" if self.state == "pending" and now >= self.value["expires_at"] \
            else self.state
        return {**shown, "state": state}


class Approvals:
    def __init__(self, state: StateStore, *, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.state, self.ttl_s = state, ttl_s

    @staticmethod
    def id_of(owner: str | None, tool: str, key: str) -> str:
        digest = hashlib.sha256("\x1f".join((owner or "", tool, key)).encode()).hexdigest()
        return f"apr_{digest[:32]}"

    def request(self, *, owner: str | None, tool: str, key: str, arguments: dict[str, Any],
                fingerprint: str, fields: dict[str, Any], requested_by: dict[str, Any]
                ) -> Approval:
        """The approval for this call: a new one, or the one already asked for with the
        same arguments (409 for other arguments under its key)."""
        now = self.state.now()
        ident = self.id_of(owner, tool, key)
        value = {"id": ident, "owner": owner, "tool": tool, "idempotency_key": key,
                 "arguments": arguments, "fingerprint": fingerprint, "fields": fields,
                 "requested_by": requested_by, "created_at": round(now, 3),
                 "expires_at": round(now + self.ttl_s, 3), "state": "pending"}
        found = self.state.create(NAMESPACE, ident, value, ttl_s=self.ttl_s * 2)
        if found is None:
            return Approval(value, 1)
        approval = Approval(found.value, found.version)
        if approval.value["fingerprint"] != fingerprint:
            raise _differs(approval)
        return approval

    def pending_for(self, owner: str | None, tool: str, key: str) -> Approval | None:
        found = self.state.get(NAMESPACE, self.id_of(owner, tool, key))
        return Approval(found.value, found.version) if found is not None else None

    def get(self, ident: str, owner: str | None) -> Approval:
        found = self.state.get(NAMESPACE, ident) if ident.startswith("apr_") else None
        if found is None or found.value.get("owner") != owner:
            raise RouteNotFound(f"no approval {ident!r} for this caller")
        return Approval(found.value, found.version)

    def use(self, approval: Approval, fingerprint: str) -> Approval:
        """Mark a pending, unexpired approval used by a run of exactly its arguments (once:
        a second use, a revoked or expired one, other arguments: 409)."""
        if approval.value["fingerprint"] != fingerprint:
            raise _differs(approval)
        return self._move(approval, "used")

    def revoke(self, approval: Approval) -> Approval:
        return self._move(approval, "revoked")

    def _move(self, approval: Approval, to: State) -> Approval:
        now = self.state.now()
        if approval.state != "pending":
            raise Conflict(f"approval {approval.id} is {approval.state}: it can run no call; "
                           "ask for a new one", code=f"approval_{approval.state}")
        if now >= approval.value["expires_at"]:
            raise Conflict(f"approval {approval.id} expired; ask for a new one",
                           code="approval_expired")
        value = {**approval.value, "state": to, f"{to}_at": round(now, 3)}
        try:
            record = self.state.put(NAMESPACE, approval.id, value, version=approval.version,
                                    ttl_s=self.ttl_s * 2)
        except VersionConflict:
            raise Conflict(f"approval {approval.id} changed meanwhile (used or revoked by "
                           "another request); read it again", code="approval_changed") from None
        return Approval(record.value, record.version)


def _differs(approval: Approval) -> Conflict:
    return Conflict(f"approval {approval.id} was asked for other arguments under idempotency "
                    f"key {approval.value['idempotency_key']!r}: only those run "
                    f"({sorted(approval.value['fields'])}); use a new key for another call",
                    param="arguments", code="approval_arguments_differ")
