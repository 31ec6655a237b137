"""`OutcomeJournal`: what the idempotency store must still be told, kept in a local file until
it has been, so a write that acted never loses its outcome to a store that was down.

Two kinds of entry: `finish` (a run's outcome: the run acted, or may have, and the store
did not take the outcome in time) and `release` (a claim whose run never started its
handler, but whose claim may have reached the store: dropped, so the key can run again).
Each is one JSON line, flushed and fsynced before the client is answered; applying it
appends a `done` line with its id. The file is read back at start (entries not done are
applied again, in order) and rewritten without the done ones once nothing is pending.

An entry may wait for an operation still running on the store (`after`): a release is
applied only once the claim it undoes has finished, or the claim could land after it."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from server.execution.store import Scope

log = logging.getLogger("strictcall.execution")
Op = Literal["finish", "release"]


@dataclass
class Entry:
    op: Op
    scope: Scope
    token: str
    outcome: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # In this process only: the store operation this entry must not overtake.
    after: concurrent.futures.Future[Any] | None = None

    def ready(self) -> bool:
        return self.after is None or self.after.done()

    def as_line(self) -> str:
        return json.dumps({"id": self.id, "op": self.op, "scope": self.scope.as_dict(),
                           "token": self.token, "outcome": self.outcome},
                          separators=(",", ":"), default=str)


class OutcomeJournal:
    """Pending entries in memory, mirrored to `path` (None: memory only, for tests and
    servers whose state is memory anyway)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: dict[str, Entry] = {}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            _cut_torn_tail(path)
            self._pending = {e.id: e for e in _read(path)}
            if self._pending:
                log.warning("outcome journal %s: %d entries the state store has not taken "
                            "yet; applying them", path, len(self._pending))

    def add(self, entry: Entry) -> None:
        with self._lock:
            self._pending[entry.id] = entry
            self._append(entry.as_line())

    def pending(self) -> list[Entry]:
        """Entries not applied yet, oldest first, that may be applied now."""
        with self._lock:
            return [e for e in self._pending.values() if e.ready()]

    def waiting(self) -> int:
        with self._lock:
            return len(self._pending)

    def done(self, entry: Entry) -> None:
        with self._lock:
            if self._pending.pop(entry.id, None) is None:
                return
            if self._pending:
                self._append(json.dumps({"id": entry.id, "op": "done"}))
            elif self.path is not None:  # nothing left: start the file afresh
                self.path.write_text("")

    def _append(self, line: str) -> None:
        if self.path is None:
            return
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())


def _cut_torn_tail(path: Path) -> None:
    """A last line the process died while writing (no newline after it) is cut off the
    file: left, the next entry would be appended to it and lost with it at the following
    restart. Its client was never answered, so nothing it held was promised."""
    try:
        with path.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            data = f.read()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning("outcome journal %s: cut a torn last line (%d bytes)", path,
                    size - keep)
    except FileNotFoundError:
        return


def _read(path: Path) -> list[Entry]:
    """The entries of the file not marked done; a torn last line (the process died while
    writing it) is skipped: its client was never answered."""
    if not path.exists():
        return []
    entries: dict[str, Entry] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            raw = json.loads(line)
        except ValueError:
            log.warning("outcome journal %s: skipped a line that is not JSON", path)
            continue
        if raw.get("op") == "done":
            entries.pop(str(raw.get("id")), None)
        elif raw.get("op") in ("finish", "release"):
            entries[str(raw["id"])] = Entry(raw["op"], Scope.of(raw["scope"]),
                                            str(raw["token"]), raw.get("outcome"),
                                            str(raw["id"]))
    return list(entries.values())
