"""ScriptedEngine: a real `Engine` for fast tests of everything above the engine.

It answers with text from a script instead of a model, but tokenizes it with the real
tokenizer and walks it through the real grammar matcher, so grammars, max_tokens and
finish reasons behave as they do with a model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from grammars import MaskingBackend, make_backend
from server.engines.base import Engine, GenerationRequest, GenerationResult

Script = Callable[[str], str]  # prompt text -> reply text


class ScriptRejected(AssertionError):
    """The scripted reply is not a sentence of the request's grammar: fix the script."""


class ScriptedEngine(Engine):
    def __init__(self, model_dir: Path, script: Script, *, max_context: int = 8192,
                 model_name: str = "scripted", grammar_backend: str = "xgrammar") -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.script = script
        self.max_context = max_context
        self.model_name = model_name
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.grammar_backend: MaskingBackend = make_backend(grammar_backend, self.tokenizer,
                                            vocab_size=len(self.tokenizer),
                                            stop_token_ids=[self.eos_id])
        self.prompts: list[str] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(0)
        prompt = self.tokenizer.decode(request.prompt_ids)
        self.prompts.append(prompt)
        reply = list(self.encode(self.script(prompt))) + [self.eos_id]
        matcher = (self.grammar_backend.matcher(request.grammar)
                   if request.grammar is not None else None)
        out: list[int] = []
        for token in reply:
            if matcher is not None and not matcher.accept_token(token):
                raise ScriptRejected(f"token {token} ({self.tokenizer.decode([token])!r}) after "
                                     f"{self.tokenizer.decode(out)!r} breaks the grammar")
            if token == self.eos_id:
                return self._result(request, out, "stop", matcher)
            out.append(token)
            text = self.decode(out)
            cut = [i for i in (text.find(s) for s in request.sampling.stop) if i >= 0]
            if cut and matcher is None:
                return self._result(request, out, "stop", matcher, text=text[:min(cut)])
            if request.on_token is not None:
                request.on_token(token)
                await asyncio.sleep(0.001)  # one token at a time, as a model would
            if len(out) >= request.sampling.max_tokens:
                return self._result(request, out, "length", matcher)
        return self._result(request, out, "stop", matcher)

    def _result(self, request: GenerationRequest, out: list[int], reason: str,
                matcher, *, text: str | None = None) -> GenerationResult:
        return GenerationResult(token_ids=tuple(out),
                                text=self.decode(out) if text is None else text,
                                finish_reason=reason,  # type: ignore[arg-type]
                                prompt_tokens=len(request.prompt_ids),
                                grammar_complete=matcher is not None and matcher.is_terminated())
