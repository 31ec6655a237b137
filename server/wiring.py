"""The composition root: the server's parts built from its settings, in order, and closed in
reverse. The state store first (an unreachable database fails before the model loads), then
the sessions' and responses' stores, the engine, the model format, the grammar policy and
cache, the pipeline (its contract grammars warmed), the execution layer and the background
tasks. `server/api/app.py` serves what this builds; nothing here knows HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import TracerProvider

from contracts import ContractRegistry
from grammars import DiskStore, GrammarCache, GrammarPolicy
from server.background import Background, reload_on_hangup, replay_journal, sweep_forever
from server.engines.base import Engine
from server.engines.memory import freeze_startup_heap, release_free_heap
from server.execution import (
    OwnerClients,
    RecordStore,
    Runner,
    ToolPolicy,
    Tracing,
    file_provider,
    load_policy,
)
from server.execution.approvals import Approvals
from server.execution.journal import OutcomeJournal
from server.execution.keyed import KeyedRuns
from server.execution.replays import ABANDONED_S, Replays
from server.execution.service import ToolService
from server.formats.detect import resolve as resolve_format
from server.identity import KeyRing, WatchedKeyRing
from server.logs import AuditLog
from server.metrics import Metrics
from server.model_store import default_cache_dir
from server.pipeline.chat import ChatPipeline, Parts
from server.ratelimit import Limiter
from server.sessions import ResponseStore, SessionStore
from server.sessions.sealing import Sealer
from server.settings import Settings
from server.state import StateStore, open_rate_limits, open_state, state_url
from server.state.url import sqlite_path

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
    database, in the cache dir under this replica's name (--replica-name, a StatefulSet
    pod's, so a replaced pod replays it; else its host name and port: replicas on one host
    must not share it); memory only when the state is."""
    if settings.outcome_journal is not None:
        return settings.outcome_journal
    url = state_url(settings)
    if url.startswith("memory:"):
        return None
    if url.startswith("sqlite:"):
        path = sqlite_path(url)
        return path.with_name(path.stem + ".outcomes.journal")
    name = settings.replica_name or f"{socket.gethostname()}-{settings.port}"
    return (settings.cache_dir or default_cache_dir()) / f"outcomes-{name}.journal"


@dataclass(frozen=True)
class Inputs:
    """What is known before the server starts: read from files, checked at once (each
    raises with one line), so a bad file fails `strictcall serve` before the model loads."""

    settings: Settings
    engine_factory: EngineFactory
    registry: ContractRegistry
    tool_policy: ToolPolicy
    audit: AuditLog | None
    keys: KeyRing | WatchedKeyRing | None  # None: no keys, every caller admitted
    rate_limits: Limiter | None  # per key: without keys there is no one to count against
    tracer_provider: TracerProvider | None

    @classmethod
    def read(cls, settings: Settings, engine_factory: EngineFactory,
             registry: ContractRegistry | None = None, *, keys: KeyRing | None = None,
             audit: AuditLog | None = None, tool_policy: ToolPolicy | None = None,
             tracer_provider: TracerProvider | None = None) -> Inputs:
        """`keys`: the API keys (default: loaded from settings.api_keys_file, if set;
        raises server.identity.KeyFileError). `audit`: default opened at
        settings.audit_log, if set (raises OSError). `tool_policy`: default loaded from
        settings.policy, if set (raises server.execution.PolicyFileError), else allow-all.
        `tracer_provider`: where request spans go (default: settings.trace_file's, else
        OpenTelemetry's global provider)."""
        registry = registry or load_contracts(settings.contracts)
        ring: KeyRing | WatchedKeyRing | None = keys
        if settings.api_keys_file is not None:  # read again on SIGHUP and when it changes
            ring = WatchedKeyRing(settings.api_keys_file, keys)
        if tool_policy is None:
            tool_policy = load_policy(settings.policy, registry) if settings.policy \
                else ToolPolicy()
        if audit is None and settings.audit_log is not None:
            audit = open_audit_log(settings)
        rate_limits = open_rate_limits(settings) if ring is not None else None
        return cls(settings, engine_factory, registry, tool_policy, audit, ring, rate_limits,
                   tracer_provider)


@dataclass(frozen=True)
class Services:
    """What the routes use, once built."""

    state: StateStore  # idempotency keys, sessions' slots, stored responses
    sessions: SessionStore
    responses: ResponseStore
    pipeline: ChatPipeline
    tools: ToolService
    metrics: Metrics
    started: float  # when it was ready (the models list's `created`)
    background: Background  # its supervised tasks (`/health` names a failing one)
    replays: Replays  # answers kept under a request's Idempotency-Key


