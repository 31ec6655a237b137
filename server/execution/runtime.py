"""The fields of a call that the server fills, never the model or the client: runtime-
sourced contract fields (headers, identity claims) and a write call's idempotency key."""

from __future__ import annotations

import uuid
from typing import Any

from contracts import Contract, Generated, MissingRuntimeValue
from server.errors import InvalidRequest
from server.identity import Caller


def contract_runtime(contract: Contract, caller: Caller) -> dict[str, Any]:
    """The server-filled fields of a contract call (from the caller's identity where the
    server checks keys), or a 400 naming the missing header or claim."""
    claims = caller.identity.claims() if caller.identity is not None else None
    try:
        return contract.runtime_values(caller.headers, claims=claims)
    except MissingRuntimeValue as exc:
        if exc.claim is not None:
            raise InvalidRequest(str(exc), code="missing_claim") from None
        raise InvalidRequest(f"{exc}; send it with the request", param=exc.header,
                             code="missing_header") from None


def new_call_key(contract: Contract | None, headers: dict[str, str] | None = None
                 ) -> str | None:
    """A write call's idempotency key (None: not a write): the value of the header a
    `Generated` field of the contract reads, where the client sent it (the call's
    arguments carry that one, and the key returned beside the call is the same); else the
    server's, one per call."""
    if contract is None or contract.catalog.kind != "write":
        return None
    sent = {k.lower(): v for k, v in (headers or {}).items()}
    for source in contract.runtime.values():
        if isinstance(source, Generated) and source.header is not None \
                and sent.get(source.header.lower()):
            return sent[source.header.lower()]
    return f"idem_{uuid.uuid4().hex}"


def with_call_key(contract: Contract, runtime: dict[str, Any], key: str | None,
                  headers: dict[str, str]) -> dict[str, Any]:
    """The runtime fields of one call: `Generated` fields the client sent no header for
    carry the call's idempotency key, so the key in the arguments and the one returned
    beside the call are the same."""
    if key is None:
        return runtime
    sent = {h.lower() for h in headers}
    return {**runtime, **{field: key for field, source in contract.runtime.items()
                          if isinstance(source, Generated)
                          and (source.header is None or source.header.lower() not in sent)}}
