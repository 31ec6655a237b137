"""A plain string's values (a grounded string field with no pattern, format or enum: a
name, a folder, a message's text): only what the words around it make the user's answer,
never any run of the conversation's words (a sort on "file" because the user said "the
file").

A user's text gives a plain string:
- for this field (`Plain.own`): the word after one of the field's own words and a verb of
  naming ("the file name is summary.txt", «папка называется архив»), or a name-like word
  right after the field's word ("the file report.pdf", "user Kelly"), or a quoted or
  name-like one right before it ("the 'report.csv' file"), or the text after a key naming
  the field ("name: Anna Petrova", a tool result's or a system message's). The field's
  words here are its key's and what it is called, less the other fields' keys' words;
- for a thing its description relates it to (`Plain.described`, below the above): a key
  holding a word only its description has ("current_directory_content: report.txt" for
  "the file from current directory"), a name-like word after such a word;
- for any field that takes it (`Plain.named`): a quoted text ('TeamNotes.txt', «Отчёт»,
  "Cheers!"), the words after "named", "called", "saying" («под названием», «с именем»),
  a word shaped like a name (report.pdf, docs/2024, @anna, #news, USR005, final_report,
  TeamNotes), a run of capitalised words inside a sentence ("to Kelly", "в Казани"), and a
  reply of one or two words that is all the message says ("archives"); but not where the
  word right beside it names another field's thing and none of this one's ("tag
  'currenttechtrend'" is no file name for a sort, "the 'Docs' directory" no text to write);
- else, what the operator's messages name so (`Plain.context`: a CRM profile's name).

Where the user's newest message speaks of the field's thing without saying which ("a
file", "one of my files", "some folder", "mention someone", «какой-нибудь файл»), the
field has only what that message gives it by its own words: what was said before is of
another thing, and the answer is a question (`Plain.wanted`: asked even where the field is
optional). Where it speaks so of a thing the field's
description names, only that message's values count."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from server.dialogue.evidence import Piece
from server.dialogue.language import STOP_WORDS, identifier_words, words
from server.dialogue.reading import date_word
from server.dialogue.which import (
    EDGE,
    INDEFINITE,
    QUOTED,
    SOMEONE,
    TOKEN,
    indefinite,
    kin,
    thing_stems,
    trim,
)

MAX_VALUE_CHARS = 200  # a quoted value past this is a passage, not a name
MAX_VALUES = 64  # per field and kind: past this, the newest are kept
MAX_NAME_WORDS = 4  # capitalised words in a row read as one name
SHORT_REPLY_WORDS = 2  # a reply this short is the value itself ("archives", "Anna Petrova")

# The words after which a name follows: "named X", "called X", "saying X", «под названием».
_NAMING = re.compile(
    r"(?i)(?<!\w)(?:named|called|titled|label(?:l)?ed|saying|says|with the (?:text|message|"
    r"content|name)|под названием|с названием|с именем|по имени|зовут|называется|"
    r"назови(?:те)?|genannt|namens|mit dem namen|nommée?|appelée?|llamad[oa])"
    r"\s*[:=]?\s+")
_SHAPED = re.compile(r"\w[._/\\@]\w|^[@#]\w|[a-zа-яё][A-ZА-ЯЁ]|\w_\w")
_UNIT = re.compile(r"(?i)^\d+(?:st|nd|rd|th|am|pm|h|m|s|k|kg|km|mb|gb|-?[а-яё]{1,3})$")
_NUMBER = re.compile(r"^[-+]?[\d\s.,]+$")
_SENTENCE_END = ".!?\n"
# Words that say a value is to be given, between a field's word and its value ("the file
# name is X", "папка называется X").
_QUANTIFIERS = frozenset({"any", "every", "each", "no", "all", "some", "любой", "любая",
                          "любое", "каждый", "каждая", "каждое", "jede", "jeder", "jedes"})
_FILLER = frozenset({"is", "was", "be", "should", "must", "will", "name", "named", "called",
                     "=", ":", "-", "—", "это", "будет", "ist", "heißt", "lautet", "est"})


@dataclass(frozen=True)
class Plain:
    own: tuple[str, ...] = ()  # said of this field, the newest first
    # Under a key or after a word only its description has ("current_directory_content:
    # report.txt" for "the file from current directory"), newest first.
    described: tuple[str, ...] = ()
    named: tuple[str, ...] = ()  # said as a name, of no field in particular, newest first
    context: tuple[str, ...] = ()  # named so in the operator's messages (a CRM profile)
    # The newest message speaks of the field's thing without saying which, and gives it
    # nothing of its own ("mention someone"): the user is asked, required field or not.
    wanted: bool = False

    def values(self) -> tuple[str, ...]:
        """What the field may take: what was said of it, else what the user named, else
        what the operator's context names."""
        return self.own or self.described or self.named or self.context

    def each(self) -> tuple[str, ...]:
        """What an array's items may take, each its own: all of them ("for me and Anna
        Petrova": the profile's name and the user's)."""
        return tuple(dict.fromkeys([*self.own, *self.described, *self.named,
                                    *self.context]))


