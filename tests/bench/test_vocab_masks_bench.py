"""bench/speed/vocab_masks.py on the embedded model's vocabulary: the mask cost is measured over
the whole answer (every token accepted) and reported per vocabulary."""

from __future__ import annotations

import pytest

from bench.speed import vocab_masks

pytestmark = pytest.mark.slow


def test_mask_times_over_the_embedded_vocabulary(model_dir):
    result = vocab_masks.mask_times(model_dir, rounds=1)
    assert result["vocab_size"] == 49152
    assert result["answer_tokens"] > 10
    assert result["mask_ms_per_token_median"] > 0
    text = vocab_masks.table({"smollm2-135m": result})
    assert text.splitlines()[1].startswith("smollm2-135m") and "49152" in text
