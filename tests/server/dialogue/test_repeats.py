"""A call made again without being asked (server/dialogue/repeats.py): the same values as
an earlier exchange's call, where the user's newest message restates none and asks for
nothing again."""

from __future__ import annotations

import pytest

from server.dialogue.questions import Wording
from server.dialogue.repeats import action_words, answered_yes, made_before
from server.task import EarlierCall, Turn

GREP = {"file_name": "report.txt", "pattern": "error"}


def _turns(newest: str, *, args: dict | None = None, name: str = "grep",
           between: tuple[Turn, ...] = ()) -> list[Turn]:
    return [Turn("user", "Search report.txt for 'error'."),
            Turn("assistant", "", (EarlierCall("c1", name, args or GREP),)),
            Turn("tool", "3 lines", call_id="c1"),
            Turn("assistant", "Found 3 lines."), *between,
            Turn("user", newest)]


def test_the_same_values_unasked_are_a_repeat():
    turns = _turns("Now sort the file alphabetically.")
    assert made_before(turns, "grep", dict(GREP)) == GREP
    # Key order and a null the model added change nothing.
    assert made_before(turns, "grep", {"pattern": "error", "file_name": "report.txt",
                                       "ignore_case": None}) == GREP


@pytest.mark.parametrize("said", [
    "Search report.txt again, please.", "Do it once more.", "Retry that.",
    "Try the search for 'error' in report.txt one more time.",
    "Are there any errors now?", "Is it still failing?",
    "Сделай это ещё раз.", "Повтори поиск.", "Und nochmal bitte.", "Bitte erneut suchen.",
])
def test_asked_again_or_restated_is_no_repeat(said):
    assert made_before(_turns(said), "grep", dict(GREP)) is None


def test_a_value_restated_for_another_action_is_still_a_repeat():
    # BFCL: after touch(file_name='DataSet1.csv'), "Infuse 'DataSet1.csv' with some
    # numbers" names the file, not another touch; "Create 'DataSet1.csv' again" would.
    made = {"file_name": "DataSet1.csv"}
    touch = action_words("touch", "A file system. Create a new file of any extension.",
                         ["echo", "A file system. Write content to a file.",
                          "mkdir", "A file system. Create a new directory."])
    assert touch == {"touch", "extens"}  # (the shared words say nothing of this tool)
    turns = _turns("Infuse 'DataSet1.csv' with some preliminary numbers.", args=made,
                   name="touch")
    assert made_before(turns, "touch", dict(made), action=lambda: touch) == made
    assert made_before(turns, "touch", dict(made)) is None  # (its action unknown)
    turns = _turns("Touch 'DataSet1.csv', it should be empty.", args=made, name="touch")
    assert made_before(turns, "touch", dict(made), action=lambda: touch) is None


def test_other_values_another_tool_or_no_values_are_no_repeat():
    turns = _turns("Now sort the file alphabetically.")
    assert made_before(turns, "grep", {**GREP, "pattern": "warning"}) is None
    assert made_before(turns, "sort", {"file_name": "report.txt"}) is None
    assert made_before(_turns("List them.", args={}, name="ls"), "ls", {}) is None
    assert made_before(turns, "grep", {"file_name": None}) is None


def test_a_call_after_the_newest_message_is_the_loops_own():
    # The agent loop's own turn: the call the model already made for this message is no
    # earlier exchange's (a retry after a tool's error is the loop's).
    turns = [Turn("user", "Search report.txt for 'error'."),
             Turn("assistant", "", (EarlierCall("c1", "grep", GREP),)),
             Turn("tool", "error: busy", call_id="c1")]
    assert made_before(turns, "grep", dict(GREP)) is None


def test_a_number_restated_as_digits_is_asked_for():
    args = {"account": "main", "lines": 20}
    turns = _turns("Show the last 20 lines.", args=args, name="tail")
    assert made_before(turns, "tail", dict(args)) is None
    turns = _turns("Show me 120 more.", args=args, name="tail")
    assert made_before(turns, "tail", dict(args)) == args  # 20 inside 120 says nothing


@pytest.mark.parametrize(("language", "reply"), [("en", "yes"), ("ru", "да, давай"),
                                                ("de", "ja, bitte")])
def test_yes_to_that_very_question_makes_it(language, reply):
    question = Wording(language).done_before(GREP).question
    turns = _turns(reply, between=(Turn("user", "Sort it."), Turn("assistant", question)))
    assert made_before(turns, "grep", dict(GREP)) == GREP  # still a repeat ...
    assert answered_yes(turns, question)  # ... that the user said yes to
    assert not answered_yes(_turns("no", between=(Turn("user", "Sort it."),
                                                  Turn("assistant", question))), question)
    assert not answered_yes(_turns(reply), question)  # asked nothing: yes to what?


def test_the_question_names_each_value_in_the_users_language():
    assert Wording("en").done_before(GREP).question == (
        "This was already done with the same values (file name: report.txt, pattern: "
        "error). Should I do it again, or with which other values?")
    assert Wording("ru").done_before({"file_name": "a.txt"}).question.startswith(
        "Это уже было сделано с теми же значениями (")
    assert "erneut" in Wording("de").done_before({"file_name": "a.txt"}).question
