"""The mutation fuzz tier: valid requests for every route and API (chat completions,
responses and messages, plain and streamed; grammar compile; a contract's validate; invoke,
read and write) with one to three values replaced, dropped or added (tests/server/api/
mutations.py), and malformed JSON Schemas from hypothesis sent to /v1/grammars/compile, all
against a real `strictcall serve --contracts contracts.examples` on the embedded model,
over one kept-alive httpx connection.

The invariants, on every answer: no 5xx other than a 503 with Retry-After; no traceback or
server file path in a body; an error in the route's shape (wire_checks.py); every 400 (and
422 arguments-invalid) names a parameter; the connection is never dropped; `/health` is 200
every 500 cases and after. A failure is collected, not raised, so one run counts every
distinct one (the tally prints with `-s`); the test then fails naming each with a request
that found it. Seeds decode at most 4 tokens and the server caps the rest.

    STRICTCALL_FUZZ_CASES=5000 [STRICTCALL_FUZZ_SEED=N] \\
        pytest -s -m slow tests/server/api/test_mutation_fuzz.py      # or: make fuzz
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest

from server.process import ServerProcess
from tests.live import MODEL
from tests.server.api.mutations import Case, mutate, seeds
from tests.server.api.wire_checks import (
    TOKEN_BOUND,
    leak_problems,
    unnamed_parameter,
    wire_problems,
)

pytestmark = [pytest.mark.slow, pytest.mark.fuzz]

# Mutated requests per run; CI's default keeps the tier near a minute and a half here.
CASES = int(os.environ.get("STRICTCALL_FUZZ_CASES", "480"))
# Hypothesis schemas per run, sent to /v1/grammars/compile.
SCHEMAS = int(os.environ.get("STRICTCALL_FUZZ_SCHEMAS") or max(60, CASES // 8))
# Random unless set: each run explores new cases; the report prints it to replay a run.
SEED = int(os.environ.get("STRICTCALL_FUZZ_SEED") or random.randrange(2**32))
HEALTH_EVERY = 500


@dataclass
class Tally:
    """What a run saw: statuses per seed, and each distinct failure once, with its case."""

    statuses: Counter = field(default_factory=Counter)  # (seed name, status)
    failures: dict[str, str] = field(default_factory=dict)  # "seed: problem" -> request
    reconnections: int = 0
    last_port: int | None = None

    def add(self, name: str, status: int | str, problems: list[str], sent: str) -> None:
        self.statuses[(name, status)] += 1
        for problem in problems:
            self.failures.setdefault(f"{name}: {problem}", sent)

    def report(self, title: str) -> str:
        total = Counter()
        for (_, status), n in self.statuses.items():
            total[status] += n
        lines = [f"{title} (seed {SEED}; STRICTCALL_FUZZ_SEED={SEED} replays it): "
                 f"{sum(total.values())} requests, {len(self.failures)} distinct failures, "
                 f"{self.reconnections} new connections after the first",
                 "statuses: " + ", ".join(f"{s}={n}" for s, n in sorted(total.items(),
                                                                         key=str))]
        names = sorted({name for name, _ in self.statuses})
        lines += [f"  {name}: " + ", ".join(f"{s}={n}" for (m, s), n in sorted(
            self.statuses.items(), key=str) if m == name) for name in names]
        lines += [f"  FAIL {what}\n    {sent}" for what, sent in self.failures.items()]
        return "\n".join(lines)


@pytest.fixture(scope="module")
def fuzz_server(model_dir):
    """A real server whose generations stay short: the server caps what bodies ask for, and
    prompts stay under 1024 tokens (a mutation that puts a 2,000-item list into a schema
    makes a 6,000-token prompt, whose prefill took 101 s on a 2-core CPU: past the engine's
    60 s step watchdog, which fails it as a hung step; over 1024, it is a 400 at once)."""
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--contracts", "contracts.examples", "--max-model-len", "1024",
                       "--max-tokens-cap", str(TOKEN_BOUND), "--reasoning", "0",
                       "--request-timeout-s", "120") as proc:
        yield proc


def test_mutated_requests_answer_no_bug(fuzz_server):
    rng = random.Random(SEED)
    every = seeds(MODEL, max_tokens=4)
    tally = Tally()
    with httpx.Client(base_url=fuzz_server.base_url, timeout=180) as client:
        for seed_request in every:  # each unmutated: a valid request, served
            response = _exercise(client, Case.unmutated(seed_request), tally)
            assert response is not None and response.status_code < 300, \
                (seed_request.name, response and response.text[:500])
        for i in range(CASES):
            case = mutate(every[i % len(every)], rng)
            _exercise(client, case, tally)
            if (i + 1) % HEALTH_EVERY == 0:
                _check_health(client, tally)
        _check_health(client, tally)
    print("\n" + tally.report(f"mutation fuzz, {CASES} mutated requests"))
    assert not tally.failures, tally.report("mutation fuzz")


def test_malformed_schemas_answer_no_bug(fuzz_server):
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from tests.grammars.schema_strategies import malformed_schemas

    tally = Tally()
    with httpx.Client(base_url=fuzz_server.base_url, timeout=180) as client:
        @seed(SEED)
        @settings(max_examples=SCHEMAS, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(schema=malformed_schemas())
        def run(schema) -> None:
            from tests.server.api.mutations import Seed

            compile_seed = Seed("compile.hypothesis", "/v1/grammars/compile", schema)
            _exercise(client, Case(compile_seed, schema, {}, ("hypothesis schema",)), tally)

        run()
        _check_health(client, tally)
    print("\n" + tally.report(f"malformed schemas, {SCHEMAS} examples"))
    assert not tally.failures, tally.report("malformed schemas")


def _exercise(client: httpx.Client, case: Case, tally: Tally) -> httpx.Response | None:
    path, name = case.seed.path, case.seed.name
    headers = {"content-type": "application/json", **case.headers}
    try:
        response = client.post(path, content=case.content(), headers=headers)
    except httpx.TransportError as exc:  # the connection dropped, or the server hung up
        tally.add(name, "no answer", [f"no answer: {type(exc).__name__}"], case.describe())
        return None
    _note_connection(response, tally)
    problems = wire_problems(path, response.status_code, dict(response.headers),
                             response.content)
    problems += leak_problems(response.status_code, response.content)
    problems += unnamed_parameter(response.status_code, response.content)
    tally.add(name, response.status_code, problems, case.describe())
    return response


def _check_health(client: httpx.Client, tally: Tally) -> None:
    try:
        status = client.get("/health").status_code
    except httpx.TransportError as exc:
        status = f"no answer: {type(exc).__name__}"
    tally.add("health", status, [] if status == 200 else [f"/health answered {status}"],
              "GET /health")


def _note_connection(response: httpx.Response, tally: Tally) -> None:
    """Counts new connections: one per answer after which the server hung up."""
    stream = response.extensions.get("network_stream")
    port = stream.get_extra_info("client_addr")[1] if stream is not None else None
    if tally.last_port is not None and port != tally.last_port:
        tally.reconnections += 1
    tally.last_port = port
