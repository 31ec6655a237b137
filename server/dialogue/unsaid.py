"""What the user's newest message means and does not say, where the answer's calls pass over
it: a question, not the calls.

A model that meets a request it cannot fill ("list every project that has a specific word
in its file name") often calls a tool that needs nothing the user must give (`ls`), and
every field of that call is grounded; what the user asked for is neither done nor asked
about. So, with grounding on (some offered tool has a field whose value must come from
someone), the decoded calls stand only where they take up what the newest message leaves
open:

- one thing the user means without saying it, whatever its field ("a specific word", "a
  certain file", «определённую операцию»; which.py `meant_unsaid`): asked, in the user's
  words ("Which specific word do you mean?"), unless the message gives it after (right
  after, or as a value of the calls said later in the message);
- a field of another offered tool (shown, or left out by selection) that the newest
  message asks for without saying which ("a directory" for `cd`'s folder, "the last
  several lines" for `tail`'s count: that tool's grounding marks it `wanted`), where no
  called tool has a field of that thing, the message gives no field of it a value, and the
  calls carry nothing the message says from that phrase on ("a travel budget of $5,000":
  a budget of 5000 takes the phrase up): that field's question, in its tool's words.

A call that takes the thing up (the tool whose field it is) is left to its own grounding,
which asks for a wanted field it leaves unfilled (server/pipeline/checking/calls.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from server.dialogue.grounding import NAME_WORDS, Grounding, field_names
from server.dialogue.language import words
from server.dialogue.marks import pointer_of
from server.dialogue.questions import NeedsInput, Wording
from server.dialogue.which import indefinite_at, kin, meant_unsaid, thing_stems


def unsaid(newest: str, calls: Sequence[tuple[str, dict[str, Any]]],
           schemas: Mapping[str, dict[str, Any]], groundings: Mapping[str, Grounding],
           wording: Callable[[str], Wording],
           left_out: Callable[[], Mapping[str, Grounding]] = dict,
           described: Callable[[str], str] = str) -> NeedsInput | None:
    """The question the answer asks instead of its `calls` (name, arguments; their tools'
    arguments' schemas in `schemas`), where the user's `newest` message leaves open what
    they pass over; None where the calls may stand. `groundings`: every shown tool's that
    has grounded or asked fields; `left_out`: those of the tools selection left out of the
    prompt (read only where needed: "a directory" is `cd`'s though `cd` was not shown);
    `described`: a tool's name and description, which say whose question it is where
    several tools' fields are left open ("set up a new file": `touch`'s, not `cat`'s)."""
    if not calls:
        return None
    called = list(dict.fromkeys(name for name, _ in calls))
    values = [v for _, arguments in calls for v in _leaves(arguments)]
    meant = meant_unsaid(newest)
    # (A value the message gives after the phrase is the thing: "a specific company ...
    # the stock symbol 'AAPL'".)
    if meant is not None and not _said_from(newest, meant[1], values) \
            and (groundings or left_out()):  # (some value must come from someone)
        phrase, thing = meant[0], set(words(meant[0].split(maxsplit=1)[-1]))
        tool, field = next(((n, p) for n in called for p, stems in _fields(
            schemas.get(n) or {}, groundings.get(n)) if thing & kin(stems)), (called[0], ""))
        asked = wording(tool)
        return NeedsInput(tool, (asked.meant(field, phrase),), {}, asked.language)
    takes = [stems for n in called
             for _, stems in _fields(schemas.get(n) or {}, groundings.get(n))]
    every = {**left_out(), **groundings}
    # Things the message does say, for some field ("a folder called temp" gives `cd`'s
    # folder, so `mkdir`'s directory name, the same kind of thing, is not left open).
    given = [_thing(f.path, g) for g in every.values() for f in g.fields
             if f.candidates or f.choices]
    left: list[tuple[str, list[tuple[str, ...]]]] = []
    for name, grounding in every.items():
        if name in called:
            continue
        open_: list[tuple[str, ...]] = [
            f.path for f in grounding.fields if f.wanted and len(f.path) == 1
            and _left_open(_thing(f.path, grounding), (*takes, *given), newest, values)]
        if open_:
            left.append((name, open_))
    if not left:
        return None
    request = set(words(newest))
    name, paths = max(left, key=lambda tool: len(request & set(words(described(tool[0])))))
    asked = wording(name)
    return NeedsInput(name, tuple(asked.missing(p) for p in paths), {}, asked.language)


def _left_open(thing: set[str], others: Sequence[set[str]], newest: str,
               values: Sequence[str]) -> bool:
    """Whether a wanted field's `thing` is left open: no called tool's field and no field
    given a value is of its kind, and the calls carry nothing the message says of it."""
    return not any(_same_kind(thing, other) for other in others) \
        and not _said_from(newest, indefinite_at(newest, kin(thing)), values)


def _said_from(newest: str, start: int | None, values: Sequence[str]) -> bool:
    """Whether `newest` says one of the calls' `values` from `start` on (where it speaks
    of the thing without saying which: "a travel budget of $5,000" is taken up by a budget
    of 5000, not "'a.txt', then "to a directory""); from anywhere where it is not known (a
    count asked for vaguely, "the last several lines")."""
    rest = newest[start or 0:]
    return any(_said_at(rest, v) is not None for v in values)


# Words of a field's key that say nothing of what kind of thing it is: `dir_name` and
# `file_name` are a directory and a file, not both "a name".
_GENERIC = frozenset(words("name names id ids number value type kind"))


def _same_kind(one: set[str], other: set[str]) -> bool:
    """Whether another field's thing (`other`) is of the kind of `one`: their words past
    the generic ones (a folder and a directory; not a file name and a directory name, nor
    a search's bare "name"), or all of them where `one` has only generic words (a name)."""
    mine = one - _GENERIC
    if mine:
        return bool(kin(mine) & kin(other - _GENERIC))
    return bool(kin(one) & kin(other))


def _leaves(value: Any) -> Iterator[str]:
    """A call's values that a user could have written: texts and numbers, at any depth."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str) and len(value.strip()) > 1:
        yield value.strip()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(int(value)) if float(value).is_integer() else str(value)


def _said_at(text: str, value: str) -> int | None:
    """Where `text` says `value` (a number not inside a longer one, its thousands
    grouped or not: "20,000" says 20000), else None."""
    if value[:1].isdigit() or value[:1] == "-":
        marked = _GROUPED.sub("\0", text)  # (same length: offsets stay put)
        match = re.search(r"(?<![\w.])" + "\0?".join(map(re.escape, value)) + r"(?![\w])",
                          marked)
    else:
        match = re.search(re.escape(value), text, re.IGNORECASE)
    return match.start() if match else None


# A thousands separator inside a number (marked with a NUL, which a value may skip).
_GROUPED = re.compile(r"(?<=\d)[,\u00a0\u202f ](?=\d{3}(?!\d))")


def _thing(path: tuple[str, ...], grounding: Grounding) -> set[str]:
    marked = grounding.mark(path)
    return thing_stems(path[-1], field_names(marked) if marked is not None else ())


def _fields(schema: dict[str, Any], grounding: Grounding | None
            ) -> list[tuple[str, set[str]]]:
    """A tool's top-level fields (their JSON Pointers) and the stems that say each one's
    thing: its key's words and what it is called (a marked field's About, a description
    short enough to be a name)."""
    out = []
    for key, node in (schema.get("properties") or {}).items():
        marked = grounding.mark((key,)) if grounding is not None else None
        names: tuple[str, ...] = field_names(marked) if marked is not None else ()
        description = node.get("description") if isinstance(node, dict) else None
        if not names and isinstance(description, str) \
                and len(description.split()) <= NAME_WORDS:
            names = (description,)
        out.append((pointer_of((key,)), thing_stems(key, names)))
    return out
