"""Streaming: the pipeline's events of one request, told as Responses API events.

Reasoning deltas open a `reasoning` item (and its one `reasoning_text` part) and extend it;
the answer's first delta closes it. Text deltas open a `message` item (and its one
`output_text` part) and extend it; a call's start closes the message and opens a
`function_call` item whose argument fragments follow. Each item is closed with its `.done`
events once the answer is finished, then `response.completed` (or `response.incomplete`)
carries the whole response. An error after the stream started (a contract still broken
after repair) ends it with an `error` event. Event shapes follow the openai SDK's
accumulator (`responses.stream()`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, assert_never

from server.api.responses.output import (
    FunctionCallOutput,
    MessageOutput,
    OutputItem,
    OutputTextPart,
    ReasoningOutput,
    ReasoningTextPart,
    ResponseUsage,
    Status,
    new_item_id,
    response_id,
    response_object,
)
from server.api.responses.request import ResponsesRequest
from server.api.sse import Frame
from server.errors import ServiceError
from server.pipeline import (
    Answer,
    ArgumentsDelta,
    CallDone,
    CallStarted,
    Finished,
    Opening,
    ReasoningDelta,
    TextDelta,
)
from server.pipeline import Event as PipelineEvent

Event = dict[str, Any]


class ResponseEvents:
    def __init__(self, req: ResponsesRequest, opening: Opening,
                 events: AsyncIterator[PipelineEvent], *, model: str) -> None:
        self.req = req
        self.events = events
        self.model = model
        self.id = response_id(opening.id)
        self.created_at = opening.created
        self.sequence = 0
        self.items: list[OutputItem] = []
        self.reasoning: ReasoningOutput | None = None  # the open reasoning item
        self.message: MessageOutput | None = None   # the open message item
        self.calls: dict[int, FunctionCallOutput] = {}  # the answer's call index -> its item
        self.answer: Answer | None = None

    done = None

    async def frames(self) -> AsyncIterator[Frame]:
        yield self._frame(self._lifecycle("response.created"))
        yield self._frame(self._lifecycle("response.in_progress"))
        async for event in self.events:
            for out in self._of(event):
                yield self._frame(out)
        status: Status = "incomplete" if self.answer is not None \
            and self.answer.finish == "length" else "completed"
        for out in self._close(status):
            yield self._frame(out)
        yield self._frame(self._lifecycle(f"response.{status}", status=status))

    def error(self, error: ServiceError, path: str) -> Frame:
        return self._frame(self._event("error", code=error.code or error.slug,
                                       message=error.detail, param=error.param))

    @staticmethod
    def _frame(event: Event) -> Frame:
        return Frame(event, event=event["type"])

    def _of(self, event: PipelineEvent) -> list[Event]:
        match event:
            case ReasoningDelta(text=text):
                return self._think(text)
            case TextDelta(text=text):
                return self._text(text)
            case CallStarted(index=index, id=id, name=name):
                return self._start_call(index, id, name)
            case ArgumentsDelta(index=index, text=text):
                return self._arguments(index, text)
            case CallDone():
                return []
            case Finished(answer=answer):
                self.answer = answer
                return []
            case _:
                assert_never(event)

    def _text(self, delta: str) -> list[Event]:
        events = [] if self.message is not None else self._open_message()
        assert self.message is not None
        self.message.content[0].text += delta
        return events + [self._event("response.output_text.delta", **self._part_of(self.message),
                                     delta=delta, logprobs=[])]

    def _think(self, delta: str) -> list[Event]:
        events = [] if self.reasoning is not None else self._open_reasoning()
        assert self.reasoning is not None
        self.reasoning.content[0].text += delta
        return events + [self._event("response.reasoning_text.delta",
                                     **self._part_of(self.reasoning), delta=delta)]

    def _open_reasoning(self) -> list[Event]:
        # The chat stream's reasoning comes first and whole, before any answer delta.
        assert not self.items, "reasoning after the answer began"
        self.reasoning = ReasoningOutput(id=new_item_id("rs"), status="in_progress",
                                         content=[])
        added = self._add(self.reasoning)
        part = ReasoningTextPart(text="")
        self.reasoning.content.append(part)
        return [added, self._event("response.content_part.added",
                                   **self._part_of(self.reasoning), part=part.model_dump())]

    def _close_reasoning(self, status: Status) -> list[Event]:
        """The reasoning item's `.done` events, once the answer begins (or the stream ends)."""
        item, self.reasoning = self.reasoning, None
        if item is None:
            return []
        item.status = status
        where, part = self._part_of(item), item.content[0]
        return [self._event("response.reasoning_text.done", **where, text=part.text),
                self._event("response.content_part.done", **where, part=part.model_dump()),
                self._event("response.output_item.done", output_index=where["output_index"],
                            item=item.model_dump())]

    def _open_message(self) -> list[Event]:
        events = self._close_reasoning("completed")
        self.message = MessageOutput(id=new_item_id("msg"), status="in_progress", content=[])
        added = self._add(self.message)
        part = OutputTextPart(text="")
        self.message.content.append(part)
        return events + [added, self._event("response.content_part.added",
                                            **self._part_of(self.message),
                                            part=part.model_dump())]

    def _start_call(self, index: int, call_id: str, name: str) -> list[Event]:
        # A new call: the reasoning and text before it are complete.
        events = self._close_reasoning("completed") + self._close_message("completed")
        item = FunctionCallOutput(id=new_item_id("fc"), call_id=call_id, name=name,
                                  arguments="", status="in_progress")
        self.calls[index] = item
        return events + [self._add(item)]

    def _arguments(self, index: int, fragment: str) -> list[Event]:
        item = self.calls[index]
        if not fragment:
            return []
        item.arguments += fragment
        return [self._event("response.function_call_arguments.delta", item_id=item.id,
                            output_index=self.items.index(item), delta=fragment)]

    def _close(self, status: Status) -> list[Event]:
        """The `.done` events of the open items, in output order."""
        # Reasoning still open: nothing came after it (cut off while thinking).
        events = self._close_reasoning(status)
        # An empty answer is still a message, as without streaming.
        if not any(isinstance(i, MessageOutput | FunctionCallOutput) for i in self.items):
            events += self._open_message()
        for item in self.items:
            if item is self.message:
                events += self._close_message(status)
            elif isinstance(item, FunctionCallOutput):
                events += self._close_call(item, status)
        return events

    def _close_call(self, item: FunctionCallOutput, status: Status) -> list[Event]:
        # A call cut off by max_output_tokens is never in the final response.
        item.status = "completed" if status == "completed" else "incomplete"
        index = self.items.index(item)
        return [self._event("response.function_call_arguments.done", item_id=item.id,
                            output_index=index, arguments=item.arguments),
                self._event("response.output_item.done", output_index=index,
                            item=item.model_dump())]

    def _close_message(self, status: Status) -> list[Event]:
        message, self.message = self.message, None
        if message is None:
            return []
        message.status = status
        where, part = self._part_of(message), message.content[0]
        return [self._event("response.output_text.done", **where, text=part.text, logprobs=[]),
                self._event("response.content_part.done", **where, part=part.model_dump()),
                self._event("response.output_item.done", output_index=where["output_index"],
                            item=message.model_dump())]

    def _add(self, item: OutputItem) -> Event:
        self.items.append(item)
        return self._event("response.output_item.added", output_index=len(self.items) - 1,
                           item=item.model_dump())

    def _part_of(self, item: MessageOutput | ReasoningOutput) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": self.items.index(item), "content_index": 0}

    def _lifecycle(self, kind: str, *, status: Status = "in_progress") -> Event:
        """The response so far: empty while in progress, whole at the end."""
        if status == "in_progress":
            response = response_object(self.req, id=self.id, created_at=self.created_at,
                                       model=self.model, output=[])
        else:
            answer = self.answer
            response = response_object(
                self.req, id=self.id, created_at=self.created_at, model=self.model,
                output=self._final_output(status), status=status,
                extension=answer.extension if answer else None,
                usage=ResponseUsage.of(answer.usage) if answer else None)
        return self._event(kind, response=response.model_dump())

    def _final_output(self, status: Status) -> list[OutputItem]:
        if status == "completed":
            return self.items
        # Cut off by max_output_tokens: its raw text is in the message; calls are left out.
        return [item for item in self.items if not isinstance(item, FunctionCallOutput)]

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event
