"""What the decode loop (engines/loop.py) does with one row's logits: choose the next token
under the row's grammar mask and steering, check the drafted tokens that were fed with it,
accept what the grammar forces next (jump-forward), propose the next drafts, and say when
the row is finished and why.

Drafts (engines/drafts.py) are checked as the model would have decoded them one by one: at
each drafted position the logits the step computed there are masked by the grammar in the
state the accepted tokens led to and steered the same way, and the choice is the greedy
one; a draft stands only where it equals that choice. The first choice that differs is
taken instead (it is what the model would have written), and the cells of the drafts after
it are dropped from the row's cache. Output is therefore token for token what decoding
without drafts writes (greedy rows only: sampled rows never draft)."""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grammars import GrammarMatcher, MaskingBackend
from server.engines import rules
from server.engines.base import FinishReason, GenerationRequest, GenerationResult
from server.engines.drafts import DraftOdds, PromptLookup, Speculation, draft_length, draft_source
from server.engines.sampling import GREEDY_BELOW, choose_token

_TAIL_TOKENS = 8  # output tokens decoded to look their text up in the prompt
_MAX_COOLDOWN = 16  # decode steps a row waits to draft again after drafts that all failed
# Where a row's odds do not pay for a draft, one token is still tried now and then (so that
# the odds can change), spending at most this share of the row's steps on such tries.
_EXPLORE_SHARE = 0.01


@dataclass
class DecodeRow:
    request: GenerationRequest
    future: concurrent.futures.Future[GenerationResult]
    matcher: GrammarMatcher | None
    generator: Any  # numpy's or torch's, as the logits are (sampling.make_generator)
    out: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    last_token: int = -1
    # What the next decode step feeds this row: the sampled token, then any forced ones.
    pending: list[int] = field(default_factory=list)
    # Proposed tokens fed after `pending` in the same step, kept only where the model agrees.
    drafts: list[int] = field(default_factory=list)
    finished: bool = False  # set by the engine thread before the result is handed out
    # Only for free text with stop strings: the text so far, a short decode per token.
    stops: rules.StopStringScanner | None = None
    slot: int = -1  # where the engine keeps this row's cache (llama.cpp's sequence id)
    prefilled: int = 0  # prompt tokens in the row's cache (reused from a prefix, or fed)
    estimate: int = -1  # prompt tokens expected to prefill (set when queued)
    state: Any = None  # the engine's own, while the prompt is prefilled (torch: its cache)
    lookup: PromptLookup | None = None  # built at the first draft
    cooldown: int = 0  # steps before this row drafts again
    misses: int = 0  # drafts in a row that all failed
    waited: int = 0  # steps since this row last drafted, where its odds did not pay
    odds: DraftOdds = field(default_factory=DraftOdds)  # that this row's next draft stands
    rejected: int = 0  # drafts the last step fed that did not stand: their cells go

    @property
    def prompt_left(self) -> int:
        return len(self.request.prompt_ids) - self.prefilled

    @property
    def greedy(self) -> bool:
        return self.request.sampling.temperature < GREEDY_BELOW


