"""Who is calling: API keys loaded from a file, each with an identity (a name, a tenant,
roles), and the rights those roles give.

The key file is YAML (JSON is YAML too):

    keys:
      - key: "sk-billing-2f9c..."            # a plaintext key, hashed when loaded, or
        name: billing-agent                   #   "sha256:<64 hex digits>" of the key
        tenant: acme
        roles: [chat]
        requests_per_minute: 60               # optional rate limits (server/ratelimit.py):
        tokens_per_minute: 20000              #   absent: the server's default; 0: none

A key that is a placeholder of the shipped examples ("sk-change-me-...") is refused: a
deployment that forgot to replace it would run on a key everyone can read. The file is
read again on SIGHUP and when it changes (`WatchedKeyRing`): a revoked key stops working
without a restart; a file that no longer loads keeps the keys in force and logs why.

Only sha256 digests are kept in memory. A presented key is hashed and compared with every
known digest by `hmac.compare_digest`, so neither a byte-by-byte nor an early-exit timing
says how close a guess was. Keys never appear in a log line or a response."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

log = logging.getLogger("strictcall.api")
Role = Literal["chat", "metrics", "admin"]
# Other role names a key may carry for the tool policy (server/execution/policy.py), e.g.
# "support-agent"; they give no route rights of their own.
_POLICY_ROLE = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
# What each role may call. `admin` may call everything; /health is open to anyone.
Right = Literal["chat", "metrics"]
ROLE_RIGHTS: dict[Role, frozenset[Right]] = {
    "chat": frozenset({"chat"}), "metrics": frozenset({"metrics"}),
    "admin": frozenset({"chat", "metrics"})}
_HASHED = "sha256:"
# What the shipped examples put where a secret goes: refused wherever a secret is read.
PLACEHOLDERS = ("change-me", "changeme", "replace-me", "placeholder")


def is_placeholder(secret: str) -> bool:
    """A value the shipped examples carry for the operator to replace ("change-me")."""
    lowered = secret.lower().replace("_", "-")
    return any(word in lowered for word in PLACEHOLDERS)


class KeyFileError(Exception):
    """An API key file that cannot be used; the message is one line naming the fix."""


@dataclass(frozen=True)
class Identity:
    name: str
    tenant: str | None
    roles: tuple[str, ...]  # Role names, and the policy's own (no route rights)
    # The key's own rate limits; None: the server's default, 0: no limit for this key.
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def may(self, right: Right) -> bool:
        rights = {str(role): given for role, given in ROLE_RIGHTS.items()}  # by any name
        return any(right in rights.get(role, frozenset()) for role in self.roles)

    def claims(self) -> dict[str, str]:
        """What contract fields can take from this identity (contracts.FromHeader.claim):
        `tenant`, `subject` (the key's name) and `roles` (comma-separated)."""
        out = {"subject": self.name, "roles": ",".join(self.roles)}
        if self.tenant is not None:
            out["tenant"] = self.tenant
        return out


@dataclass(frozen=True)
class Caller:
    """Where a request's runtime-sourced contract fields come from: its headers, and, when
    API keys are on, the authenticated identity, whose claims the headers cannot override."""

    headers: dict[str, str]
    identity: Identity | None = None
    request_id: str | None = None  # for the records (audit log) of what the request did


class _KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    name: str = Field(min_length=1)
    tenant: str | None = None
    roles: list[str] = Field(default_factory=lambda: ["chat"])
    requests_per_minute: int | None = Field(None, ge=0)
    tokens_per_minute: int | None = Field(None, ge=0)

    @field_validator("roles")
    @classmethod
    def _roles(cls, roles: list[str]) -> list[str]:
        if not set(roles) & set(ROLE_RIGHTS):
            raise ValueError(f"a key needs one of the roles {sorted(ROLE_RIGHTS)}; other "
                             "names (lower-case, e.g. 'support-agent') are tool-policy roles")
        bad = [r for r in roles if r not in ROLE_RIGHTS and not _POLICY_ROLE.match(r)]
        if bad:
            raise ValueError(f"role names are lower-case letters, digits, '_', '.', '-': {bad}")
        return roles

    @field_validator("key")
    @classmethod
    def _hash_form(cls, key: str) -> str:
        if key.startswith(_HASHED):
            digest = key.removeprefix(_HASHED)
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
                raise ValueError("a 'sha256:' key must be followed by 64 hex digits")
        elif len(key) < 16:  # a short key is a guessable key
            raise ValueError("a plaintext key must have at least 16 characters")
        elif is_placeholder(key):
            raise ValueError("this key is the example's placeholder, which anyone can read: "
                             "put a random key of your own (or its sha256:...) in its place")
        return key


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keys: list[_KeyEntry] = Field(min_length=1)


class KeyRing:
    """The known keys, by sha256 digest."""

    def __init__(self, entries: list[tuple[bytes, Identity]]) -> None:
        self._entries = entries

    @classmethod
    def load(cls, path: Path) -> KeyRing:
        try:
            raw = yaml.safe_load(path.read_text())
            parsed = _KeyFile.model_validate(raw)
        except OSError as exc:
            raise KeyFileError(f"cannot read the API key file {str(path)!r}: "
                               f"{exc.strerror}") from None
        except yaml.YAMLError:
            raise KeyFileError(f"the API key file {str(path)!r} is not YAML or JSON") from None
        except ValidationError as exc:
            first = exc.errors()[0]  # never echo the input: it may be a key
            where = ".".join(map(str, first["loc"])) or "the file"
            raise KeyFileError(f"the API key file {str(path)!r}: {where}: {first['msg']} "
                               "(expected {keys: [{key, name, tenant, roles, "
                               "requests_per_minute, tokens_per_minute}]})") from None
        return cls.of(parsed.keys)

    @classmethod
    def of(cls, entries: list[_KeyEntry] | list[dict[str, Any]]) -> KeyRing:
        ring, names, digests = [], set(), set()
        for raw in entries:
            entry = raw if isinstance(raw, _KeyEntry) else _KeyEntry.model_validate(raw)
            digest = _digest_of(entry.key)
            if entry.name in names or digest in digests:
                raise KeyFileError(f"API key {entry.name!r} is listed twice (by name or key)")
            names.add(entry.name)
            digests.add(digest)
            ring.append((digest, Identity(entry.name, entry.tenant, tuple(entry.roles),
                                          entry.requests_per_minute,
                                          entry.tokens_per_minute)))
        return cls(ring)

    def identify(self, presented: str) -> Identity | None:
        """The identity of a presented key, or None. Every digest is compared, always."""
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found = None
        for known, identity in self._entries:
            if hmac.compare_digest(known, digest):
                found = identity
        return found

    def __len__(self) -> int:
        return len(self._entries)


def _digest_of(key: str) -> bytes:
    if key.startswith(_HASHED):
        return bytes.fromhex(key.removeprefix(_HASHED))
    return hashlib.sha256(key.encode()).digest()


class WatchedKeyRing:
    """The keys of `path`, loaded again when the file changes (checked every few seconds by
    `watch`) or on `reload` (SIGHUP). A file that fails to load keeps the keys in force."""

    def __init__(self, path: Path, ring: KeyRing | None = None) -> None:
        self.path = path
        self.ring = ring or KeyRing.load(path)
        self._seen = _stamp(path)

    def identify(self, presented: str) -> Identity | None:
        return self.ring.identify(presented)

    def __len__(self) -> int:
        return len(self.ring)

    def reload(self) -> bool:
        """Load the file again; True when the new keys are in force."""
        self._seen = _stamp(self.path)
        try:
            ring = KeyRing.load(self.path)
        except KeyFileError as exc:
            log.error("API keys not reloaded, the %d loaded before stay in force: %s",
                      len(self.ring), exc)
            return False
        self.ring = ring
        log.info("API keys reloaded from %s: %d key(s)", self.path, len(ring))
        return True

    def changed(self) -> bool:
        return _stamp(self.path) != self._seen

    async def watch(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            if self.changed():
                await asyncio.to_thread(self.reload)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file: its inode (a Secret volume swaps a symlink), size and
    modification time."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns
