"""What an engine's logits are, and what follows from it: numpy arrays on the host (the
llama.cpp engine's, in a process that never imports torch) or torch tensors on the model's
device (the torch engine's; `device` is then a `torch.device`, None for numpy).

The decode loop (engines/loop.py) asks this module, not torch, so it runs either way; the
token choice on each kind is engines/sampling.py's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

# A step's logits: [rows, vocab], or one row [vocab].
Logits = Any


@contextlib.contextmanager
def inference(device: Any) -> Iterator[None]:
    """For the engine's worker thread: torch logits are inference tensors (no autograd),
    masked and steered in place; numpy needs nothing."""
    if device is None:
        yield
        return
    import torch

    with torch.inference_mode():
        yield


def host_bitmask(bitmask: np.ndarray, device: Any) -> np.ndarray:
    """The batch's bitmask, filled on the host: for a CUDA device, a view of pinned memory
    with the same contents, so copying it to the GPU does not wait for the host."""
    if device is None or device.type != "cuda":
        return bitmask
    import torch

    return torch.from_numpy(bitmask).pin_memory().numpy()  # the view keeps its tensor


def as_float(logits: Logits) -> Logits:
    """Logits as 32-bit floats (a GPU model's are bfloat16); numpy's already are."""
    return logits if isinstance(logits, np.ndarray) else logits.float()


def any_finite(logits: Logits) -> bool:
    """Whether any token is left that the masks have not set to -inf."""
    if isinstance(logits, np.ndarray):
        return bool(np.isfinite(logits).any())
    return bool(logits.isfinite().any())
