"""What the family tests share: tools whose arguments cover every JSON type, the family's
rendering of an ask, its markers (the walk's vocabulary), and a streamed reading."""

from __future__ import annotations

import json
import random

from grammars import ToolSpec
from grammars.keywords import XGRAMMAR_KEYWORDS
from server.formats.base import Ask, AskedTool, Mode, Rendering
from server.formats.families import get_format
from server.formats.reading import Reader
from server.formats.syntax import FamilySyntax
from server.pipeline.guards.toolstream import ArgumentsFragment, CallNamed, CallScanner

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string"},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "days", "unit"]}
# `get` begins `get_weather`: a header names its tool only once the other cannot follow.
GET = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
NOTE = {"type": "object", "properties": {
    "text": {"type": "string"},
    "score": {"type": "number"},
    "done": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "where": {"type": "object", "properties": {"x": {"type": "integer"},
                                               "label": {"type": "string"}},
              "required": ["x", "label"]},
    "ref": {"type": ["string", "null"]}},
    "required": ["text", "score", "done", "tags", "where", "ref"]}
TOOLS = {"get_weather": WEATHER, "get": GET, "note": NOTE}
# Values a template writes back in each style: quotes, markup, a newline, non-ASCII.
CALLS = [("get_weather", {"city": 'Paris "Nord" <b> & 日', "days": 3, "unit": "celsius"}),
         ("note", {"text": "line one\nline two", "score": 1.5, "done": False,
                   "tags": ["a", "b c"], "where": {"x": -2, "label": "q"}, "ref": None}),
         ("get", {"key": "k1"})]
REASONING = "I should look it up."
# Families whose grammar has one call at most per answer.
ONE_CALL = {"llama"}


def ask(mode: Mode = "tools", *, reasoning: int = 0, tools: dict | None = None,
        max_calls: int | None = None) -> Ask:
    return Ask(mode, tuple(AskedTool(n, s, ToolSpec.from_parameters(n, s,
                                                                     table=XGRAMMAR_KEYWORDS))
                           for n, s in (tools or TOOLS).items()),
               reasoning=reasoning, max_calls=max_calls)


def render(family: str, mode: str = "tools", *, reasoning: bool = False,
           max_calls: int | None = None) -> Rendering:
    fmt = get_format(family)
    return fmt.render(ask(mode, reasoning=64 if reasoning else 0, max_calls=max_calls))


def markers(syntax: FamilySyntax) -> list[str]:
    """The strings a family's grammar writes whole: its markers, and every style's tags."""
    out = [s for c in syntax.calls for s in (c.begin, c.end, c.then)]
    out += [*syntax.noise, syntax.think_begin or "", syntax.think_end or "", syntax.think_then,
            syntax.calls_begin, syntax.calls_end, syntax.tail, syntax.preamble]
    out += [s for block, ends in syntax.text_blocks for s in (block, *ends)]
    out += ["</parameter>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
            '<|"|>', "]<]minimax[>[", "</cofl:value>", "<|close|>argument<|sep|>",
            "</｜DSML｜parameter>", "true", "false", "null"]
    return out


def closers(syntax: FamilySyntax) -> list[str]:
    """The strings that end something: a call, a list of calls, a block, a value."""
    out = [c.end for c in syntax.calls] + [syntax.calls_end, syntax.tail,
                                           syntax.think_end or ""]
    out += [end for _, ends in syntax.text_blocks for end in ends]
    out += ["</parameter>", "</arg_value>", "</cofl:value>", "<|close|>argument<|sep|>",
            "</｜DSML｜parameter>", '<|"|>', "]<]minimax[>[", '"', "}", "]"]
    return out


def streamed(reader: Reader, text: str, seed: str) -> list[tuple[str, object]]:
    """The calls as a client rebuilds them from the stream: `text` read in random chunks,
    the growing calls text fed to the pipeline's scanner. Checks that the calls text only
    grows."""
    rng = random.Random(seed)
    scanner, fed, names, args = CallScanner(), 0, {}, {}
    previous, cut = "", 0
    while cut < len(text):
        cut = min(len(text), cut + rng.randint(1, 9))
        calls = reader.read(text[:cut], complete=cut == len(text)).calls or ""
        assert calls.startswith(previous), f"calls text shrank: {previous!r} -> {calls!r}"
        previous = calls
        for event in scanner.feed(calls[fed:]):
            if isinstance(event, CallNamed):
                names[event.index] = event.name
            elif isinstance(event, ArgumentsFragment):
                args[event.index] = args.get(event.index, "") + event.text
        fed = len(calls)
    return [(names[i], json.loads(args[i])) for i in sorted(names)]


def accepts(tag: str, text: str) -> bool:
    """The grammar of `tag` (a structural tag's JSON text) takes `text` as a whole answer."""
    import xgrammar

    compiled = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False) \
        .compile_structural_tag(tag)
    matcher = xgrammar.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return bool(matcher.accept_string(text)) and matcher.is_terminated()
