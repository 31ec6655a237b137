"""Running the app under uvicorn with a graceful stop.

On SIGTERM (or SIGINT) the app is marked as shutting down: the gate answers any new request
503 with Retry-After, uvicorn stops listening and lets in-flight requests finish for up to
`shutdown_grace_s`; a request still running one second before that ends is answered 503
(server/api/deps.py) rather than cut; then the engine is closed and the process exits."""

from __future__ import annotations

import logging
import math
import time
from types import FrameType

import uvicorn
from fastapi import FastAPI

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


def serve(app: FastAPI, settings: Settings, *, log_level: str) -> None:
    # log_config=None: uvicorn's own lines go through the root logger, request id included.
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            log_config=None,
                            timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_s))
    GracefulServer(config, app, grace_s=settings.shutdown_grace_s).run()
