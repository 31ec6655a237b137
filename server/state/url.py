"""`--state-url` and `--rate-limit-url`: which store a URL names, checked before startup,
and shown without its password in every message."""

from __future__ import annotations

import logging
import sqlite3
import urllib.parse
from pathlib import Path

from server.model_store import default_cache_dir
from server.ratelimit import Limiter, RateLimiter
from server.settings import Settings
from server.state.records import StateError, StateStore

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


def shown(url: str) -> str:
    """The URL with any password replaced by ***."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def check_urls(settings: Settings) -> None:
    """Refuse a URL of a kind no store takes, in one line (StateError)."""
    url = state_url(settings)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in STATE_SCHEMES:
        raise StateError(f"--state-url {shown(url)!r}: use sqlite:///PATH, "
                         "postgresql://USER:PASSWORD@HOST:PORT/DB or memory://")
    if scheme == "sqlite" and not urllib.parse.urlsplit(url).path.strip("/"):
        raise StateError(f"--state-url {url!r} names no file: sqlite:///absolute/path.sqlite3")
    limits = settings.rate_limit_url
    if limits and urllib.parse.urlsplit(limits).scheme not in LIMIT_SCHEMES:
        raise StateError(f"--rate-limit-url {shown(limits)!r}: use redis://HOST:PORT/DB "
                         "(rediss:// for TLS), or leave it out for this process's memory")


def open_state(settings: Settings) -> StateStore:
    """The store --state-url names, migrated to this code's schema (StateError if it
    cannot be reached or is newer)."""
    check_urls(settings)
    url = state_url(settings)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "memory":
        from server.state.records import MemoryStateStore

        return MemoryStateStore()
    if scheme in ("postgresql", "postgres"):
        from server.state.postgres import PostgresStateStore

        return PostgresStateStore(url, shown=shown(url))
    from server.state.sqlite import SqliteStateStore

    path = sqlite_path(url)
    if settings.tools_db is not None and not settings.state_url:
        log.warning("--tools-db is deprecated: --state-url sqlite:///%s says the same", path)
    _adopt_legacy_file(path, settings)
    return SqliteStateStore(path)


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
