"""`Sealer`: a contract's `Redact()` values as sessions keep them, sealed (AES-GCM) so the
state store (its database, its backups, GET /v1/sessions/{id}) never holds them in clear,
while the next turn of the conversation still has them.

The key is derived from `--state-secret`, which every replica shares; without one, each
process makes its own: its sealed values do not outlive it and no other replica can open
them, so they are dropped as if never filled (the conversation finds them again)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

SEALED = "$sealed"  # the one key of a sealed value: {"$sealed": "<base64>"}


class Sealer:
    def __init__(self, secret: bytes | None) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key = hashlib.sha256(b"strictcall-sessions\x00" + (secret or os.urandom(32))).digest()
        self._aead = AESGCM(key)

    def seal(self, value: Any) -> dict[str, str]:
        nonce = os.urandom(12)
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return {SEALED: base64.b64encode(nonce + self._aead.encrypt(nonce, text, None))
                .decode()}

    def open(self, sealed: Any) -> tuple[bool, Any]:
        """(True, the value), or (False, None) for a value sealed under another key."""
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.b64decode(sealed[SEALED])
            return True, json.loads(self._aead.decrypt(raw[:12], raw[12:], None))
        except (InvalidTag, ValueError, KeyError, TypeError):
            return False, None


def is_sealed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {SEALED}
