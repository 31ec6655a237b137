"""`create_app(settings)`: the FastAPI application, its lifespan and its routes."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response
from opentelemetry.trace import TracerProvider

from contracts import ContractRegistry
from server.api import errors, tools
from server.api.admission import Admission
from server.api.chat.route import chat_completions
from server.api.deps import PipelineDep
from server.api.gate import Gate
from server.api.grammars import compile_grammar
from server.api.messages.route import create_message
from server.api.responses.route import create_response
from server.api.responses.stored import delete_response, get_response, list_input_items
from server.api.sessions import delete_session, get_session
from server.execution import ToolPolicy
from server.identity import KeyRing
from server.logs import AuditLog
from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.metrics import RequestTimer
from server.settings import Settings
from server.wiring import EngineFactory, Inputs, assembled

log = logging.getLogger("strictcall.api")


def create_app(settings: Settings, engine_factory: EngineFactory,
               registry: ContractRegistry | None = None, *,
               keys: KeyRing | None = None, audit: AuditLog | None = None,
               tool_policy: ToolPolicy | None = None,
               tracer_provider: TracerProvider | None = None) -> FastAPI:
    """The app over the parts `server/wiring.py` builds at startup. What is read from files
    (keys, policy, audit log, contracts) is read now: see `Inputs.read` for each
    argument's default and the one-line error a bad file raises."""
    inputs = Inputs.read(settings, engine_factory, registry, keys=keys, audit=audit,
                         tool_policy=tool_policy, tracer_provider=tracer_provider)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with assembled(inputs) as services:
            app.state.state = services.state
            app.state.sessions = services.sessions
            app.state.responses = services.responses
            app.state.pipeline = services.pipeline
            app.state.tools = services.tools
            app.state.replays = services.replays
            app.state.metrics = services.metrics
            app.state.admission = Admission(settings.max_batch + settings.max_queued,
                                            engine=services.pipeline.engine)
            app.state.started = services.started
            app.state.background = services.background
            yield

    app = FastAPI(title="StrictCall", lifespan=lifespan)
    app.state.shutdown_deadline = None  # set on SIGTERM (server/api/serving.py)
    app.state.rate_limits = inputs.rate_limits  # the gate admits, the pipeline charges tokens
    # Inside the timer, so refusals are counted and timed too.
    app.add_middleware(Gate, keys=inputs.keys, metrics_auth=settings.metrics_auth,
                       max_body_bytes=settings.max_body_bytes,
                       read_timeout_s=settings.request_read_timeout_s,
                       write_timeout_s=settings.stream_write_timeout_s)
    app.add_middleware(RequestTimer)
    errors.install(app)
    app.get("/health")(health)
    app.get("/livez")(livez)
    app.get("/v1/models")(list_models)
    app.get("/metrics")(metrics_text)
    app.post("/v1/chat/completions", response_model=None)(chat_completions)
    app.post("/v1/messages", response_model=None)(create_message)
    app.post("/v1/responses", response_model=None)(create_response)
    app.get("/v1/responses/{response_id}")(get_response)  # server/api/responses/stored.py
    app.delete("/v1/responses/{response_id}")(delete_response)
    app.get("/v1/responses/{response_id}/input_items")(list_input_items)
    app.get("/v1/sessions/{session_id}")(get_session)  # server/api/sessions.py
    app.delete("/v1/sessions/{session_id}")(delete_session)
    app.post("/v1/grammars/compile")(compile_grammar)  # server/api/grammars.py
    app.get("/v1/contracts")(tools.list_contracts)
    app.post("/v1/contracts/{name}/validate")(tools.validate_contract)
    app.post("/v1/tools/{name}/invoke")(tools.invoke_tool)
    app.post("/v1/tools/{name}/executions/{key}/resolve")(tools.resolve_execution)
    app.get("/v1/approvals/{approval_id}")(tools.get_approval)  # server/execution/approvals
    app.post("/v1/approvals/{approval_id}/approve")(tools.approve)
    app.post("/v1/approvals/{approval_id}/revoke")(tools.revoke_approval)
    return app


async def health(pipeline: PipelineDep, request: Request,
                 response: Response) -> dict[str, Any]:
    """200 "ok"; 503 "degraded" (with `problem`) while the engine cannot serve: stopped, or
    a step hung past the watchdog. Readiness, for a load balancer: the process is up, but
    send no requests here until it says "ok" again. A background task that failed lately
    (journal replay, the sweeper, the keys' watch) is named under `background_failing`:
    it runs again on its own, and requests are still served."""
    stats = pipeline.cache.stats()
    problem = pipeline.engine.problem()
    if problem is not None:
        response.status_code = 503
    background = getattr(request.app.state, "background", None)
    failing = background.failing() if background is not None else {}
    return {"status": "ok" if problem is None else "degraded",
            **({"problem": problem} if problem is not None else {}),
            **({"background_failing": failing} if failing else {}),
            "model": pipeline.model_name, "engine": pipeline.engine.stats(),
            "memory": pipeline.engine.memory(),
            "grammar_cache": dataclasses.asdict(stats)}


async def livez() -> dict[str, str]:
    """Liveness: answered by the event loop itself, with nothing else done, so a loop that
    one request holds fails it (a TCP connect would still pass: the kernel accepts)."""
    return {"status": "alive"}


async def metrics_text(request: Request) -> Response:
    """Prometheus text format."""
    return Response(request.app.state.metrics.render(), media_type=METRICS_CONTENT_TYPE)


async def list_models(pipeline: PipelineDep, request: Request) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": pipeline.model_name, "object": "model",
                                        "created": int(request.app.state.started),
                                        "owned_by": "strictcall"}]}
