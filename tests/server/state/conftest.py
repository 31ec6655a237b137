"""The state stores on each backend: memory and SQLite in the fast tier, Postgres (a real
server this session starts) in the `replicas` tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.state import MemoryStateStore, StateStore

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[pytest.mark.replicas, pytest.mark.slow]),
]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def open_backend(kind: str, request: pytest.FixtureRequest, tmp_path) -> StateStore:
    if kind == "memory":
        return MemoryStateStore()
    if kind == "sqlite":
        from server.state.sqlite import SqliteStateStore

        return SqliteStateStore(tmp_path / "state.sqlite3")
    from server.state.postgres import PostgresStateStore

    url = request.getfixturevalue("postgres").database()
    return PostgresStateStore(url, shown=url)


@pytest.fixture(params=BACKENDS)
def records(request, tmp_path) -> Iterator[StateStore]:
    store = open_backend(request.param, request, tmp_path)
    yield store
    store.close()
