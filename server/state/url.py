"""`--state-url` and `--rate-limit-url`: which store a URL names, checked before startup,
and shown without its password in every message."""

from __future__ import annotations

import logging
import sqlite3
import urllib.parse
from pathlib import Path

from server.identity import is_placeholder
from server.model_store import default_cache_dir
from server.ratelimit import Limiter, RateLimiter
from server.settings import Settings
from server.state.records import StateError, StateStore
from server.state.timed import TimedStateStore

log = logging.getLogger("strictcall.state")
STATE_SCHEMES = ("sqlite", "postgresql", "postgres", "memory")
LIMIT_SCHEMES = ("memory", "redis", "rediss")


def state_url(settings: Settings) -> str:
    """The state URL the settings mean: --state-url; else the deprecated --tools-db FILE;
    else SQLite in the cache dir."""
    if settings.state_url:
        return settings.state_url
    if settings.tools_db is not None:
        return sqlite_url(settings.tools_db)
    return sqlite_url((settings.cache_dir or default_cache_dir()) / "state.sqlite3")


def sqlite_url(path: Path) -> str:
    return "sqlite://" + path.expanduser().absolute().as_posix()  # sqlite:///abs/path


def sqlite_path(url: str) -> Path:
    """The file of `sqlite:///abs/path` (or SQLAlchemy's `sqlite:////abs/path`)."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
    return Path("/" + path.lstrip("/"))


# Query parameters that carry a secret (libpq's `?password=`, `sslpassword`, a token).
_SECRET_KEYS = ("password", "secret", "token", "passwd")


def shown(url: str) -> str:
    """The URL with any password replaced by ***: in its user part, and in a query
    parameter that holds one (`postgresql://h/db?password=...`)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc if parts.password is None else \
        parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    pairs = []
    for raw in parts.query.split("&") if parts.query else []:
        key, eq, _ = raw.partition("=")
        secret = eq and any(s in urllib.parse.unquote(key).lower() for s in _SECRET_KEYS)
        pairs.append(f"{key}=***" if secret else raw)
    query = "&".join(pairs)
    if parts.password is None and query == parts.query:
        return url  # (rebuilt, `sqlite:////abs` would lose a slash)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def check_urls(settings: Settings) -> None:
    """Refuse a URL of a kind no store takes, a placeholder password, or a store of this
    process's own for one of several replicas, in one line (StateError)."""
    url = state_url(settings)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in STATE_SCHEMES:
        raise StateError(f"--state-url {shown(url)!r}: use sqlite:///PATH, "
                         "postgresql://USER:PASSWORD@HOST:PORT/DB or memory://")
    if scheme == "sqlite" and not urllib.parse.urlsplit(url).path.strip("/"):
        raise StateError(f"--state-url {url!r} names no file: sqlite:///absolute/path.sqlite3")
    if settings.replicas > 1 and scheme in ("sqlite", "memory"):
        # Each replica would keep its own idempotency keys: a retry on another replica
        # runs the write again.
        raise StateError(f"--replicas {settings.replicas} with --state-url {shown(url)!r}: "
                         "replicas must share one state store; use --state-url "
                         "postgresql://USER:PASSWORD@HOST:PORT/DB")
    password = urllib.parse.urlsplit(url).password
    if password is not None and is_placeholder(password):
        raise StateError(f"--state-url {shown(url)!r} has a placeholder password: set the "
                         "database's real password (a secret of your own)")
    if settings.state_secret is not None and is_placeholder(settings.state_secret):
        raise StateError("--state-secret is a placeholder: set a random secret of your own "
                         "(the same on every replica)")
    limits = settings.rate_limit_url
    if limits and urllib.parse.urlsplit(limits).scheme not in LIMIT_SCHEMES:
        raise StateError(f"--rate-limit-url {shown(limits)!r}: use redis://HOST:PORT/DB "
                         "(rediss:// for TLS), or leave it out for this process's memory")
    limits_password = urllib.parse.urlsplit(limits).password if limits else None
    if limits_password is not None and is_placeholder(limits_password):
        raise StateError(f"--rate-limit-url {shown(limits or '')!r} has a placeholder "
                         "password: set Redis's real password (a secret of your own)")


def open_state(settings: Settings) -> TimedStateStore:
    """The store --state-url names, migrated to this code's schema (StateError if it
    cannot be reached or is newer), its every operation off the event loop with a
    deadline (server/state/timed.py)."""
    check_urls(settings)
    url = state_url(settings)
    return TimedStateStore(_open_inner(settings, url), workers=settings.state_workers,
                           timeout_s=settings.state_timeout_s, shown=shown(url))


def _open_inner(settings: Settings, url: str) -> StateStore:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "memory":
        from server.state.records import MemoryStateStore

        return MemoryStateStore()
    if scheme in ("postgresql", "postgres"):
        from server.state.postgres import PostgresStateStore

        return PostgresStateStore(
            url, shown=shown(url), max_size=settings.state_pool_size,
            connect_timeout_s=settings.state_connect_timeout_s,
            statement_timeout_s=settings.state_timeout_s,
            pool_timeout_s=settings.state_timeout_s)
    from server.state.sqlite import SqliteStateStore

    path = sqlite_path(url)
    if settings.tools_db is not None and not settings.state_url:
        log.warning("--tools-db is deprecated: --state-url sqlite:///%s says the same", path)
    _adopt_legacy_file(path, settings)
    return SqliteStateStore(path, max_bytes=settings.state_max_bytes,
                            busy_timeout_s=settings.state_timeout_s)


def _adopt_legacy_file(path: Path, settings: Settings) -> None:
    """Before --state-url, the default file was <cache dir>/tools.sqlite3: its keys are
    copied into a new default state file once (the migrations then move them into
    records), so an upgrade does not forget a key a client may retry."""
    legacy = (settings.cache_dir or default_cache_dir()) / "tools.sqlite3"
    default = (settings.cache_dir or default_cache_dir()) / "state.sqlite3"
    if path != default or path.exists() or not legacy.exists():
        return
    source, target = sqlite3.connect(legacy), sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    log.info("state: copied the idempotency keys of %s into %s", legacy, path)


def ephemeral_state_warning(settings: Settings) -> str | None:
    """Why the state file would not outlive this container, if it would not: SQLite in
    the container's writable layer (an overlay file system, no volume mounted there)."""
    url = state_url(settings)
    if urllib.parse.urlsplit(url).scheme != "sqlite":
        return None
    path = sqlite_path(url)
    fs = _filesystem_of(path)
    if fs != "overlay":
        return None
    return (f"the state file {path} is in the container's writable layer (overlay): a "
            "recreated container forgets every idempotency key, and a retry runs the write "
            "again. Mount a volume at its folder, or use --state-url postgresql://...")


def _filesystem_of(path: Path) -> str | None:
    """The file system type of the mount that holds `path` (Linux /proc/mounts)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = str(path.expanduser().absolute())
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and (target == parts[1] or target.startswith(
                parts[1].rstrip("/") + "/")) and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


def open_rate_limits(settings: Settings) -> Limiter:
    """The buckets --rate-limit-url names: this process's memory by default, Redis for
    replicas (connected on first use)."""
    url = settings.rate_limit_url
    requests, tokens = settings.requests_per_minute, settings.tokens_per_minute
    if not url or urllib.parse.urlsplit(url).scheme == "memory":
        return RateLimiter(requests_per_minute=requests, tokens_per_minute=tokens)
    from server.state.buckets import RedisRateLimiter

    return RedisRateLimiter(url, shown=shown(url), requests_per_minute=requests,
                            tokens_per_minute=tokens)
