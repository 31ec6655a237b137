"""What the server writes down: its log lines (text, or one JSON object per line) and the
audit log, a size-rotated JSONL file with one record per tool-call decision
(server/pipeline/checking/audit.py builds the records).

JSON log lines are for log shippers, which split on newlines: a traceback goes into the
`exception` field as one string, so a record is always exactly one line."""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import threading
import time
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger("strictcall.records")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, request_id
    (RequestIdFilter puts it on the record), and the exception and stack as strings."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname, "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-")}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str, fmt: Literal["text", "json"],
                      *filters: logging.Filter) -> None:
    """The root logger's one handler (stderr), in the chosen format, with `filters` (the
    request id); uvicorn's lines come through the root logger too."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    for f in filters:
        handler.addFilter(f)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # warnings.warn() lines in the same format, not raw stderr


class HeldLines(logging.Handler):
    """Stands in for the root logger's handlers until `pass_on()`: what is logged meanwhile
    (a model loading beside the checks of a server's flags and files) is kept, then
    handled by those handlers, in order. Never passed on (a check failed, and the server ends
    with its one line), it goes with the process. At most `limit` records are kept."""

    def __init__(self, limit: int = 1000) -> None:
        super().__init__()
        self._root = logging.getLogger()
        self._handlers = list(self._root.handlers)
        self._records: list[logging.LogRecord] = []
        self._limit = limit
        self._passed = False
        self._root.handlers = [self]

    def emit(self, record: logging.LogRecord) -> None:
        if self._passed:  # a record that reached this handler as it passed them on
            self._pass(record)
        elif len(self._records) < self._limit:
            self._records.append(record)

    def pass_on(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # emit() runs under it too
            self._root.handlers = self._handlers
            self._passed = True
            for record in self._records:
                self._pass(record)
            self._records = []

    def _pass(self, record: logging.LogRecord) -> None:
        for handler in self._handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


class _Rotating(logging.handlers.RotatingFileHandler):
    def handleError(self, record: logging.LogRecord) -> None:
        """A failed write (disk full, file removed) is one warning line, never a traceback
        on stderr and never a failed request; the record is lost, and the log says so."""
        log.warning("could not write an audit record to %s; it is lost", self.baseFilename)


class AuditLog:
    """Appends one JSON line per record to `path`; when the next line would take the file
    past `max_bytes`, it is renamed to `path.1` (`path.1` to `path.2`, ... up to
    `backups`; the oldest is deleted) and a new file is started.

    Written synchronously, under the handler's lock: a record is on disk (in the OS's
    buffers) before its response leaves, so nothing is lost in a queue when the process
    dies, and readers see a decision as soon as the client does."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # backupCount 0 would mean "never rotate" to RotatingFileHandler: keep one instead
        # and truncate it away, so the bound on size holds either way.
        self._handler = _Rotating(self.path, maxBytes=max_bytes,
                                  backupCount=max(backups, 1), encoding="utf-8")
        self._backups = backups
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        entry = logging.LogRecord("strictcall.audit", logging.INFO, __file__, 0, line, None,
                                  None)
        with self._lock:
            self._handler.handle(entry)
            if self._backups == 0:
                Path(f"{self.path}.1").unlink(missing_ok=True)

    def prune(self, *, max_age_s: float) -> list[Path]:
        """Delete rotated files (FILE.1 ... FILE.N) last written more than `max_age_s` ago;
        the live file is never deleted. The deleted paths."""
        cutoff = time.time() - max_age_s
        gone = []
        for old in sorted(self.path.parent.glob(self.path.name + ".*")):
            suffix = old.name.removeprefix(self.path.name + ".")
            if suffix.isdigit() and old.stat().st_mtime < cutoff:
                old.unlink(missing_ok=True)
                gone.append(old)
        return gone

    def close(self) -> None:
        self._handler.close()
