"""Running the app under uvicorn with a graceful stop.

On SIGTERM (or SIGINT) the app is marked as shutting down: the gate answers any new request
503 with Retry-After, uvicorn stops listening and lets in-flight requests finish for up to
`shutdown_grace_s`; a request still running one second before that ends is answered 503
(server/api/deps.py) rather than cut; then the engine is closed and the process exits.

Slow clients hold nothing for ever: at most `max_connections` connections (more are
answered 503), an idle kept-alive one is closed after `keepalive_timeout_s`, and a request
whose headers have not all come within `request_read_timeout_s` (a client that connects
and sends nothing, or a byte now and then) has its connection closed; uvicorn's own idle
timer starts only after a first response. The body and a stream's writes have their own
deadlines in the gate (server/api/gate.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import time
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from server.settings import Settings

log = logging.getLogger("strictcall.api")


class GracefulServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI, *, grace_s: float) -> None:
        super().__init__(config)
        self._app = app
        self._grace_s = grace_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._app.state.shutdown_deadline is None:
            log.info("signal %d: finishing in-flight requests for up to %g s, refusing new "
                     "ones", sig, self._grace_s)
            self._app.state.shutdown_deadline = time.monotonic() + self._grace_s
        super().handle_exit(sig, frame)


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers, from the
    connection's start and from each response's end, and a bound on what one connection's
    answer may hold in buffers: the kernel's send buffer (fixed, not autotuned to
    megabytes) and the transport's, so a client that stops reading is noticed soon."""

    header_timeout_s = 30.0
    send_buffer_bytes = 256 * 1024

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        transport.set_write_buffer_limits(high=self.send_buffer_bytes)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expired)

    def _expired(self) -> None:
        """No request under way (its headers never came whole): close the connection."""
        cycle = self.cycle
        if (cycle is not None and not cycle.response_complete) or self.transport.is_closing():
            return
        log.info("closing a connection whose request headers did not come in %g s",
                 self.header_timeout_s)
        self.transport.close()


def serve(app: FastAPI, settings: Settings, *, log_level: str) -> None:
    protocol = type("BoundedH11", (HeaderDeadline,),
                    {"header_timeout_s": settings.request_read_timeout_s,
                     "send_buffer_bytes": settings.send_buffer_bytes})
    # log_config=None: uvicorn's own lines go through the root logger, request id included.
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            log_config=None, http=protocol,
                            limit_concurrency=settings.max_connections,
                            timeout_keep_alive=max(1, math.ceil(settings.keepalive_timeout_s)),
                            timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_s))
    GracefulServer(config, app, grace_s=settings.shutdown_grace_s).run()
