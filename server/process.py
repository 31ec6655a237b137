"""A real `strictcall serve` child process on 127.0.0.1, for end-to-end tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


class ServerProcess:
    def __init__(self, *args: str, startup_s: float = 120,
                 ready: tuple[int, ...] = (200,)) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._args = args
        self._startup_s = startup_s
        self._ready = ready  # the /health statuses that mean it started (503: degraded)
        self._proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="strictcall-", suffix=".log")[1])

    def __enter__(self) -> ServerProcess:
        log = self.log_path.open("wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1",
             "--port", str(self.port), *self._args],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            # Its own process group: vLLM's engine-core and worker processes go with it.
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + self._startup_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"server exited with {self._proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1).status_code in self._ready:
                    return self
            except httpx.HTTPError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"server did not become healthy in {self._startup_s} s:\n{self.log()}")

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        group = os.getpgid(self._proc.pid) if self._proc.poll() is None else None
        self._proc.terminate()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if group is not None:  # whatever it started and left behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self._proc = None

    @property
    def pid(self) -> int:
        """The server's process id (benchmarks read its memory from /proc/<pid>/status)."""
        assert self._proc is not None, "the server is not running"
        return self._proc.pid

    def send_signal(self, sig: int) -> None:
        assert self._proc is not None, "the server is not running"
        self._proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process has exited (subprocess.TimeoutExpired if not)."""
        assert self._proc is not None, "the server is not running"
        return self._proc.wait(timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
