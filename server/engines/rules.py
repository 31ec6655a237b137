"""Rules every engine follows, written once so the torch, scripted and vLLM engines agree
(tests/server/engines/test_engine_conformance.py holds each engine to them).

- End of sequence: the model's EOS ids are the union of generation_config.json's, config.json's
  and the tokenizer's, and the end-of-text tokens its vocabulary has (`eos_token_ids`).
- Stop strings end free text only: cutting grammar-constrained output would leave it
  incomplete (`applied_stop_strings`); the text ends before the first one
  (`StopStringScanner`; vLLM applies the same list itself).
- `grammar_complete`: a grammar was given and the output is a complete sentence of it.
- Steering (`avoid`): a request's steer callback names tokens to avoid; they are masked out
  after the grammar's mask, unless nothing else would be left.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.engines.arrays import any_finite
from server.engines.base import SamplingParams
from server.engines.detokenize import Decode, IncrementalDetokenizer
from server.engines.tokenizer_files import config_eos_ids

# End-of-text tokens a model may write whatever its files name: a GGUF carries one EOS
# (Qwen2.5's names `<|im_end|>`), where the model's own generation config also ends on
# `<|endoftext|>`, which Qwen2.5-0.5B writes after a call. A token of these in the
# vocabulary ends the answer; it never reaches `content`.
END_OF_TEXT = ("<|endoftext|>", "<|im_end|>", "<|end_of_text|>", "<|eot_id|>",
               "<end_of_turn>", "<\uff5cend\u2581of\u2581sentence\uff5c>")


def eos_token_ids(model_dir: Path, tokenizer: Any) -> frozenset[int]:
    """Every token id that ends a sequence: generation config, model config, tokenizer,
    and the end-of-text tokens its vocabulary has (`END_OF_TEXT`). Read from the model
    directory's JSON files and the tokenizer, without loading weights."""
    ids = config_eos_ids(model_dir)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids.update(int(vocab[t]) for t in END_OF_TEXT if t in vocab)
    return frozenset(ids)


def applied_stop_strings(sampling: SamplingParams, *, constrained: bool) -> tuple[str, ...]:
    """The stop strings a request's decode applies: none under a grammar, since cutting
    constrained output would break the sentence the grammar guarantees."""
    return () if constrained else sampling.stop


class StopStringScanner:
    """Follows free text token by token and finds where it ends: before the earliest
    occurrence of any stop string."""

    def __init__(self, stops: Sequence[str], decode: Decode) -> None:
        self._stops = tuple(stops)
        self._longest = max(len(s) for s in self._stops)
        self._text = IncrementalDetokenizer(decode)

    @classmethod
    def for_request(cls, sampling: SamplingParams, decode: Decode, *,
                    constrained: bool) -> StopStringScanner | None:
        """A scanner when the request has stop strings to apply, else None."""
        stops = applied_stop_strings(sampling, constrained=constrained)
        return cls(stops, decode) if stops else None

    def add(self, token_id: int) -> str | None:
        """Add one output token; once a stop string has appeared, the text before it."""
        # No stop string was in the text before, so a new one must reach into the new part.
        start = max(0, len(self._text.text) - self._longest + 1)
        text = self._text.add([token_id])
        found = [i for i in (text.find(s, start) for s in self._stops) if i >= 0]
        return text[:min(found)] if found else None


def grammar_complete(*, constrained: bool, ended_on_eos: bool) -> bool:
    """True when a grammar was given and the output is a complete sentence of it.

    The evidence is that the decode ended on an end-of-sequence token under the grammar's
    mask, which allows EOS only where the sentence is complete. Engines that apply the masks
    themselves (torch, scripted) ask their matcher (`is_terminated`: it accepted EOS). The
    vLLM engine reads its output: finish_reason "stop" with stop_reason None (its EOS token)
    or an int (an EOS id of the generation config, which vLLM adds to stop_token_ids); a
    string stop_reason (a stop string) cannot occur, none are sent under a grammar. Or the
    JSON value a vLLM grammar writes has closed (`json_text.JsonClose`): the grammar allows only EOS
    after it, so the engine ends there, as if on EOS. Cut by max_tokens, the context or a
    cancel, the output is never complete.
    """
    return constrained and ended_on_eos


def avoid(logits: Any, banned: Any) -> None:
    """Mask `banned` token ids out of one row of logits (already under the grammar's mask),
    in place, unless that would leave no token at all."""
    banned = [t for t in banned if 0 <= t < logits.shape[-1]]
    if not banned:
        return
    saved = logits[banned]  # a copy (numpy and torch alike), of the banned ones only
    logits[banned] = float("-inf")
    if not any_finite(logits):
        logits[banned] = saved
