"""`ToolService`: runs a call of a registered contract that declares a handler.

    POST /v1/tools/{name}/invoke  {"arguments": {...}, "idempotency_key": "idem_..."}

In order: the policy (hidden or retired: 404 as an unknown tool; deny: 403, outcome
`denied`), the handler (none: 400), the runtime fields (the server's, never the client's),
validation against the contract (a 422, the handler never called), approval (the policy
says `approval_required`: 202, outcome `approval_required`, nothing run), then for writes
the idempotency key (required; a key seen before returns its first outcome, `replayed`),
and the run itself (server/execution/runner.py), once per key (server/execution/keyed.py).
Every step is a trace event, and the outcome an audit record."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from contracts import Contract, ContractRegistry, FromHeader, Generated, ToolContext
from server.errors import (
    APPROVAL_REQUIRED,
    ArgumentsInvalid,
    Conflict,
    Forbidden,
    InProgress,
    InvalidRequest,
    RouteNotFound,
    ServiceError,
)
from server.execution.approvals import Approvals
from server.execution.journal import Entry
from server.execution.keyed import Claim, KeyedRuns
from server.execution.policy import Principal, ToolPolicy, Verdict
from server.execution.runner import Execution, Runner, unknown_outcome
from server.execution.runtime import contract_runtime, with_call_key
from server.execution.store import Scope, Stored
from server.execution.tracing import RequestTrace, Tracing
from server.identity import Caller

log = logging.getLogger("strictcall.execution")


@dataclass(frozen=True)
class Invoked:
    status: int  # 200 run (or replayed), 202 waiting for approval
    body: dict[str, Any]


class ToolService:
    def __init__(self, registry: ContractRegistry, policy: ToolPolicy, *,
                 runs: KeyedRuns, runner: Runner, tracing: Tracing,
                 audit: Any = None, approvals: Approvals | None = None) -> None:
        self.registry, self.policy, self.runs = registry, policy, runs
        self.runner, self.tracing, self.audit = runner, tracing, audit
        self.approvals = approvals or Approvals(runs.state)
        runs.on_refused = self._late_refused

    async def invoke(self, name: str, arguments: dict[str, Any], key: str | None,
                     caller: Caller) -> Invoked:
        trace = self.tracing.start("strictcall.tool.invoke", request_id=caller.request_id,
                                  tool=name)
        principal = self.policy.principal(caller)
        try:
            done = await self._invoke(name, arguments, key, caller, principal, trace)
        except ServiceError as exc:
            trace.event("rejected", tool=name, status=exc.status, detail=exc.detail[:300])
            trace.end(error=exc.slug)
            raise
        trace.event("executed", tool=name, outcome=done.body["outcome"],
                    attempts=done.body["attempts"], replayed=done.body["replayed"])
        trace.end()
        return done

    async def _invoke(self, name: str, arguments: dict[str, Any], key: str | None,
                      caller: Caller, principal: Principal, trace: RequestTrace) -> Invoked:
        contract, verdict = self.known(name, principal)
        trace.event("policy_decision", tool=name, decision=verdict.decision, rule=verdict.rule)
        if verdict.decision == "deny":
            self._record(caller, contract, None, Execution("denied"), key, replayed=False)
            raise Forbidden(f"the policy denies tool {name!r} to this caller (tenant "
                            f"{principal.tenant!r}, roles {list(principal.roles)})",
                            code="tool_denied", extensions={"outcome": "denied"})
        if contract.execution is None:
            raise InvalidRequest(f"tool {name!r} has no handler on this server: StrictCall "
                                 "returns its calls, and your code runs them",
                                 code="no_handler")
        write = contract.catalog.kind == "write"
        if write and key is None:
            raise InvalidRequest(f"{name!r} is a write tool: send the idempotency_key that "
                                 "came with its call (strictcall.calls[].idempotency_key), or "
                                 "your own, so that a retry cannot act twice",
                                 param="idempotency_key", code="idempotency_key_required")
        valid = self._validated(contract, arguments, key if write else None, caller)
        trace.event("validated", tool=name)
        owner, fingerprint = owner_of(principal, caller), _fingerprint(valid, contract)
        bound = key or f"read_{fingerprint[:32]}"  # a read's approval: by its arguments
        if verdict.decision == "approval_required":
            fields = _approval(verdict, valid)["fields"]
            approval = await self.runs.state.run(
                self.approvals.request, owner=owner, tool=name, key=bound,
                arguments=valid, fingerprint=fingerprint,
                fields=contract.redact(fields) if fields else {},
                requested_by=_who(principal))
            shown = approval.public(now=time.time())
            waiting = Execution("approval_required",
                                problem={**_approval(verdict, valid), "approval": shown})
            self._record(caller, contract, valid, waiting, key, replayed=False)
            self._write({"event": "approval_requested", "tool": name, **shown}, caller)
            return Invoked(202, {**self._body(name, waiting, key, replayed=False),
                                 "approval": shown})
        # An allowed caller running a call an approval waits for: exactly its arguments.
        waiting_for = await self.runs.state.run(self.approvals.pending_for, owner, name, bound)
        if waiting_for is not None and waiting_for.state != "used":
            used = await self.runs.state.run(self.approvals.use, waiting_for, fingerprint)
            self._write({"event": "approval_used", "tool": name,
                         **used.public(now=time.time())}, caller)
        return await self._execute(contract, valid, key if write else None, caller, principal)

    async def approval(self, ident: str, action: str, caller: Caller) -> Invoked:
        """GET an approval, or approve it (run exactly its arguments, once) or revoke it.
        Approving needs a caller the policy allows for the tool; revoking, one that sees
        it. Another owner's approval is unknown (404)."""
        principal = self.policy.principal(caller)
        approvals = self.approvals
        found = await self.runs.state.run(approvals.get, ident, owner_of(principal, caller))
        contract, verdict = self.known(found.value["tool"], principal)
        if action == "get":
            return Invoked(200, {"object": "approval", **found.public(now=time.time())})
        if action == "revoke":
            revoked = await self.runs.state.run(approvals.revoke, found)
            shown = revoked.public(now=time.time())
            self._write({"event": "approval_revoked", "tool": contract.name, **shown}, caller)
            return Invoked(200, {"object": "approval", **shown})
        if verdict.decision != "allow":
            raise Forbidden(f"approving {contract.name!r} needs a caller the policy allows to "
                            f"run it (this one: {verdict.decision})", code="approval_forbidden")
        used = await self.runs.state.run(approvals.use, found, found.value["fingerprint"])
        self._write({"event": "approval_approved", "tool": contract.name,
                     **used.public(now=time.time())}, caller)
        write = contract.catalog.kind == "write"
        key = found.value["idempotency_key"] if write else None
        done = await self._execute(contract, found.value["arguments"], key, caller, principal)
        return Invoked(done.status, {**done.body, "approval": used.public(
            now=time.time())})

    async def _execute(self, contract: Contract, valid: dict[str, Any], key: str | None,
                       caller: Caller, principal: Principal) -> Invoked:
        """Run it: once per key for writes (a key seen before replays its outcome)."""
        claim = None
        if key is not None:
            scope = Scope(owner_of(principal, caller), contract.name, key)
            found = await self.runs.claim(scope, _fingerprint(valid, contract))
            if isinstance(found, Stored):
                replay = self._replayed(scope, found, _fingerprint(valid, contract))
                self._record(caller, contract, valid, replay, key, replayed=True)
                return Invoked(200, self._body(contract.name, replay, key, replayed=True))
            claim = found
        done = await self._run(contract, valid, key, principal, claim)
        if claim is not None and done.still_running is not None:
            self._keep_when_done(claim, contract, valid, done, caller)
        elif claim is not None:
            await self.runs.keep(claim, done)
        self._record(caller, contract, valid, done, key, replayed=False)
        return Invoked(200, self._body(contract.name, done, key, replayed=False))

    async def _run(self, contract: Contract, valid: dict[str, Any], key: str | None,
                   principal: Principal, claim: Claim | None) -> Execution:
        """The handler's outcome; the claim's lease renewed meanwhile."""
        assert contract.execution is not None
        context = ToolContext(contract.name, key, principal.tenant, principal.roles, 1)
        lease = self.runs.lease(claim) if claim is not None else None
        try:
            return await self.runner.run(contract.execution, valid,
                                         kind=contract.catalog.kind, context=context,
                                         output=contract.output, owner=contract.catalog.owner)
        except BaseException:  # cancelled mid-run: it may have acted
            if claim is not None:
                self.runs.keep_later(claim, _unknown(contract.name), lambda done: None)
            raise
        finally:
            if lease is not None:
                lease.cancel()

    def _keep_when_done(self, claim: Claim, contract: Contract, valid: dict[str, Any],
                        done: Execution, caller: Caller) -> None:
        """A handler thread still running past its time limit: its real outcome is kept,
        and audited, when it ends."""
        assert done.still_running is not None
        late = self.runner.late(done.still_running, kind=contract.catalog.kind,
                                tool=contract.name, output=contract.output)
        self.runs.keep_later(claim, late, lambda real: self._record(
            caller, contract, valid, real, claim.scope.key, replayed=False, late=True))

    def known(self, name: str, principal: Principal) -> tuple[Contract, Verdict]:
        """The contract and this caller's verdict; hidden and retired tools are unknown."""
        contract = self.registry.get(name)
        verdict = self.policy.decide(principal, name, contract) if contract else None
        if contract is None or verdict is None or verdict.decision == "hidden" \
                or contract.catalog.lifecycle == "retired":
            raise RouteNotFound(f"no contract named {name!r}; the contracts you may use are "
                                f"{self.policy.visible_names(principal, self.registry)}")
        return contract, verdict

    def _validated(self, contract: Contract, arguments: dict[str, Any], key: str | None,
                   caller: Caller) -> dict[str, Any]:
        """The normalized arguments, runtime fields filled by the server. A runtime field
        the client sent must match the server's value (it cannot choose a tenant)."""
        runtime = with_call_key(contract, contract_runtime(contract, caller), key,
                                caller.headers)
        written = {k: v for k, v in arguments.items() if k not in contract.runtime}
        for field in contract.runtime.keys() & arguments.keys():
            if arguments[field] != runtime[field]:
                raise ArgumentsInvalid(
                    f"/{field} is filled by the server ({_source(contract, field)}); the value "
                    "sent differs from this caller's: leave it out", param=f"arguments.{field}",
                    extensions={"violations": [{"pointer": f"/{field}", "code": "unknown_field",
                                                "message": "filled by the server"}]})
        outcome = contract.validate(written, runtime=runtime)
        if not outcome.valid or outcome.arguments is None:
            first = outcome.violations[0]
            raise ArgumentsInvalid(
                f"the arguments break {contract.name!r}'s contract at {first.pointer or '/'!r}: "
                f"{first.message}; the handler was not called", param=_param(first.pointer),
                extensions={"violations": [v.as_dict() for v in outcome.violations]})
        return outcome.arguments

    def _replayed(self, scope: Scope, found: Stored, fingerprint: str) -> Execution:
        """The first outcome of a key seen before, or why there is none to give yet."""
        if found.fingerprint != fingerprint:
            raise Conflict(f"idempotency key {scope.key!r} was used for {scope.tool!r} with "
                           "other arguments; use a new key for a new call",
                           param="idempotency_key", code="idempotency_key_reused")
        if found.state == "running" or found.outcome is None:
            raise InProgress(f"a call to {scope.tool!r} with idempotency key {scope.key!r} is "
                             "running; ask again for its outcome later")
        o = found.outcome
        return Execution(o["outcome"], o.get("result"), o.get("problem"), o.get("attempts", 0),
                         o.get("seconds", 0.0))

    async def resolve(self, name: str, key: str, outcome: str, result: Any, note: str,
                      caller: Caller) -> dict[str, Any]:
        """Settle a key left `side_effect_unknown` (or `running` past its lease) once someone
        checked the system: `failed` (it never acted: the key may run again) or
        `succeeded`. A run still holding its lease is refused (409): its own outcome is
        coming, and settling it would let a retry run beside it."""
        principal = self.policy.principal(caller)
        if caller.identity is not None and "admin" not in caller.identity.roles:
            raise Forbidden("resolving an execution needs a key with the 'admin' role")
        contract, _ = self.known(name, principal)
        scope = Scope(owner_of(principal, caller), name, key)
        settled = None if outcome == "failed" else {
            **Execution("succeeded", result).as_dict(), "resolved": note}
        await self.runs.state.run(self._settle, scope, settled)
        self._write({"event": "resolved", "tool": contract.name, "idempotency_key": key,
                     "outcome": outcome, "note": note}, caller)
        return {"object": "tool.resolution", "tool": name, "idempotency_key": key,
                "outcome": outcome}

    def _settle(self, scope: Scope, settled: dict[str, Any] | None) -> None:
        """On the state pool: the resolution, if the record may take one."""
        store = self.runs.store
        found = store.get(scope)
        if found is None or (found.state == "done" and (found.outcome or {}).get(
                "outcome") != "side_effect_unknown"):
            state = "unknown" if found is None else (found.outcome or {}).get("outcome")
            raise Conflict(f"nothing to resolve for {scope.tool!r} key {scope.key!r} "
                           f"({state}); only a side_effect_unknown call, or a running one "
                           "whose lease ran out, can be resolved", code="nothing_to_resolve")
        if found.state == "running":
            left = self.runs.lease_s - (store.now() - found.updated)
            if left > 0:
                error = InProgress(
                    f"the call to {scope.tool!r} with key {scope.key!r} is running and its "
                    f"server renews its lease: its own outcome is coming. Resolve it only if "
                    f"it stays running past its lease ({self.runs.lease_s:g} s without a "
                    "renewal)", code="execution_running")
                error.retry_after_s = max(1, math.ceil(left))
                raise error
        if not store.resolve(scope, settled, version=found.version):
            raise Conflict(f"the record of {scope.tool!r} key {scope.key!r} changed while it "
                           "was resolved; read it again and resolve again if it still needs",
                           code="resolve_conflict")

    def _late_refused(self, entry: Entry, found: Stored | None) -> None:
        """A run's outcome the store refused: its key was resolved (and maybe run again)
        while it ran. Recorded, never stored over the newer record."""
        log.warning("a late outcome of %r key %r was refused: the key was resolved meanwhile",
                    entry.scope.tool, entry.scope.key)
        self._write({"event": "late_finish_refused", "tool": entry.scope.tool,
                     "idempotency_key": entry.scope.key,
                     "outcome": (entry.outcome or {}).get("outcome"),
                     "record": None if found is None else {
                         "state": found.state, "resolved": found.resolved,
                         "outcome": (found.outcome or {}).get("outcome")}},
                    Caller({}, None, None))

    def _body(self, name: str, done: Execution, key: str | None, *,
              replayed: bool) -> dict[str, Any]:
        return {"object": "tool.execution", "tool": name, **done.as_dict(),
                "idempotency_key": key, "replayed": replayed}

    def _record(self, caller: Caller, contract: Contract, arguments: dict[str, Any] | None,
                done: Execution, key: str | None, *, replayed: bool,
                late: bool = False) -> None:
        self._write({"event": "executed_late" if late else "executed", "tool": contract.name,
                     "kind": contract.catalog.kind, "outcome": done.outcome,
                     "idempotency_key": key, "replayed": replayed, "attempts": done.attempts,
                     "arguments": None if arguments is None else contract.redact(arguments),
                     "problem": done.problem,
                     # The handler's own words (an exception, an HTTP body): here only.
                     "internal": _scrubbed(done.internal, arguments, contract)}, caller)

    def _write(self, record: dict[str, Any], caller: Caller) -> None:
        if self.audit is None:
            return
        identity = caller.identity
        self.audit.write({
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"), "request_id": caller.request_id,
            "identity": None if identity is None else {
                "name": identity.name, "tenant": identity.tenant,
                "roles": list(identity.roles)}, **record})


