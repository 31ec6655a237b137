"""POST /v1/grammars/compile: a JSON Schema compiled (or found compiled), with the report of
which keyword is enforced by what. With `{"schema": ..., "messages": [...]}` the schema's
grounded properties (`x-strictcall-grounded`) are grounded in those messages first, and the
report says how many values each had to choose from."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Body, Request
from pydantic import TypeAdapter, ValidationError

from grammars import EnforcementReport, grounding_uses, narrowed_schema
from server.api.chat.translate import turn_of
from server.api.chat.wire import Message
from server.api.deps import PipelineDep, seen_grammars, until_disconnect
from server.dialogue import Bounds, ground, grounding_bounds
from server.dialogue.evidence import evidence_of
from server.errors import InvalidRequest
from server.pipeline import ChatPipeline

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


async def compile_grammar(body: Annotated[Any, Body()], pipeline: PipelineDep,
                          request: Request) -> dict[str, Any]:
    """A refused keyword is a 400 naming it. Under the request's deadline
    (--request-timeout-s, a 504) and cancelled if the client goes away."""
    return await until_disconnect(request, _compiled(body, pipeline, request))


async def _compiled(body: Any, pipeline: ChatPipeline, request: Request) -> dict[str, Any]:
    schema, grounding = await asyncio.to_thread(
        _grounded, body, from_system=pipeline.settings.ground_from_system,
        bounds=grounding_bounds(pipeline.settings))
    cache = pipeline.cache
    spec, analysis, lookup = await pipeline.preparer.compile_schema(schema, where="the schema")
    report = analysis.report
    if grounding:
        report = EnforcementReport(report.backend, (*report.uses,
                                                    *grounding_uses(grounding[0])))
    out: dict[str, Any] = {"object": "grammar", "key": spec.key,
                           "backend": cache.backend.name,
                           "backend_version": cache.backend.version}
    if seen_grammars(request).own(request, lookup):  # (not another tenant's compile)
        out |= {"cache": "hit" if lookup.hit else "miss",
                "compile_ms": round(lookup.grammar.compile_seconds * 1000, 3),
                "lookup_ms": round(lookup.seconds * 1000, 3)}
    out["enforcement"] = report.to_json()
    if grounding is not None:
        out["grounding"] = {"fields": grounding[1]}
    return out


def _grounded(body: Any, *, from_system: bool, bounds: Bounds
              ) -> tuple[Any, tuple[dict[str, int], dict[str, int]] | None]:
    """(the schema to compile, and per grounded property how many values it had: by schema
    pointer and by value pointer; None: no messages)."""
    if not (isinstance(body, dict) and set(body) == {"schema", "messages"}):
        return body, None
    try:
        messages = _MESSAGES.validate_python(body["messages"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "messages" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                     for p in first["loc"] if not str(p)[:1].isupper())
        raise InvalidRequest(f"{where}: {first['msg']}; send chat messages "
                             "({role, content})", param=where) from None
    schema = body["schema"]
    if not isinstance(schema, dict):
        return schema, ({}, {})  # refused as a schema by the planner, with its own message
    found = ground(schema, None, evidence_of([turn_of(m) for m in messages],
                                             from_system=from_system, bounds=bounds))
    written = narrowed_schema(schema, [f.narrowing() for f in found.fields],
                              nullable=[p for p in found.asked if p not in found.grounded])
    return written, (found.report(), found.counts())
