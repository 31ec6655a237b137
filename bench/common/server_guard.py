"""The server a long benchmark started, kept alive for the next dialogue and kept within a
memory bound, each death recorded for the report.

A request that makes the server grow past the bound is its own finding (the report says
during which dialogue and setting); killing it there keeps one benchmark from driving a
shared machine into its OOM killer, which picks among everyone's processes. The next
dialogue gets a fresh server: what died is counted, never hidden."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import Any

from server.process import ServerProcess


class GuardedServer:
    def __init__(self, *args: str, max_rss_gib: float, startup_s: float = 600) -> None:
        self._args, self._startup_s = args, startup_s
        self._max_rss_kb = int(max_rss_gib * 2**20)
        self._server: ServerProcess | None = None
        self._killed: str | None = None  # why the watchdog killed the current server
        self._stop = threading.Event()
        self.during = ""  # what is being run, for the record of a death
        self.deaths: list[dict[str, Any]] = []

    def __enter__(self) -> GuardedServer:
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not running"
        return self._server.base_url

    @property
    def pid(self) -> int:
        assert self._server is not None, "the server is not running"
        return self._server.pid

    def alive(self) -> bool:
        """Whether the server runs; if it died, the death is recorded and a new one started
        (False: the caller needs a new client for the new base_url)."""
        assert self._server is not None, "the server is not running"
        try:
            code = self._server.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return True
        self.deaths.append({"during": self.during, "exit": code,
                            "why": self._killed or f"exited with {code}",
                            "log": self._server.log()[-1500:]})
        self._end()
        self._start()
        return False

    def _start(self) -> None:
        self._server = ServerProcess(*self._args, startup_s=self._startup_s).__enter__()
        self._killed, self._stop = None, threading.Event()
        threading.Thread(target=self._watch, args=(self._server.pid, self._stop),
                         daemon=True).start()

    def _end(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.__exit__()
            self._server = None

    def _watch(self, pid: int, stop: threading.Event) -> None:
        while not stop.wait(0.25):
            rss = _rss_kb(pid)
            if rss is None:
                return
            if rss > self._max_rss_kb:
                self._killed = (f"resident memory {rss / 2**20:.1f} GiB passed the "
                                f"{self._max_rss_kb / 2**20:g} GiB bound: killed")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return


def _rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