def owner_of(principal: Principal, caller: Caller) -> str | None:
    """Whose idempotency keys these are: the API key's tenant, else the API key itself (two
    keys without a tenant never see each other's outcomes); without API keys, the tenant
    the trusted headers name."""
    identity = caller.identity
    if identity is not None and identity.tenant is None:
        return f"key:{identity.name}"
    return principal.tenant


async def _unknown(tool: str) -> Execution:
    return unknown_outcome(tool, "was cancelled mid-run")


def _fingerprint(arguments: dict[str, Any], contract: Contract) -> str:
    written = {k: v for k, v in arguments.items()
               if not isinstance(contract.runtime.get(k), Generated)}
    return hashlib.sha256(json.dumps(written, sort_keys=True, default=str).encode()).hexdigest()


def _approval(verdict: Verdict, arguments: dict[str, Any]) -> dict[str, Any]:
    fields = verdict.approve_fields or tuple(arguments)
    return {"type": APPROVAL_REQUIRED.type, "title": APPROVAL_REQUIRED.title,
            "detail": "the policy needs a human approval before this call runs: a caller it "
                      "allows invokes the same arguments and idempotency key",
            "fields": {f: arguments.get(f) for f in fields}, "rule": verdict.rule,
            "retryable": False, "owner_action_required": True}


def _who(principal: Principal) -> dict[str, Any]:
    return {"tenant": principal.tenant, "roles": list(principal.roles),
            "key": principal.name}


def _source(contract: Contract, field: str) -> str:
    source = contract.runtime[field]
    if isinstance(source, FromHeader):
        return f"from the {source.header!r} header or the API key"
    return "generated: a write's Generated field is its idempotency key"


def _param(pointer: str) -> str:
    """The request field a violation's JSON Pointer (inside `arguments`) is at."""
    out = "arguments"
    for token in pointer.split("/")[1:] if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        out += f"[{token}]" if token.isdigit() else f".{token}"
    return out


def _scrubbed(text: str | None, arguments: dict[str, Any] | None,
              contract: Contract) -> str | None:
    """`text` with the values of the contract's redacted fields taken out."""
    if text is None or not arguments or not contract.redacted:
        return text
    hidden = contract.redact(arguments)
    for name, value in arguments.items():
        if hidden.get(name) != value and isinstance(value, (str, int, float)) and str(value):
            text = text.replace(str(value), "[redacted]")
    return text
