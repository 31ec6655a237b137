"""A bound on the generation requests inside the server, decoding or waiting for the engine.

Engines queue without limit (TorchEngine's queue, vLLM's scheduler), so the bound is kept
here, above every engine: once `capacity` requests are inside, the next one is refused at
once with a 429 and Retry-After instead of waiting behind all of them. A counter is
enough: it is only touched on the event loop."""

from __future__ import annotations

from server.engines.base import Engine
from server.errors import Overloaded, Unavailable


class Admission:
    def __init__(self, capacity: int, *, engine: Engine) -> None:
        self.capacity = capacity
        self.inside = 0
        self._engine = engine

    def enter(self) -> None:
        """Take a place, or raise: 503 when the engine is down (or a step hung: its
        watchdog says so through `alive`), 429 when every place is taken. Each successful
        `enter` is paired with one `leave`."""
        if not self._engine.alive():
            why = self._engine.problem() or "the engine is not running"
            raise Unavailable(f"{why}; retry later or on another replica")
        if self.inside >= self.capacity:
            raise Overloaded(f"all {self.capacity} request places are taken (decoding or "
                             "queued); retry after the Retry-After delay")
        self.inside += 1

    def leave(self) -> None:
        self.inside -= 1
