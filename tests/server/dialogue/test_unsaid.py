"""What the user's newest message means without saying it, where the model's calls pass over
it (server/dialogue/unsaid.py): BFCL's missing-parameter turns, where the model calls a
tool that needs nothing (`ls`) for "list every project that has a specific word in its
file name"; and what is no such thing ("a list of files", "that specific message", "the
folder temp", a value the message gives after it). The readings under it (which.py):
`meant_unsaid`, and `indefinite`'s and `vague`'s fixed false readings."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammars import GROUNDED
from server.dialogue import Grounding, ground
from server.dialogue.evidence import evidence_of
from server.dialogue.turn import wording_of
from server.dialogue.unsaid import unsaid
from server.dialogue.which import indefinite, meant_unsaid, thing_stems, vague
from server.task import Turn

TODAY = dt.date(2026, 12, 7)


@pytest.mark.parametrize(("text", "phrase"), [
    ("list every project that has a specific word in its file name", "specific word"),
    ("Locate any file with that a special word in it", "special word"),
    ("highlight any lines featuring a specific term.", "specific term"),
    ("Calculate a specific metric for me.", "specific metric"),
    ("Is it a certain amount of money?", "certain amount"),
    ("Оспорьте определённую операцию, пожалуйста", "определённую операцию"),
    ("Найди файлы с конкретным словом в названии", "конкретным словом"),
    ("Öffne eine bestimmte Datei", "bestimmte Datei"),
    # Said: right after it, or named.
    ("Find a specific word 'goal' in the names", None),
    ("Open a specific file: notes.txt", None),
    ("Send it to a particular user, Anna", None),
    ("a specific user named Anna", None),
    # No one thing meant: known already, an adjective of many, sure, a value's own words.
    ("Open the specific file again", None),
    ("Sort them in no specific order", None),
    ("Add specific attributes to the report", None),
    ("I am certain it was yesterday", None),
    ("In particular, list the hidden files", None),
    ("Я определённо хочу это", None),
    ("The message should be like 'the cancellation of a specific order.'", None),
])
def test_one_thing_meant_and_not_said(text, phrase):
    found = meant_unsaid(text)
    assert (found[0] if found else None) == phrase
    if found:
        assert text[:found[1]].rstrip(".,;:!?").endswith(phrase)  # where it ends


@pytest.mark.parametrize(("text", "stems", "unsaid_"), [
    ("Show one of my files", {"file"}, True),
    ("Make a backup in some folder", {"folder"}, True),
    ("Retract a specific message", {"messag"}, True),
    ("Give me an inventory of files here", {"file"}, False),  # a list's, not a file
    ("Compile a list of stock symbols", {"stock", "symbol"}, False),
    ("Could you retract that specific message?", {"messag"}, False),
    ("Some stocks are underperforming", {"stock"}, False),  # some of many: none in particular
    ("Retrieve any recent messages I sent", {"messag"}, False),
    ("Copy it into a folder named backup", {"name"}, False),  # "named" says which
])
def test_indefinite_reads_a_thing_left_unsaid_and_nothing_else(text, stems, unsaid_):
    assert indefinite(text, stems) is unsaid_


def test_how_many_asks_for_a_number_and_is_no_vague_count():
    assert vague("Show the last several lines", {"line"})
    assert not vague("Find out how many lines are in the file", {"line"})


def _tool(tool: str, **fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return tool, {"type": "object", "properties": fields}


def _grounded(description: str | None = None, kind: str = "string") -> dict[str, Any]:
    return {"type": kind, GROUNDED: True, **({"description": description} if description
                                             else {})}


# BFCL's file system tools, their strings (and counts) grounded as a client marks them.
TOOLS = dict([
    _tool("ls", a={"type": "boolean", "description": "Show hidden files"}),
    _tool("cd", folder=_grounded("The folder of the directory to change to.")),
    _tool("find", path=_grounded("The directory path to start the search"),
          name=_grounded("The name of the file or directory to search for")),
    _tool("tail", file_name=_grounded("The name of the file to display"),
          lines=_grounded("The number of lines to display", "integer")),
    _tool("cat", file_name=_grounded("The name of the file to display")),
    _tool("touch", file_name=_grounded("The name of the new file in the current directory")),
])
DESCRIBED = {"cat": "cat Display the contents of a file.",
             "touch": "touch Create a new file of any extension in the current directory."}


def _asked(said: str, *calls: tuple[str, dict[str, Any]], tools=TOOLS,
           language_of: str = "en") -> Any:
    evidence = evidence_of([Turn("user", said)], today=TODAY)
    groundings = {n: g for n, s in tools.items() if (g := ground(s, None, evidence))}
    def wording(name: str):
        return wording_of(groundings.get(name) or Grounding(language=evidence.language),
                          tools[name])
    return unsaid(said, list(calls), tools, groundings, wording,
                  described=lambda name: DESCRIBED.get(name, name))


def test_a_specific_thing_the_calls_pass_over_is_asked_in_the_users_words():
    """BFCL miss_param_7: the 0.5B and the 135M model both listed the folder instead."""
    asked = _asked("Within academic_venture, list every project that has a specific word "
                   "in its file name.", ("ls", {"a": True}))
    assert asked is not None and asked.tool == "ls"
    assert asked.text() == "Which specific word do you mean?"
    assert asked.as_dict()["missing"] == [{"field": "", "question": asked.text()}]
    # A call with a value the model picked is no answer either ("goal" nobody said).
    assert _asked("list the files that have a specific word in their name",
                  ("find", {"name": "goal"})) is not None
    # A value the message gives after it is the thing.
    assert _asked("list the files that have a specific word in their name: 'goal'",
                  ("find", {"name": "goal"})) is None
    assert _asked("Find a file with a specific name in this folder, I mean report.pdf",
                  ("find", {"name": "report.pdf"})) is None


def test_a_specific_thing_in_russian_and_german_is_asked_in_that_language():
    asked = _asked("Найди все файлы, в названии которых есть определённое слово.",
                   ("ls", {"a": True}))
    assert asked is not None and asked.language == "ru"
    assert asked.text() == \
        "Уточните, пожалуйста: «определённое слово» — что именно вы имеете в виду?"
    # Another tool's folder, asked for in Russian: the catalog's word for it, not the
    # client's English description inside a Russian sentence.
    folder = _asked("Покажи все файлы в какой-нибудь папке, скрытые тоже.", ("ls", {"a": True}))
    assert folder is not None and folder.tool == "cd"
    assert folder.text() == "Уточните, пожалуйста: папка."
    german = _asked("Zeig mir den Inhalt einer bestimmten Datei.", ("ls", {"a": True}))
    assert german is not None and german.text() == \
        "Was genau meinen Sie mit „bestimmten Datei“?"


def test_another_tools_field_asked_for_without_a_value_is_its_question():
    """BFCL miss_param_11: "within a directory", and the model listed the current one."""
    said = "Display all the files located within a directory, the hidden ones too."
    asked = _asked(said, ("ls", {"a": True}))
    assert asked is not None and asked.tool == "cd"
    assert asked.as_dict()["missing"] == [{
        "field": "/folder", "question": "Please tell me: the folder of the directory to "
                                        "change to."}]
    # The tool whose field it is was called: its own grounding asks (calls.py), not this.
    assert _asked(said, ("cd", {"folder": "temp"})) is None
    # "The last several lines", and the model showed the whole file: the count is asked.
    lines = _asked("Finally, show the last several lines of the file.",
                   ("cat", {"file_name": "log.txt"}))
    assert lines is not None and [m["field"] for m in lines.as_dict()["missing"]] == \
        ["/lines"]


def test_a_tool_selection_left_out_still_says_what_is_left_open():
    """BFCL miss_param_11 again, with more tools than fit: selection showed `ls` and left
    `cd` out of the prompt. Its folder, asked for without saying which, is still asked."""
    said = "Display all the files located within a directory, the hidden ones too."
    evidence = evidence_of([Turn("user", said)], today=TODAY)
    shown = {"ls": TOOLS["ls"]}
    hidden = ground(TOOLS["cd"], None, evidence)
    read = []
    def left_out():
        read.append(1)
        return {"cd": hidden}
    asked = unsaid(said, [("ls", {"a": True})], shown, {"ls": Grounding(marks=hidden.marks)},
                   lambda n: wording_of(hidden, TOOLS[n]), left_out)
    assert asked is not None and asked.tool == "cd" and read == [1]
    # Read only where needed: a call acting on the message's words never reads them.
    assert unsaid("List 'docs' with a specific word", [("ls", {"path": "docs"})], shown,
                  {"ls": hidden}, lambda n: wording_of(hidden, TOOLS[n]), left_out) \
        is not None  # (the specific word: asked without them)
    assert read == [1]


def test_of_several_tools_left_open_the_one_the_request_describes_asks():
    """BFCL miss_param_42: "in my existing folder called 'Lectures', I'd like to set up a
    new file", and the model only changed into the folder. Every file tool's file name is
    left open; the question is the one of the tool the request's words describe (`touch`:
    "create a new file"), not the first offered (`cat`)."""
    asked = _asked("In my existing folder called 'Lectures', I'd like to set up a new file.",
                   ("cd", {"folder": "Lectures"}))
    assert asked is not None and asked.tool == "touch"
    assert asked.text() == "Please tell me: the name of the new file in the current directory."


def test_calls_with_no_fields_and_nothing_given_still_ask():
    """A call to a tool with no fields, where the message gives no field a value: nothing
    to compare the open thing with (a NameError there was a 500, BFCL miss_param_54)."""
    tools = {**TOOLS, **dict([_tool("start_engine")])}
    asked = _asked("Convert some liters into gallons, then start the engine.",
                   ("start_engine", {}), tools={"start_engine": tools["start_engine"],
                                                "tail": TOOLS["tail"]})
    assert asked is None or asked.tool == "tail"
    lines = _asked("Show the last several lines of the log.", ("start_engine", {}),
                   tools={"start_engine": tools["start_engine"], "tail": TOOLS["tail"]})
    assert lines is not None and lines.tool == "tail"


@pytest.mark.parametrize("said", [
    "Go into the folder temp and list all the files.",  # the folder is said
    "Look in a folder called temp and show what is there.",
    "Show me a list of my files.",  # a list, of all files
    "Show me the files here, hidden ones included.",
])
def test_what_the_message_says_or_does_not_ask_for_is_no_question(said):
    assert _asked(said, ("ls", {"a": True})) is None


def test_calls_acting_on_what_the_phrase_says_stand_and_on_other_words_do_not():
    """A value of the calls said where the message speaks of the thing, or after ("a
    travel budget of $5,000"), is that phrase taken up; one said before it ('a.txt', then
    "to a directory") is not: the directory is still asked for."""
    tools = {**TOOLS, **dict([
        _tool("cp", source=_grounded("The file to copy"),
              destination=_grounded("The destination to copy to")),
        _tool("get_flight_cost", travel_from=_grounded("The location the travel is from")),
        _tool("set_budget_limit", budget_limit=_grounded("The budget limit", "number"))])}
    assert _asked("Set up a travel budget of $5,000 for me.",
                  ("set_budget_limit", {"budget_limit": 5000}), tools=tools) is None
    other = _asked("Set up a travel budget of $5,000 for me.",
                   ("set_budget_limit", {"budget_limit": 7000}), tools=tools)
    assert other is not None and other.tool == "get_flight_cost"  # (7000: nobody said it)
    asked = _asked("Copy 'a.txt' to a directory.", ("cp", {"source": "a.txt"}), tools=tools)
    assert asked is not None and asked.tool == "cd"
    # "A last-minute trip" speaks of no "last" anything.
    assert not indefinite("Book a last-minute trip", {"last", "modifi", "after"})


def test_no_grounded_field_no_question():
    """Grounding off (or no field whose value must come from someone): calls stand."""
    said = "list every project that has a specific word in its file name"
    assert unsaid(said, [("ls", {"a": True})], TOOLS, {}, lambda n: None) is None  # type: ignore[arg-type,return-value]
    assert _asked(said) is None  # no calls: the model's own text answers


def test_a_field_thing_is_its_keys_words_and_what_it_is_called():
    assert thing_stems("dir_name") == {"dir", "name"}


WORDS = ["a", "an", "some", "any", "the", "specific", "certain", "several", "file", "folder",
         "directory", "name", "lines", "named", "'x.txt'", "5", "20,000", "of", "list",
         "какой-нибудь", "папке", "определённое", "слово", "last-minute", "something", ","]


ARGUMENTS = st.dictionaries(
    st.sampled_from(["a", "folder", "file_name", "lines", "name"]),
    st.one_of(st.booleans(), st.integers(-3, 30000), st.floats(allow_nan=False),
              st.sampled_from(["x.txt", "", "5", "temp"]), st.lists(st.integers())),
    max_size=3)


@given(said=st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join),
       offered=st.lists(st.sampled_from(sorted(TOOLS)), max_size=4, unique=True),
       called=st.lists(st.tuples(st.sampled_from([*TOOLS, "start_engine"]), ARGUMENTS),
                       max_size=3))
@settings(max_examples=300, deadline=None)
def test_what_the_calls_pass_over_is_read_without_raising(said, offered, called):
    """Any message, any offered and called tools, any argument values: a question or None,
    never an exception (one was a 500)."""
    tools = {n: TOOLS[n] for n in offered}
    evidence = evidence_of([Turn("user", said)], today=TODAY)
    groundings = {n: g for n, s in tools.items() if (g := ground(s, None, evidence))}
    asked = unsaid(said, called, tools, groundings,
                   lambda n: wording_of(groundings.get(n) or Grounding(), tools.get(n, {})))
    assert asked is None or asked.questions
