"""Two StrictCall replicas (real server processes) on one Postgres and one Redis, as behind
a load balancer: a write with one idempotency key runs once across both, a key's rate
limit holds across both, a replica killed mid-write leaves a key the other never runs
again, and a conversation begun on one replica goes on on the other: its stored responses
and its session's slots live in the same Postgres."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.errors import problem_type
from server.process import ServerProcess

pytestmark = [pytest.mark.replicas, pytest.mark.slow]
ADMIN, LIMITED = "sk-admin-0123456789abcdef", "sk-limited-0123456789abcd"
KEYS = f"""
keys:
  - {{key: {ADMIN}, name: ops, tenant: acme, roles: [admin], requests_per_minute: 0}}
  - {{key: {LIMITED}, name: agent, tenant: acme, roles: [chat], requests_per_minute: 10}}
"""


@pytest.fixture(scope="module")
def shared(postgres, redis_server, tmp_path_factory) -> dict[str, object]:
    files = tmp_path_factory.mktemp("replicas")
    (files / "keys.yaml").write_text(KEYS)
    return {"args": ("--state-url", postgres.database(), "--rate-limit-url", redis_server.url,
                     "--api-keys", str(files / "keys.yaml"), "--contracts",
                     "tests.server.state.replica_contracts", "--contracts",
                     "contracts.examples", "--execution-lease-s", "5"),
            "runs": files / "runs.log"}


@pytest.fixture(scope="module")
def replicas(shared) -> Iterator[list[ServerProcess]]:
    os.environ["STRICTCALL_TEST_RUNS"] = str(shared["runs"])  # the children inherit it
    # Redact() values of stored sessions are sealed: both replicas open them with it.
    os.environ["STRICTCALL_STATE_SECRET"] = "a secret both replicas share"
    try:
        with ServerProcess(*shared["args"]) as one, ServerProcess(*shared["args"]) as two:
            yield [one, two]
    finally:
        os.environ.pop("STRICTCALL_TEST_RUNS", None)
        os.environ.pop("STRICTCALL_STATE_SECRET", None)


def runs(shared, key: str) -> list[str]:
    path: Path = shared["runs"]
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if f" {key} " in line]


async def invoke(client: httpx.AsyncClient, base: str, key: str, hold_s: float) -> httpx.Response:
    return await client.post(f"{base}/v1/tools/transfer_funds/invoke",
                             headers={"Authorization": f"Bearer {ADMIN}"},
                             json={"arguments": {"amount": 10, "hold_s": hold_s},
                                   "idempotency_key": key})


def test_forty_invokes_of_one_key_over_both_replicas_run_the_write_once(replicas, shared):
    key = f"idem_{uuid.uuid4().hex}"

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            return list(await asyncio.gather(*(
                invoke(client, replicas[i % 2].base_url, key, 1.0) for i in range(40))))

    answers = asyncio.run(burst())
    assert len(runs(shared, key)) == 2  # one start, one done: one run in all
    ran = [a for a in answers if a.status_code == 200 and not a.json()["replayed"]]
    replayed = [a for a in answers if a.status_code == 200 and a.json()["replayed"]]
    busy = [a for a in answers if a.status_code == 409]
    assert len(ran) == 1 and len(ran) + len(replayed) + len(busy) == 40
    assert all(a.json()["retryable"] and a.headers["Retry-After"] for a in busy)
    assert all(a.json()["result"] == ran[0].json()["result"] for a in replayed)
    again = asyncio.run(_once(replicas[1].base_url, key))  # after it: a replay on either
    assert again.status_code == 200 and again.json()["replayed"]
    assert again.json()["result"] == ran[0].json()["result"]


async def _once(base: str, key: str, hold_s: float = 1.0) -> httpx.Response:
    async with httpx.AsyncClient(timeout=60) as client:
        return await invoke(client, base, key, hold_s)


def test_a_key_allowed_ten_a_minute_gets_ten_over_both_replicas(replicas):
    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            return list(await asyncio.gather(*(
                client.get(f"{replicas[i % 2].base_url}/v1/models",
                           headers={"Authorization": f"Bearer {LIMITED}"})
                for i in range(30))))

    started = time.monotonic()
    answers = asyncio.run(burst())
    elapsed = time.monotonic() - started
    admitted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    # A full bucket is the minute's 10; it refills one request every 6 s.
    assert 10 <= len(admitted) <= 10 + int(elapsed / 6)
    assert len(admitted) + len(refused) == 30
    assert all(int(a.headers["Retry-After"]) >= 1 for a in refused)
    assert {a.json()["error"]["code"] for a in refused} == {"rate_limit_exceeded"}


def test_a_replica_killed_mid_write_leaves_a_key_the_other_never_runs_again(replicas, shared):
    key = f"idem_{uuid.uuid4().hex}"
    other = replicas[1].base_url
    with ServerProcess(*shared["args"]) as doomed:
        async def start_then_kill() -> None:
            async with httpx.AsyncClient(timeout=60) as client:
                call = asyncio.ensure_future(invoke(client, doomed.base_url, key, 2.5))
                deadline = time.monotonic() + 30
                while not runs(shared, key) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                assert runs(shared, key), "the write never started"
                doomed.send_signal(signal.SIGKILL)
                with pytest.raises(httpx.HTTPError):
                    await call
        asyncio.run(start_then_kill())
        doomed.wait(timeout=10)
    first = asyncio.run(_once(other, key, 2.5))  # the same call, retried on the other
    assert first.status_code == 409 and first.json()["retryable"]  # it may still be running
    assert first.json()["type"] == problem_type("in-progress")
    deadline = time.monotonic() + 30
    answer = first
    while answer.status_code == 409 and time.monotonic() < deadline:
        time.sleep(0.5)
        answer = asyncio.run(_once(other, key, 2.5))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["outcome"] == "side_effect_unknown" and body["replayed"]
    assert "resolve" in body["problem"]["detail"]
    assert [line.split()[0] for line in runs(shared, key)] == ["start"]  # never run again
    again = asyncio.run(_once(replicas[0].base_url, key, 2.5))
    assert again.json()["outcome"] == "side_effect_unknown"
    assert len(runs(shared, key)) == 1


DISPUTE = "yesterday my card •• 4417 was charged 1 200,50 twice"
UNDATED = "my card •• 4417 was charged 1 200,50 twice"
DISPUTE_TOOLS = [{"type": "function", "name": "open_dispute", "parameters": None}]


def _client(replica: ServerProcess):
    from openai import OpenAI

    return OpenAI(base_url=f"{replica.base_url}/v1", api_key=ADMIN, max_retries=0, timeout=300)


def test_a_conversation_begun_on_one_replica_goes_on_on_the_other(replicas):
    """Turn 1 on one replica, turn 2 on the other by previous_response_id: the stored
    response is there, its items are turn 2's earlier turns, and the slots turn 1 filled
    are turn 2's (pinned: whatever the model writes, they cannot change unseen)."""
    ask = {"model": "smollm2-135m-instruct", "tools": DISPUTE_TOOLS, "max_output_tokens": 200,
           "tool_choice": {"type": "function", "name": "open_dispute"},
           "extra_body": {"strictcall": {"tool_prompt": "full"}}}
    with _client(replicas[0]) as one, _client(replicas[1]) as two:
        first = one.responses.create(input=DISPUTE, **ask)
        filled = first.model_extra["strictcall"]["slots"]["filled"]
        assert filled.get("card_last4") == "4417"
        assert two.responses.retrieve(first.id).id == first.id
        second = two.responses.create(input="yes, both at the coffee shop",
                                      previous_response_id=first.id, **ask)
        slots = second.model_extra["strictcall"]["slots"]
        assert slots["session"] == first.model_extra["strictcall"]["slots"]["session"]
        assert {k: slots["filled"].get(k) for k in filled} == filled
        items = one.responses.input_items.list(second.id, order="asc")
        # Turn 1, stored by the other, its card digits (a Redact() field) not kept.
        assert items.data[0].content[0].text == DISPUTE.replace("4417", "[redacted]")
        assert one.responses.delete(second.id) is None
        with pytest.raises(Exception, match="not found"):
            two.responses.retrieve(second.id)


