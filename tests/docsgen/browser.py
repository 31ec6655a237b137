"""Headless Chromium driven over the DevTools protocol (Debian's `chromium`; the
`websockets` client): open a page, wait for it to load, evaluate JavaScript in it, take a
screenshot. Enough to read the docs site as a browser renders it, with nothing to install
but the browser."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from websockets.sync.client import ClientConnection, connect

_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One browser tab."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and return its result (events that arrive meanwhile are dropped)."""
        own = next(self._ids)
        self._socket.send(json.dumps({"id": own, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=30))
            if message.get("id") == own:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.call("Page.enable")
        own = next(self._ids)
        self._socket.send(json.dumps({"id": own, "method": "Page.navigate",
                                      "params": {"url": url}}))
        while json.loads(self._socket.recv(timeout=30)).get("method") != "Page.loadEventFired":
            pass

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self._socket.close()

    def screenshot(self, path: Path) -> Path:
        # let the theme's header finish its title transition after a scroll
        self.evaluate("new Promise(done => setTimeout(done, 600))")
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Page]:
    """A headless Chromium with one tab; closed on exit."""
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("no chromium on PATH: `make setup-browser` installs Debian's")
    # Its helper processes (renderer, GPU, crashpad) may write the profile a moment after
    # the browser exits: all of them are ended as one group, and what is left in the
    # profile then does not fail the test's teardown.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        page = None
        try:
            page = _first_tab(proc, width, height)
            yield page
        finally:
            if page is not None:
                page.close()
            _end_group(proc)


def _end_group(proc: subprocess.Popen[str]) -> None:
    """The browser and every helper it started (one session: `start_new_session`)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _drain(stream: IO[str]) -> None:
    with stream:  # closed here, at the end of the browser's log
        for _ in stream:
            pass


def _first_tab(proc: subprocess.Popen[str], width: int, height: int) -> Page:
    assert proc.stderr is not None
    for line in proc.stderr:
        if found := _LISTENING.search(line):
            break
    else:
        raise RuntimeError("chromium exited before it listened for DevTools")
    # Keep reading its log, or a full pipe would stall the browser.
    threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
    port = found.group(1).split(":")[2].split("/")[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
        tabs = [t for t in json.load(answer) if t.get("type") == "page"]
    page = Page(connect(tabs[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=10))
    page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
              deviceScaleFactor=1, mobile=False)
    return page
