"""A batch of sequences that decode together: one left-padded KV cache, an attention mask
that hides the padding, and each row's next position id.

Sequences join after their own prefill and leave when finished; decode steps never copy
more than the cache already does."""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache


class KvBatch:
    def __init__(self, config: Any) -> None:  # the model's transformers config
        self._config = config
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros((0, 0), dtype=torch.long)
        self.positions = torch.zeros((0,), dtype=torch.long)

    @property
    def size(self) -> int:
        return int(self.mask.shape[0])

    def _layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        assert self.cache is not None
        return [_kv(layer) for layer in self.cache.layers]

    def add(self, cache: DynamicCache, length: int) -> None:
        """Append one prefilled sequence (batch 1, `length` tokens) as the last row."""
        new = [_kv(layer) for layer in cache.layers]
        device = new[0][0].device
        new_mask = torch.ones((1, length), dtype=torch.long, device=device)
        new_pos = torch.tensor([length], dtype=torch.long, device=device)
        if self.cache is None or self.size == 0:
            self._set(new, new_mask, new_pos)
            return
        old, width = self._layers(), self.mask.shape[1]
        target = max(width, length)
        old = [(_left_pad(k, target), _left_pad(v, target)) for k, v in old]
        new = [(_left_pad(k, target), _left_pad(v, target)) for k, v in new]
        merged = [(torch.cat([ok, nk]), torch.cat([ov, nv]))
                  for (ok, ov), (nk, nv) in zip(old, new, strict=True)]
        mask = torch.cat([_left_pad_mask(self.mask, target), _left_pad_mask(new_mask, target)])
        self._set(merged, mask, torch.cat([self.positions, new_pos]))

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows`, then the padding columns no remaining row needs."""
        if not rows:
            self.cache = None
            self.mask = self.mask[:0, :0]
            self.positions = self.positions[:0]
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        first = int(mask.any(dim=0).nonzero()[0])
        layers = [(k.index_select(0, index)[:, :, first:], v.index_select(0, index)[:, :, first:])
                  for k, v in self._layers()]
        self._set(layers, mask[:, first:], self.positions.index_select(0, index))

    def step_inputs(self, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention mask and position ids for a step that feeds `counts[r]` new tokens to
        row r (more than one after a jump-forward), right-aligned in a step `max(counts)`
        wide: a shorter row's leading columns are padding, masked out here and in every
        later step. Call `advance` after."""
        width = max(counts)
        device = self.mask.device
        n = torch.tensor(counts, dtype=torch.long, device=device).unsqueeze(1)
        cols = torch.arange(width, device=device).unsqueeze(0)
        new_mask = (cols >= width - n).long()
        positions = self.positions.unsqueeze(1) + (cols - (width - n)).clamp(min=0)
        return torch.cat([self.mask, new_mask], dim=1), positions

    def advance(self, mask: torch.Tensor, counts: list[int]) -> None:
        self.mask = mask
        self.positions = self.positions + torch.tensor(counts, dtype=torch.long,
                                                       device=self.positions.device)

    def rewind(self, row: int, n: int) -> None:
        """Forget the last `n` tokens fed to `row` (drafts that did not stand): masked out
        for good, and its next position back where they began."""
        if n <= 0:
            return
        self.mask[row, -n:] = 0
        self.positions[row] -= n

    def _set(self, layers: Any, mask: torch.Tensor, positions: torch.Tensor) -> None:
        self.cache = DynamicCache(ddp_cache_data=layers, config=self._config)
        self.mask, self.positions = mask, positions


def _kv(layer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A full-attention layer's keys and values (the only kind these models have)."""
    keys, values = layer.keys, layer.values
    assert isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor)
    return keys, values


def _left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - t.shape[-2]
    if missing == 0:
        return t
    pad = torch.zeros((*t.shape[:-2], missing, t.shape[-1]), dtype=t.dtype, device=t.device)
    return torch.cat([pad, t], dim=-2)


def _left_pad_mask(mask: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - mask.shape[1]
    if missing == 0:
        return mask
    return torch.cat([torch.zeros((mask.shape[0], missing), dtype=mask.dtype,
                                  device=mask.device), mask], dim=1)
