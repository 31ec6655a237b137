"""Tokens are charged for what was decoded, whether the client stayed or not: a decode
cancelled mid-way (the client left, or its time ran out) is charged its prompt and the
tokens written until then, so leaving is no way around a tokens-per-minute limit."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from server.engines.base import GenerationRequest, SamplingParams
from server.identity import Identity
from server.pipeline.decode import Decoder


class Charges:
    def __init__(self) -> None:
        self.charged: list[int] = []

    def charge(self, identity: Identity, tokens: int) -> None:
        self.charged.append(tokens)


class LeftMidway:
    """An engine that writes three tokens, then its caller is cancelled."""

    async def generate(self, request: GenerationRequest):
        for token in (11, 12, 13):
            request.on_token(token)
        raise asyncio.CancelledError


def test_a_decode_cancelled_midway_is_charged_what_it_decoded():
    request = GenerationRequest(tuple(range(40)), SamplingParams(max_tokens=100))
    step = SimpleNamespace(guard=lambda engine: None, guarded=lambda guard: request)
    prepared = SimpleNamespace(context=SimpleNamespace(
        caller=SimpleNamespace(identity=Identity("k", None, ("chat",))),
        trace=SimpleNamespace(end=lambda **kw: None)))
    charges = Charges()
    decoder = Decoder(LeftMidway(), rate_limits=charges, metrics=None)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(decoder.run(step, prepared))
    assert charges.charged == [40 + 3]
