"""The loops the back-to-back repeat check misses (BFCL cut-offs seen on the embedded model):
string items that keep repeating earlier items or the previous one with a drifting tail,
and an object nesting the same key ever deeper. Steering avoids the tokens that would start
another such item or write the key again; it never writes anything for the model."""

from __future__ import annotations

import pytest

from server.formats.smollm2 import ListReader
from server.pipeline.guards.item_loops import (
    KEY_REPEATS,
    NUMBER_RUN,
    SIMILAR_RUN,
    JsonShape,
    similar_run,
    vocabulary_of,
)
from server.pipeline.guards.runaway import RunawayGuard
from server.pipeline.request_options import GuardOptions

CALL = '[{"name":"streaming_services.shows_list_and_ratings","arguments":{"show_list":['
# A run one short of SIMILAR_RUN: the item being written makes it a loop.
STRANGER = CALL + '"Friends","Stranger Things"' + "".join(
    f',"Stranger Things_{n}"' for n in range(2, SIMILAR_RUN + 1))
REBOUNDED = CALL + ('"points_per_game","assists","points_rebounded","minutes_rebounded",'
                    '"minutes_rebounded","minutes_rebounded","points_rebounded",'
                    '"minutes_rebounded","points_rebounded","minutes_rebounded",'
                    '"points_rebounded"')
LEVEL = '"gradeDict":{"type":{"math":90},'
NESTED = '[{"name":"calculate_average","arguments":{' + LEVEL * KEY_REPEATS + '"grade'
PROMPT = "Show me the ratings of Friends and Stranger Things."


def steered(tokenizer, text: str, evidence: str = PROMPT) -> tuple[RunawayGuard, set[str]]:
    """A guard fed `text` token by token (as the decode would), and the texts of the tokens
    it would avoid next."""
    guard = RunawayGuard(ListReader("tools"), tokenizer.decode,
                         options=GuardOptions(loop_guard="steer"),
                         vocabulary=vocabulary_of(tokenizer), evidence=evidence)
    ids = tokenizer.encode(text, add_special_tokens=False)
    for token in ids:
        guard.see(token)
    return guard, {tokenizer.decode([t]) for t in guard.steer(ids)}


def test_drifting_suffixes_stop_starting_items(tokenizer):
    guard, banned = steered(tokenizer, STRANGER + f',"Stranger Things_{SIMILAR_RUN + 1}')
    assert guard.trip is None
    assert {'","', '",'} <= banned  # no fifth variant after this one
    assert '"]' not in banned and '"' not in banned  # the model closes the list itself
    assert not any(set(t) <= set("0123456789_") for t in banned)  # the item may go on
    # Between items, only the separator is avoided.
    _, between = steered(tokenizer, STRANGER + f',"Stranger Things_{SIMILAR_RUN + 1}"')
    assert "," in between and "]" not in between and "]}" not in between


def test_a_short_run_of_variants_is_a_real_list(tokenizer):
    _, banned = steered(tokenizer, STRANGER[:-1])  # one variant fewer
    assert '","' not in banned
    week = CALL + ",".join(f'"2024-01-0{d}"' for d in range(1, 8))  # a week of dates
    assert '","' not in steered(tokenizer, week[:week.rindex(",")][:-1])[1]  # a 7th may start
    files = CALL + '"report_2021.pdf","report_2022.pdf","report_2023.pdf'
    assert '","' not in steered(tokenizer, files)[1]
    cities = CALL + '"Paris","London","Tokyo","Berlin","Rome","Madrid","Lisbon'
    assert steered(tokenizer, cities)[1] == set()


def test_items_that_repeat_earlier_ones_stop_starting_items(tokenizer):
    _, banned = steered(tokenizer, REBOUNDED + ',"minutes')
    assert '","' in banned


def test_the_same_number_again_and_again_ends_the_items(tokenizer):
    data = CALL.replace("show_list", "data") + "85,90" + ",91" * NUMBER_RUN
    _, banned = steered(tokenizer, data)
    assert "," in banned and "]" not in banned and "1" not in banned
    # One time fewer, a short vector, or numbers that only recur: a real value.
    assert steered(tokenizer, data[:-3])[1] == set()
    assert steered(tokenizer, CALL + "0,0,0,0,0,0,0,0,0,0")[1] == set()  # ten zeros
    assert steered(tokenizer, CALL + "30,70,30,70,30,70,30,70,30,70,30,70")[1] == set()


def test_a_key_nesting_itself_is_not_written_again(tokenizer):
    guard, banned = steered(tokenizer, NESTED)
    assert guard.trip is None
    assert "Dict" in banned  # "gradeDict" a third time on its own path
    assert "Book" not in banned and '"' not in banned  # another key may be written
    once = NESTED.replace(LEVEL, "", 1)
    assert "Dict" not in steered(tokenizer, once)[1]  # one level fewer is allowed


def test_items_copied_from_the_conversation_are_not_a_loop(tokenizer):
    """The same list is a loop when the model invents its items, a list when the user gave
    them: items found in the prompt break the run."""
    invented = STRANGER + f',"Stranger Things_{SIMILAR_RUN + 1}'
    assert '","' in steered(tokenizer, invented)[1]
    given = PROMPT + " " + ", ".join(f"Stranger Things_{n}" for n in range(2, 9))
    assert '","' not in steered(tokenizer, invented, evidence=given)[1]


@pytest.mark.parametrize(("items", "run"), [
    (["a", "b", "c"], 0),
    (["Tenet", "No Time To Die", "Tenet", "Tenet", "Tenet"], 3),
    (["Friends", "Stranger Things", "Stranger Things_2", "Stranger Things_3"], 2),
    (["Friends", "Stranger Things", "Stranger Things_2", "Stranger Things_3"], 2),
    (["New York", "Los Angeles", "New York"], 1),
    (["x", None, "x"], 1),          # a number between breaks nothing but counts for nothing
    (["ab", "ab", None], 0),        # the newest item is not a string
])
def test_similar_run(items, run):
    assert similar_run(items) == run


def test_the_shape_reads_keys_items_and_strings():
    shape = JsonShape()
    shape.update('{"a":["x","y\\"z",1,{"b":"c"}],"d":{"e":"f')
    assert shape.in_string and shape.role == "value" and shape.buf == "f"
    assert [o.key for o in shape.stack] == ["d", "e"]
    shape.update('{"a":["x","y\\"z",1')
    assert shape.stack[-1].items == ["x", 'y"z'] and shape.stack[-1].scalar


def test_the_thresholds_stay_above_bfcl():
    # strictcall-bench runaway --thresholds measured 1, 1 and 2 in BFCL's gold values.
    assert SIMILAR_RUN > 1 and KEY_REPEATS > 1 and NUMBER_RUN > 2
