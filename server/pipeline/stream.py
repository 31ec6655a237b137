"""Streaming: one decode turned into OpenAI `chat.completion.chunk` events as tokens arrive.

Text streams as content deltas (holding back what could be the start of a stop string).
Calls stream as `delta.tool_calls`: the id and name once the name is decoded, then argument
fragments; a contract call's arguments come in one piece after validation and repair. The
same post-decode checks as without streaming run at the end; if they fail, the stream ends
with an error event instead of a finish reason."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from server.pipeline.chat import ChatPipeline, Prepared, new_call_id, new_completion_id
from server.engines.detokenize import IncrementalDetokenizer
from server.pipeline.modes import has_content
from server.pipeline.toolstream import ArgumentsDelta, CallScanner, CallStarted
from server.errors import ServiceError
from server.protocol import Choice


class ChunkStream:
    def __init__(self, pipeline: ChatPipeline, prep: Prepared, *, include_usage: bool,
                 overdue: Callable[[], ServiceError | None] | None = None) -> None:
        self.pipeline = pipeline
        # Says why the stream must stop now (its time limit, a shutdown), checked between
        # tokens and at least every quarter second: the stream then ends with that error.
        self.overdue = overdue or (lambda: None)
        self.prep = prep
        self.include_usage = include_usage
        self.id = new_completion_id()
        self.created = int(time.time())
        self.view = _View(prep)

    def chunk(self, delta: dict[str, Any] | None, finish: str | None = None,
              stop_reason: str | None = None, **extra: Any) -> dict[str, Any]:
        choices = [] if delta is None else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
             **({"stop_reason": stop_reason} if finish else {})}]
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.pipeline.model_name, "choices": choices, **extra}

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """Chunks; raises a ServiceError if the post-decode checks fail (after some chunks)."""
        yield self.chunk({"role": "assistant", "content": self.view.first_content})
        prep, results = self.prep, []
        while True:
            async for delta in self._pump(prep):
                yield self.chunk(delta)
            results.append(self._result)
            following = prep.then(self._result)
            if following is None:
                break
            prep, self.view = following, _View(following)
        choice, extension = await self.pipeline.finish(prep, results[-1], self._trip)
        for delta in self.view.close(choice):
            yield self.chunk(delta)
        yield self.chunk({}, choice.finish_reason, choice.stop_reason,
                         **({"strictcall": extension} if extension else {}))
        if self.include_usage:
            yield self.chunk(None, usage=self.pipeline.usage(prep, results).model_dump())

    async def _pump(self, prep: Prepared) -> AsyncIterator[dict[str, Any]]:
        """Decode `prep`, yielding deltas as tokens arrive; leaves the result in _result."""
        loop = asyncio.get_running_loop()
        tokens: asyncio.Queue[int] = asyncio.Queue()
        prep = self.pipeline.with_token_callback(
            prep, lambda t: loop.call_soon_threadsafe(tokens.put_nowait, t))
        task = asyncio.ensure_future(self.pipeline.run(prep))
        text = IncrementalDetokenizer(self.pipeline.engine.decode)
        try:
            while not (task.done() and tokens.empty()):
                getter = asyncio.ensure_future(tokens.get())
                await asyncio.wait({getter, task}, timeout=0.25,
                                   return_when=asyncio.FIRST_COMPLETED)
                if (why := self.overdue()) is not None:
                    getter.cancel()
                    raise why
                if not getter.done():
                    getter.cancel()
                    continue
                ids = [getter.result()]
                while not tokens.empty():
                    ids.append(tokens.get_nowait())
                for delta in self.view.feed(text.add(ids)):
                    yield delta
            self._result, self._trip = task.result()
        finally:
            if not task.done():
                task.cancel()  # the client went away: stop the decode


class _View:
    """What the client has been shown so far, and the deltas that extend it."""

    def __init__(self, prep: Prepared) -> None:
        self.mode = prep.plan.mode
        self.reader = prep.plan.read_with()
        self.contracts = prep.plan.contracts
        self.thought = ""                # reasoning shown
        self.holdback = max((len(s) for s in prep.request.sampling.stop), default=1) - 1
        self.shown = ""                  # content shown
        self.scanner: CallScanner | None = None
        self.fed = 0                     # how much of the calls' text the scanner has read
        self.names: dict[int, str] = {}
        self.ids: dict[int, str] = {}
        self.streamed: dict[int, str] = {}  # argument text shown, per call

    @property
    def first_content(self) -> str | None:
        return "" if has_content(self.mode) else None

    def feed(self, text: str) -> list[dict[str, Any]]:
        if text.endswith("\ufffd"):
            return []  # a character split across tokens: wait for the rest
        reading = self.reader.read(text, complete=False)
        deltas = self._think(reading.reasoning or "")
        if reading.thinking:
            return deltas
        if self.scanner is not None:
            return deltas + self._calls(reading.calls or "")
        if reading.calls is None:
            return deltas + self._show(self.reader.showable(text, stop_holdback=self.holdback))
        # The calls began: the text before them is all the content there is.
        self.scanner = CallScanner()
        return deltas + self._show(reading.content or "") + self._calls(reading.calls)

    def _think(self, upto: str) -> list[dict[str, Any]]:
        if not upto.startswith(self.thought) or len(upto) <= len(self.thought):
            return []
        new, self.thought = upto[len(self.thought):], upto
        return [{"reasoning_content": new, "reasoning": new}]

    def _show(self, upto: str) -> list[dict[str, Any]]:
        if not upto.startswith(self.shown) or len(upto) <= len(self.shown):
            return []
        new, self.shown = upto[len(self.shown):], upto
        return [{"content": new}]

    def _calls(self, calls_text: str) -> list[dict[str, Any]]:
        assert self.scanner is not None
        events = self.scanner.feed(calls_text[self.fed:])
        self.fed = len(calls_text)
        deltas = []
        for event in events:
            if isinstance(event, CallStarted):
                self.names[event.index] = event.name
                self.ids[event.index] = new_call_id()
                deltas.append(_call_delta(event.index, id=self.ids[event.index],
                                          name=event.name, arguments=""))
            elif isinstance(event, ArgumentsDelta) and self.names[event.index] not in \
                    self.contracts:  # contract arguments only after validation
                self.streamed[event.index] = self.streamed.get(event.index, "") + event.text
                deltas.append(_call_delta(event.index, arguments=event.text))
        return deltas

    def close(self, choice: Choice) -> list[dict[str, Any]]:
        """The rest, once the final (validated, normalized) choice is known."""
        message = choice.message
        deltas = self._think(message.reasoning_content or "")
        if not message.tool_calls:
            return deltas + (self._show(message.content or "")
                             if message.content is not None else [])
        for index, call in enumerate(message.tool_calls):
            if index not in self.names:  # decoded all at once (a very short stream)
                deltas.append(_call_delta(index, id=call.id, name=call.function.name,
                                          arguments=call.function.arguments))
            elif call.function.name in self.contracts:
                deltas.append(_call_delta(index, arguments=call.function.arguments))
            else:  # what the stream has not shown yet (held back, or cut by a guard)
                shown, final = self.streamed.get(index, ""), call.function.arguments
                if final.startswith(shown) and len(final) > len(shown):
                    deltas.append(_call_delta(index, arguments=final[len(shown):]))
        return deltas


def _call_delta(index: int, *, id: str | None = None, name: str | None = None,
                arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        call.update(id=id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}