def plain_values(pieces: Sequence[Piece], field: str, own_stems: frozenset[str], *,
                 names: Sequence[str] = (), described: str | None = None,
                 others: frozenset[str] = frozenset(),
                 foreign: frozenset[str] = frozenset(),
                 accepts: Callable[[str], bool]) -> Plain:
    """A plain string field's values in `pieces` (in the conversation's order). `field`:
    its key; `own_stems`: the stems only this field's words have (FieldWords); `names`:
    what the field is called in each language (a contract's `About`), which with its key's
    words say the field's thing ("file", «город»); `described`: its description, whose
    words say related things; `others`: the stems of the tool's other fields' keys;
    `accepts`: whether the field takes a value (its length bounds, its validators).

    Where the newest user message speaks of the field's thing without saying which ("one
    of my files"), only what that message says of the field itself counts; of a related
    thing ("a directory inside 'Docs'" for a destination "directory to copy to"), only
    what that message says ("a hotel in Paris" still gives the city of "City of the
    hotel")."""
    thing = thing_stems(field, names)
    related = set(words(described)) if described else set()
    # The words that name the field's own thing (its key's, what it is called), and those
    # only its description has ("file from current directory"): after these, only a value
    # shaped like a name is the field's, and a key holding them ("current_working_directory:
    # docs") is of another thing.
    naming = thing - others
    described_only = own_stems - thing
    elsewhere = frozenset(kin(foreign) - kin(thing | related | own_stems))
    by_description: list[str] = []
    own: list[str] = []
    named: list[str] = []
    context: list[str] = []
    newest = next((i for i in range(len(pieces) - 1, -1, -1)
                   if pieces[i].source == "user"), None)
    unsaid = newest is not None and indefinite(pieces[newest].text, kin(thing))
    only_newest = unsaid or (newest is not None
                             and indefinite(pieces[newest].text, kin(related)))
    for i, piece in enumerate(pieces):
        if only_newest and i != newest:
            continue  # said before the message that asks for another one
        own += _keyed(piece.text, naming, head=True)
        # (Under a related key, a name, not a text: "sorted_content: Initial report
        # content Unsorted data" holds no file name for the sort's file_name.)
        by_description += [v for v in _keyed(piece.text, described_only)
                           if len(v.split()) <= MAX_NAME_WORDS]
        if piece.source == "tool":
            continue
        unquoted = QUOTED.sub(lambda m: " " * len(m.group()), piece.text)
        found = [*_quoted(piece.text), *_after_naming(unquoted, piece.text),
                 *(v for v in _shaped_or_capitalised(unquoted)  # ("6 January": no name)
                   if not all(date_word(w) for w in v.split()))]
        if piece.source == "system":
            context += found
            continue
        own += [*_after_field_words(piece.text, naming),
                *_before_field_words(piece.text, naming)]
        by_description += _after_field_words(piece.text, described_only, shaped_only=True)
        if not unsaid:
            # (Each distinct value judged once: a message that says one value 300 times
            # costs its places once, not once per place.)
            another = {v: _of_another(piece.text, v, elsewhere) for v in dict.fromkeys(found)}
            named += [v for v in found if not another[v]]
            named += _short_reply(piece.text) if unquoted == piece.text else ()
    given = _newest(own, accepts)
    return Plain(given, _newest(by_description, accepts), _newest(named, accepts),
                 _newest(context, accepts), wanted=unsaid and not given)


