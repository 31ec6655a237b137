"""The endpoints one run measures: `--target name=URL[,model=M][,api-key-env=VAR]
[,dialect=D]`, each an OpenAI-compatible server already running.

The URL is the server's root or its `/v1` base (both are read the same way): requests go
to `/v1/chat/completions`, `/v1/responses` and `/v1/messages` under the root, metrics to
`/metrics`. The API key is read from the environment variable named, never from the
command line (which the results record). The dialect says how the shipped workloads ask
for JSON: "openai" (default; tools marked `"strict": true`, which vLLM needs to constrain a
named call), "strictcall", or "llamacpp" (llama-cpp-python's server takes
`{"type": "json_object", "schema": ...}` and answers OpenAI's json_schema form with a 500).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from bench.speed.latency_workload import SERVED_DIALECTS, Dialect

_KEYS = ("model", "api-key-env", "dialect")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class TargetError(ValueError):
    """A --target that cannot be used: the message names the part and the fix."""


@dataclass(frozen=True)
class Target:
    name: str
    root: str  # scheme://host:port[/prefix], without a trailing /v1
    model: str
    api_key_env: str | None = None
    dialect: Dialect = "openai"

    def headers(self) -> dict[str, str]:
        """Authorization (and Anthropic's x-api-key) from the named variable, if any."""
        if self.api_key_env is None:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise TargetError(f"target {self.name!r}: the environment variable "
                              f"{self.api_key_env!r} is not set; export it or drop "
                              "api-key-env=")
        return {"Authorization": f"Bearer {key}", "x-api-key": key}

    def shown(self) -> dict[str, str | None]:
        """What the results record (the key's variable name, never the key)."""
        return {"name": self.name, "url": self.root, "model": self.model,
                "api_key_env": self.api_key_env, "dialect": self.dialect}


def parse_target(spec: str, *, default_model: str) -> Target:
    """`name=URL[,model=M][,api-key-env=VAR][,dialect=D]`."""
    head, *rest = spec.split(",")
    name, eq, url = head.partition("=")
    if not eq or not _NAME.match(name):
        raise TargetError(f"--target {spec!r}: start with a name and its URL, e.g. "
                          "vllm=http://127.0.0.1:8000")
    options: dict[str, str] = {}
    for part in rest:
        key, eq, value = part.partition("=")
        if key not in _KEYS or not eq or not value:
            raise TargetError(f"--target {spec!r}: {part!r} is not one of "
                              f"{', '.join(k + '=...' for k in _KEYS)}")
        options[key] = value
    dialect = options.get("dialect", "openai")
    if dialect not in SERVED_DIALECTS:
        raise TargetError(f"--target {spec!r}: dialect {dialect!r} is not one of "
                          f"{', '.join(SERVED_DIALECTS)}")
    return Target(name=name, root=_root(url, spec), model=options.get("model", default_model),
                  api_key_env=options.get("api-key-env"),
                  dialect=dialect)  # one of SERVED_DIALECTS: checked just above


def parse_targets(specs: list[str], *, default_model: str) -> list[Target]:
    targets = [parse_target(s, default_model=default_model) for s in specs]
    names = [t.name for t in targets]
    if not targets:
        raise TargetError("name at least one --target name=URL")
    if len(set(names)) != len(names):
        raise TargetError(f"target names must differ: {', '.join(names)}")
    return targets


def _root(url: str, spec: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"--target {spec!r}: {url!r} is not an http(s) URL, e.g. "
                          "http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    return f"{parts.scheme}://{parts.netloc}{path}"
