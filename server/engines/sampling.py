"""Token choice for one row of logits: greedy, or temperature + top-p with a per-request
generator, so a seeded request is reproducible whatever else shares its batch.

Logits are numpy arrays on the host (the llama.cpp engine's, a process that never imports
torch) or torch tensors on the model's device (the torch engine's); each is sampled with its
own library, and a request's generator is of the same kind (`make_generator`)."""

from __future__ import annotations

from typing import Any

import numpy as np

# Temperatures below this are greedy, as in vLLM: dividing logits by 1e-300 overflows them
# to inf, and a softmax over inf is NaN, which torch.multinomial refuses (a valid request,
# "temperature": 1e-300, was a 503 engine failure).
GREEDY_BELOW = 1e-5


def make_generator(seed: int | None, device: Any = "cpu") -> Any:
    """`device` None: a numpy generator, for numpy logits. Otherwise a torch generator on the
    logits' device, so sampling on a GPU copies no distribution to the host."""
    if device is None:  # any int the API takes, negative ones too, as torch reads them
        return np.random.Generator(np.random.PCG64(None if seed is None else seed % 2**64))
    import torch

    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return gen


def choose_token(logits: Any, *, temperature: float, top_p: float, generator: Any) -> int:
    """`logits` is one row (vocab,), masked tokens already at -inf."""
    if isinstance(logits, np.ndarray):
        return _choose_numpy(logits, temperature=temperature, top_p=top_p, generator=generator)
    import torch

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


def _choose_numpy(logits: np.ndarray, *, temperature: float, top_p: float,
                  generator: np.random.Generator) -> int:
    """As the torch path, in numpy: the same distribution, another generator's draws."""
    if temperature < GREEDY_BELOW:
        return int(np.argmax(logits))
    scaled = (logits.astype(np.float64) - float(np.max(logits))) / temperature
    probs = np.exp(scaled)
    if top_p < 1.0:
        probs = probs / probs.sum()
        order = np.argsort(-probs, kind="stable")
        sorted_probs = probs[order]
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        sorted_probs[np.cumsum(sorted_probs) - sorted_probs > top_p] = 0.0
        probs = np.zeros_like(probs)
        probs[order] = sorted_probs
    cumulative = np.cumsum(probs)
    # The first token whose cumulative mass passes the draw: never one of mass 0.
    token = int(np.searchsorted(cumulative, generator.random() * cumulative[-1], side="right"))
    if token < len(probs) and probs[token] > 0:
        return token
    return int(np.flatnonzero(probs)[-1])  # a draw rounded up to the total
