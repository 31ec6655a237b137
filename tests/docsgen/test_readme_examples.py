"""Every Python example of the README and the getting-started page, run as a newcomer runs
it against a real server on the embedded model (the session's `live_server`, at the address
the examples name replaced by its own), printing what the comment on its `print` line says
it prints: the first example's grounded `days` comes back 3."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/getting-started.md")
EXAMPLE = re.compile(r"```python\n(.*?)```", re.S)
PRINTS = re.compile(r"^print\(.*\)\s+#\s*(.+)$", re.M)


def _examples() -> list[tuple[str, int, str]]:
    return [(page, i, code) for page in PAGES
            for i, code in enumerate(EXAMPLE.findall((ROOT / page).read_text()))]


def test_each_example_says_what_it_prints():
    assert len(_examples()) >= 4
    for page, i, code in _examples():
        assert len(PRINTS.findall(code)) == 1, f"{page} example {i}: one print, with a comment"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_example_runs_and_prints_what_it_says(live_server, page):
    namespace: dict = {}  # one page's examples run in order, as one session would
    try:
        for _, i, code in [e for e in _examples() if e[0] == page]:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(code.replace("http://127.0.0.1:8000", live_server), namespace)
            assert printed.getvalue().strip() == PRINTS.findall(code)[0].strip(), \
                f"{page} example {i} printed {printed.getvalue()!r}"
    finally:  # the examples' clients, closed: no socket left for the GC to warn about
        for value in namespace.values():
            if type(value).__name__ in ("OpenAI", "Anthropic"):
                value.close()
