"""A user's own requests: a JSONL file, one request a line, in any of three wire APIs.

A line is either a request body as the API takes it, or an envelope around one:

    {"messages": [...], "tools": [...], "response_format": {...}, "max_tokens": 64}
    {"api": "responses", "id": "refund-1", "body": {"input": "...", "text": {...}}}

Without "api" the body says which API it is for: `input` is the Responses API's;
`messages` with Anthropic's marks (a top-level `system`, tools with `input_schema`,
`tool_choice` of type "any"/"tool", `stop_sequences`, content blocks of type
"tool_use"/"tool_result") is the Messages API's; other `messages` bodies are Chat
Completions. A body with marks of both is refused: declare its "api". Each line's tools and
schemas are what its answer is checked against (bench/serve/validity.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast, get_args

from bench.serve.validity import APIS, Api, BodyError, expect_of
from bench.serve.workload import WorkItem

_ENVELOPE = frozenset({"api", "id", "body", "headers"})
_CHAT_MARKS = ("response_format", "max_completion_tokens", "functions", "logprobs", "n")


class UserFileError(ValueError):
    """A line that cannot be sent: the message names the file, the line and the fix."""


def load_user_file(path: Path) -> list[WorkItem]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UserFileError(f"{path}: {exc.strerror or exc}") from None
    items = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            items.append(_item(path, number, line))
    if not items:
        raise UserFileError(f"{path}: no requests (one JSON object a line)")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise UserFileError(f"{path}: the same \"id\" is on two lines; give each its own")
    return items


def _item(path: Path, number: int, line: str) -> WorkItem:
    where = f"{path}:{number}"
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise UserFileError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise UserFileError(f"{where}: a line must be a JSON object (a request body)")
    if "body" in raw:
        extra = set(raw) - _ENVELOPE
        if extra:
            raise UserFileError(f"{where}: an envelope takes only {sorted(_ENVELOPE)}; "
                                f"{sorted(extra)!r} belong inside \"body\"")
        body, declared = raw["body"], raw.get("api")
    else:
        body, declared = raw, None
    if not isinstance(body, dict):
        raise UserFileError(f"{where}: \"body\" must be a JSON object")
    api = _declared(where, declared) if declared is not None else detect_api(body, where)
    try:
        expect = expect_of(api, body)
    except BodyError as exc:
        raise UserFileError(f"{where}: {exc}") from None
    headers = raw.get("headers", {}) if "body" in raw else {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise UserFileError(f"{where}: \"headers\" must map names to strings")
    return WorkItem(id=str(raw.get("id", number)) if "body" in raw else str(number),
                    workload=f"file:{path.name}", api=api, body=body, expect=expect,
                    headers=headers)


def _declared(where: str, api: Any) -> Api:
    if api not in get_args(Api):
        raise UserFileError(f"{where}: \"api\" is {api!r}; use one of {', '.join(APIS)}")
    return cast(Api, api)  # checked just above


def detect_api(body: dict[str, Any], where: str = "the body") -> Api:
    """Which API `body` is written for (the module's docstring says how)."""
    if "input" in body and "messages" not in body:
        return "responses"
    if not isinstance(body.get("messages"), list):
        raise UserFileError(f"{where}: a request needs \"messages\" (Chat Completions, "
                            "Messages) or \"input\" (Responses); or declare \"api\"")
    messages, chat = _anthropic_marks(body), _chat_marks(body)
    if messages and chat:
        raise UserFileError(f"{where}: written for both Messages ({messages[0]}) and Chat "
                            f"Completions ({chat[0]}); declare it: "
                            '{"api": "messages" or "chat", "body": {...}}')
    return "messages" if messages else "chat"


def _anthropic_marks(body: dict[str, Any]) -> list[str]:
    marks: list[str] = [key for key in ("system", "stop_sequences", "top_k") if key in body]
    tools = cast(list[Any], body.get("tools")) if isinstance(body.get("tools"), list) else []
    marks += ["tools with input_schema" for t in tools[:1]
              if isinstance(t, dict) and "input_schema" in t]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        marks.append(f"tool_choice {choice['type']!r}")
    for message in body["messages"]:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result"):
                marks.append(f"a {block['type']} block")
    return marks


def _chat_marks(body: dict[str, Any]) -> list[str]:
    marks: list[str] = [key for key in _CHAT_MARKS if key in body]
    tools = cast(list[Any], body.get("tools")) if isinstance(body.get("tools"), list) else []
    marks += ['tools of type "function"' for t in tools[:1]
              if isinstance(t, dict) and "function" in t]
    marks += [f"a {m['role']!r} message" for m in body["messages"]
              if isinstance(m, dict) and m.get("role") in ("system", "developer", "tool")][:1]
    return marks