class RowDecoder:
    """Token choice and finishing for the rows of one engine; `counts` are its counters."""

    def __init__(self, *, backend: MaskingBackend, eos: frozenset[int],
                 decode: Callable[[Sequence[int]], str], encode: Callable[[str], Sequence[int]],
                 max_context: int, jump_forward: bool, speculation: Speculation | None,
                 max_feed: int, counts: dict[str, int]) -> None:
        self.backend, self.eos, self.decode, self.encode = backend, eos, decode, encode
        self.max_context = max_context
        self.jump_forward = jump_forward
        # None where no draft can pay (off, or a drafted token costs a step or more).
        self.speculation = speculation if speculation and speculation.pays else None
        self.max_feed = max_feed  # tokens one row may be fed in one step
        self.counts = counts
        self._row_mask = backend.allocate_bitmask(1)  # for drafted positions, one at a time

    # -- a step's logits -----------------------------------------------------------------
    def first(self, seq: DecodeRow, logits: Any) -> bool:
        """The prompt's last logits (unmasked): the first output token. True: finished."""
        if seq.future.done():
            return self.finish(seq, "cancelled")
        self.mask_one(seq, logits)
        return self._continue(seq, [], logits, [])

    def advance(self, seq: DecodeRow, logits: Any, drafted: list[Any]
                ) -> bool:
        """After a decode step: `logits` after the row's pending tokens (masked already),
        `drafted` after each of its drafts (unmasked). True: finished."""
        if seq.future.done():  # cancelled by its client, or failed by the watchdog
            return self.finish(seq, "cancelled")
        drafts, seq.drafts = seq.drafts, []
        return self._continue(seq, drafts, logits, drafted)

    def _continue(self, seq: DecodeRow, drafts: list[int], logits: Any,
                  drafted: list[Any]) -> bool:
        token = self._choose(seq, logits)
        kept = 0
        while kept < len(drafts) and token == drafts[kept]:
            kept += 1
            seq.pending = []  # the draft is in the cache already
            if self._take(seq, token):
                self._drafted(seq, len(drafts), kept)
                return True
            if seq.pending:
                # The grammar forces what follows (jump-forward): fed next step, exactly as
                # without drafts; the drafts after this one go.
                self._drafted(seq, len(drafts), kept)
                return False
            row = drafted[kept - 1]
            self.mask_one(seq, row)
            token = self._choose(seq, row)
        self._drafted(seq, len(drafts), kept)
        seq.pending = [token]
        return self._take(seq, token)

    def _drafted(self, seq: DecodeRow, proposed: int, kept: int) -> None:
        seq.rejected = proposed - kept  # the engine drops their cells
        if not proposed:
            return
        self.counts["draft_tokens"] += proposed
        self.counts["draft_accepted"] += kept
        seq.timings["drafted"] = seq.timings.get("drafted", 0) + proposed
        seq.timings["draft_accepted"] = seq.timings.get("draft_accepted", 0) + kept
        seq.odds.update(proposed, kept)
        seq.misses = 0 if kept else seq.misses + 1
        seq.cooldown = 0 if kept else min(2 ** seq.misses, _MAX_COOLDOWN)

    def _choose(self, seq: DecodeRow, logits: Any) -> int:
        sp = seq.request.sampling
        if seq.request.steer is not None:
            rules.avoid(logits, seq.request.steer(seq.out))
        return choose_token(logits, temperature=sp.temperature, top_p=sp.top_p,
                            generator=seq.generator)

    def _take(self, seq: DecodeRow, token: int) -> bool:
        """Accept `token` as the row's next and queue what the grammar forces after it in
        `pending` (jump-forward). True: finished."""
        if seq.matcher is not None and not seq.matcher.accept_token(token):
            raise RuntimeError(f"grammar refused token {token} that its own mask allowed")
        seq.last_token = token
        seq.timings["sampled"] = seq.timings.get("sampled", 0) + 1  # EOS included
        self.counts["sampled_tokens"] += 1
        if token in self.eos:
            return self.finish(seq, "stop")
        self._emit(seq, token)
        sp = seq.request.sampling
        if self.jump_forward and seq.matcher is not None:
            self._jump_forward(seq, room=min(sp.max_tokens - len(seq.out), self.max_feed - 1))
        if seq.matcher is not None and seq.matcher.is_terminated():
            return self.finish(seq, "stop")
        cut = seq.stops.add(token) if seq.stops is not None else None
        if cut is not None:
            return self.finish(seq, "stop", text=cut)
        total = len(seq.request.prompt_ids) + len(seq.out)
        if len(seq.out) >= sp.max_tokens or total >= self.max_context:
            return self.finish(seq, "length")
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
        self.counts["jump_forward_tokens"] += len(forced)
        seq.timings["forced"] = seq.timings.get("forced", 0) + len(forced)

    # -- drafts for the next step ----------------------------------------------------------
    def propose(self, seq: DecodeRow, *, room: int) -> None:
        """Drafts to feed after the row's pending tokens in its next step: at most `room`
        (what the engine can feed), only where the grammar would accept them."""
        spec = self.speculation
        if spec is None or not seq.greedy or room <= 0:
            return
        if seq.cooldown > 0:
            seq.cooldown -= 1
            return
        # As far as the row's odds pay for (drafts that all fail make the row wait:
        # `cooldown`). Where they pay for none, a row's odds change only if it tries: one
        # token, once in as many steps as keep such tries under `_EXPLORE_SHARE` of them.
        # (Always one token, as before, cost 6% of free text's steps on the embedded model
        # here, where a drafted token costs 0.92 steps: 16 drafted, 1 stood, in 256.)
        cost = spec.token_cost or 0.0
        worth = draft_length(seq.odds.odds, cost, spec.max_tokens)
        if not worth:
            seq.waited += 1
            if seq.waited < math.ceil(cost / _EXPLORE_SHARE):
                return
            worth = 1
        left = min(room, worth, seq.request.sampling.max_tokens - len(seq.out),
                   self.max_context - len(seq.request.prompt_ids) - len(seq.out) - 1)
        if left <= 0:
            return
        if seq.lookup is None:
            text = draft_source(self.decode(seq.request.prompt_ids), seq.request.draft_texts)
            seq.lookup = PromptLookup(text, self.encode, max_tokens=spec.max_tokens,
                                      min_match=spec.min_match)
        drafts = seq.lookup.propose(self.decode(seq.out[-_TAIL_TOKENS:]), limit=left)
        drafts = drafts[:next((i for i, t in enumerate(drafts) if t in self.eos), len(drafts))]
        if seq.matcher is not None and drafts:
            drafts = drafts[:seq.matcher.accepted_count(drafts)]
        seq.drafts = drafts
        if drafts:
            seq.waited = 0

    # -- masks --------------------------------------------------------------------------
    def mask_rows(self, logits: Any, seqs: list[DecodeRow],
                  bitmask: Any) -> None:
        """Each constrained row's mask over its row of `logits` ([rows, vocab]), in place."""
        rows = []
        for i, seq in enumerate(seqs):
            if seq.matcher is not None:
                seq.matcher.fill_bitmask(bitmask, i)
                rows.append(i)
        if not rows:
            return
        self.backend.apply_bitmask(logits, bitmask[: len(seqs)], rows)

    def mask_one(self, seq: DecodeRow, logits: Any) -> None:
        if seq.matcher is not None:
            seq.matcher.fill_bitmask(self._row_mask, 0)
            self.backend.apply_bitmask(logits[None], self._row_mask, [0])

    # -- the end ----------------------------------------------------------------------------
    def finish(self, seq: DecodeRow, reason: FinishReason, *, text: str | None = None) -> bool:
        now = time.perf_counter()
        self.counts["cancelled" if reason == "cancelled" else "finished"] += 1
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
        settle(seq.future, result=result)
        return True


def settle(future: concurrent.futures.Future[Any], *, result: Any = None,
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
