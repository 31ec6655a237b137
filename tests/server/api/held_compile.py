"""A compile held until the test releases it: tests of compile timeouts order events with it
(the compile is known to be running; the timeout answers while it still is)."""

from __future__ import annotations

import json
import threading


class HeldCompile:
    """Wraps a backend's compile: a spec `holds` picks compiles only once `release` is set
    (or after 120 s, so that a broken build fails instead of hanging); `entered` says that
    compile started, `left` that it stopped waiting, `returned` that it compiled."""

    def __init__(self, compile_, holds=lambda spec: "slowpoke" in json.dumps(
            spec.json_schema())) -> None:
        self.real, self.holds = compile_, holds
        self.entered, self.release, self.left, self.returned = (
            threading.Event(), threading.Event(), threading.Event(), threading.Event())

    def __call__(self, spec):
        if not self.holds(spec):
            return self.real(spec)
        self.entered.set()
        self.release.wait(timeout=120)
        self.left.set()
        compiled = self.real(spec)
        self.returned.set()
        return compiled
