"""The execution layer's routes: run a validated call of a contract with a handler, settle a
write whose effect is unknown, and the catalog as this caller may see it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.api.deps import PipelineDep, caller_of
from server.errors import InvalidRequest
from server.execution import contract_runtime
from server.execution.service import ToolService

_KEY = Field(None, min_length=8, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")


def _tools(request: Request) -> ToolService:
    tools: ToolService = request.app.state.tools
    return tools


ToolsDep = Annotated[ToolService, Depends(_tools)]


class InvokeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any]
    # A write's key: the one returned with its call (or the `Idempotency-Key` header).
    idempotency_key: str | None = _KEY


class ResolveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    outcome: Literal["succeeded", "failed"]  # failed: it never acted, the key may run again
    result: Any = None
    note: str = Field(min_length=1, max_length=500)


async def invoke_tool(name: str, body: InvokeBody, tools: ToolsDep, request: Request,
                      response: Response) -> dict[str, Any]:
    header = request.headers.get("idempotency-key")
    key = body.idempotency_key
    if header is not None and key is not None and header != key:
        raise InvalidRequest("the Idempotency-Key header and idempotency_key differ; send "
                             "one of them", param="idempotency_key")
    if key is None and header is not None:
        key = _header_key(header)
    done = await tools.invoke(name, body.arguments, key, caller_of(request))
    response.status_code = done.status
    return done.body


def _header_key(header: str) -> str | None:
    """The Idempotency-Key header's key, held to the body field's rules."""
    try:
        return InvokeBody.model_validate({"arguments": {}, "idempotency_key": header}) \
            .idempotency_key
    except ValidationError as exc:
        raise InvalidRequest(f"the Idempotency-Key header: {exc.errors()[0]['msg']}; send 8 "
                             "to 128 of A-Z a-z 0-9 . _ : -", param="Idempotency-Key",
                             code="invalid_idempotency_key") from None


async def resolve_execution(name: str, key: str, body: ResolveBody, tools: ToolsDep,
                            request: Request) -> dict[str, Any]:
    return await tools.resolve(name, key, body.outcome, body.result, body.note,
                               caller_of(request))


async def get_approval(approval_id: str, tools: ToolsDep, request: Request) -> dict[str, Any]:
    """An approval as its owner sees it: tool, fields to approve, who asked, its state."""
    return (await tools.approval(approval_id, "get", caller_of(request))).body


async def approve(approval_id: str, tools: ToolsDep, request: Request,
                  response: Response) -> dict[str, Any]:
    """Run exactly the approved call's arguments under its key, once (a caller the policy
    allows for the tool)."""
    done = await tools.approval(approval_id, "approve", caller_of(request))
    response.status_code = done.status
    return done.body


async def revoke_approval(approval_id: str, tools: ToolsDep,
                          request: Request) -> dict[str, Any]:
    return (await tools.approval(approval_id, "revoke", caller_of(request))).body


async def list_contracts(pipeline: PipelineDep, tools: ToolsDep,
                         request: Request) -> dict[str, Any]:
    """Registered contracts with their catalog metadata and this caller's policy decision;
    hidden ones are left out, as if they did not exist."""
    principal = tools.policy.principal(caller_of(request))
    data = []
    for contract in pipeline.registry:
        verdict = tools.policy.decide(principal, contract.name, contract)
        if verdict.decision == "hidden":
            continue
        data.append({**contract.snapshot(), "catalog": contract.catalog.as_dict(),
                     "policy": verdict.as_dict(),
                     "executable": contract.execution is not None})
    return {"object": "list", "data": data}


class ValidateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any]


async def validate_contract(name: str, body: ValidateBody, tools: ToolsDep,
                            request: Request) -> dict[str, Any]:
    """Validate and normalize arguments produced anywhere (another model, a human form)."""
    caller = caller_of(request)
    contract, _ = tools.known(name, tools.policy.principal(caller))
    outcome = contract.validate(body.arguments, runtime=contract_runtime(contract, caller))
    return {"valid": outcome.valid, "arguments": outcome.arguments,
            "violations": [v.as_dict() for v in outcome.violations]}
