"""Calls into the engine and the grammar cache, with their failures mapped to service errors:
an engine failure is a retryable 503; a schema the backend refuses, or one that does not
compile within the timeout, is a 400. A decode may run under a runaway guard, which stops
the engine early when the output repeats itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import replace
from typing import Any

from grammars import (
    BridgedBackend,
    GrammarCache,
    GrammarError,
    GrammarSpec,
    Lookup,
    bridge_first,
)
from server.engines.base import Engine, GenerationRequest, GenerationResult, TokenCallback
from server.errors import EngineFailure, InvalidRequest, ServiceError
from server.identity import Identity
from server.metrics import Metrics
from server.pipeline.guards.runaway import RunawayGuard, Trip
from server.pipeline.prepared import Decode, Prepared
from server.ratelimit import Limiter

log = logging.getLogger("strictcall.pipeline")

# One decode's result, and its runaway guard's trip if the guard stopped it.
Decoded = tuple[GenerationResult, Trip | None]


class Decoder:
    """The decode stage: one step of a plan decoded under its runaway guard, its tokens
    charged to the caller's key and its timings metered."""

    def __init__(self, engine: Engine, *, rate_limits: Limiter | None,
                 metrics: Metrics | None) -> None:
        self.engine = engine
        self.rate_limits = rate_limits
        self.metrics = metrics

    async def run(self, step: Decode, prepared: Prepared) -> Decoded:
        guard = step.guard(self.engine)
        identity = prepared.context.caller.identity
        request = step.guarded(guard)
        decoded = Counted(request.on_token)  # what the engine wrote, for the charge
        try:
            result = await decode(self.engine, replace(request, on_token=decoded),
                                  guard=guard)
        except BaseException as exc:
            prepared.context.trace.end(error=type(exc).__name__)
            # A client that left mid-decode (or timed out) is charged what was decoded for
            # it, its prompt included: leaving is no way around the tokens-per-minute limit.
            if isinstance(exc, asyncio.CancelledError) or decoded.count:
                self._charge(identity, len(request.prompt_ids) + decoded.count)
            raise
        self._charge(identity, result.prompt_tokens + result.completion_tokens)
        if self.metrics is not None:
            t = result.timings
            self.metrics.decode(prompt_tokens=result.prompt_tokens,
                                generated=result.completion_tokens,
                                finish_reason=result.finish_reason, ttft_s=t.get("ttft_s"),
                                decode_s=t["e2e_s"] - t["ttft_s"] if "ttft_s" in t else None,
                                queue_s=t.get("queue_s"))
        return result, guard.trip if guard is not None else None

    def _charge(self, identity: Identity | None, tokens: int) -> None:
        if self.rate_limits is not None and identity is not None and tokens > 0:
            self.rate_limits.charge(identity, tokens)


class Counted:
    """An engine's token callback that counts the tokens (the engine's thread writes the
    count; the loop reads it once the decode has ended)."""

    def __init__(self, then: TokenCallback | None) -> None:
        self.then = then
        self.count = 0

    def __call__(self, token: int) -> None:
        self.count += 1
        if self.then is not None:
            self.then(token)


