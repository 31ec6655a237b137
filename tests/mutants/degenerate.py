"""Two degenerate servers, for proving that the end-to-end tests can fail.

A test that passes on a server that asks the user for every value, or that refuses every
answer, proves nothing about the calls it means to check. `STRICTCALL_TEST_MUTANT`, read
when Python starts (this folder's `sitecustomize.py`, on `PYTHONPATH`), turns the server of
that process and of every server process it starts into one of them:

- `ask`: every decoded tool call becomes a question asking for each of its tool's fields,
  in the request's language: a server that never calls anything and never invents;
- `refuse`: every finished decode answers 422 (output-invalid): a server that never
  returns an answer it could get wrong.

Only the checks after the decode change: prompts, grammars and decoding are the real
server's. `tests/mutants/check.py` runs the named tests under each and reports which
fail."""

from __future__ import annotations

import os
import sys
from typing import Any

MUTANTS = ("ask", "refuse")
VARIABLE = "STRICTCALL_TEST_MUTANT"


def install() -> str | None:
    """Patch the server's post-decode checks as `STRICTCALL_TEST_MUTANT` says (None: unset)."""
    mutant = os.environ.get(VARIABLE, "").strip()
    if not mutant:
        return None
    if mutant not in MUTANTS:
        raise SystemExit(f"{VARIABLE}={mutant!r}: one of {', '.join(MUTANTS)}")
    try:
        from server.pipeline.checking import calls, checks
    except ImportError:  # a Python without the server (the vLLM upstream's own): nothing
        return None
    if mutant == "ask":
        calls.CallChecks.check = _asks_everything  # type: ignore[method-assign]
    else:
        checks.Finisher.finish = _refuses_everything  # type: ignore[method-assign]
    print(f"strictcall test mutant: {mutant} (pid {os.getpid()})", file=sys.stderr)
    return mutant


async def _asks_everything(self: Any, plan: Any, context: Any, calls_text: str,
                           audit: Any, *, ids: Any) -> Any:
    from server.dialogue import NeedsInput, Wording
    from server.pipeline.checking.calls import Asking
    from server.pipeline.validation import parse_json

    name = parse_json(calls_text)[0]["name"]
    wording = context.dialogue.wording(name) if context.dialogue is not None else Wording()
    fields = list((plan.schemas.get(name) or {}).get("properties") or {}) or ["arguments"]
    return Asking(NeedsInput(name, tuple(wording.missing((f,)) for f in fields), {},
                             wording.language))


async def _refuses_everything(self: Any, prepared: Any, step: Any, result: Any, trip: Any,
                              **_: Any) -> Any:
    from server.errors import OutputInvalid

    prepared.context.trace.end(error="output-invalid")
    raise OutputInvalid("refused by the `refuse` test mutant (tests/mutants/degenerate.py)")
