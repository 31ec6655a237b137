"""How an answer to "Should I use 1300.00 instead of 1200.50?" is read: by rule, from the
user's words and the values they state, never by the model."""

from __future__ import annotations

import pytest

from server.pipeline.confirmation import verdict


@pytest.mark.parametrize(("texts", "stated", "expected"), [
    (["yes"], [], "confirmed"),
    (["Yes, that's correct."], [], "confirmed"),
    (["да, верно"], [], "confirmed"),
    (["1 300,00 is right"], ["1300.00"], "confirmed"),         # the new value restated
    (["no, 1300"], ["1300.00"], "confirmed"),                   # a value beats a word
    (["no"], [], "declined"),
    (["no, keep it"], [], "declined"),
    (["нет"], [], "declined"),
    (["yes, no wait"], [], "declined"),                         # unsure: nothing new done
    (["it was 1 200,50 after all"], ["1200.50"], "declined"),   # the old value restated
    (["actually 1 400"], ["1400"], "superseded"),               # a third value: ask again
    (["what is the weather?"], [], "unanswered"),
])
def test_an_answer_is_read_by_rule(texts, stated, expected):
    assert verdict(texts, stated=stated, old="1200.50", new="1300.00") == expected
