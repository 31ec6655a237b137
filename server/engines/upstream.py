"""UpstreamEngine: vLLM servers StrictCall does not run decode for it (`--engine upstream
--upstream URL`, repeatable, or one router's URL).

StrictCall renders the prompt and the grammar exactly as for its embedded vLLM engine; the
upstream decodes: `/v1/completions` with the prompt as token ids and the spec as vLLM's
`structured_outputs`, streamed with each delta's token ids (server/engines/upstream_wire.py).
Everything above the engine (contracts, validation, repair, policy, execution, the three
APIs) works unchanged. What the embedded engines do inside the decode loop and a remote
server cannot, jump-forward and the cold-compile bridge, is not in effect, and `stats()`
says so. Only the tokenizer and chat template are needed here (`--model`), not vLLM, torch
or llama.cpp.

Failures: a request whose upstream refuses, times out, answers 5xx, sends a malformed or
error line, or dies before the first token goes to another upstream; each such failure
counts against the upstream, which leaves rotation once they come several in a row (or at
once when its connection is refused: server/engines/upstream_pool.py). StrictCall's own
connection pool running dry is not the upstream's fault: the request moves, the upstream
stays. After the first token the tokens are out (maybe streamed), so the request fails
with a 503 and Retry-After. Cancelling the request (a runaway guard, a client gone)
closes the stream, and vLLM aborts the request when its client goes."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from grammars import CompiledGrammar, GrammarSpec
from server.engines import rules
from server.engines.base import (
    Engine,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    TokenCallback,
)
from server.engines.json_text import JsonClose
from server.engines.tokenizer_files import load_tokenizer
from server.engines.upstream_pool import Health, Upstream, UpstreamPool
from server.engines.upstream_probe import TOKENIZER_PROBE, ProbeSpec, describe
from server.engines.upstream_wire import (
    Delta,
    UpstreamError,
    UpstreamGrammarBackend,
    Whitespace,
    completion_body,
    ended_on_eos,
    read_event,
)
from server.errors import EngineFailure, InvalidRequest, Unavailable

log = logging.getLogger("strictcall.engine")
WARM_TIMEOUT_S = 120.0  # vLLM's pinned xgrammar takes seconds on string lengths


@dataclass(frozen=True)
class UpstreamOptions:
    model: str | None = None  # the upstream's served model name (default: what it lists)
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 60.0  # to the first token, and between tokens
    cooldown_s: float = 5.0  # out of rotation at least this long after a failure
    whitespace: Whitespace = "bounded"
    max_model_len: int | None = None  # default: the smallest the upstreams report
    eject_after: int = 3  # consecutive failures that take an upstream out of rotation
    probe: str = "decode"  # "decode": a one-token decode; "models": GET /v1/models only
    resolve: bool = False  # each URL's host name as all its addresses
    check_tokenizer: bool = True


class UpstreamLost(EngineFailure):
    """The upstream failed after the first token: the request cannot move elsewhere."""

    slug, title = "upstream-failure", "Upstream failure"


class _NotStarted(Exception):
    """No token came: the request may go to another upstream. `at_fault`: a failure of the
    upstream (counted), not merely busy; `down`: nothing listens there (out at once);
    `slow`: no first token in time, which the request itself may cause (a schema slow to
    compile): counted only once another upstream has served the same request."""

    def __init__(self, why: str, *, at_fault: bool, down: bool = False,
                 slow: bool = False) -> None:
        super().__init__(why)
        self.why, self.at_fault, self.down, self.slow = why, at_fault, down, slow


@dataclass
class _Streamed:
    """One decode's stream as it comes: the tokens (each told to `on_token`), the text, how
    it ended, and when the first token came."""

    started: float
    tokens: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    finish: str | None = None
    stop_reason: int | str | None = None
    first_at: float | None = None
    close: JsonClose | None = None  # for a JSON value's grammar: where it closes

    def add(self, delta: Delta | None, on_token: TokenCallback | None) -> bool:
        """Add one event; True once the JSON value a grammar writes has closed, which ends
        the decode as on EOS without waiting a model step for it (JsonClose)."""
        if delta is None:
            return False
        if delta.token_ids and self.first_at is None:
            self.first_at = time.perf_counter()
        for token in delta.token_ids:
            self.tokens.append(token)
            if on_token is not None:
                on_token(token)
        self.pieces.append(delta.text)
        self.finish = delta.finish_reason or self.finish
        if delta.stop_reason is not None:
            self.stop_reason = delta.stop_reason
        if self.finish is None and self.close is not None and self.close.add(delta.text):
            self.finish = "stop"  # stop_reason None: as on EOS
            return True
        return False

    def result(self, request: GenerationRequest, *, constrained: bool) -> GenerationResult:
        ended = time.perf_counter()
        reason: FinishReason = "length" if self.finish == "length" else "stop"
        complete = rules.grammar_complete(
            constrained=constrained, ended_on_eos=ended_on_eos(self.finish, self.stop_reason))
        return GenerationResult(tuple(self.tokens), "".join(self.pieces), reason,
                                len(request.prompt_ids), grammar_complete=complete,
                                timings={"total": ended - self.started,
                                         "first_token": (self.first_at or ended) - self.started})


class UpstreamEngine(Engine):
    def __init__(self, model_dir: Path, *, urls: list[str], options: UpstreamOptions,
                 model_name: str | None = None, transport: httpx.AsyncBaseTransport |
                 None = None, probe_transport: httpx.BaseTransport | None = None) -> None:
        self.tokenizer = load_tokenizer(model_dir)
        self.model_dir = Path(model_dir)
        self.model_name = model_name or self.model_dir.name
        self.options = options
        self.eos_token_ids = rules.eos_token_ids(model_dir, self.tokenizer)
        # vLLM ends on the tokenizer's EOS and the generation config's; the rest of ours too.
        self._extra_stop_ids = sorted(self.eos_token_ids - {self.tokenizer.eos_token_id})
        self.grammar_backend = UpstreamGrammarBackend(
            self.tokenizer, stop_token_ids=sorted(self.eos_token_ids),
            whitespace=options.whitespace)
        # No bound on connections of its own: the admission bound is the server's, and a
        # pool that runs dry must not look like a failing upstream.
        self._client = httpx.AsyncClient(
            transport=transport, limits=httpx.Limits(max_connections=None,
                                                     max_keepalive_connections=64),
            timeout=httpx.Timeout(options.read_timeout_s, connect=options.connect_timeout_s))
        self.pool = UpstreamPool(urls, model=options.model, cooldown_s=options.cooldown_s,
                                 connect_timeout_s=options.connect_timeout_s,
                                 health=self._health(options), transport=probe_transport)
        self._config_context = _config_context(self.model_dir)
        self._warm_specs: list[GrammarSpec] = []
        self._counts = {"finished": 0, "cancelled": 0, "ended_at_close": 0,
                        "moved_to_another_upstream": 0,
                        "failed_after_first_token": 0, "refused_no_upstream": 0,
                        "slow_on_every_upstream": 0, "grammars_warmed": 0}
        self._running = 0  # requests decoding upstream now
        self.pool.probe_all()
        self.max_context = self._context()
        self.pool.on_back = self._came_back
        self.pool.start()
        for upstream in self.pool.upstreams:
            log.info("upstream %s: %s", upstream.url, "in rotation" if upstream.up
                     else f"out of rotation ({upstream.problem})")
        log.info("jump-forward and the cold-compile bridge are not in effect: the upstream "
                 "decodes")

    def _health(self, options: UpstreamOptions) -> Health:
        decode = () if options.probe == "models" else tuple(
            self.encode(self.render_chat([{"role": "user", "content": "hi"}])))
        expected = tuple(self.tokenizer.encode(TOKENIZER_PROBE, add_special_tokens=False))
        return Health(eject_after=options.eject_after, cooldown_s=options.cooldown_s,
                      check_tokenizer=options.check_tokenizer,
                      probe=ProbeSpec(decode, expected), resolve=options.resolve,
                      decode_timeout_s=min(options.read_timeout_s, 10.0))

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self._running += 1
        try:
            return await self._generate(request)
        finally:
            self._running -= 1

    async def _generate(self, request: GenerationRequest) -> GenerationResult:
        tried: list[Upstream] = []
        reasons: list[str] = []
        slow: list[tuple[Upstream, str]] = []  # no first token in time: whose fault?
        while (upstream := self.pool.choose(tried)) is not None:
            tried.append(upstream)
            try:
                result = await self._decode(upstream, request)
                for earlier, why in slow:  # another served it in time: theirs, counted
                    self.pool.fail(earlier, why, keep_last=True)
                return result
            except _NotStarted as exc:
                reasons.append(f"{upstream.name}: {exc.why}")
                if exc.slow:
                    slow.append((upstream, exc.why))
                elif exc.at_fault:
                    self.pool.fail(upstream, exc.why, at_once=exc.down)
                self._counts["moved_to_another_upstream"] += 1
            finally:
                self.pool.release(upstream)
        if slow:  # slow on every upstream it tried: the request's doing, counted against none
            self._counts["slow_on_every_upstream"] += 1
        self._counts["refused_no_upstream"] += 1
        why = "; ".join(reasons) or self.pool.problem() or "none is in rotation"
        error = Unavailable(f"no upstream vLLM server could take the request ({why}); retry "
                            "after the Retry-After delay", code="upstream_unavailable")
        error.retry_after_s = max(1, math.ceil(self.options.cooldown_s))
        raise error

    async def _decode(self, upstream: Upstream, request: GenerationRequest
                      ) -> GenerationResult:
        assert upstream.model is not None  # learned by the probe that put it in rotation
        grammar = request.grammar
        body = completion_body(
            request.prompt_ids, request.sampling, model=upstream.model,
            spec=grammar.spec if grammar is not None else None,
            whitespace=self.options.whitespace, extra_stop_ids=self._extra_stop_ids,
            skip_special_tokens=self.skip_special_tokens,
            request_id=f"strictcall-{uuid.uuid4().hex}")
        got = _Streamed(time.perf_counter(),
                        close=JsonClose.for_spec(grammar.spec if grammar is not None else None))
        try:
            sent = self._client.build_request("POST", f"{upstream.url}/v1/completions",
                                              json=body, headers=upstream.headers())
            response = await self._client.send(sent, stream=True)
            try:
                if response.status_code != 200:
                    await _refused(response)
                async for line in response.aiter_lines():
                    if got.add(read_event(line), request.on_token):
                        self._counts["ended_at_close"] += 1
                        break
            finally:
                # Closing the connection is what makes vLLM abort the request: shielded, so
                # a second cancellation (the request's end, a client gone) cannot cut it.
                await asyncio.shield(response.aclose())
            if got.finish is None:
                raise UpstreamError("the stream ended without a finish reason")
        except asyncio.CancelledError:  # closing the stream makes vLLM abort the request
            self._counts["cancelled"] += 1
            raise
        except (httpx.HTTPError, UpstreamError, ValueError) as exc:
            self._lost(upstream, exc, len(got.tokens))
        self.pool.succeeded(upstream)
        self._counts["finished"] += 1
        return got.result(request, constrained=grammar is not None)

    def _lost(self, upstream: Upstream, exc: Exception, produced: int) -> None:
        """Before the first token the request may move; after it, a 503."""
        why = describe(exc) if isinstance(exc, httpx.HTTPError) else str(exc)[:300]
        if produced == 0:
            raise _NotStarted(why, at_fault=not isinstance(exc, httpx.PoolTimeout),
                              down=isinstance(exc, (httpx.ConnectError,
                                                    httpx.ConnectTimeout)),
                              slow=isinstance(exc, httpx.ReadTimeout)) from exc
        self.pool.fail(upstream, why)
        self._counts["failed_after_first_token"] += 1
        log.warning("upstream %s failed after %d tokens: %s", upstream.url, produced, why)
        raise UpstreamLost(f"the upstream vLLM server ({upstream.name}) failed after the "
                           f"first token ({why}); retry the request",
                           code="upstream_failed") from exc

    async def warm(self, grammars: list[CompiledGrammar]) -> None:
        """Have every upstream in rotation compile each grammar now (a one-token decode
        under it), so no request pays for it; again for an upstream that comes back."""
        self._warm_specs = [g.spec for g in grammars]
        for upstream in [u for u in self.pool.upstreams if u.up]:
            results = await asyncio.gather(*(
                self._client.post(f"{upstream.url}/v1/completions", headers=upstream.headers(),
                                  json=self._warm_body(upstream, spec), timeout=WARM_TIMEOUT_S)
                for spec in self._warm_specs), return_exceptions=True)
            self._warmed(upstream, results)

    def _warm_body(self, upstream: Upstream, spec: GrammarSpec) -> dict[str, Any]:
        prompt = self.encode(self.render_chat([{"role": "user", "content": "hi"}]))
        body = completion_body(prompt, SamplingParams(max_tokens=1),
                               model=upstream.model or self.model_name, spec=spec,
                               whitespace=self.options.whitespace,
                               extra_stop_ids=self._extra_stop_ids, skip_special_tokens=True,
                               request_id=f"strictcall-warm-{uuid.uuid4().hex}")
        return {**body, "stream": False, "return_token_ids": False}

    def _warmed(self, upstream: Upstream, results: list[Any]) -> None:
        failed = [r for r in results if isinstance(r, BaseException)
                  or getattr(r, "status_code", 200) != 200]
        self._counts["grammars_warmed"] += len(results) - len(failed)
        if failed:  # requests will compile them: slower, not wrong
            first = failed[0]
            why = describe(first) if isinstance(first, BaseException) else \
                f"{first.status_code}: {first.text[:200]}"
            log.warning("upstream %s: %d of %d grammars not warmed (%s)", upstream.url,
                        len(failed), len(results), why)

    def _came_back(self, upstream: Upstream) -> None:
        """From the prober's thread: the context may be known now; its grammars are warmed
        in a thread of their own, so the prober goes on probing the others."""
        self.max_context = self._context()
        if self._warm_specs:
            threading.Thread(target=self._rewarm, args=(upstream,), daemon=True,
                             name="strictcall-upstream-warm").start()

    def _rewarm(self, upstream: Upstream) -> None:
        results: list[Any] = []
        for spec in self._warm_specs:
            try:
                results.append(self.pool.post(upstream, "/v1/completions",
                                              self._warm_body(upstream, spec),
                                              WARM_TIMEOUT_S))
            except httpx.HTTPError as exc:
                results.append(exc)
        if results:
            self._warmed(upstream, results)

    def _context(self) -> int:
        return self.options.max_model_len or self.pool.smallest_context() or \
            self._config_context

    def alive(self) -> bool:
        return self.pool.any_up()

    def problem(self) -> str | None:
        return self.pool.problem()

    def stats(self) -> dict[str, int]:
        # Decode-loop features a remote server cannot have: reported off, never faked.
        return {**self._counts, **self.pool.counts(), "running": self._running,
                "jump_forward_in_effect": 0, "cold_compile_bridge_in_effect": 0}

    def close(self) -> None:
        self.pool.close()

    async def aclose(self) -> None:
        await self._client.aclose()
        self.close()


async def _refused(response: httpx.Response) -> None:
    """A non-200 answer: the request's fault (400: ours to report, not retried) or the
    upstream's (moved to another)."""
    text = (await response.aread()).decode(errors="replace")
    try:
        message = str(json.loads(text).get("error", {}).get("message") or text)
    except (ValueError, AttributeError):
        message = text
    status = response.status_code
    if status in (400, 422):
        raise InvalidRequest(f"the upstream vLLM server refused the request: {message[:400]}",
                             code="upstream_refused")
    # 429: busy, not broken: another may take it, and it stays in rotation.
    raise _NotStarted(f"answered {status}: {message[:200]}", at_fault=status != 429)


def _config_context(model_dir: Path) -> int:
    """The model's own context, where no upstream has said its max_model_len yet."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return 2048
    value = config.get("max_position_embeddings")
    return int(value) if isinstance(value, int) else 2048