async def compiled(cache: GrammarCache, spec: GrammarSpec, *, timeout_s: float,
                   bridge_wait_s: float | None = None, param: str | None = None,
                   persist: bool = True) -> Lookup:
    """The compiled grammar, never compiled on the event loop. Shielded: a caller that gives
    up does not cancel a compilation other requests share; it finishes and is cached.

    With a bridged backend and `bridge_wait_s` set, a miss still compiling after that long
    is served by the bridge's grammar (llguidance, milliseconds) where it enforces the same,
    while the compilation goes on for later requests. The bridge starts with the miss, beside
    xgrammar, so a schema's first mask waits for the longer of the two, not their sum (a
    bridge that xgrammar beats is thrown away: a miss is rare, the cache keeps the rest).
    A long schema (`bridge_first`), which xgrammar never compiles within the wait, is
    bridged first and compiled after: side by side, the two took twice as long here.
    `persist=False`: a grammar of one conversation, kept off the disk cache."""
    started = time.perf_counter()
    backend = cache.backend
    bridges = bridge_wait_s is not None and isinstance(backend, BridgedBackend)
    gate = threading.Event() if bridges and bridge_first(spec) else None
    submitted = cache.submit(spec, persist=persist, after=gate)
    # (The submitted future, not its asyncio wrapper: a wrapper learns of a hit only on
    # the loop's next turn, and a bridge started on every hit cost each request its compile.)
    missed = not submitted.done()
    if gate is not None and not missed:
        gate.set()
    future = asyncio.shield(asyncio.wrap_future(submitted))
    if bridges and isinstance(backend, BridgedBackend) and missed:
        bridging = asyncio.ensure_future(asyncio.to_thread(backend.bridge, spec))
        if gate is not None:  # set however the bridge ends, even after this call is gone
            bridging.add_done_callback(lambda _: gate.set())
        done, _ = await asyncio.wait({future}, timeout=bridge_wait_s)
        if not done:
            racing: set[asyncio.Future[Any]] = {future, bridging}
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        bridged = bridging.result() if not future.done() and bridging.done() else None
        if bridged is not None:
            # xgrammar goes on for later requests; a refusal there is theirs to report.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            return Lookup(bridged, False, time.perf_counter() - started)
    try:
        return await asyncio.wait_for(future, timeout=timeout_s)
    except TimeoutError:
        raise InvalidRequest(f"compiling the grammar for this schema took longer than "
                             f"{timeout_s:g} s; simplify the schema (fewer unions, shallower "
                             "nesting, smaller enums)", param=param,
                             code="grammar_timeout") from None
    except GrammarError as exc:  # `param`: the request field whose schema it was
        raise InvalidRequest(exc.render(), param=param, code="invalid_schema") from None


async def decode(engine: Engine, request: GenerationRequest, *,
                 guard: RunawayGuard | None = None) -> GenerationResult:
    """One decode; its result's timings gain `ttft_s` (to the first output token, measured
    the same way for every engine) and `e2e_s`."""
    started = time.perf_counter()
    first: list[float] = []
    watcher = request.on_token

    def stamp(token: int) -> None:  # the engine's thread
        if not first:
            first.append(time.perf_counter())
        if watcher is not None:
            watcher(token)

    request = replace(request, on_token=stamp)
    try:
        if guard is None:
            result = await engine.generate(request)
        else:
            result = await _guarded(engine, request, guard)
    except ServiceError:  # the engine chose its words for the client
        raise
    except Exception as exc:  # the engine's failure, not the request's: worth a retry
        # The exception's text (file paths, model internals) goes to the log, not the client.
        log.exception("the engine failed on a request")
        raise EngineFailure("the engine failed on this request; retry it (this server or "
                            "another replica)") from exc
    timings = {**result.timings, "e2e_s": time.perf_counter() - started}
    if first:
        timings["ttft_s"] = first[0] - started
    return replace(result, timings=timings)


async def _guarded(engine: Engine, request: GenerationRequest,
                   guard: RunawayGuard) -> GenerationResult:
    """Decode with `guard` between the engine and whoever watches the tokens; when it trips,
    the engine is stopped and the guard's text stands as the output."""
    loop = asyncio.get_running_loop()
    tripped = asyncio.Event()
    watcher = request.on_token
    seen: list[int] = []

    def on_token(token: int) -> None:  # the engine's thread
        seen.append(token)
        shown = guard.see(token)
        if guard.trip is not None:
            loop.call_soon_threadsafe(tripped.set)
        elif watcher is not None:
            for t in shown:
                watcher(t)

    task = asyncio.ensure_future(engine.generate(replace(request, on_token=on_token)))
    waiter = asyncio.ensure_future(tripped.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()  # tripped, or our caller went away: stop the decode
            with contextlib.suppress(asyncio.CancelledError):
                await task
    trip = guard.trip
    if trip is None:
        result = task.result()
        if watcher is not None:  # a call held back that turned out not to repeat
            for t in guard.release():
                watcher(t)
        return result
    complete = trip.kind in ("duplicate_call", "after_calls")
    return GenerationResult(tuple(seen), trip.text, "stop" if complete else "length",
                            len(request.prompt_ids), grammar_complete=complete)