@contextlib.asynccontextmanager
async def assembled(inputs: Inputs) -> AsyncIterator[Services]:
    """The parts built and started; closed in reverse when the block ends."""
    settings, registry = inputs.settings, inputs.registry
    async with contextlib.AsyncExitStack() as stack:
        # --state-url, before the model loads: an unreachable database fails fast.
        state = open_state(settings)
        stack.callback(state.close)
        stack.callback(gc.unfreeze)  # last: what start-up froze (_warm_dialogue) collectable
        if inputs.rate_limits is not None:
            stack.push_async_callback(inputs.rate_limits.aclose)
        if inputs.audit is not None:
            stack.callback(inputs.audit.close)
        sealer = Sealer(settings.state_secret.encode() if settings.state_secret else None)
        sessions = SessionStore(state, slot_ttl_s=settings.slot_ttl_s,
                                contract_of=registry.get, sealer=sealer)
        responses = ResponseStore(state, ttl_s=settings.response_ttl_s,
                                  contract_of=registry.get, sealer=sealer)
        tracing = Tracing(_tracing(settings, inputs.tracer_provider, stack))
        engine = inputs.engine_factory(settings)
        stack.push_async_callback(engine.aclose)
        pipeline, metrics = _pipeline(inputs, engine, sessions, tracing, stack)
        if settings.warm_grammars:  # what requests naming a contract will look up
            grammars = await asyncio.to_thread(pipeline.preparer.warm)
            await engine.warm(grammars)  # engines that compile grammars themselves (vLLM)
        # A client per tool owner (one owner's hanging endpoint holds only its own
        # connections); each attempt's limit is the contract's.
        http = OwnerClients(connections=settings.handler_workers)
        stack.push_async_callback(http.aclose)
        runner = Runner(http, workers_per_owner=settings.handler_workers)
        stack.callback(runner.pools.shutdown)
        runs = KeyedRuns(RecordStore(state, owned=False, ttl_s=settings.idempotency_ttl_s),
                         state, OutcomeJournal(journal_path(settings)),
                         lease_s=settings.execution_lease_s)
        stack.push_async_callback(runs.aclose)
        tools = ToolService(registry, inputs.tool_policy, runs=runs, runner=runner,
                            tracing=tracing, audit=inputs.audit,
                            approvals=Approvals(state, ttl_s=settings.approval_ttl_s))
        background = Background()
        stack.push_async_callback(background.stop)
        background.start(lambda: replay_journal(runs), "strictcall-journal")
        background.start(lambda: sweep_forever(state, every_s=settings.sweep_every_s,
                                               audit=inputs.audit,
                                               audit_max_age_s=settings.audit_log_max_age_s),
                         "strictcall-sweeper")
        if isinstance(inputs.keys, WatchedKeyRing):
            background.start(inputs.keys.watch, "strictcall-keys")
            reload_on_hangup(inputs.keys)
        # In the background: ready as soon as the model is; the first conversation finds
        # dateparser's and lingua's data loaded (about a second on this CPU). A thread:
        # it cannot be cancelled, only waited for.
        release_free_heap()  # start-up's transient blocks, freed: their pages go back
        warming = asyncio.create_task(asyncio.to_thread(_warm_dialogue, pipeline))
        stack.push_async_callback(lambda: warming)
        replays = Replays(RecordStore(state, owned=False, ttl_s=settings.idempotency_ttl_s),
                          sealer, abandoned_s=settings.request_timeout_s or ABANDONED_S)
        yield Services(state, sessions, responses, pipeline, tools, metrics, time.time(),
                       background, replays)


def _warm_dialogue(pipeline: ChatPipeline) -> None:
    pipeline.dialogue.warm()
    release_free_heap()
    freeze_startup_heap()


def _tracing(settings: Settings, given: TracerProvider | None,
             stack: contextlib.AsyncExitStack) -> TracerProvider | None:
    if given is not None or not settings.trace_file:
        return given
    provider, out = file_provider(settings.trace_file)
    assert isinstance(provider, SdkTracerProvider)  # file_provider's
    stack.callback(out.close)
    stack.callback(provider.shutdown)
    return provider


def _pipeline(inputs: Inputs, engine: Engine, sessions: SessionStore, tracing: Tracing,
              stack: contextlib.AsyncExitStack) -> tuple[ChatPipeline, Metrics]:
    settings = inputs.settings
    # Built once: requests, repairs, warm-up and the compile endpoint all plan with it.
    policy = GrammarPolicy.for_backend(engine.grammar_backend, settings.policies.model_dump(),
                                       json_layout=settings.json_layout)
    fmt = resolve_format(settings.model_format, model_dir=engine.model_dir,
                         tokenizer=engine.tokenizer)
    engine.skip_special_tokens = fmt.skip_special_tokens  # the reader needs its markers
    metrics = Metrics(settings.served_model_name or engine.model_name)
    disk = DiskStore((settings.cache_dir or default_cache_dir()) / "grammars",
                     max_bytes=settings.grammar_disk_cache_mb * 2**20) \
        if settings.grammar_disk_cache else None
    cache = GrammarCache(engine.grammar_backend, max_entries=settings.grammar_cache_entries,
                         max_bytes=settings.grammar_cache_bytes,
                         ttl_s=settings.grammar_cache_ttl_s, disk=disk,
                         compile_workers=settings.compile_workers,
                         on_compile=metrics.compile_seconds.observe)
    stack.callback(cache.close)
    metrics.watch(cache=lambda: dataclasses.asdict(cache.stats()), engine=engine.stats)
    pipeline = ChatPipeline(engine, cache, settings, Parts(
        policy, fmt, registry=inputs.registry, metrics=metrics,
        rate_limits=inputs.rate_limits, audit=inputs.audit, tool_policy=inputs.tool_policy,
        tracing=tracing, sessions=sessions))
    return pipeline, metrics
