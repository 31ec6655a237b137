"""The decode loop shared by the engines that step a model themselves (torch, llama.cpp).

One worker thread owns the model. Requests queue up; each is prefilled alone, then joins the
running batch, and every decode step advances all of them at once, with one grammar bitmask
row per constrained request. Jump-forward: tokens the grammar forces (keys, punctuation, a
decided name) are accepted without sampling and fed to the model together in the row's next
step, one forward pass for all of them. A watchdog (engines/watchdog.py) times every step:
one that runs past `step_timeout_s` fails the requests it holds with a 503 and marks the
engine unhealthy until it returns; whatever it then returns for them is discarded.

A subclass supplies the model: `_prefill_logits` (one request's prompt, into its own cache),
`_step_logits` (one step for the batch's rows, each fed its `pending` tokens) and
`_keep_rows` (rows that finished leave the batch)."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from grammars import GrammarMatcher, MaskingBackend
from server.engines import rules
from server.engines.base import Engine, FinishReason, GenerationRequest, GenerationResult
from server.engines.sampling import choose_token, make_generator
from server.engines.watchdog import StepWatchdog
from server.errors import EngineFailure

log = logging.getLogger("strictcall.engine")


@dataclass
class DecodeRow:
    request: GenerationRequest
    future: concurrent.futures.Future[GenerationResult]
    matcher: GrammarMatcher | None
    generator: torch.Generator
    out: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    last_token: int = -1
    # What the next decode step feeds this row: the sampled token, then any forced ones.
    pending: list[int] = field(default_factory=list)
    finished: bool = False  # set by the engine thread before the result is handed out
    # Only for free text with stop strings: the text so far, a short decode per token.
    stops: rules.StopStringScanner | None = None
    slot: int = -1  # where the engine keeps this row's cache (llama.cpp's sequence id)



class SteppedEngine(Engine):
    steers = True
    grammar_backend: MaskingBackend
    max_batch: int
    vocab_size: int
    device: torch.device = torch.device("cpu")  # where logits are (the torch engine's GPU)

    def _start(self, *, name: str, max_batch: int, step_timeout_s: float,
               jump_forward: bool) -> None:
        """Called by the subclass once its model, tokenizer and grammar backend are set."""
        self.max_batch = max_batch
        self.jump_forward = jump_forward
        self._queue: queue.Queue[DecodeRow | None] = queue.Queue()
        self._rows: list[DecodeRow] = []
        self._bitmask = self.grammar_backend.allocate_bitmask(max_batch)
        if self.device.type == "cuda":  # filled on the host, copied without a sync
            self._bitmask = self._bitmask.pin_memory()
        # prefills: one per request, reasoning pass or not (it continues in the same cache).
        self._counts = {"finished": 0, "cancelled": 0, "decode_steps": 0, "prefills": 0,
                        "prefill_tokens": 0, "hung_steps": 0, "failed_by_watchdog": 0,
                        "jump_forward_tokens": 0, "prefix_hits": 0, "prefix_reused_tokens": 0}
        self._inflight: list[DecodeRow] = []  # what the step now running holds
        self._watchdog = StepWatchdog(step_timeout_s, on_hang=self._on_hang,
                                      on_recover=self._on_recover)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the model, per engine ---------------------------------------------------------
    @abc.abstractmethod
    def _prefill_logits(self, seq: DecodeRow) -> torch.Tensor:
        """Prefill `seq`'s prompt into its own cache; the last position's logits [vocab]
        (a tensor the loop may mask in place). Counts prefill_tokens and prefix reuse."""

    @abc.abstractmethod
    def _join(self, seq: DecodeRow) -> None:
        """`seq`, prefilled, joins the running batch as its last row."""

    @abc.abstractmethod
    def _step_logits(self, rows: list[DecodeRow]) -> torch.Tensor:
        """One forward step: row r is fed `rows[r].pending`; logits [rows, vocab] of each
        row's last fed token."""

    @abc.abstractmethod
    def _keep_rows(self, keep: list[int], rows: list[DecodeRow]) -> None:
        """Only rows `keep` (indexes into `rows`) stay in the batch; an empty list empties it."""

    def _released(self, seq: DecodeRow) -> None:
        """`seq` finished at its prefill, before joining: free what it holds."""

    # -- Engine API -------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        future: concurrent.futures.Future[GenerationResult] = concurrent.futures.Future()
        matcher = self.grammar_backend.matcher(request.grammar) if request.grammar else None
        seq = DecodeRow(request, future, matcher,
                        make_generator(request.sampling.seed, self.device),
                        stops=rules.StopStringScanner.for_request(
                            request.sampling, self.decode, constrained=matcher is not None))
        seq.timings["queued_at"] = time.perf_counter()
        self._queue.put(seq)
        # Cancelling the awaiting task cancels `future`; the worker sees it at its next step.
        return await asyncio.wrap_future(future)

    def alive(self) -> bool:
        return self._thread.is_alive() and self._watchdog.hung_for is None

    def problem(self) -> str | None:
        hung = self._watchdog.hung_for
        if hung is not None:
            return (f"an engine step has run for {hung:.0f} s, past the "
                    f"{self._watchdog.timeout_s:g} s watchdog")
        return super().problem()

    def stats(self) -> dict[str, int]:
        # Finished rows leave the batch at the end of their step: not counted as running.
        running = sum(1 for seq in self._rows if not seq.finished)
        return {"running": running, "queued": self._queue.qsize(), **self._counts}

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        self._watchdog.close()

    # -- watchdog (its monitor thread, and the worker when a hung step returns) --------
    def _on_hang(self, elapsed: float, first: bool) -> None:
        failure = EngineFailure(
            f"an engine step ran past the {self._watchdog.timeout_s:g} s watchdog; the "
            "request was failed and the engine is reported unhealthy until the step "
            "returns; retry (another replica can answer)")
        if first:
            self._counts["hung_steps"] += 1
            log.error("an engine step has run %.1f s (watchdog: %g s): failing its %d "
                      "request(s); /health reports degraded until it returns", elapsed,
                      self._watchdog.timeout_s, len(self._inflight))
            for row in self._inflight:
                self._fail_watched(row, failure)
        # New work would wait behind the hung step: failed too (admission refuses more).
        closing = False
        while True:
            try:
                seq = self._queue.get_nowait()
            except queue.Empty:
                break
            if seq is None:
                closing = True
            else:
                self._fail_watched(seq, failure)
        if closing:
            self._queue.put(None)

    def _fail_watched(self, seq: DecodeRow, failure: EngineFailure) -> None:
        if not seq.future.done():
            self._counts["failed_by_watchdog"] += 1
        _settle(seq.future, exc=failure)

    def _on_recover(self, took: float) -> None:
        log.warning("the hung engine step returned after %.1f s; its requests had been "
                    "failed, their results are discarded; serving again", took)

    # -- worker thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self._admit():
                return
            if not self._rows:
                continue
            try:
                with self._watched(self._rows):
                    self._decode_step()
            except Exception as exc:
                log.exception("decode step failed")
                self._fail_all(exc)

    def _admit(self) -> bool:
        """Prefill queued requests into the batch. Blocks only while nothing is running."""
        while len(self._rows) < self.max_batch:
            try:
                seq = self._queue.get(block=not self._rows)
            except queue.Empty:
                return True
            if seq is None:
                self._fail_all(RuntimeError("engine closed"))
                return False
            if seq.future.cancelled():
                self._counts["cancelled"] += 1
                continue
            try:
                with self._watched([seq, *self._rows]):  # the batch waits on it too
                    self._prefill(seq)
            except Exception as exc:
                log.exception("prefill failed")
                self._released(seq)
                _settle(seq.future, exc=exc)
        return True

    def _watched(self, seqs: list[DecodeRow]):
        self._inflight = list(seqs)
        return self._watchdog.step()

    @torch.inference_mode()  # logits are inference tensors: masked and steered in place
    def _prefill(self, seq: DecodeRow) -> None:
        start = time.perf_counter()
        seq.timings["queue_s"] = start - seq.timings["queued_at"]
        self._counts["prefills"] += 1
        logits = self._prefill_logits(seq)
        done = self._choose_and_check(seq, logits, 0)
        seq.timings["prefill_s"] = time.perf_counter() - start  # includes the first token
        if done:
            self._released(seq)
            return
        self._join(seq)
        self._rows.append(seq)
        # Decode time counts batched steps only, so tokens/s = (tokens - 1) / decode_s.
        seq.timings["decode_started"] = time.perf_counter()

    @torch.inference_mode()
    def _decode_step(self) -> None:
        logits = self._step_logits(self._rows).float()
        self._counts["decode_steps"] += 1
        self._mask_logits(logits, self._rows)
        keep = [row for row, seq in enumerate(self._rows)
                if not self._choose_and_check(seq, logits[row], row, masked=True)]
        if len(keep) != len(self._rows):
            self._keep_rows(keep, self._rows)
            self._rows = [self._rows[i] for i in keep]

    def _mask_logits(self, logits: torch.Tensor, seqs: list[DecodeRow]) -> None:
        rows = []
        for i, seq in enumerate(seqs):
            if seq.matcher is not None:
                seq.matcher.fill_bitmask(self._bitmask, i)
                rows.append(i)
        if not rows:
            return
        self.grammar_backend.apply_bitmask(logits, self._bitmask[: len(seqs)], rows)

    def _choose_and_check(self, seq: DecodeRow, logits: torch.Tensor, row: int, *,
                          masked: bool = False) -> bool:
        """Pick the next token for `seq`; return True when `seq` is finished (and settled)."""
        if seq.future.done():  # cancelled by its client, or failed by the watchdog
            return self._finish(seq, "cancelled")
        if seq.matcher is not None and not masked:
            self._mask_logits(logits.unsqueeze(0), [seq])
        sp = seq.request.sampling
        if seq.request.steer is not None:
            rules.avoid(logits, seq.request.steer(seq.out))
        token = choose_token(logits, temperature=sp.temperature, top_p=sp.top_p,
                             generator=seq.generator)
        if seq.matcher is not None and not seq.matcher.accept_token(token):
            raise RuntimeError(f"grammar refused token {token} that its own mask allowed")
        seq.last_token = token
        seq.timings["sampled"] = seq.timings.get("sampled", 0) + 1  # EOS included
        if token in self.eos_token_ids:
            return self._finish(seq, "stop")
        seq.pending = [token]
        self._emit(seq, token)
        if self.jump_forward and seq.matcher is not None:
            self._jump_forward(seq, room=sp.max_tokens - len(seq.out))
        if seq.matcher is not None and seq.matcher.is_terminated():
            return self._finish(seq, "stop")
        cut = seq.stops.add(token) if seq.stops is not None else None
        if cut is not None:
            return self._finish(seq, "stop", text=cut)
        total = len(seq.request.prompt_ids) + len(seq.out)
        if len(seq.out) >= sp.max_tokens or total >= self.max_context:
            return self._finish(seq, "length")
        return False

    def _emit(self, seq: DecodeRow, token: int) -> None:
        seq.out.append(token)
        if seq.request.on_token is not None:
            seq.request.on_token(token)

    def _jump_forward(self, seq: DecodeRow, *, room: int) -> None:
        """Accept what the grammar forces next (at most `room` tokens) and queue it for the
        row's next step, so that it costs one forward pass instead of one per token."""
        assert seq.matcher is not None
        forced = seq.matcher.forced_tokens()[:max(room, 0)]
        for token in forced:
            if not seq.matcher.accept_token(token):
                raise RuntimeError(f"grammar refused its own forced token {token}")
            self._emit(seq, token)
        seq.pending.extend(forced)
        self._counts["jump_forward_tokens"] += len(forced)
        seq.timings["forced"] = seq.timings.get("forced", 0) + len(forced)

    def _finish(self, seq: DecodeRow, reason: FinishReason, *, text: str | None = None) -> bool:
        now = time.perf_counter()
        self._counts["cancelled" if reason == "cancelled" else "finished"] += 1
        seq.finished = True
        seq.timings["decode_s"] = now - seq.timings.get("decode_started", now)
        seq.timings["total_s"] = now - seq.timings["queued_at"]
        matcher = seq.matcher
        complete = rules.grammar_complete(
            constrained=matcher is not None,
            ended_on_eos=matcher is not None and matcher.is_terminated())
        result = GenerationResult(
            token_ids=tuple(seq.out),
            text=text if text is not None else self.decode(seq.out),
            finish_reason=reason, prompt_tokens=len(seq.request.prompt_ids),
            grammar_complete=complete, timings=dict(seq.timings))
        _settle(seq.future, result=result)
        return True

    def _fail_all(self, exc: BaseException) -> None:
        # The batch is emptied before any waiter wakes: one that reads stats() at once sees
        # its slot free, not a row the worker has yet to drop.
        rows, self._rows = self._rows, []
        self._keep_rows([], rows)
        for seq in rows:
            _settle(seq.future, exc=exc)


def _settle(future: concurrent.futures.Future, *, result: Any = None,
            exc: BaseException | None = None) -> None:
    if future.done():  # cancelled by a client that went away
        return
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


