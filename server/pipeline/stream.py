"""Streaming: one request's decode told as typed events (server/pipeline/answer.py) as tokens
arrive.

Text streams as deltas, holding back what could be the start of a stop string. A call
streams as `CallStarted` once its name is decoded, then argument fragments; a contract
call's arguments come in one piece after validation and repair. The same post-decode checks
as without streaming run at the end; if they fail, the stream raises the ServiceError after
the events it has given (each API ends its stream with its own error event)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from server.engines.base import GenerationResult
from server.engines.detokenize import IncrementalDetokenizer
from server.errors import ServiceError
from server.pipeline.answer import (
    ArgumentsDelta,
    CallDone,
    CallStarted,
    Event,
    Finished,
    ReasoningDelta,
    TextDelta,
)
from server.pipeline.checking.checks import Checked, Finisher
from server.pipeline.decode import Decoder
from server.pipeline.guards.runaway import Trip
from server.pipeline.guards.toolstream import ArgumentsFragment, CallNamed, CallScanner
from server.pipeline.prepared import Decode, Prepared
from server.pipeline.validation import new_call_id

# Says why a stream must stop now (its time limit passed, the server is shutting down).
Overdue = Callable[[], ServiceError | None]


class EventStream:
    def __init__(self, decoder: Decoder, finisher: Finisher, prepared: Prepared, *,
                 overdue: Overdue | None = None) -> None:
        self.decoder = decoder
        self.finisher = finisher
        self.prepared = prepared
        # Says why the stream must stop now (its time limit, a shutdown), checked between
        # tokens and at least every quarter second: the stream then raises that error.
        self.overdue = overdue or (lambda: None)
        self._result: GenerationResult | None = None
        self._trip: Trip | None = None

    async def events(self) -> AsyncIterator[Event]:
        step, results = self.prepared.decode, []
        dialogue = self.prepared.context.dialogue  # a session's tools: shown after the merge
        held = dialogue.held_tools if dialogue is not None else set()
        view = _View(step, held)
        while True:
            async for event in self._pump(step, view):
                yield event
            assert self._result is not None
            results.append(self._result)
            following = step.then(self._result)
            if following is None:
                break
            step, view = following, _View(following, held)
        checked = await self.finisher.finish(self.prepared, step, results[-1], self._trip,
                                            call_ids=view.ids)
        for event in view.close(checked):
            yield event
        yield Finished(self.finisher.answered(self.prepared, step, checked, results))

    async def _pump(self, step: Decode, view: _View) -> AsyncIterator[Event]:
        """Run `step`, yielding events as tokens arrive; leaves the result in _result."""
        loop = asyncio.get_running_loop()
        tokens: asyncio.Queue[int] = asyncio.Queue()
        def watch(token: int) -> None:  # the engine's thread
            loop.call_soon_threadsafe(tokens.put_nowait, token)

        step = step.watched(watch)
        task = asyncio.ensure_future(self.decoder.run(step, self.prepared))
        text = IncrementalDetokenizer(self.decoder.engine.decode)
        getter: asyncio.Future[int] | None = None
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
                for event in view.feed(text.add(ids)):
                    yield event
            self._result, self._trip = task.result()
        finally:
            if getter is not None and not getter.done():
                getter.cancel()
            if not task.done():
                task.cancel()  # the client went away: stop the decode


class _View:
    """What the client has been shown of one decode, and the events that extend it."""

    def __init__(self, step: Decode, held: set[str]) -> None:
        self.reader = step.plan.reader
        self.contracts = step.plan.contracts
        # Calls to tools with grounded, asked or confirmed fields, or a session's slots, may
        # turn into a question: nothing of them, nor of any call after, shows before checks.
        self.unseen = set(step.plan.groundings) | held
        self.hidden: set[int] = set()  # calls held back, by index
        self.thought = ""                # reasoning shown
        self.holdback = max((len(s) for s in step.request.sampling.stop), default=1) - 1
        self.shown = ""                  # content shown
        self.scanner: CallScanner | None = None
        self.fed = 0                     # how much of the calls' text the scanner has read
        self.names: dict[int, str] = {}
        self.ids: dict[int, str] = {}
        self.streamed: dict[int, str] = {}  # argument text shown, per call

    def feed(self, text: str) -> list[Event]:
        if text.endswith("\ufffd"):
            return []  # a character split across tokens: wait for the rest
        reading = self.reader.read(text, complete=False)
        events = self._think(reading.reasoning or "")
        if reading.thinking:
            return events
        if self.scanner is not None:
            return events + self._calls(reading.calls or "")
        if reading.calls is None:
            return events + self._show(self.reader.showable(text, stop_holdback=self.holdback))
        # The calls began: the text before them is all the content there is.
        self.scanner = CallScanner()
        return events + self._show(reading.content or "") + self._calls(reading.calls)

    def _think(self, upto: str) -> list[Event]:
        if not upto.startswith(self.thought) or len(upto) <= len(self.thought):
            return []
        new, self.thought = upto[len(self.thought):], upto
        return [ReasoningDelta(new)]

    def _show(self, upto: str) -> list[Event]:
        if not upto.startswith(self.shown) or len(upto) <= len(self.shown):
            return []
        new, self.shown = upto[len(self.shown):], upto
        return [TextDelta(new)]

    def _calls(self, calls_text: str) -> list[Event]:
        assert self.scanner is not None
        found = self.scanner.feed(calls_text[self.fed:])
        self.fed = len(calls_text)
        events: list[Event] = []
        for item in found:
            if isinstance(item, CallNamed):
                self.names[item.index] = item.name
                self.ids[item.index] = new_call_id()
                if item.name in self.unseen or self.hidden:
                    self.hidden.add(item.index)
                else:
                    events.append(CallStarted(item.index, self.ids[item.index], item.name,
                                              held=item.name in self.contracts))
            elif isinstance(item, ArgumentsFragment) and item.index not in self.hidden \
                    and self.names[item.index] not in self.contracts:
                # (contract arguments only after validation)
                self.streamed[item.index] = self.streamed.get(item.index, "") + item.text
                events.append(ArgumentsDelta(item.index, item.text))
        return events

    def close(self, checked: Checked) -> list[Event]:
        """The rest, once the final (validated, normalized) answer is known."""
        events = self._think(checked.reasoning or "")
        if checked.question is not None:  # a question instead of the calls
            return events + [TextDelta(("\n" if self.shown else "") + (checked.content or ""))]
        if not checked.calls:
            return events + (self._show(checked.content or "")
                             if checked.content is not None else [])
        for index, call in enumerate(checked.calls):
            if index not in self.names or index in self.hidden:  # shown only now
                events += [CallStarted(index, call.id, call.name),
                           ArgumentsDelta(index, call.arguments)]
            elif call.name in self.contracts:
                events.append(ArgumentsDelta(index, call.arguments))
            else:  # what the stream has not shown yet (held back, or cut by a guard)
                shown, final = self.streamed.get(index, ""), call.arguments
                if final.startswith(shown) and len(final) > len(shown):
                    events.append(ArgumentsDelta(index, final[len(shown):]))
            events.append(CallDone(index, call))
        return events