def test_a_chat_session_goes_on_on_the_other_replica(replicas):
    """A Chat Completions session (`strictcall.session`): turn 1 on one replica fills the
    slots and asks for the date it lacks, turn 2 on the other finds them, and restating the
    card is no change. (A turn that completes its call ends the intent and its slots.)"""
    session = f"replicas-{uuid.uuid4().hex}"
    body = {"model": "smollm2-135m-instruct", "max_tokens": 200,
            "tools": [{"type": "function", "function": {"name": "open_dispute"}}],
            "tool_choice": {"type": "function", "function": {"name": "open_dispute"}},
            "strictcall": {"session": session, "tool_prompt": "full"}}
    headers = {"Authorization": f"Bearer {ADMIN}"}
    first = httpx.post(f"{replicas[0].base_url}/v1/chat/completions", headers=headers,
                       timeout=300, json={**body, "messages": [
                           {"role": "user", "content": UNDATED}]}).json()
    missing = first["strictcall"]["needs_input"]["missing"]
    assert "/operation_date" in [m["field"] for m in missing]
    filled = first["strictcall"]["slots"]["filled"]
    assert filled.get("amount") == "1200.50" and filled.get("card_last4") == "4417"
    second = httpx.post(f"{replicas[1].base_url}/v1/chat/completions", headers=headers,
                        timeout=300, json={**body, "messages": [
                            {"role": "user", "content": "card 4417, I said"}]}).json()
    slots = second["strictcall"]["slots"]
    assert slots["session"] == session and slots["tool"] == "open_dispute"
    assert {k: slots["filled"].get(k) for k in filled} == filled
    assert slots["changed"] == [] and slots["confirm"] == []
