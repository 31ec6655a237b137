"""Prompt-lookup drafts on the embedded model's real tokenizer: what a copied value's draft
is, and when there is none."""

from __future__ import annotations

from server.engines.drafts import DraftOdds, PromptLookup, Speculation, draft_length, draft_source

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


def test_a_draft_is_as_long_as_its_tokens_pay():
    # token i stands with probability odds**i and costs `cost` steps
    assert draft_length(0.9, 0.5, 8) == 6  # 0.9**6 = 0.53 > 0.5 > 0.9**7
    assert draft_length(0.9, 0.0, 8) == 8  # free drafts: as far as allowed
    assert draft_length(0.7, 0.5, 8) == 1
    assert draft_length(0.5, 0.5, 8) == 0
    assert draft_length(0.99, 1.0, 8) == 0  # a drafted token costing a step never pays


def test_odds_follow_what_the_rows_drafts_did():
    odds = DraftOdds()
    assert odds.odds == 0.8  # the prior, before any draft
    odds.update(proposed=4, kept=4)
    assert odds.odds > 0.8
    for _ in range(5):
        odds.update(proposed=2, kept=0)
    assert odds.odds < 0.3  # recent failures outweigh the prior and the early success
    odds.update(proposed=1, kept=1)
    assert 0.3 < odds.odds < 0.6


def test_drafts_pay_only_below_a_step():
    assert Speculation(token_cost=0.3).pays and Speculation().pays  # None: to be measured
    assert not Speculation(token_cost=1.2).pays
    assert not Speculation(max_tokens=0, token_cost=0.0).pays


def test_vllm_ngram_drafts_are_configured_from_the_setting():
    from server.engines.vllm_engine import VllmOptions, speculative_config
    from server.settings import Settings

    assert speculative_config(VllmOptions()) is None
    assert Settings().vllm_speculate_tokens == 0
    assert speculative_config(VllmOptions(speculate_tokens=4)) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 3,
        "prompt_lookup_max": 5}


def _rows(tokenizer, cost):
    """A row decoder drafting at `cost` steps a token, and a greedy row that has written
    "What is the weather in" (the prompt goes on: a draft is there to propose)."""
    import concurrent.futures
    from collections import Counter

    from server.engines.base import GenerationRequest, SamplingParams
    from server.engines.decoding import DecodeRow, RowDecoder

    class _Masks:
        def allocate_bitmask(self, rows):
            return None

    encode = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    decoder = RowDecoder(backend=_Masks(), eos=frozenset(), decode=tokenizer.decode,
                         encode=encode, max_context=4096, jump_forward=False,
                         speculation=Speculation(max_tokens=8, token_cost=cost), max_feed=16,
                         counts=Counter())
    row = DecodeRow(GenerationRequest(tuple(encode(PROMPT)), SamplingParams(64)),
                    concurrent.futures.Future(), None, None,
                    out=list(encode("What is the weather in")))
    return decoder, row


def test_a_row_whose_odds_do_not_pay_tries_one_token_seldom(tokenizer):
    # Measured on the embedded model: a drafted token cost 0.92 steps, so the prior odds
    # (0.8) pay for none; trying one token every step that allowed it cost 6% of free text.
    decoder, row = _rows(tokenizer, 0.92)
    tried = []
    for _ in range(300):
        decoder.propose(row, room=8)
        tried.append(len(row.drafts))
        row.drafts = []
    assert set(tried) == {0, 1} and sum(tried) == 3  # one token once in 92 steps: 1% at most
    # Where the odds pay, the row drafts at once, as far as they pay.
    decoder, row = _rows(tokenizer, 0.3)
    decoder.propose(row, room=8)
    assert len(row.drafts) == draft_length(0.8, 0.3, 8) == 5
