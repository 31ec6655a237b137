"""The decode loop shared by the engines that step a model themselves (torch, llama.cpp).

One worker thread owns the model. Requests queue up; the scheduler (engines/scheduler.py)
decides which prompt is prefilled next and how much of it, between the decode steps of the
requests already running: a prompt with a few tokens left (a prefix-cache hit) joins at
once, a longer one is prefilled in pieces that get a share of the engine's time while
others decode. Every decode step advances all running rows at once, with one grammar
bitmask row per constrained request (engines/decoding.py chooses the tokens).

Each row may be fed several tokens in a step: the tokens the grammar forces next (keys,
punctuation, a decided name: jump-forward) and drafts looked up in the prompt (values being
copied), checked against what the model would have chosen, all in one forward pass. Engines
that can also take a prefill piece in the same forward pass (llama.cpp) do. A watchdog
(engines/watchdog.py) times every step: one that runs past `step_timeout_s` fails the
requests it holds with a 503 and marks the engine unhealthy until it returns; whatever it
then returns for them is discarded.

A subclass supplies the model: `_begin` (a request's own cache, a reused prefix in it),
`_prefill_chunk` (the next piece of its prompt), `_step_logits` (one step for the batch),
`_keep_rows` (finished rows leave), `_rewind` (drafts that did not stand leave a row)."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from grammars import MaskingBackend
from server.engines import rules
from server.engines.arrays import Logits, as_float, host_bitmask, inference
from server.engines.base import Engine, GenerationRequest, GenerationResult
from server.engines.decoding import DecodeRow, RowDecoder, settle
from server.engines.drafts import Speculation
from server.engines.hung_steps import HungSteps
from server.engines.sampling import make_generator
from server.engines.scheduler import SchedulePolicy, Scheduler
from server.engines.watchdog import StepWatchdog

__all__ = ["DecodeRow", "SteppedEngine"]
log = logging.getLogger("strictcall.engine")
# Steps a drafted token is taken to cost on an engine that does not measure it.
ASSUMED_DRAFT_COST = 0.5
Chunk = tuple[DecodeRow, int]  # a prompt and how many more of its tokens to prefill


class SteppedEngine(HungSteps, Engine):
    steers = True
    grammar_backend: MaskingBackend
    max_batch: int
    vocab_size: int
    # Where logits are: None, numpy arrays on the host; else the torch device of the torch
    # engine's tensors (its GPU).
    device: Any = None
    # Tokens one forward pass may take in all (llama.cpp: its batch size).
    feed_limit: int = 1 << 20

    def _start(self, *, name: str, max_batch: int, step_timeout_s: float,
               jump_forward: bool, schedule: SchedulePolicy | None = None,
               speculation: Speculation | None = None) -> None:
        """Called by the subclass once its model, tokenizer and grammar backend are set."""
        self.max_batch = max_batch
        self.jump_forward = jump_forward
        self.speculation = speculation = self._priced(speculation)
        self._inbox: queue.Queue[DecodeRow | None] = queue.Queue()
        self._waiting: list[DecodeRow] = []  # queued; no cache yet
        self._prefilling: list[DecodeRow] = []  # part of the prompt in its cache
        self._rows: list[DecodeRow] = []  # decoding
        self._scheduler = Scheduler(schedule or SchedulePolicy())
        self._bitmask = host_bitmask(self.grammar_backend.allocate_bitmask(max_batch),
                                     self.device)
        # prefills: one per request, reasoning pass or not (it continues in the same cache).
        self._counts = {"finished": 0, "cancelled": 0, "decode_steps": 0, "prefills": 0,
                        "prefill_tokens": 0, "prefill_chunks": 0, "hung_steps": 0,
                        "failed_by_watchdog": 0, "jump_forward_tokens": 0, "prefix_hits": 0,
                        "prefix_reused_tokens": 0, "prefix_evictions": 0, "draft_tokens": 0,
                        "draft_accepted": 0, "sampled_tokens": 0,
                        # a decode step's time in the model's forward pass (with any prefill
                        # chunk that rode along) and in the host's mask, sampling and rows
                        "step_forward_us": 0, "step_host_us": 0}
        self._decoder = RowDecoder(
            backend=self.grammar_backend, eos=self.eos_token_ids, decode=self.decode,
            encode=self.encode, max_context=self.max_context, jump_forward=jump_forward,
            speculation=speculation, max_feed=max(1, self.feed_limit // max_batch),
            counts=self._counts)
        self._inflight: list[DecodeRow] = []  # what the step now running holds
        self._watchdog = StepWatchdog(step_timeout_s, on_hang=self._on_hang,
                                      on_recover=self._on_recover)
        self.grammar_backend.ready()  # a part built beside the start-up above (the bridge's)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _priced(self, speculation: Speculation | None) -> Speculation | None:
        """`speculation` with its draft cost measured, where drafts are on and no cost was
        given; an engine may call it as soon as its model can step (_start does otherwise)."""
        if speculation is None or speculation.max_tokens <= 0 \
                or speculation.token_cost is not None:
            return speculation
        speculation = dataclasses.replace(speculation, token_cost=self._draft_token_cost())
        log.info("a drafted token costs %.2f model steps here: %s", speculation.token_cost,
                 "drafts where a row's odds pay for them" if speculation.pays
                 else "no draft can pay, none are made")
        return speculation

    # -- the model, per engine ---------------------------------------------------------
    def _draft_token_cost(self) -> float:
        """Model steps one drafted token costs, fed with its logits after a one-token step
        (called once at start, before the loop runs). Engines that can, measure it."""
        return ASSUMED_DRAFT_COST

    def _reusable(self, prompt: Sequence[int]) -> int:
        """How many leading tokens of `prompt` a prefix cache would give now (an estimate
        for the scheduler; `_begin` reuses for real)."""
        return 0

    @abc.abstractmethod
    def _begin(self, seq: DecodeRow) -> None:
        """Give `seq` its own cache, with any reusable prefix of its prompt in it; sets
        `seq.prefilled` and counts prefix reuse."""

    @abc.abstractmethod
    def _prefill_chunk(self, seq: DecodeRow, n: int) -> Logits | None:
        """Feed the next `n` prompt tokens of `seq`; once the prompt is complete, the last
        position's logits [vocab] (a tensor the loop may mask in place), else None."""

    @abc.abstractmethod
    def _join(self, seq: DecodeRow) -> None:
        """`seq`, prefilled, joins the running batch as its last row."""

    @abc.abstractmethod
    def _step_logits(self, rows: list[DecodeRow]) -> Logits:
        """One forward step: row r is fed `rows[r].pending + rows[r].drafts`; the logits
        after its last pending token and after each draft, rows in order:
        [sum(1 + len(drafts)), vocab]."""

    @abc.abstractmethod
    def _keep_rows(self, keep: list[int], rows: list[DecodeRow]) -> None:
        """Only rows `keep` (indexes into `rows`) stay in the batch; an empty list empties it."""

    def _rewind(self, seq: DecodeRow, n: int) -> None:
        """Drop the last `n` tokens fed to row `seq` (drafts that did not stand)."""
        raise NotImplementedError(f"{type(self).__name__} does not take drafts")

    def _released(self, seq: DecodeRow) -> None:  # optional hook
        """`seq` finished or failed before joining the batch: free what it holds."""

    def _forward(self, rows: list[DecodeRow], chunk: Chunk | None
                 ) -> tuple[Logits, Logits | None]:
        """A decode step and a prefill piece: two passes here; engines that can, one."""
        logits = self._step_logits(rows)
        return logits, (self._prefill_chunk(*chunk) if chunk is not None else None)

    # -- Engine API -------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        future: concurrent.futures.Future[GenerationResult] = concurrent.futures.Future()
        matcher = self.grammar_backend.matcher(request.grammar) if request.grammar else None
        seq = DecodeRow(request, future, matcher,
                        make_generator(request.sampling.seed, self.device),
                        stops=rules.StopStringScanner.for_request(
                            request.sampling, self.decode, constrained=matcher is not None))
        seq.timings["queued_at"] = time.perf_counter()
        self._inbox.put(seq)
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
        queued = self._inbox.qsize() + len(self._waiting) + len(self._prefilling)
        cost = self.speculation.token_cost if self.speculation is not None else None
        return {"running": running, "queued": queued, **self._counts,
                # what a drafted token costs, in hundredths of a model step (-1: no drafts)
                "draft_cost_pct": -1 if cost is None else round(100 * cost)}

    def close(self) -> None:
        self._inbox.put(None)
        self._thread.join(timeout=10)
        self._watchdog.close()

    # -- worker thread ----------------------------------------------------------------
    def _run(self) -> None:
        with inference(self.device):
            while self._collect():
                try:
                    self._turn()
                except Exception as exc:  # a bug here fails the batch, not the worker
                    log.exception("engine step failed")
                    self._fail_rows(exc)

    def _turn(self) -> None:
        """One round of the worker: short prompts join, then a decode step (with a prefill
        piece where the scheduler pays for one) or, with nothing decoding, a prefill piece."""
        self._drop_cancelled()
        self._join_short()
        if self._rows:
            self._decode_step()
        elif (seq := self._next_prompt()) is not None:
            self._prefill_piece(seq, self._scheduler.budget(self._left(seq), decoding=False))

    def _collect(self) -> bool:
        """New requests from the inbox to the waiting list; blocks while there is nothing
        else to do. False once the engine closes."""
        block = not (self._rows or self._prefilling or self._waiting)
        while True:
            try:
                seq = self._inbox.get(block=block)
            except queue.Empty:
                return True
            if seq is None:
                self._fail_all(RuntimeError("engine closed"))
                return False
            prompt = seq.request.prompt_ids
            seq.estimate = len(prompt) - self._reusable(prompt)
            self._waiting.append(seq)
            block = False

    def _drop_cancelled(self) -> None:
        for seq in [s for s in (*self._waiting, *self._prefilling) if s.future.done()]:
            self._counts["cancelled"] += 1
            self._forget(seq)

    def _forget(self, seq: DecodeRow) -> None:
        """`seq` leaves before joining the batch (cancelled, failed, or done at once)."""
        if seq in self._waiting:
            self._waiting.remove(seq)
        if seq in self._prefilling:
            self._prefilling.remove(seq)
            self._released(seq)

    def _left(self, seq: DecodeRow) -> int:
        return seq.prompt_left if seq in self._prefilling else seq.estimate

    def _free_slots(self) -> int:
        return self.max_batch - len(self._rows) - len(self._prefilling)

    def _next_prompt(self) -> DecodeRow | None:
        """The prompt to prefill next: one already begun, or a waiting one with a free slot."""
        candidates = [*self._prefilling, *(self._waiting if self._free_slots() > 0 else [])]
        return self._scheduler.pick(candidates, left=self._left,
                                    arrived=lambda s: s.timings["queued_at"],
                                    now=time.perf_counter())

    def _join_short(self) -> None:
        """Prompts with only a few tokens left (prefix-cache hits) prefill now, whole."""
        while (seq := self._next_short()) is not None:
            self._prefill_piece(seq, self._left(seq))

    def _next_short(self) -> DecodeRow | None:
        shorts = [s for s in self._prefilling if self._scheduler.is_short(s.prompt_left)]
        if self._free_slots() > 0:
            shorts += [s for s in self._waiting if self._scheduler.is_short(s.estimate)]
        return self._scheduler.pick(shorts, left=self._left,
                                    arrived=lambda s: s.timings["queued_at"],
                                    now=time.perf_counter())

    def _begin_prompt(self, seq: DecodeRow) -> None:
        start = time.perf_counter()
        seq.timings["queue_s"] = start - seq.timings["queued_at"]
        seq.timings["prefill_started"] = start
        self._waiting.remove(seq)
        self._prefilling.append(seq)
        self._counts["prefills"] += 1
        self._begin(seq)
        seq.estimate = seq.prompt_left

    def _prefill_piece(self, seq: DecodeRow, n: int) -> None:
        """Up to `n` more of `seq`'s prompt, alone in a forward pass; at the prompt's end
        its first token is chosen and it joins the batch."""
        try:
            if seq not in self._prefilling:
                self._begin_prompt(seq)
            n = max(1, min(n, seq.prompt_left, self.feed_limit))
            start = time.perf_counter()
            with self._watched():
                logits = self._prefill_chunk(seq, n)
            self._counts["prefill_chunks"] += 1
            self._scheduler.prefilled(n, time.perf_counter() - start, decoding=False)
            if logits is not None:
                self._prompt_done(seq, logits)
        except Exception as exc:  # fail this request, keep serving
            log.exception("prefill failed")
            self._forget(seq)
            settle(seq.future, exc=exc)

    def _prompt_done(self, seq: DecodeRow, logits: Logits) -> None:
        done = self._decoder.first(seq, logits)
        seq.timings["prefill_s"] = time.perf_counter() - seq.timings["prefill_started"]
        if done:
            self._forget(seq)
            return
        self._join(seq)
        self._prefilling.remove(seq)
        self._rows.append(seq)
        # Decode time counts batched steps only, so tokens/s = (tokens - 1) / decode_s.
        seq.timings["decode_started"] = time.perf_counter()
        self._decoder.propose(seq, room=self._decoder.max_feed - len(seq.pending))

    def _step_chunk(self) -> Chunk | None:
        """The prefill piece that goes with this decode step, if the scheduler pays for one."""
        seq = self._next_prompt()
        if seq is None:
            return None
        fed = sum(len(s.pending) + len(s.drafts) for s in self._rows)
        n = min(self._scheduler.budget(self._left(seq), decoding=True), self.feed_limit - fed)
        if n <= 0:
            return None
        if seq not in self._prefilling:
            self._begin_prompt(seq)
        return seq, min(n, seq.prompt_left)

    def _decode_step(self) -> None:
        chunk: Chunk | None = None
        try:
            chunk = self._step_chunk()
            start = time.perf_counter()
            with self._watched():
                logits, done = self._forward(self._rows, chunk)
            elapsed = time.perf_counter() - start
            self._counts["decode_steps"] += 1
            tokens = chunk[1] if chunk is not None else 0
            self._counts["prefill_chunks"] += bool(tokens)
            self._scheduler.prefilled(tokens, None, decoding=True)
            self._scheduler.decoded(max(elapsed - tokens * self._scheduler.token_s, 0.0),
                                    waiting=bool(self._waiting or self._prefilling))
            self._advance_rows(as_float(logits))
            self._counts["step_forward_us"] += round(elapsed * 1e6)
            self._counts["step_host_us"] += round((time.perf_counter() - start - elapsed) * 1e6)
        except Exception as exc:  # fail the batch, keep serving
            log.exception("decode step failed")
            if chunk is not None:
                self._forget(chunk[0])
                settle(chunk[0].future, exc=exc)
            self._fail_rows(exc)
            return
        if chunk is not None and done is not None:
            self._prompt_done(chunk[0], done)

    def _advance_rows(self, logits: Logits) -> None:
        rows = self._rows
        starts, at = [], 0
        for seq in rows:
            starts.append(at)
            at += 1 + len(seq.drafts)
        first = logits if at == len(rows) else logits[starts]
        self._decoder.mask_rows(first, rows, self._bitmask)
        keep = []
        for r, seq in enumerate(rows):
            drafted = [logits[starts[r] + 1 + i] for i in range(len(seq.drafts))]
            if not self._decoder.advance(seq, first[r], drafted):
                if seq.rejected:
                    self._rewind(seq, seq.rejected)
                keep.append(r)
        if len(keep) != len(rows):
            self._keep_rows(keep, rows)
            self._rows = [rows[i] for i in keep]
        for seq in self._rows:
            self._decoder.propose(seq, room=self._decoder.max_feed - len(seq.pending))

    def _fail_rows(self, exc: BaseException) -> None:
        # The batch is emptied before any waiter wakes: one that reads stats() at once sees
        # its slot free, not a row the worker has yet to drop.
        rows, self._rows = self._rows, []
        self._keep_rows([], rows)
        for seq in rows:
            settle(seq.future, exc=exc)

    def _fail_all(self, exc: BaseException) -> None:
        held = [*self._prefilling, *self._waiting]
        for seq in held:
            self._forget(seq)
        self._fail_rows(exc)
        for seq in held:
            settle(seq.future, exc=exc)
