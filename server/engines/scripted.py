"""ScriptedEngine: a real `Engine` for fast tests of everything above the engine.

It answers with text from a script instead of a model, but tokenizes it with the real
tokenizer and walks it through the real grammar matcher, so grammars, max_tokens and
finish reasons behave as they do with a model.

With a `Hold`, every request waits at the engine's door until the hold is released: a test
then knows a request is decoding, and makes a time limit, a shutdown or a full queue happen
while it is, without sleeping and hoping."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from grammars import GrammarMatcher, MaskingBackend, make_backend
from server.engines import rules
from server.engines.base import Engine, FinishReason, GenerationRequest, GenerationResult
from server.engines.tokenizer_files import load_tokenizer
from server.errors import EngineFailure

Script = Callable[[str], str]  # prompt text -> reply text


class ScriptRejected(EngineFailure, AssertionError):
    """The scripted reply is not a sentence of the request's grammar: fix the script. A 503
    whose detail names the token, so a test can see the grammar refuse what it should."""


class Hold:
    """Keeps each request that reaches it waiting until `release()`. Thread-safe: the
    engine awaits it on the server's event loop, a test waits for arrivals in its own
    thread. Counts the requests that arrived and those cancelled while they waited."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._released = False
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.arrived = 0
        self.cancelled = 0

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Let every waiting request through, and every later one at once."""
        with self._changed:
            self._released = True
            waiting, self._waiting = self._waiting, []
        for loop, opened in waiting:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(opened.set)

    def wait_for(self, what: Literal["arrived", "cancelled"], count: int, *,
                 bound_s: float = 60.0) -> None:
        """Block until `count` requests have `what` ("arrived", "cancelled"). `bound_s` is
        how long to wait before failing, not a claim about speed."""
        with self._changed:
            if not self._changed.wait_for(lambda: getattr(self, what) >= count,
                                          timeout=bound_s):
                raise AssertionError(f"{getattr(self, what)} of {count} requests {what} at "
                                     f"the hold within {bound_s:g} s")

    async def enter(self) -> None:
        opened = asyncio.Event()
        with self._changed:
            self.arrived += 1
            if self._released:
                opened.set()
            else:
                self._waiting.append((asyncio.get_running_loop(), opened))
            self._changed.notify_all()
        try:
            await opened.wait()
        except asyncio.CancelledError:
            with self._changed:
                self.cancelled += 1
                self._changed.notify_all()
            raise


class ScriptedEngine(Engine):
    def __init__(self, model_dir: Path, script: Script, *, max_context: int = 8192,
                 model_name: str = "scripted", grammar_backend: str = "xgrammar",
                 hold: Hold | None = None) -> None:
        self.tokenizer = load_tokenizer(model_dir)
        self.model_dir = Path(model_dir)
        self.script = script
        self.max_context = max_context
        self.model_name = model_name
        # The script's reply ends with the tokenizer's EOS; any of the model's ends it.
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.eos_token_ids = rules.eos_token_ids(model_dir, self.tokenizer)
        self.grammar_backend: MaskingBackend = make_backend(
            grammar_backend, self.tokenizer, vocab_size=len(self.tokenizer),
            stop_token_ids=sorted(self.eos_token_ids))
        self.prompts: list[str] = []
        self.hold = hold
        self._counts = {"running": 0, "finished": 0, "cancelled": 0}

    def stats(self) -> dict[str, int]:
        return dict(self._counts)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self._counts["running"] += 1
        try:
            if self.hold is not None:
                await self.hold.enter()
            result = await self._decode(request)
        except asyncio.CancelledError:
            self._counts["cancelled"] += 1
            raise
        finally:
            self._counts["running"] -= 1
        self._counts["finished"] += 1
        return result

    async def _decode(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(0)
        prompt = self.tokenizer.decode(request.prompt_ids)
        self.prompts.append(prompt)
        reply = list(self.encode(self.script(prompt))) + [self.eos_id]
        matcher = (self.grammar_backend.matcher(request.grammar)
                   if request.grammar is not None else None)
        stops = rules.StopStringScanner.for_request(request.sampling, self.decode,
                                                    constrained=matcher is not None)
        out: list[int] = []
        for token in reply:
            if matcher is not None and not matcher.accept_token(token):
                raise ScriptRejected(f"token {token} ({self.tokenizer.decode([token])!r}) after "
                                     f"{self.tokenizer.decode(out)!r} breaks the grammar")
            if token in self.eos_token_ids:
                return self._result(request, out, "stop", matcher)
            out.append(token)
            cut = stops.add(token) if stops is not None else None
            if cut is not None:
                return self._result(request, out, "stop", matcher, text=cut)
            if request.on_token is not None:
                request.on_token(token)
                await asyncio.sleep(0.001)  # one token at a time, as a model would
            if len(out) >= request.sampling.max_tokens:
                return self._result(request, out, "length", matcher)
        return self._result(request, out, "stop", matcher)

    def _result(self, request: GenerationRequest, out: list[int], reason: FinishReason,
                matcher: GrammarMatcher | None, *, text: str | None = None) -> GenerationResult:
        complete = rules.grammar_complete(
            constrained=matcher is not None,
            ended_on_eos=matcher is not None and matcher.is_terminated())
        return GenerationResult(token_ids=tuple(out),
                                text=self.decode(out) if text is None else text,
                                finish_reason=reason, prompt_tokens=len(request.prompt_ids),
                                grammar_complete=complete)
