"""`bench.dialogue.bfcl_missing`'s judge of invented values: a string nobody wrote, and a
number written neither in digits nor in words that is not its parameter's default."""

from __future__ import annotations

import json

from bench.dialogue.bfcl_missing import invented_values

TAIL = {"type": "object", "properties": {"file_name": {"type": "string"},
                                         "lines": {"type": "integer", "default": 10}}}
MESSAGES = [{"role": "user", "content": "Show me the last several lines of log.txt."}]


def judge(arguments: dict, messages=MESSAGES, parameters=TAIL) -> list:
    return invented_values(json.dumps(arguments), messages, parameters)


def test_a_count_nobody_gave_is_invented_as_a_string_nobody_wrote_is():
    # BFCL miss_param_1 turn 3 on the 0.5B with strings grounded: tail(lines=5) for "the
    # last several lines" carried no string nobody wrote, and a count nobody gave.
    assert judge({"file_name": "log.txt", "lines": 5}) == [5]
    assert judge({"file_name": "notes.txt"}) == ["notes.txt"]
    assert judge({"file_name": "log.txt"}) == []
    assert judge({"file_name": "log.txt", "lines": 10}) == []  # its default: as if omitted


def test_a_number_written_in_digits_or_in_words_or_in_a_tool_result_was_given():
    said = [{"role": "user", "content": "Show me the last five lines of log.txt."}]
    assert judge({"file_name": "log.txt", "lines": 5}, said) == []
    said = [{"role": "user", "content": "Show me the last two lines of log.txt."}]
    assert judge({"file_name": "log.txt", "lines": 2}, said) == []  # (text2num skips "two"
    # unless told not to: then every such call was counted invented)
    said = [{"role": "user", "content": "Add 10 and 20.5 please."}]
    assert judge({"a": 10, "b": 20.5}, said, {}) == []
    assert judge({"a": 10.0, "b": 21}, said, {}) == [21]
    said = [{"role": "user", "content": "Sum the sizes."},
            {"role": "tool", "content": "{\"sizes\": [3, 4]}"}]
    assert judge({"numbers": [3, 4, 7]}, said, {}) == [7]


def test_choices_the_tool_offers_are_never_counted():
    assert judge({"file_name": "log.txt", "follow": True}) == []
    assert judge({"file_name": "log.txt", "tags": ["log.txt", "archive"]}) == ["archive"]
