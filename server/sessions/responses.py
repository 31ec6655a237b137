"""`ResponseStore`: stored Responses API responses as records of the state store
(namespace "responses"), scoped by tenant like sessions, kept `--response-ttl-s`.

A record holds the response object as it was returned, this response's own input items
(each with its id), the session its chain's slots live in, and the ids of the responses
it continues (`chain`, oldest first): the earlier turns are referenced, never copied, so a
chain of n turns stores each item once, not n times. Reading a response reads its chain
in one round trip; storing one pushes its chain's expiry on with its own, so an earlier
turn does not expire under a later one. A deleted response is gone from every chain:
later responses no longer carry its items.

A contract's `Redact()` values are never stored in clear: in a call's arguments they are
"[redacted]", and wherever the same value appears in the stored items' text it is too. The
items as they were are kept sealed beside them (AES-GCM, the sessions' `Sealer`): a
response chained onto this one starts from them, so a later turn still finds "the same
card" in the conversation, while every read of the store (GET, input_items) shows the
scrubbed items. A sealed copy no process can open (no shared `--state-secret`) is left
aside: the chain then continues from the scrubbed items.

Records from before `chain` (a `context` list, copied) are read as they are."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts import Contract
from contracts.redaction import REDACTED
from server.sessions.sealing import Sealer
from server.state import StateStore

NAMESPACE = "responses"
RESERVATIONS = "reservations"
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class StoredResponse:
    response: JsonObject
    context: list[JsonObject]  # the items before this response's own input
    input: list[JsonObject]  # its own input items
    session: str | None
    chain: list[str] = field(default_factory=list)  # the ids it continues, oldest first

    @property
    def output(self) -> list[JsonObject]:
        return list(self.response.get("output") or [])

    def conversation(self) -> list[JsonObject]:
        """Every item so far, oldest first: what a chained response starts from."""
        return [*self.context, *self.input, *self.output]

    def input_items(self) -> list[JsonObject]:
        """What GET /v1/responses/{id}/input_items lists: every item the model saw."""
        return [*self.context, *self.input]


class ResponseStore:
    def __init__(self, records: StateStore, *, ttl_s: float,
                 contract_of: Callable[[str], Contract | None] = lambda name: None,
                 sealer: Sealer | None = None) -> None:
        self.records = records
        self.ttl_s = ttl_s
        self._contract = contract_of  # a tool's contract, for its Redact() fields
        self._sealer = sealer

    def reserve(self, scope: str) -> str:
        """A write before the decode, so a store that is full or down is a 503 before the
        decode is spent; `keep` drops it."""
        token = uuid.uuid4().hex
        self.records.put(RESERVATIONS, _key(scope, token), {}, ttl_s=3600.0)
        return token

    def keep(self, scope: str, stored: StoredResponse, *, reserved: str | None = None) -> None:
        items, response = scrubbed(stored.input, stored.response, self._contract)
        record: JsonObject = {"response": response, "input": items, "session": stored.session,
                              "chain": stored.chain}
        if self._sealer is not None and (items != stored.input or response != stored.response):
            record["sealed"] = self._sealer.seal({"input": stored.input,
                                                  "output": stored.output})
        self.records.put(NAMESPACE, _key(scope, str(stored.response["id"])), record,
                         ttl_s=self.ttl_s)
        if stored.chain:
            self.records.touch(NAMESPACE, [_key(scope, i) for i in stored.chain],
                               ttl_s=self.ttl_s)
        if reserved is not None:
            self.records.delete(RESERVATIONS, _key(scope, reserved))

    def get(self, scope: str, response_id: str, *, opened: bool = False
            ) -> StoredResponse | None:
        """`opened`: the items as they were (for the response chained onto it), where a
        sealed copy opens; else as stored, Redact() values scrubbed (what reads show)."""
        found = self.records.get(NAMESPACE, _key(scope, response_id))
        if found is None:
            return None
        value = self._opened(found.value) if opened else found.value
        chain = [str(i) for i in value.get("chain") or ()]
        context = list(value.get("context") or [])  # a record from before `chain`
        if chain:
            earlier = self.records.get_many(NAMESPACE, [_key(scope, i) for i in chain])
            for record in earlier:  # a deleted or expired one is left out
                if record is not None:
                    v = self._opened(record.value) if opened else record.value
                    context += [*(v.get("context") or []), *(v.get("input") or []),
                                *(v["response"].get("output") or [])]
        return StoredResponse(value["response"], context, list(value.get("input") or []),
                              value.get("session"), chain)

    def _opened(self, value: JsonObject) -> JsonObject:
        sealed = value.get("sealed")
        if sealed is None or self._sealer is None:
            return value
        ok, clear = self._sealer.open(sealed)
        if not ok:
            return value
        return {**value, "input": clear["input"],
                "response": {**value["response"], "output": clear["output"]}}

    def delete(self, scope: str, response_id: str) -> bool:
        return self.records.delete(NAMESPACE, _key(scope, response_id))


def scrubbed(items: list[JsonObject], response: JsonObject,
             contract_of: Callable[[str], Contract | None]
             ) -> tuple[list[JsonObject], JsonObject]:
    """The items and response with every Redact() value replaced: in the calls'
    arguments, in the `strictcall` extension (the session's slots, the contract reports),
    and wherever the same text appears."""
    secrets: set[str] = set()
    output = [_redacted_call(item, contract_of, secrets) for item in response.get("output")
              or []]
    kept_items = [_redacted_call(item, contract_of, secrets) for item in items]
    kept = {**response, "output": output}
    if isinstance(response.get("strictcall"), dict):
        kept["strictcall"] = _redacted_extension(response["strictcall"], contract_of, secrets)
    if not secrets:
        return kept_items, kept
    return _without(kept_items, secrets), _without(kept, secrets)


def _redacted_call(item: JsonObject, contract_of: Callable[[str], Contract | None],
                   secrets: set[str]) -> JsonObject:
    """A function_call item with its contract's Redact() fields replaced."""
    if item.get("type") != "function_call":
        return item
    contract = contract_of(str(item.get("name")))
    if contract is None or not contract.redacted:
        return item
    try:
        arguments = json.loads(item.get("arguments") or "{}")
    except ValueError:
        return item
    hidden = _hidden(contract, arguments, "", secrets)
    if hidden == arguments:
        return item
    return {**item, "arguments": json.dumps(hidden, ensure_ascii=False,
                                            separators=(",", ":"))}


def _redacted_extension(extension: JsonObject, contract_of: Callable[[str], Contract | None],
                        secrets: set[str]) -> JsonObject:
    """`strictcall`'s slots (filled values, changes) and contract reports (arguments of
    each attempt), each with its tool's Redact() fields replaced."""
    out = dict(extension)
    slots = extension.get("slots")
    contract = contract_of(str(slots.get("tool"))) if isinstance(slots, dict) else None
    if isinstance(slots, dict) and contract is not None and contract.redacted:
        slots = {**slots, "filled": _hidden(contract, slots.get("filled") or {}, "", secrets)}
        for name in ("changed", "confirm"):
            slots[name] = [{**c, "old": _hidden(contract, c.get("old"), c["field"], secrets),
                            "new": _hidden(contract, c.get("new"), c["field"], secrets)}
                           if isinstance(c, dict) and "field" in c else c
                           for c in slots.get(name) or ()]
        out["slots"] = slots
    reports = []
    for report in extension.get("contracts") or ():
        contract = contract_of(str(report.get("tool"))) if isinstance(report, dict) else None
        if contract is None or not contract.redacted:
            reports.append(report)
            continue
        report = {**report, "arguments": _hidden(contract, report.get("arguments"), "",
                                                 secrets)}
        if isinstance(report.get("attempts"), list):  # (a count in answers, a list in audits)
            report["attempts"] = [{**a, "arguments": _hidden(
                contract, a.get("arguments"), "", secrets)} if isinstance(a, dict) else a
                for a in report["attempts"]]
        reports.append(report)
    if "contracts" in extension:
        out["contracts"] = reports
    return out


def _hidden(contract: Contract, value: Any, at: str, secrets: set[str]) -> Any:
    """`value` (at pointer `at` of a call's arguments) redacted; what was taken out goes
    to `secrets`."""
    if value is None:
        return value
    hidden = contract.redact(value, at=at)
    _collect(value, hidden, secrets)
    return hidden


def _collect(clear: Any, hidden: Any, secrets: set[str]) -> None:
    if hidden == REDACTED and clear != REDACTED:
        if isinstance(clear, (str, int, float)) and str(clear):
            secrets.add(str(clear))
    elif isinstance(clear, dict) and isinstance(hidden, dict):
        for key in clear:
            _collect(clear[key], hidden.get(key), secrets)
    elif isinstance(clear, list) and isinstance(hidden, list):
        for a, b in zip(clear, hidden, strict=False):
            _collect(a, b, secrets)


# Identifiers and names: left as they are (a call id that happens to hold the digits must
# still match its output). Every other string (text, arguments, questions) is scrubbed.
_NAME_KEYS = frozenset({"id", "call_id", "item_id", "previous_response_id", "session",
                        "name", "tool", "type", "role", "status", "object", "model",
                        "idempotency_key", "field", "pointer", "code"})


def _without(value: Any, secrets: set[str], key: str | None = None) -> Any:
    if isinstance(value, str):
        if key in _NAME_KEYS:
            return value
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _without(v, secrets, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, secrets, key) for v in value]
    return value


def _key(scope: str, response_id: str) -> str:
    return f"{scope}\x1f{response_id}"
