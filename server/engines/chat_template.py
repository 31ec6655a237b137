"""A model's Jinja chat template, rendered as transformers 5's `apply_chat_template(...,
tokenize=False)` renders it, without importing transformers (whose import alone takes about
half a second of a server's start: it scans every model it knows). Used by `JsonTokenizer`
(engines/json_tokenizer.py); `tests/server/engines/test_json_tokenizer.py` renders real
families' templates both ways and compares them character for character.

What transformers does, and this does the same:
- the template is compiled in Jinja's immutable sandbox, with `trim_blocks` and
  `lstrip_blocks`, the `loopcontrols` extension and a `{% generation %}` block (rendered as
  its body: only transformers' assistant-token masks read it);
- `tojson` keeps non-ASCII text and takes `indent`, `separators` and `sort_keys`;
  `raise_exception`, `strftime_now`, a `dict` and a `namespace` that refuses names starting
  with an underscore are the template's globals;
- a message's keys whose value is None are dropped; what the template sees is plain JSON
  data (pydantic models dumped, anything else a placeholder naming its type);
- a message's reasoning under any of its names (`reasoning_content`, `thinking`,
  `reasoning`) is given under `reasoning_content` and `thinking` too;
- the tokenizer's named special tokens (`bos_token`, `eos_token`, ...) are variables, which
  the caller's keyword arguments override.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from collections.abc import Mapping
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment

REASONING_NAMES = ("reasoning_content", "thinking", "reasoning")


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: its body, as it is."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body) \
            .set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


class _Namespace(jinja2.utils.Namespace):
    """Jinja's namespace, refusing attributes that start with an underscore."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        for name in dict(*rest, **kwargs):
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, *rest, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"a chat template cannot set {name!r} on a namespace (a name starting "
                "with an underscore)")


class _Dict:
    """The template's `dict`: a call and `fromkeys`, nothing else of the type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return dt.datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=16)
def compiled(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now,
                       dict=_Dict(), namespace=_Namespace)
    return env.from_string(source)


def plain(value: Any) -> Any:
    """Plain JSON data: what a template may see of `value`."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, np.generic):
        return plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _with_reasoning_names(message: dict[str, Any]) -> dict[str, Any]:
    reasoning = next((message[k] for k in REASONING_NAMES if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def render(source: str, messages: list[dict[str, Any]], *,
           tools: list[dict[str, Any]] | None = None, add_generation_prompt: bool = False,
           special_tokens: Mapping[str, str] | None = None, **kwargs: Any) -> str:
    """The template `source` over `messages` (dicts), `tools` (JSON schemas, as dicts) and
    the template variables `kwargs`, beside the tokenizer's `special_tokens`."""
    if not messages:
        raise ValueError("a chat template needs at least one message")
    chat = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise TypeError(f"a chat message must be a dict, not {type(message).__name__}")
        chat.append(_with_reasoning_names(
            plain({k: v for k, v in message.items() if v is not None})))
    if tools is not None and not all(isinstance(tool, Mapping) for tool in tools):
        raise TypeError("tools must be JSON schemas (dicts)")
    variables = plain({**(special_tokens or {}), **kwargs})
    return compiled(source).render(messages=chat, tools=plain(tools), documents=None,
                                   add_generation_prompt=add_generation_prompt, **variables)
