"""Schema migrations, run at startup: numbered SQL files (sql/<dialect>/NNN_name.sql), each
applied once, in order, recorded in `strictcall_migrations`. A database whose schema is
newer than this code is refused: an older replica must not write into a newer layout."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from server.state.records import StateError

Dialect = Literal["sqlite", "postgres"]
SQL_DIR = Path(__file__).resolve().parent / "sql"
_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
VERSION_TABLE = """CREATE TABLE IF NOT EXISTS strictcall_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied double precision NOT NULL)"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file's statements, one by one (SQLite runs them inside one transaction this
        way; its executescript would commit first)."""
        out, pending = [], ""
        for line in self.sql.splitlines(keepends=True):
            if line.lstrip().startswith("--"):
                continue
            pending += line
            if sqlite3.complete_statement(pending):
                out.append(pending.strip())
                pending = ""
        if pending.strip():
            raise ValueError(f"{self.name}: the last statement has no closing ';'")
        return out


def migrations(dialect: Dialect) -> list[Migration]:
    found = []
    for path in sorted((SQL_DIR / dialect).glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise ValueError(f"{path}: migration files are named NNN_name.sql")
        found.append(Migration(int(match.group(1)), path.name, path.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"{SQL_DIR / dialect}: migrations must be numbered 001, 002, ... "
                         f"without gaps; found {versions}")
    return found


def pending(dialect: Dialect, applied: set[int], *, where: str) -> list[Migration]:
    """The migrations not applied yet; StateError if the database is ahead of this code."""
    known = migrations(dialect)
    ahead = sorted(applied - {m.version for m in known})
    if ahead:
        raise StateError(f"the state database {where} has schema version {max(ahead)}, newer "
                         f"than this StrictCall knows ({len(known)}): run the newer "
                         "StrictCall, or point --state-url at another database")
    return [m for m in known if m.version not in applied]
