"""The engine seam: token ids in, token ids out, optionally under a compiled grammar."""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from grammars import CompiledGrammar, GrammarBackend

FinishReason = Literal["stop", "length", "cancelled"]
# Called with each output token id as it is chosen (from the engine's thread).
TokenCallback = Callable[[int], None]


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    seed: int | None = None
    # Stop strings end free text only (rules.applied_stop_strings).
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationRequest:
    prompt_ids: tuple[int, ...]
    sampling: SamplingParams
    grammar: CompiledGrammar | None = None
    # Streaming and the runaway guards watch the tokens as they come.
    on_token: TokenCallback | None = field(default=None, compare=False)
    # Given the output so far, token ids the next choice should avoid (from the engine's
    # thread). Engines with `steers` honor it (never leaving no token); others ignore it.
    steer: Callable[[Sequence[int]], Collection[int]] | None = field(default=None,
                                                                      compare=False)
    # Text the output is expected to copy from besides the prompt (a grounded field's
    # candidates): engines that draft (engines/drafts.py) look drafts up there too.
    draft_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    # True only when a grammar was given and the output is a complete sentence of it
    # (rules.grammar_complete).
    grammar_complete: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)


class Engine(abc.ABC):
    """Implemented by `TorchEngine` (embedded CPU / CUDA) and test doubles."""

    model_name: str
    max_context: int
    tokenizer: Any  # a Hugging Face tokenizer with a chat template
    eos_token_ids: frozenset[int]  # rules.eos_token_ids: every id that ends a sequence
    # A MaskingBackend (xgrammar, outlines-core) where the engine applies the masks itself;
    # vLLM's pass-through GrammarBackend where vLLM does.
    grammar_backend: GrammarBackend
    # Whether `GenerationRequest.steer` is honored (the engine chooses tokens itself).
    steers: bool = False
    # Whether output text drops special tokens. A model format whose markers are special
    # tokens (harmony's `<|call|>`, DeepSeek's tool-call markers) turns this off, so that its
    # reader sees them; end-of-sequence tokens are dropped either way.
    skip_special_tokens: bool = True
    model_dir: Path | None = None  # where its config and chat template came from

    def render_chat(self, messages: list[dict[str, Any]], *,
                    tools: list[dict[str, Any]] | None = None, **template_kwargs: Any) -> str:
        """The chat template applied to messages (and `tools`, for templates that render
        them), ending with the assistant turn's opening."""
        return str(self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                      add_generation_prompt=True,
                                                      **template_kwargs))

    def fewest_tokens(self, text: str) -> int:
        """A bound below the number of tokens `text` encodes to, known without encoding it:
        no token stands for more characters than its vocabulary entry has (a byte-level
        entry's characters are bytes, at least as many). A prompt of megabytes is refused
        on its length, without a tokenizer pass of seconds and its ids' memory."""
        longest = getattr(self, "_longest_token", None)
        if longest is None:
            longest = max((len(t) for t in self.tokenizer.get_vocab()), default=1) or 1
            self._longest_token = longest
        return len(text) // longest

    def encode(self, text: str) -> tuple[int, ...]:
        """`text`'s token ids. A Rust tokenizer's batch call, which lets go of the
        interpreter lock while it works (its single `encode` holds it: three seconds for a
        prompt of megabytes, with every other request waiting); the same ids."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            return tuple(backend.encode_batch([text], add_special_tokens=False)[0].ids)
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def fewest_message_tokens(self, texts: Sequence[str]) -> int:
        """A bound below the tokens `texts` take in a prompt, each text encoded apart (in
        the prompt a text's edges may merge with the template around it: two tokens fewer
        each, at most)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            counts = [len(e.ids) for e in backend.encode_batch(list(texts),
                                                               add_special_tokens=False)]
        else:
            counts = [len(self.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
        return sum(max(0, n - 2) for n in counts)

    def decode(self, token_ids: Sequence[int]) -> str:
        if self.skip_special_tokens:
            return str(self.tokenizer.decode(token_ids, skip_special_tokens=True))
        return str(self.tokenizer.decode([t for t in token_ids if t not in self.eos_token_ids],
                                         skip_special_tokens=False))

    @abc.abstractmethod
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Decode one request. Cancelling the awaiting task stops its decode."""

    async def warm(self, grammars: list[CompiledGrammar]) -> None:  # noqa: B027 - optional hook, no-op by default
        """Engines that compile grammars themselves (vLLM) do it now, before any request."""

    def alive(self) -> bool:
        """False once the engine can no longer decode (its worker is gone): requests are
        then refused with a 503 instead of waiting for it."""
        return True

    def problem(self) -> str | None:
        """Why the engine cannot serve now, in words for /health; None when it can."""
        return None if self.alive() else "the engine is not running"

    def stats(self) -> dict[str, int]:
        """Counters for /health; engines without any return nothing."""
        return {}

    def memory(self) -> dict[str, int]:
        """What the engine sized from its settings (bytes, cells) and what the process
        holds (server/engines/memory.py), for /health and the start-up log."""
        from server.engines.memory import process_memory

        return process_memory()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads and memory."""

    async def aclose(self) -> None:
        """`close`, for engines that hold what only the event loop can release (an async
        HTTP client's connections); the server's lifespan calls this one."""
        self.close()
