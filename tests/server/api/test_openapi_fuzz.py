"""Schemathesis against the server's own OpenAPI document (`GET /openapi.json`), over HTTP,
against a real `strictcall serve` process on the embedded model: every operation, with
bodies that match its schema (positive) and bodies that break it (negative). No answer may
be a 5xx other than a deliberate 503/504 with Retry-After, and every 4xx must be the route's
error shape (tests/server/api/wire_checks.py).

A failure is collected, not raised, so one run counts every distinct failure of every
operation (the counts print with `-s`); the test then fails naming them, each with the
request that found it. Generated token budgets are lowered (wire_checks.bound_tokens) and the
server caps the rest (--max-tokens-cap), so each generation is a few tokens.

    STRICTCALL_FUZZ_EXAMPLES=60 [STRICTCALL_FUZZ_SEED=N] \
        pytest -s -m slow tests/server/api/test_openapi_fuzz.py
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from server.process import ServerProcess
from tests.conftest import FUZZ_SEEDS
from tests.live import MODEL
from tests.server.api.wire_checks import TOKEN_BOUND, bound_tokens, wire_problems

pytestmark = [pytest.mark.slow, pytest.mark.fuzz]

import hypothesis  # noqa: E402 - a test dependency (pyproject [test]): missing, collection fails
import schemathesis  # noqa: E402 - a test dependency (pyproject [test]): missing, collection fails

# Per operation and generation mode; the bodies of the generation routes decode on a CPU.
EXAMPLES = int(os.environ.get("STRICTCALL_FUZZ_EXAMPLES", "25"))
# Random unless set, fixed for the run: each run explores new bodies; pytest's header and
# summary, and this test's report, print it to replay a run.
SEED = FUZZ_SEEDS["STRICTCALL_FUZZ_SEED"]
CONTRACTS = ("open_dispute", "create_support_ticket", "check_access_request_status",
             "search_products", "reissue_card")


@dataclass
class Tally:
    """What the run saw: cases per operation, statuses, and each distinct failure once."""

    cases: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)  # "op: problem" -> request
    reasons: Counter = field(default_factory=Counter)  # (op, status, detail start)

    def report(self) -> str:
        lines = [f"schemathesis (seed {SEED}): {len(self.cases)} operations, "
                 f"{sum(self.cases.values())} cases, {len(self.failures)} distinct failures",
                 "statuses: " + ", ".join(f"{s}={n}" for s, n in sorted(self.statuses.items()))]
        lines += [f"  {op}: {n} cases" for op, n in sorted(self.cases.items())]
        lines += [f"  {n:4d} x {op} {status} {why}" for (op, status, why), n
                  in self.reasons.most_common(40)]
        lines += [f"  FAIL {what}\n    {sent}" for what, sent in self.failures.items()]
        return "\n".join(lines)


@pytest.fixture(scope="module")
def fuzz_server(model_dir):
    """A real server whose generations stay short: the server caps what bodies ask for."""
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--contracts", "contracts.examples",
                       "--max-tokens-cap", str(TOKEN_BOUND), "--reasoning", "0",
                       "--request-timeout-s", "120") as proc:
        yield proc


def _runner(strategy: Any, base_url: str, tally: Tally, *, served: bool) -> Any:
    """One operation variant's hypothesis run, seeded for the whole run."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case: Any) -> None:
        _exercise(case, base_url, tally, served=served)
    return run


def test_no_operation_answers_a_bug(fuzz_server):
    print(f"\nschemathesis seed {SEED} (replay: STRICTCALL_FUZZ_SEED={SEED})")
    schema = schemathesis.openapi.from_url(f"{fuzz_server.base_url}/openapi.json")
    tally = Tally()
    for result in schema.get_all_operations():
        operation = result.ok()
        for variant, strategy in _strategies(operation):
            run = _runner(strategy, fuzz_server.base_url, tally,
                          served=variant != "negative")
            try:
                run()
            except hypothesis.errors.Unsatisfiable:
                # Nothing to break: POST /v1/grammars/compile takes any JSON value.
                assert variant == "negative", operation.label
    print("\n" + tally.report())
    # 11, and the stored responses' three, the sessions' two and the approvals' three
    assert len(tally.cases) == 20, "an operation went missing from the OpenAPI document"
    assert not tally.failures, tally.report()


def _strategies(operation) -> list[tuple[str, object]]:
    """Bodies that match the operation's schema and bodies that break it (none to break
    without parameters or a body); a contract's validate route also with the names of
    registered contracts, since a random name only ever finds the 404."""
    from hypothesis import strategies as st

    positive, negative = schemathesis.GenerationMode.POSITIVE, \
        schemathesis.GenerationMode.NEGATIVE
    out = [("positive", operation.as_strategy(generation_mode=positive))]
    if operation.method.upper() != "GET":
        out.append(("negative", operation.as_strategy(generation_mode=negative)))
    if operation.path_parameters:
        named = st.sampled_from(CONTRACTS).flatmap(
            lambda name: operation.as_strategy(path_parameters={"name": name}))
        out.append(("registered", named))
    return out


def _exercise(case, base_url: str, tally: Tally, *, served: bool) -> None:
    """One call and its checks. `served`: a body meant to be valid names the served model
    (a random name only ever finds the 404)."""
    label = case.operation.label
    if isinstance(case.body, dict):
        case.body = bound_tokens(case.body)
        if served and isinstance(case.body.get("model"), str):
            case.body["model"] = MODEL
    response = case.call(base_url=base_url, timeout=180)
    tally.cases[label] += 1
    tally.statuses[response.status_code] += 1
    tally.reasons[(label, response.status_code, _why(response))] += 1
    for problem in wire_problems(case.operation.path, response.status_code,
                                 _flat(response.headers), response.content):
        key = f"{label}: {problem}"
        if key not in tally.failures:
            tally.failures[key] = _reproduction(case)


def _reproduction(case) -> str:
    """The request as sent (schemathesis's curl command hides values it deems secrets, such
    as any field named like `max_tokens`)."""
    body = case.body if isinstance(case.body, (dict, list, str, int, float, bool)) \
        or case.body is None else "<none>"
    return f"{case.method} {case.formatted_path} {json.dumps(body)[:3000]}"


def _flat(headers: dict[str, list[str]]) -> dict[str, str]:
    """Schemathesis keeps repeated headers as lists; the checks need one value each."""
    return {name: values[0] if isinstance(values, list) else values
            for name, values in headers.items()}


def _why(response) -> str:
    """The start of an error's message (what the run mostly hit), or '' for a success."""
    if response.status_code < 400:
        return ""
    try:
        error = response.json().get("error") or {}
        return str(error.get("message", ""))[:70]
    except (ValueError, AttributeError):
        return response.text[:70]
