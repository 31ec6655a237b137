"""The one lexer under the guards and the call stream (server/engines/json_text.py),
and the readers built on it read a text the same in whatever pieces it arrives."""

import json
import random

from server.engines.json_text import JsonLexer
from server.pipeline.guards.item_loops import JsonShape
from server.pipeline.guards.toolstream import ArgumentsFragment, CallNamed, CallScanner

CALLS = [{"name": "transfer", "arguments": {"to": "Анна \"А\" \\ Б", "amount": 1200.5,
                                            "tags": ["a", "b"], "ok": True}},
         {"name": "note", "arguments": {"text": "{not [structure], \\\"x\\\"}"}}]


def test_kinds_and_depth_of_escapes_and_structure() -> None:
    lexer = JsonLexer()
    kinds = [(lexer.kind(ch), lexer.depth) for ch in '{"a\\"}":[1, true]}']
    assert [k for k, _ in kinds] == [
        "open", "quote", "char", "escape", "char", "char", "unquote", "colon", "open",
        "scalar", "comma", "space", "scalar", "scalar", "scalar", "scalar", "close", "close"]
    assert kinds[0][1] == 1 and kinds[8][1] == 2 and kinds[-1][1] == 0
    assert not lexer.in_string


def _scan(pieces: list[str]) -> tuple[list[str], dict[int, str]]:
    scanner, names, args = CallScanner(), [], {}
    for piece in pieces:
        for event in scanner.feed(piece):
            if isinstance(event, CallNamed):
                names.append(event.name)
            else:
                assert isinstance(event, ArgumentsFragment)
                args[event.index] = args.get(event.index, "") + event.text
    assert scanner.done
    return names, args


def test_call_scanner_reads_the_same_in_any_pieces() -> None:
    for text in (json.dumps(CALLS), json.dumps(CALLS, separators=(",", ":")),
                 json.dumps(CALLS, indent=2, ensure_ascii=False)):
        whole = _scan([text])
        assert whole[0] == ["transfer", "note"]
        assert [json.loads(a) for a in whole[1].values()] == [c["arguments"] for c in CALLS]
        rng = random.Random(len(text))
        for _ in range(20):
            cuts = sorted(rng.sample(range(1, len(text)), 8))
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            assert _scan(pieces) == whole


def test_json_shape_reads_the_same_in_any_pieces() -> None:
    text = json.dumps(CALLS)
    rng = random.Random(7)
    for end in rng.sample(range(1, len(text)), 30):
        whole, grown = JsonShape(), JsonShape()
        whole.update(text[:end])
        for cut in range(1, end + 1, 5):
            grown.update(text[:cut])
        grown.update(text[:end])
        assert (whole.in_string, whole.buf, [o.items for o in whole.stack]) == \
            (grown.in_string, grown.buf, [o.items for o in grown.stack])
