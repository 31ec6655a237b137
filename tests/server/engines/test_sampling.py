"""Token choice at the edges of what a request may ask for (found by the OpenAPI fuzz test,
tests/server/api/test_openapi_fuzz.py): any temperature the API accepts yields a token."""

from __future__ import annotations

import pytest
import torch

from server.engines.sampling import choose_token, make_generator


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-6, 1e-5, 2.0])
@pytest.mark.parametrize("top_p", [1.0, 1e-300, 0.5])
def test_tiny_temperatures_choose_a_token(temperature, top_p):
    logits = torch.tensor([1.0, 3.5, float("-inf"), 2.0, -40.0])
    token = choose_token(logits, temperature=temperature, top_p=top_p,
                         generator=make_generator(0))
    assert token in (0, 1, 3, 4)
    if temperature < 1e-5 or top_p < 0.3:
        assert token == 1  # greedy, or the nucleus holds only the best token


def test_huge_logits_do_not_overflow_a_small_temperature():
    logits = torch.tensor([3e38, 1e38, float("-inf")])
    assert choose_token(logits, temperature=1e-4, top_p=1.0, generator=make_generator(0)) == 0
