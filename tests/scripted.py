"""The scripted app the unit tier drives, in one place: the real app (`create_app`) over a
ScriptedEngine behind FastAPI's TestClient, the scripts tests answer with, and the checks
of the error body each API renders. Every test module builds its app through
`scripted_client` (the `scripted` fixture, tests/conftest.py), so none repeats how."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.base import Engine
from server.engines.scripted import ScriptedEngine
from server.errors import PROBLEMS_URL
from server.settings import Settings

MODEL = "scripted"
USER = [{"role": "user", "content": "Weather in Paris?"}]
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"},
                                                  "days": {"type": "integer"}},
                   "required": ["city"]}}}
OTHER = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}


class Replies:
    """Script: answer with whatever the test sets."""

    def __init__(self) -> None:
        self.text = "Hello."

    def __call__(self, prompt: str) -> str:
        return self.text


@contextlib.contextmanager
def scripted_client(model_dir: Path, script: Callable[[str], str] | None = None, *,
                    engine: Callable[[Settings], Engine] | None = None,
                    app: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                    raise_server_exceptions: bool = True,
                    **settings: Any) -> Iterator[TestClient]:
    """A TestClient on the app with these settings (served as "scripted" unless they say
    otherwise), over a ScriptedEngine answering `script`, or `engine`'s; `app`: more of
    create_app's arguments (keys, audit, tool_policy). `raise_server_exceptions=False`
    shows a 500 as the client gets it."""
    settings.setdefault("served_model_name", MODEL)
    factory = engine or (lambda s: ScriptedEngine(model_dir, script or Replies()))
    with TestClient(create_app(Settings(**settings), factory, **(app or {})),
                    headers=headers, raise_server_exceptions=raise_server_exceptions) as client:
        yield client


def assert_problem(resp: Any, status: int, *, param: str | None = None,
                   says: str = "") -> dict[str, Any]:
    """An RFC 9457 problem with OpenAI's error envelope (Chat Completions, Responses and
    the server's own routes)."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = resp.json()
    assert body["status"] == status and body["type"].startswith(PROBLEMS_URL)
    assert body["error"]["message"] == body["detail"]
    if param is not None:
        assert body["error"]["param"] == param
    assert says.lower() in body["detail"].lower()
    assert "Traceback" not in resp.text
    return body


def assert_error(resp: Any, status: int, *, kind: str = "invalid_request_error",
                 says: str = "") -> dict[str, Any]:
    """Anthropic's error body, which the `anthropic` SDK reads (the Messages API)."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = resp.json()
    assert body["type"] == "error" and body["error"]["type"] == kind
    assert says.lower() in body["error"]["message"].lower(), body["error"]["message"]
    assert body["strictcall"]["status"] == status and "Traceback" not in resp.text
    return body
