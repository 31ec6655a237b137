"""`create_app(settings)`: the FastAPI application, its lifespan and its routes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import TracerProvider

from contracts import ContractRegistry
from grammars import DiskStore, GrammarCache, GrammarPolicy
from server.api import errors, tools
from server.api.admission import Admission
from server.api.background import Background, reload_on_hangup, replay_journal, sweep_forever
from server.api.chat.route import chat_completions
from server.api.deps import PipelineDep
from server.api.gate import Gate
from server.api.grammars import compile_grammar
from server.api.messages.route import create_message
from server.api.responses.route import create_response
from server.api.responses.stored import delete_response, get_response, list_input_items
from server.api.sessions import delete_session, get_session
from server.engines.base import Engine
from server.execution import Events, RecordStore, Runner, ToolPolicy, file_provider, load_policy
from server.execution.journal import OutcomeJournal
from server.execution.keyed import KeyedRuns
from server.execution.service import ToolService
from server.formats.detect import resolve as resolve_format
from server.identity import KeyRing, WatchedKeyRing
from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.metrics import Metrics, RequestTimer
from server.model_store import default_cache_dir
from server.pipeline.chat import ChatPipeline, Parts
from server.records import AuditLog
from server.sessions import ResponseStore, SessionStore
from server.sessions.sealing import Sealer
from server.settings import Settings
from server.state import open_rate_limits, open_state, state_url
from server.state.url import sqlite_path

log = logging.getLogger("strictcall.api")
EngineFactory = Callable[[Settings], Engine]


def load_contracts(targets: list[str]) -> ContractRegistry:
    """Raises contracts.ContractError with one readable line."""
    registry = ContractRegistry()
    for target in targets:
        registry.load(target)
    return registry


def open_audit_log(settings: Settings) -> AuditLog:
    """The audit log the settings ask for (raises OSError when it cannot be opened)."""
    assert settings.audit_log is not None
    return AuditLog(settings.audit_log, max_bytes=settings.audit_log_max_bytes,
                    backups=settings.audit_log_backups)


def journal_path(settings: Settings) -> Path | None:
    """Where outcomes wait for the state store: beside a SQLite state file; for a shared
    database, in the cache dir under this replica's host name and port (one file per
    replica: replicas on one host must not share it); memory only when the state is."""
    if settings.outcome_journal is not None:
        return settings.outcome_journal
    url = state_url(settings)
    if url.startswith("memory:"):
        return None
    if url.startswith("sqlite:"):
        path = sqlite_path(url)
        return path.with_name(path.stem + ".outcomes.journal")
    return (settings.cache_dir or default_cache_dir()) / \
        f"outcomes-{socket.gethostname()}-{settings.port}.journal"


def create_app(settings: Settings, engine_factory: EngineFactory,
               registry: ContractRegistry | None = None, *,
               keys: KeyRing | None = None, audit: AuditLog | None = None,
               tool_policy: ToolPolicy | None = None,
               tracer_provider: TracerProvider | None = None) -> FastAPI:
    """`keys`: the API keys (default: loaded from settings.api_keys_file, if set; raises
    server.identity.KeyFileError with one line). `audit`: the audit log (default: opened
    at settings.audit_log, if set; raises OSError). `tool_policy`: default loaded from
    settings.policy, if set (raises server.execution.PolicyFileError with one line), else
    allow-all. `tracer_provider`: where request spans go (default: settings.trace_file's,
    else OpenTelemetry's global provider)."""
    registry = registry or load_contracts(settings.contracts)
    watched = None
    if settings.api_keys_file is not None:  # read again on SIGHUP and when it changes
        watched = WatchedKeyRing(settings.api_keys_file, keys)
    ring: KeyRing | WatchedKeyRing | None = watched or keys
    if tool_policy is None:
        tool_policy = load_policy(settings.policy, registry) if settings.policy \
            else ToolPolicy()
    if audit is None and settings.audit_log is not None:
        audit = open_audit_log(settings)
    # Rate limits count per key: without keys there is no one to count against.
    rate_limits = open_rate_limits(settings) if ring is not None else None  # --rate-limit-url

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # --state-url, before the model loads: an unreachable database fails fast. The
        # idempotency keys, sessions' slots and stored responses live there.
        state = app.state.state = open_state(settings)
        secret = settings.state_secret.encode() if settings.state_secret else None
        sealer = Sealer(secret)
        sessions = app.state.sessions = SessionStore(state, slot_ttl_s=settings.slot_ttl_s,
                                                     contract_of=registry.get,
                                                     sealer=sealer)
        app.state.responses = ResponseStore(state, ttl_s=settings.response_ttl_s,
                                            contract_of=registry.get, sealer=sealer)
        engine = engine_factory(settings)
        # Built once: requests, repairs, warm-up and the compile endpoint all plan with it.
        policy = GrammarPolicy.for_backend(engine.grammar_backend,
                                           settings.policies.model_dump())
        fmt = resolve_format(settings.model_format, model_dir=engine.model_dir,
                             tokenizer=engine.tokenizer)
        engine.skip_special_tokens = fmt.skip_special_tokens  # the reader needs its markers
        metrics = Metrics(settings.served_model_name or engine.model_name)
        disk = DiskStore((settings.cache_dir or default_cache_dir()) / "grammars") \
            if settings.grammar_disk_cache else None
        cache = GrammarCache(engine.grammar_backend, max_entries=settings.grammar_cache_entries,
                             max_bytes=settings.grammar_cache_bytes,
                             ttl_s=settings.grammar_cache_ttl_s, disk=disk,
                             compile_workers=settings.compile_workers,
                             on_compile=metrics.compile_seconds.observe)
        app.state.metrics = metrics
        metrics.watch(cache=lambda: dataclasses.asdict(cache.stats()), engine=engine.stats)
        provider, trace_out = (file_provider(settings.trace_file) if settings.trace_file
                               and tracer_provider is None else (tracer_provider, None))
        events = Events(provider)
        app.state.pipeline = ChatPipeline(engine, cache, settings, Parts(
            policy, registry=registry, metrics=metrics, fmt=fmt, rate_limits=rate_limits,
            audit=audit, tool_policy=tool_policy, events=events, sessions=sessions))
        if settings.warm_grammars:  # what requests naming a contract will look up
            grammars = await asyncio.to_thread(app.state.pipeline.warm)
            await engine.warm(grammars)  # engines that compile grammars themselves (vLLM)
        # In the background: ready as soon as the model is; the first conversation finds
        # dateparser's and lingua's data loaded (about a second on this CPU).
        warming = asyncio.create_task(asyncio.to_thread(app.state.pipeline.dialogue.warm))
        runs = KeyedRuns(RecordStore(state, owned=False, ttl_s=settings.idempotency_ttl_s),
                         state, OutcomeJournal(journal_path(settings)),
                         lease_s=settings.execution_lease_s)
        http = httpx.AsyncClient(timeout=None)  # each attempt's limit is the contract's
        runner = Runner(http, workers_per_owner=settings.handler_workers)
        app.state.tools = ToolService(registry, tool_policy, runs=runs, runner=runner,
                                      events=events, audit=audit)
        app.state.admission = Admission(settings.max_batch + settings.max_queued,
                                        engine=engine)
        background = Background()
        background.start(replay_journal(runs), "strictcall-journal")
        background.start(sweep_forever(state, every_s=settings.sweep_every_s, audit=audit,
                                       audit_max_age_s=settings.audit_log_max_age_s),
                         "strictcall-sweeper")
        if watched is not None:
            background.start(watched.watch(), "strictcall-keys")
            reload_on_hangup(watched)
        app.state.started = time.time()
        try:
            yield
        finally:
            await warming  # (a thread: it cannot be cancelled, only waited for)
            await background.stop()
            await runs.aclose()
            runner.pools.shutdown()
            cache.close()
            await engine.aclose()
            await http.aclose()
            state.close()
            if rate_limits is not None:
                await rate_limits.aclose()
            if trace_out is not None:
                assert isinstance(provider, SdkTracerProvider)  # file_provider's
                provider.shutdown()
                trace_out.close()
            if audit is not None:
                audit.close()

    app = FastAPI(title="StrictCall", lifespan=lifespan)
    app.state.shutdown_deadline = None  # set on SIGTERM (server/api/serving.py)
    app.state.rate_limits = rate_limits  # the gate admits, the pipeline charges tokens
    # Inside the timer, so refusals are counted and timed too.
    app.add_middleware(Gate, keys=ring, metrics_auth=settings.metrics_auth,
                       max_body_bytes=settings.max_body_bytes,
                       read_timeout_s=settings.request_read_timeout_s,
                       write_timeout_s=settings.stream_write_timeout_s)
    app.add_middleware(RequestTimer)
    errors.install(app)
    app.get("/health")(health)
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
    return app


async def health(pipeline: PipelineDep, response: Response) -> dict[str, Any]:
    """200 "ok"; 503 "degraded" (with `problem`) while the engine cannot serve: stopped, or
    a step hung past the watchdog. Readiness, for a load balancer: the process is up, but
    send no requests here until it says "ok" again."""
    stats = pipeline.cache.stats()
    problem = pipeline.engine.problem()
    if problem is not None:
        response.status_code = 503
    return {"status": "ok" if problem is None else "degraded",
            **({"problem": problem} if problem is not None else {}),
            "model": pipeline.model_name, "engine": pipeline.engine.stats(),
            "memory": pipeline.engine.memory(),
            "grammar_cache": dataclasses.asdict(stats)}


async def metrics_text(request: Request) -> Response:
    """Prometheus text format."""
    return Response(request.app.state.metrics.render(), media_type=METRICS_CONTENT_TYPE)


async def list_models(pipeline: PipelineDep, request: Request) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": pipeline.model_name, "object": "model",
                                        "created": int(request.app.state.started),
                                        "owned_by": "strictcall"}]}