def _newest(values: list[str], accepts: Callable[[str], bool]) -> tuple[str, ...]:
    out: dict[str, str] = {}
    for value in reversed(values):
        value = value.strip()
        if value and len(value) <= MAX_VALUE_CHARS and value not in out and accepts(value):
            out[value] = value
            if len(out) == MAX_VALUES:
                break
    return tuple(out)


def _of_another(text: str, value: str, elsewhere: frozenset[str]) -> bool:
    """Whether every place `text` says `value` has, right beside it, a word of another
    field's thing (`elsewhere`): "tag 'news'", "the 'Docs' directory"."""
    at = text.find(value) if elsewhere else -1
    if at < 0:
        return False
    while at >= 0:  # (each place read within `_BESIDE` characters: linear in the text)
        before = [t for t in TOKEN.findall(text[max(0, at - _BESIDE):at].rstrip(
            _QUOTES + " "))[-1:] if t[-1:] not in _SENTENCE_END + ",;:"]  # (not past a comma)
        end = at + len(value)
        after = TOKEN.findall(text[end:end + _BESIDE].lstrip(_QUOTES))[:1]
        if not any(elsewhere & set(words(trim(t))) for t in [*before, *after]):
            return False
        at = text.find(value, at + 1)
    return True


_BESIDE = 64  # characters read on each side of a value for the word beside it


_QUOTES = "\"'«»“”„‘’`"


def _quoted(text: str) -> Iterator[str]:
    for match in QUOTED.finditer(text):
        yield _inside(match)


def _inside(match: re.Match[str]) -> str:
    """What a `QUOTED` match holds, without its quotes."""
    return next(g for g in match.groups() if g is not None)


def _after_naming(text: str, written: str | None = None) -> Iterator[str]:
    """The name after "named", "called" in `text`; `written`: the text as written, where
    `text` blanked its quoted parts (a quoted name after "with the name" is `_quoted`'s,
    and the word after it no name: "with the name 'a.txt' nestled in")."""
    for match in _NAMING.finditer(text):
        rest = text[match.end():]
        if rest[:1] in "'\"«“„‘`" or written is not None and any(
                c in "'\"«“„‘`" for c in written[match.start():match.end()]):
            continue  # quoted: `_quoted` has it whole
        yield from _run(rest, capitalised_only=False)


def _run(text: str, *, capitalised_only: bool) -> Iterator[str]:
    """The first word of `text` (trimmed of punctuation), with the capitalised words that
    follow it in the same sentence ("Anna Petrova")."""
    tokens = TOKEN.findall(text)
    if not tokens:
        return
    first = trim(tokens[0])
    if not first or (capitalised_only and not first[:1].isupper()):
        return
    taken = [first]
    if tokens[0][-1:] not in _SENTENCE_END + ",;:":
        for token in tokens[1:MAX_NAME_WORDS]:
            word = trim(token)
            if not word[:1].isupper() or not word.replace("-", "").isalpha():
                break
            taken.append(word)
            if token[-1:] in _SENTENCE_END + ",;:":
                break
    yield " ".join(taken)


def _shaped_or_capitalised(text: str) -> Iterator[str]:
    """Words shaped like names (report.pdf, USR005, final_report, @anna), and runs of
    capitalised words that do not open a sentence ("Kelly", "Anna Petrova", "Казани")."""
    matches = list(TOKEN.finditer(text))
    opens = True  # the next word opens a sentence
    i = 0
    while i < len(matches):
        raw = matches[i].group()
        word = trim(raw)
        taken = 1
        if word and _is_shaped(word):
            yield word
        elif len(word) > 1 and word[:1].isupper() and word.replace("-", "").isalpha() \
                and word.casefold() not in STOP_WORDS:
            run = [word]
            while (len(run) < MAX_NAME_WORDS and i + taken < len(matches)
                   and raw[-1:] not in _SENTENCE_END + ",;:"):
                raw = matches[i + taken].group()
                nxt = trim(raw)
                if not (len(nxt) > 1 and nxt[:1].isupper() and nxt.replace("-", "").isalpha()):
                    break
                run.append(nxt)
                taken += 1
            if not opens or len(run) > 1:
                yield " ".join(run)
        last = matches[i + taken - 1].group()
        opens = last[-1:] in _SENTENCE_END or "\n" in text[matches[i + taken - 1].end():
                                                          matches[i + taken].start()] \
            if i + taken < len(matches) else True
        i += taken


