"""JSON log lines (--log-format json): one object per line with the request id, and an
exception's traceback as a string field, never lines of its own."""

from __future__ import annotations

import io
import json
import logging

from server.api.gate import REQUEST_ID, RequestIdFilter
from server.logs import JsonFormatter


def lines_of(emit) -> list[dict]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    log = logging.getLogger("strictcall.test-json")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        emit(log)
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    return [json.loads(line) for line in text.splitlines()]


def test_each_record_is_one_json_line_with_the_request_id():
    def emit(log: logging.Logger) -> None:
        log.info("outside a request: %d", 1)
        token = REQUEST_ID.set("req-42")
        try:
            log.warning("inside \"quoted\"\nand on two lines")
        finally:
            REQUEST_ID.reset(token)

    outside, inside = lines_of(emit)
    assert outside["message"] == "outside a request: 1" and outside["request_id"] == "-"
    assert inside == {**inside, "level": "WARNING", "logger": "strictcall.test-json",
                      "request_id": "req-42", "message": "inside \"quoted\"\nand on two lines"}
    assert inside["time"].endswith("Z") and "T" in inside["time"]


def test_an_exception_is_a_string_field_of_the_same_line():
    def emit(log: logging.Logger) -> None:
        try:
            {}["missing"]
        except KeyError:
            log.exception("lookup failed")

    (record,) = lines_of(emit)
    assert record["level"] == "ERROR" and record["message"] == "lookup failed"
    assert record["exception"].startswith("Traceback") and "KeyError: 'missing'" in \
        record["exception"]
