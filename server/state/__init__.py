"""State that outlives a process and is shared by replicas, behind small interfaces with an
embedded default and a real server for replicas:

- `StateStore` (server/state/records.py): JSON records by namespace and key, at
  `--state-url`: SQLite by default, Postgres for replicas, memory for tests. The
  idempotency keys and executions live there (server/execution/store.py); sessions and
  stored responses are meant to (a namespace each).
- Rate-limit buckets at `--rate-limit-url` (server/state/buckets.py): this process's
  memory by default, Redis for replicas."""

from server.state.records import (
    JsonObject,
    MemoryStateStore,
    Record,
    StateError,
    StateStore,
    VersionConflict,
)
from server.state.url import check_urls, open_rate_limits, open_state, shown, state_url

__all__ = ["JsonObject", "MemoryStateStore", "Record", "StateError", "StateStore",
           "VersionConflict", "check_urls", "open_rate_limits", "open_state", "shown",
           "state_url"]
