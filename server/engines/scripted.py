"""ScriptedEngine: a real `Engine` for fast tests of everything above the engine.

It answers with text from a script instead of a model, but tokenizes it with the real
tokenizer and walks it through the real grammar matcher, so grammars, max_tokens and
finish reasons behave as they do with a model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from grammars import GrammarMatcher, MaskingBackend, make_backend
from server.engines import rules
from server.engines.base import Engine, FinishReason, GenerationRequest, GenerationResult
from server.errors import EngineFailure

Script = Callable[[str], str]  # prompt text -> reply text


class ScriptRejected(EngineFailure, AssertionError):
    """The scripted reply is not a sentence of the request's grammar: fix the script. A 503
    whose detail names the token, so a test can see the grammar refuse what it should."""


class ScriptedEngine(Engine):
    def __init__(self, model_dir: Path, script: Script, *, max_context: int = 8192,
                 model_name: str = "scripted", grammar_backend: str = "xgrammar") -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
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

    async def generate(self, request: GenerationRequest) -> GenerationResult:
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
