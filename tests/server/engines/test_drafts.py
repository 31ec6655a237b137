"""Prompt-lookup drafts on the embedded model's real tokenizer: what a copied value's draft
is, and when there is none."""

from __future__ import annotations

from server.engines.drafts import PromptLookup, draft_source

PROMPT = ("<|im_start|>user\nWhat is the weather in San Francisco, CA tomorrow? My order "
          "id is ORD-48213.<|im_end|>\n<|im_start|>assistant\n")


def lookup(tokenizer, text=PROMPT, **options):
    return PromptLookup(text, lambda s: tokenizer.encode(s, add_special_tokens=False),
                        **options)


def test_a_value_being_copied_drafts_the_rest_of_it(tokenizer):
    drafts = lookup(tokenizer).propose('{"location":"San', limit=4)
    assert tokenizer.decode(drafts).startswith(" Francisco, CA")


def test_the_latest_occurrence_and_the_longest_suffix_win(tokenizer):
    text = "id A-1 then id B-2"
    assert tokenizer.decode(lookup(tokenizer, text).propose('"the id')) == " B-2"
    assert tokenizer.decode(lookup(tokenizer, text).propose("then id")) == " B-2"
    assert tokenizer.decode(lookup(tokenizer, text, min_match=2).propose("A-")) == "1 then id B-2"


def test_no_draft_without_a_match_long_enough_or_room(tokenizer):
    assert lookup(tokenizer).propose('{"unit":"kelvin') == []
    assert lookup(tokenizer).propose("Sa") == []  # under min_match
    assert lookup(tokenizer).propose("San", limit=0) == []
    assert lookup(tokenizer, "only San").propose("San") == []  # nothing follows it


def test_drafts_are_capped(tokenizer):
    assert len(lookup(tokenizer, max_tokens=3).propose("weather in")) == 3


def test_extra_sources_come_last_and_win():
    assert draft_source("prompt", ("2024-05-01",)) == "prompt\n2024-05-01"
    assert draft_source("prompt", ()) == "prompt"
