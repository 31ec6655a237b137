"""Grounded fields: the values a field may take, found in the conversation's evidence
(server/dialogue/evidence.py) as people write them.

A field's candidates are read from the evidence every way its schema allows
(server/dialogue/finding.py), then attributed to who said them (`_attributed`). A plain
string (no pattern, format or enum) takes only what the words around it make the
user's answer (server/dialogue/plain.py): a quoted name, "named X", report.pdf, "the folder
temp", never any run of the conversation's words.

A tool's fields look first at what came after its last call (a new intent starts from the
conversation, and its newest words: "the same card" still finds the card said before, but
not what a tool returned for the intent before). A user's value an earlier exchange's call
used for another field stays that field's, unless said again; and one saying of a value
fills one field of a call (`Grounding.repeated`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contracts import Contract
from grammars import Narrowing, schema_pointer
from server.dialogue.earlier import EarlierValues
from server.dialogue.evidence import Evidence, Piece
from server.dialogue.finding import Found, ValueFinder, newest_values, value_reader
from server.dialogue.language import identifier_words, words
from server.dialogue.marks import Marked, Path, marked_fields, pointer_of, top_descriptions
from server.dialogue.naming import (
    NEW_INTENT,
    OPENS_NEW_INTENT,
    FieldWords,
    closest,
    field_words,
    replaced,
)
from server.dialogue.plain import Plain, plain_values
from server.dialogue.shape import plain_string
from server.dialogue.which import thing_stems, vague

NAME_WORDS = 3  # a description this short is the field's name


@dataclass(frozen=True)
class GroundedField:
    path: Path
    candidates: tuple[Any, ...] = ()  # the JSON values the model may write (besides null)
    # The message says these values of this very field ("4 nights"): given, so "not
    # given" is no choice (null is not offered).
    named: bool = False
    # More than one value the user's words give this field, where the user decides
    # (`ground`'s `ask_between`): the model may write none of them (only "not given"), and
    # the question names them (server/dialogue/questions.py Wording.missing).
    choices: tuple[Any, ...] = ()
    # The user's newest message asks for this field's thing without saying which ("the last
    # several lines", "mention someone"): "not given" is a question even where the schema
    # does not require the field.
    wanted: bool = False

    def narrowing(self) -> Narrowing:
        return Narrowing(self.path, self.candidates, nullable=not self.named)

    def count(self) -> int:
        return len(self.candidates)



@dataclass(frozen=True)
class Grounding:
    """One tool's fields that must come from someone: grounded ones with their candidates,
    and every marked field (questions, confirmations, what each is in words)."""

    fields: tuple[GroundedField, ...] = ()
    marks: tuple[Marked, ...] = ()
    language: str = "en"
    descriptions: Mapping[Path, str] = field(default_factory=dict)
    # Per plain string value the user's words gave: how many times they say it. One saying
    # is one field's answer ("compare it with 'previous_report.pdf'" is no source and
    # destination both).
    said: Mapping[str, int] = field(default_factory=dict)

    @property
    def grounded(self) -> tuple[Path, ...]:
        return tuple(f.path for f in self.fields)

    @property
    def asked(self) -> tuple[Path, ...]:
        """Fields that may be "not given": grounded ones, and those with a question."""
        return tuple(dict.fromkeys([*self.grounded, *(m.path for m in self.marks if m.ask)]))

    @property
    def wanted(self) -> tuple[Path, ...]:
        """Fields the user asked for without a value: a question when not given, required
        or not."""
        return tuple(f.path for f in self.fields if f.wanted)

    @property
    def wanted_arrays(self) -> tuple[Path, ...]:
        """The arrays whose items the user asked for without a value ("mention someone"):
        required in the grammar, and a question where the model writes them empty."""
        return tuple(dict.fromkeys(p[:p.index("*")] for p in self.wanted if "*" in p))

    @property
    def confirmed(self) -> tuple[Path, ...]:
        return tuple(m.path for m in self.marks if m.confirm)

    def mark(self, path: Path) -> Marked | None:
        return next((m for m in self.marks if m.path == path), None)

    def candidates(self) -> dict[Path, tuple[Any, ...]]:
        return {f.path: f.candidates for f in self.fields}

    def report(self) -> dict[str, int]:
        """Per grounded field (its schema pointer): how many values."""
        return {schema_pointer(f.path): f.count() for f in self.fields}

    def counts(self) -> dict[str, int]:
        """Per grounded field (its value's JSON Pointer, `*` for array items): how many
        values."""
        return {pointer_of(f.path): f.count() for f in self.fields}

    def __bool__(self) -> bool:
        return bool(self.fields or self.marks)

    def repeated(self, arguments: dict[str, Any]) -> tuple[Path, ...]:
        """The plain fields of `arguments` that repeat a value the user said once (or
        fewer times than fields take it), after the first field (in the schema's order)
        that takes it: one saying is one field's answer, and those are asked for, not the
        same words read twice (mv from 'a.pdf' to 'a.pdf')."""
        seen: dict[str, int] = {}
        out = []
        for grounded in self.fields:
            if len(grounded.path) != 1:
                continue
            value = arguments.get(grounded.path[0])
            if not isinstance(value, str) or not self.said.get(value):
                continue
            times = self.said[value]
            seen[value] = seen.get(value, 0) + 1
            if seen[value] > times:
                out.append(grounded.path)
        return tuple(out)


def draft_lines(groundings: Mapping[str, Grounding]) -> tuple[str, ...]:
    """Each grounded field's candidates written as a call writes them after the field's key
    (`"amount":1200.5`, and with a space after the colon), for prompt-lookup drafts
    (engines/drafts.py): a normalised value ("1 200,50" in the chat, 1200.5 in the call) is
    not in the prompt as the call writes it. A draft only stands where the model, under its
    mask, would have chosen the same tokens, so a wrong candidate costs a step, not a value."""
    lines = []
    for grounding in groundings.values():
        for grounded in grounding.fields:
            key = json.dumps(grounded.path[-1], ensure_ascii=False)
            for value in grounded.candidates:
                written = json.dumps(value, ensure_ascii=False)
                lines += [f"{key}:{written}", f"{key}: {written}"]
    return tuple(dict.fromkeys(lines))



def ground(schema: dict[str, Any], contract: Contract | None, evidence: Evidence, *,
           since: int = -1, ask_between: bool = False,
           earlier: EarlierValues | None = None,
           foreign: frozenset[str] = frozenset()) -> Grounding:
    """The grounding of one tool's arguments `schema` (a contract's, or a client's).
    `since`: the turn of the tool's last call; what came after it is looked at first.
    `earlier`: the string values earlier calls wrote (server/dialogue/earlier.py): a
    plain string the user gave that a call used for another field was that field's
    answer. `foreign`: the stems of the keys of every tool the request offers (a name said
    beside another tool's field word is that field's: "tag 'news'" names no file).

    Each value is attributed to where it was said (`_attributed`): the user's own words for
    a field win over what a tool returned or the operator's messages say. `ask_between` (a
    write, or a request's `strictcall.ambiguity: "ask"`): where more than one value
    remains, the user chooses (the field's `choices`), not the model."""
    marks = marked_fields(schema)
    if not marks:  # nothing marked: nothing to read
        return Grounding(language=evidence.language, descriptions=top_descriptions(schema))
    earlier = earlier or EarlierValues()
    since = max(since, _opened_anew(evidence))
    finders = {m.path: ValueFinder(schema, m.path, m.node, contract, evidence)
               for m in marks if m.grounded and not plain_string(m.node)}
    words = field_words(schema, marks)
    # Before the last call, only what the user and the system said: what a tool returned
    # then (the first dispute's operation ids) was that intent's, not this one's.
    everything = _owned(finders, [p for p in evidence.pieces
                                  if p.turn > since or p.source != "tool"], words)
    recent = _owned(finders, evidence.after(since).pieces, words) if since >= 0 \
        else everything
    # After a call, words that start another event ("one more", "ещё одна") leave the
    # earlier intent's values behind, but those of the fields referred back to ("the same
    # card"): a new dispute never carries the first one's operation id.
    fresh = " ".join(evidence.user_after(since)) if since >= 0 else ""
    starts_new = bool(NEW_INTENT.search(fresh))
    back = words.referred_back(fresh) if starts_new else set()
    newest = next((i for i in range(len(evidence.pieces) - 1, -1, -1)
                   if evidence.pieces[i].source == "user"), -1)
    fields = []
    # What another field's reading takes ("752A" is the train's) is no plain string's.
    others = {json.dumps(f.value) if not isinstance(f.value, str) else f.value
              for fs in everything.values() for f in fs}
    for marked in (m for m in marks if m.grounded):
        if marked.path not in finders:  # a plain string: what the words make an answer
            fields.append(_plain_field(
                schema, marked, contract, evidence, words, since=since,
                others=others | earlier.spent_elsewhere(marked.path),
                behind=starts_new and marked.path not in back, ask_between=ask_between,
                foreign=foreign))
            continue
        found = recent.get(marked.path) or (
            [] if starts_new and marked.path not in back else everything[marked.path])
        one = "*" not in marked.path  # (an array's items each take their own value)
        if one:
            found = _attributed(found, evidence.pieces, marked.path)
        wanted = False
        if one and finders[marked.path].shape.numbers and newest >= 0 and vague(
                evidence.pieces[newest].text, thing_stems(marked.path[-1], field_names(marked))):
            # "The last several lines": no count is given, whatever numbers came before.
            found = [f for f in found if f.piece == newest]
            wanted = not found
        # Named beside every value the newest turns give it: no "not given" to choose.
        named = bool(found) and bool(recent.get(marked.path)) and all(f.named for f in found)
        values = tuple(newest_values(found))
        # A required field the user's own words give exactly one value ("charged 1 200,50"):
        # given, though the field is not named beside it; no "not given" to ask about.
        named = named or (one and len(values) == 1 and not wanted
                          and bool(recent.get(marked.path))
                          and marked.path[0] in (schema.get("required") or ())
                          and len(marked.path) == 1
                          and all(evidence.pieces[f.piece].source == "user" for f in found))
        if ask_between and one and len(values) > 1:
            fields.append(GroundedField(marked.path, choices=values[::-1]))  # as said
        else:
            fields.append(GroundedField(marked.path, values, named=named, wanted=wanted))
    descriptions = {**top_descriptions(schema),
                    **{m.path: m.description for m in marks if m.description}}
    # (Counted only for a value two or more plain fields may take.)
    shared = Counter(v for f in fields if f.path not in finders
                     for v in {*f.candidates, *f.choices} if isinstance(v, str))
    return Grounding(tuple(fields), tuple(marks), evidence.language, descriptions,
                     earlier.said([v for v, n in shared.items() if n > 1], evidence))


def _opened_anew(evidence: Evidence) -> int:
    """Where the user's newest message opens another event ("One more: ...", «И ещё одна:
    ...») after earlier words of theirs: the turn before it, where the earlier intent ends
    (its values stay behind but those referred back to), filed or not; else -1."""
    users = [p for p in evidence.pieces if p.source == "user"]
    newest = [p for p in users if p.turn == users[-1].turn] if users else []
    # (The message as written: its number-words copy reads «ещё одна» as «ещё 1».)
    if len({p.turn for p in users}) < 2 or not OPENS_NEW_INTENT.search(newest[0].text):
        return -1
    return users[-1].turn - 1


def field_names(marked: Marked) -> tuple[str, ...]:
    """What the field is called: its `About` texts, and a description short enough to be
    its name ("Имя файла"; "City of the hotel" is a sentence: "a hotel" is no city)."""
    return (*marked.about.values(), *(d for d in (marked.description,)
                                      if d and len(d.split()) <= NAME_WORDS))


def _plain_field(schema: dict[str, Any], marked: Marked, contract: Contract | None,
                 evidence: Evidence, words: FieldWords, *, since: int, behind: bool,
                 others: set[str], ask_between: bool,
                 foreign: frozenset[str] = frozenset()) -> GroundedField:
    """A plain string's field: the values the user's words give it (plain.py), those said
    since the tool's last call first; an earlier intent's only where the user did not start
    a new one (`behind`), less what another field's reading takes (`others`). Two or more
    said of this very field, where the user decides (`ask_between`): the field's
    `choices`."""
    value_of = value_reader(schema, marked.node, marked.path, contract, evidence)

    def accepts(raw: str) -> bool:
        ok, value = value_of(raw)
        return ok and value == raw and raw not in others
    own = words.by_field.get(marked.path, frozenset())
    names = field_names(marked)
    keys = (schema.get("properties") or {}) if len(marked.path) == 1 else {}
    other_keys = frozenset(s for k in keys if k != marked.path[0] for s in thing_stems(k))
    key = next((k for k in reversed(marked.path) if k != "*"), marked.path[-1])
    found = plain_values(evidence.after(since).pieces, key, own, names=names,
                         described=marked.description, others=other_keys,
                         foreign=foreign, accepts=accepts) if since >= 0 else Plain()
    if not found.values() and not behind:
        found = plain_values([p for p in evidence.pieces if p.turn > since
                              or p.source != "tool"], key, own, names=names,
                             described=marked.description, others=other_keys,
                             foreign=foreign, accepts=accepts)
    one = "*" not in marked.path
    if ask_between and one and len(found.own) > 1:
        return GroundedField(marked.path, choices=found.own[::-1])
    return GroundedField(marked.path, found.values() if one else found.each(),
                         wanted=found.wanted)



def _owned(finders: Mapping[Path, ValueFinder], pieces: Sequence[Piece],
           words: FieldWords) -> dict[Path, list[Found]]:
    """Each field's values in `pieces`, less those the message says of another field that
    takes them ("for 2 guests": 2 is no number of nights; "card •• 4417" no amount)."""
    taken_back: dict[int, list[tuple[int, int]]] = {}  # "не 4417, а 4471": no 4417

    def standing(f: Found, all_pieces: Sequence[Piece]) -> bool:
        if f.piece not in taken_back:  # (once per piece, not per value)
            taken_back[f.piece] = replaced(all_pieces[f.piece].text)
        return not any(a <= f.start < b for a, b in taken_back[f.piece])

    found = {path: [f for f in finder.found(pieces) if standing(f, finder.all)]
             for path, finder in finders.items()}
    spans = {path: {(f.piece, f.start, f.end) for f in fs} for path, fs in found.items()}
    out: dict[Path, list[Found]] = {}
    for path, fs in found.items():
        kept = []
        for f in fs:
            span = (f.piece, f.start, f.end)
            named = words.naming(finders[path].all[f.piece].text, f.start, f.end) \
                if len(path) == 1 else {}
            owners = closest(named, [o for o in named if o == path or span in spans.get(o, ())])
            if owners == {path}:
                kept.append(replace(f, named=True))
            elif not owners:
                kept.append(f)  # (said of two fields that take it: of neither, dropped)
        out[path] = kept
    # (A value's `piece` counts among all the evidence's pieces, which each finder holds.)
    return _left_to_their_own(out, next(iter(finders.values())).all if finders else ())


def _left_to_their_own(found: dict[Path, list[Found]], pieces: Sequence[Piece]
                       ) -> dict[Path, list[Found]]:
    """Where the user's words give a field one value only, those words are that field's: a
    field with other values leaves them ("charged 75.00 on card 6120": 75.00 is the
    amount's one value, so the card's is 6120; "three nights, there are four of us": 4 is
    the guests', so the nights' is 3). Repeated while that leaves another field one value.
    (The user's words only: a profile's "cards 4417, 9921" are context, which gives no
    amount. Top-level fields: an array's items each take their own.)"""
    out = dict(found)
    while True:
        taken: dict[tuple[int, int, int], set[Path]] = {}
        for path, fs in out.items():
            if len(path) == 1 and len({_key(f.value) for f in fs}) == 1:
                for f in fs:
                    if 0 <= f.piece < len(pieces) and pieces[f.piece].source == "user":
                        taken.setdefault((f.piece, f.start, f.end), set()).add(path)
        changed = False
        for path, fs in out.items():
            if len(path) != 1 or len({_key(f.value) for f in fs}) < 2:
                continue
            kept = [f for f in fs if not taken.get((f.piece, f.start, f.end), set()) - {path}]
            if kept and len(kept) < len(fs):
                out[path], changed = kept, True
        if not changed:
            return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)



def _attributed(found: Sequence[Found], pieces: Sequence[Piece], path: Path) -> list[Found]:
    """The values a field may take, by where they were said: the user's own words, where
    they give the field any (a date the system message states, a card a CRM profile lists,
    an id a tool returned are context: the user's answer wins over them); else a tool
    result's values under a key that shares a word with the field's name (`"original":
    "OP-204518"` for `original_operation_id`, beside `"duplicate": "OP-204519"`)."""
    users = [f for f in found if 0 <= f.piece < len(pieces)
             and pieces[f.piece].source == "user"]
    if users:
        return users
    own = {s for w in identifier_words(path[-1]) for s in words(w)}
    keyed = [f for f in found if 0 <= f.piece < len(pieces)
             and pieces[f.piece].source == "tool" and own & _key_stems(pieces[f.piece].text)]
    return keyed or list(found)  # a tool result's value under a key naming the field



def _key_stems(text: str) -> set[str]:
    """The stems of a tool result's key ("original" of "original: OP-204518")."""
    key, sep, _ = text.partition(": ")
    if not sep or len(key) > 64:
        return set()
    return {s for w in identifier_words(key) for s in words(w)}
