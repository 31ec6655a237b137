"""`strictcall serve` holds the root logger's lines while the model loads beside its checks
of flags and files (server/logs.py HeldLines): passed on, they come out in order through the
same handlers; never passed on, none come out."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from server.logs import HeldLines


@pytest.fixture
def root_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(threadName)s %(message)s"))
    root.handlers, root.level = [handler], logging.INFO
    try:
        yield stream
    finally:
        root.handlers, root.level = saved, level


def log_from_a_thread(message: str) -> None:
    worker = threading.Thread(target=logging.getLogger("strictcall.engine").info,
                              args=(message,), name="engine-build")
    worker.start()
    worker.join()


def test_lines_passed_on_come_out_in_order_through_the_same_handlers(root_stream):
    held = HeldLines()
    log_from_a_thread("model loaded")
    logging.getLogger("strictcall.api").info("checked")
    assert root_stream.getvalue() == ""
    held.pass_on()
    logging.getLogger("strictcall.api").info("serving")
    assert root_stream.getvalue().splitlines() == [
        "engine-build model loaded", "MainThread checked", "MainThread serving"]
    assert logging.getLogger().handlers[0] is not held


def test_lines_never_passed_on_never_come_out(root_stream):
    HeldLines()
    log_from_a_thread("model loaded")
    assert root_stream.getvalue() == ""


def test_at_most_the_limit_is_kept(root_stream):
    held = HeldLines(limit=2)
    for n in range(5):
        logging.getLogger("strictcall.engine").info("line %d", n)
    held.pass_on()
    assert root_stream.getvalue().splitlines() == ["MainThread line 0", "MainThread line 1"]