def _is_shaped(word: str) -> bool:
    if _NUMBER.match(word) or _UNIT.match(word):
        return False
    has_digit = any(c.isdigit() for c in word)
    has_letter = any(c.isalpha() for c in word)
    return bool(_SHAPED.search(word)) or (has_digit and has_letter)


def _short_reply(text: str) -> Iterator[str]:
    tokens = TOKEN.findall(text)
    if 0 < len(tokens) <= SHORT_REPLY_WORDS and "?" not in text:  # (a question is none)
        reply = trim(" ".join(tokens))
        if reply and not all(t.casefold().strip(EDGE) in STOP_WORDS | _YES_NO for t in tokens):
            yield reply


_YES_NO = frozenset({"yes", "no", "ok", "okay", "sure", "да", "нет", "ага", "ja", "nein",
                     "oui", "non", "sí", "si"})


def _after_field_words(text: str, stems: frozenset[str] | set[str], *,
                       shaped_only: bool = False) -> Iterator[str]:
    """The word after one of the field's words, past the words that name a value ("the
    folder temp", "the file name is summary.txt"); `shaped_only`: only a word shaped like
    a name (after a word only the field's description has)."""
    if not stems:
        return
    matches = list(TOKEN.finditer(text))
    for i, match in enumerate(matches):
        token = match.group()
        if token[-1:] in _SENTENCE_END + ",;" or not stems & set(words(trim(token))):
            continue
        said = False  # a word that names a value came between ("is", "called")
        # "any file is greater": of a quantified thing, "is" says what it is like, not
        # its name; only a word shaped like a name is one there
        quantified = i > 0 and trim(matches[i - 1].group()).casefold() in _QUANTIFIERS
        for later in matches[i + 1:i + 4]:
            raw = later.group()
            word = trim(raw)
            folded = word.casefold()
            if folded in _FILLER or stems & set(words(word)):
                said = said or folded in _FILLER
                if raw[-1:] in _SENTENCE_END + ",;":
                    break  # ("its file name, ensuring": no name follows)
                continue
            if not word or folded in STOP_WORDS or folded in INDEFINITE \
                    or folded in SOMEONE or raw[:1] in "'\"«“„‘`":
                break  # ("the file 'a.txt'": quoted, `_quoted` has it)
            # A plain word right after the field's word may be any word ("file contain"):
            # only after "is", "called", or where it looks like a name.
            if _is_shaped(word) or not shaped_only and not quantified \
                    and (said or word[:1].isupper()):
                yield word
            break


def _before_field_words(text: str, stems: frozenset[str] | set[str]) -> Iterator[str]:
    """A quoted text or a name-shaped word right before one of the field's words ("the
    'report.csv' file", "the log.txt files"): said of the field's thing."""
    if not stems:
        return
    for match in QUOTED.finditer(text):
        after = TOKEN.match(text, match.end() + 1) if text[match.end():match.end() + 1] \
            == " " else None
        if after is not None and stems & set(words(trim(after.group()))):
            yield _inside(match)
    matches = list(TOKEN.finditer(text))
    for raw, after in zip(matches, matches[1:], strict=False):
        word = trim(raw.group())
        if raw.group()[-1:] not in _SENTENCE_END + ",;:" and _is_shaped(word) \
                and raw.group()[:1] not in "'\"«“„‘`" \
                and stems & set(words(trim(after.group()))):
            yield word


def _keyed(text: str, stems: frozenset[str] | set[str], *, head: bool = False
           ) -> Iterator[str]:
    """The value after a key naming the field, a line of its own ("name: Anna Petrova", a
    tool result's "folder: documents"). `head`: the key's last word must be one of
    `stems` ("customer_name" names a name; "file_content" is a content, no file name)."""
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        key_words = identifier_words(key.strip()) if sep and len(key) <= 64 else []
        if head:
            key_words = key_words[-1:]
        if key_words and value.strip() \
                and stems & {s for w in key_words for s in words(w)}:
            yield trim(value.strip()) if value.strip()[:1] in "'\"«“" else value.strip()
