"""The one server-sent-events writer. Each API's stream is a sequence of frames (an optional
`event:` name and a JSON body); an error after the stream began ends it with that API's own
error frame, never a broken connection without a word."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from server.errors import ServiceError

log = logging.getLogger("strictcall.api")


@dataclass(frozen=True)
class Frame:
    data: dict[str, Any]
    event: str | None = None  # the `event:` line (Responses and Messages name each event)

    def encode(self) -> str:
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {json.dumps(self.data, ensure_ascii=False)}\n\n"


class FrameStream(Protocol):
    def frames(self) -> AsyncIterator[Frame]: ...

    def error(self, error: ServiceError, path: str) -> Frame:
        """The frame that ends the stream when `error` happens after it began."""
        ...

    @property
    def done(self) -> str | None:
        """A last `data:` line after every stream (Chat Completions' `[DONE]`), or None."""
        ...


async def write_sse(stream: FrameStream, path: str) -> AsyncGenerator[str, None]:
    frames = stream.frames()
    try:
        async for frame in frames:
            yield frame.encode()
    except ServiceError as exc:  # after the stream started: the API's error event ends it
        yield stream.error(exc, path).encode()
    except Exception:
        log.exception("stream failed")
        error = ServiceError("internal error while streaming; the server log has the details")
        yield stream.error(error, path).encode()
    finally:  # closed early (the client went, or stopped reading): the stream's work stops
        close = getattr(frames, "aclose", None)
        if close is not None:
            await close()
    if stream.done is not None:
        yield f"data: {stream.done}\n\n"
