"""How an answer to "Should I use 1300.00 instead of 1200.50?" is read: from the values the
user states, then by meaning in English, Russian and German; never by the model. A reply
that says yes and no at once, or doubts, is no answer: the question is asked again."""

from __future__ import annotations

import pytest

from server.dialogue.replies import verdict


@pytest.mark.parametrize(("texts", "stated", "expected"), [
    (["yes"], [], "confirmed"),
    (["Yes, that's correct."], [], "confirmed"),
    (["Yes, no problem"], [], "confirmed"),          # "no problem" is a yes
    (["go ahead"], [], "confirmed"),
    (["sure, use the new one"], [], "confirmed"),
    (["да, верно"], [], "confirmed"),
    (["Конечно"], [], "confirmed"),
    (["Да, не против"], [], "confirmed"),            # "не против" is a yes
    (["ок"], [], "confirmed"),
    (["угу"], [], "confirmed"),
    (["согласен"], [], "confirmed"),
    (["Ja, passt schon"], [], "confirmed"),
    (["1 300,00 is right"], ["1300.00"], "confirmed"),         # the new value restated
    (["no, 1300"], ["1300.00"], "confirmed"),                   # a value beats a word
    (["no"], [], "declined"),
    (["no, keep the old one"], [], "declined"),
    (["no, keep it"], [], "declined"),
    (["нет"], [], "declined"),
    (["нет, оставьте как было"], [], "declined"),
    (["не надо"], [], "declined"),
    (["nein, wie vorher"], [], "declined"),
    (["it was 1 200,50 after all"], ["1200.50"], "declined"),   # the old value restated
    (["actually 1 400"], ["1400"], "superseded"),               # a third value: ask again
    (["yes, no wait"], [], "unanswered"),                       # both: asked again
    (["нет, всё верно"], [], "unanswered"),
    (["not sure"], [], "unanswered"),                           # doubt: asked again
    (["не знаю"], [], "unanswered"),
    (["maybe yes"], [], "unanswered"),
    (["what is the weather?"], [], "unanswered"),
])
def test_an_answer_is_read_by_its_meaning(texts, stated, expected):
    assert verdict(texts, stated=stated, old="1200.50", new="1300.00") == expected
