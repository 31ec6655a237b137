"""Compiled grammars on disk, so a restarted server starts warm.

One file per cache key, named by the key's digest; the file repeats the whole key, which is
checked on load (a digest collision or a hand-copied file is a miss, not a wrong grammar).
Writes go to a temporary file renamed into place, so readers (other threads, other server
processes sharing the directory) never see half a file. A file that does not load is
removed and counted, and the grammar is compiled again. The store only ever costs warmth:
a directory that cannot be made or written is logged, and requests and startup go on.

The directory holds `max_bytes` at most: past it, the files used least recently (a load
touches its file) are removed, so schemas clients send once cannot fill the disk."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("strictcall.grammars")

FORMAT = 1


DEFAULT_MAX_BYTES = 512 * 2**20


class DiskStore:
    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.bad_files = 0
        self.evicted = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # saves will fail and be logged too; loads simply miss
            log.warning("grammar disk cache %s is unusable, compiling without it: %s",
                        self.directory, exc)
        self._bytes = sum(size for _, size, _ in self._files())

    def path_for(self, key: Any) -> Path:
        digest = hashlib.sha256(_key_text(key).encode()).hexdigest()
        return self.directory / f"{digest}.json"

    def load(self, key: Any) -> str | None:
        """The serialized grammar stored for `key`, or None."""
        path = self.path_for(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):  # not stored, or no store at all
            return None
        except (OSError, ValueError) as exc:
            self.discard(key, f"unreadable ({exc})")
            return None
        if not isinstance(record, dict) or not isinstance(record.get("grammar"), str):
            self.discard(key, "not a stored grammar")
            return None
        if record.get("format") != FORMAT or record.get("key") != dataclasses.asdict(key):
            self.discard(key, "written for another key or format")
            return None
        grammar: str = record["grammar"]
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: the last to be evicted
        return grammar

    def save(self, key: Any, serialized: str) -> None:
        record = {"format": FORMAT, "key": dataclasses.asdict(key), "grammar": serialized}
        path = self.path_for(key)
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, ensure_ascii=False)
            os.replace(tmp, path)
            self._bytes += path.stat().st_size
            if self._bytes > self.max_bytes:
                self._evict()
        except OSError as exc:  # a full or read-only disk costs warmth, never a request
            log.warning("could not store a compiled grammar in %s: %s", self.directory, exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    Path(tmp).unlink(missing_ok=True)

    def _files(self) -> list[tuple[float, int, Path]]:
        """(last used, size, path) of every stored grammar."""
        out = []
        with contextlib.suppress(OSError):
            for path in self.directory.glob("*.json"):
                with contextlib.suppress(OSError):
                    stat = path.stat()
                    out.append((stat.st_mtime, stat.st_size, path))
        return out

    def _evict(self) -> None:
        """Remove the least recently used files until the store holds 90% of `max_bytes`
        (recounted from the directory, which other processes may share)."""
        files = sorted(self._files())
        total = sum(size for _, size, _ in files)
        for _, size, path in files:
            if total <= self.max_bytes * 0.9:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                self.evicted += 1
        self._bytes = total

    def discard(self, key: Any, why: str) -> None:
        self.bad_files += 1
        log.warning("dropping cached grammar %s: %s", self.path_for(key).name, why)
        try:
            self.path_for(key).unlink(missing_ok=True)
        except OSError as exc:  # a read-only store: the file stays, and stays a miss
            log.warning("could not remove %s: %s", self.path_for(key), exc)


def _key_text(key: Any) -> str:
    return json.dumps(dataclasses.asdict(key), sort_keys=True)
