"""A progress bar for the benchmarks: tqdm's where tqdm is installed, else a count."""

from __future__ import annotations

import sys


class Progress:
    """tqdm's bar where tqdm is installed; else a count on one line of stderr."""

    def __init__(self, total: int | None) -> None:  # None: not known ahead (a duration)
        self.total, self.done = total, 0
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
        else:
            self._bar = tqdm(total=total, desc="requests", file=sys.stderr)

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        else:
            print(f"\rrequests {self.done}/{self.total or '?'}", end="", file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            print(file=sys.stderr)
