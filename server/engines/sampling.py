"""Token choice for one row of logits: greedy, or temperature + top-p with a per-request
generator, so a seeded request is reproducible whatever else shares its batch."""

from __future__ import annotations

import torch

# Temperatures below this are greedy, as in vLLM: dividing logits by 1e-300 overflows them
# to inf, and a softmax over inf is NaN, which torch.multinomial refuses (a valid request,
# "temperature": 1e-300, was a 503 engine failure).
GREEDY_BELOW = 1e-5


def make_generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    """On the logits' device, so sampling on a GPU copies no distribution to the host."""
    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return gen


def choose_token(logits: torch.Tensor, *, temperature: float, top_p: float,
                 generator: torch.Generator) -> int:
    """`logits` is one row (vocab,), masked tokens already at -inf."""
    if temperature < GREEDY_BELOW:
        return int(torch.argmax(logits))
    logits = logits.float()
    # Shifted so the best token's logit is 0: no overflow for any temperature left here.
    probs = torch.softmax((logits - logits.max()) / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        drop = cumulative - sorted_probs > top_p
        sorted_probs[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    if probs.device != generator.device:
        probs = probs.to(generator.device)
    return int(torch.multinomial(probs, 1, generator=generator))
