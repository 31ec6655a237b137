"""Faults of the shared state, injected against real servers: two StrictCall replicas
(real processes, the embedded model) on one real Postgres and one real Redis. Each test
asserts nothing ran twice, nothing was lost and the replicas kept answering, and prints
its numbers (tests/faults.py Tally: run with -s to see them).

- `resolve` on a running key: refused (409) while the run renews its lease; the write
  runs once and its real outcome is kept. A replica paused mid-write (its lease lapses):
  the key is settled, resolved and run again on purpose; the paused run's late finish is
  refused and audited, the newer outcome kept.
- Postgres paused (SIGSTOP) and restarted (pg_ctl restart) during a write loop, plain
  chat beside it.
- Redis restarted under load.
- A write against a closed port that then opens: not stored, runs once when it opens.
- A container recreated without its volume: the replicas' state is Postgres's; a
  replica on an embedded store of its own refuses to start."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.process import ServerProcess
from tests.faults import Partner, Tally, runs, starts, until
from tests.real_servers import free_port

pytestmark = [pytest.mark.replicas, pytest.mark.slow]
ADMIN, LIMITED = "sk-admin-0123456789abcdef", "sk-limited-0123456789abcd"
KEYS = f"""
keys:
  - {{key: {ADMIN}, name: ops, tenant: acme, roles: [admin], requests_per_minute: 0}}
  - {{key: {LIMITED}, name: agent, tenant: acme, roles: [chat], requests_per_minute: 600}}
"""
LEASE_S = 3.0
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def shared(postgres, redis_server, tmp_path_factory) -> Iterator[dict]:
    files = tmp_path_factory.mktemp("faults")
    (files / "keys.yaml").write_text(KEYS)
    env = {"STRICTCALL_TEST_RUNS": str(files / "runs.log"),
           "STRICTCALL_TEST_PARTNER_PORT": str(free_port()),
           "STRICTCALL_STATE_SECRET": "the replicas' own shared secret"}
    os.environ.update(env)  # the replicas inherit them
    yield {"files": files, "runs": files / "runs.log", "db": postgres.database(),
           "port": int(env["STRICTCALL_TEST_PARTNER_PORT"]),
           "args": ("--rate-limit-url", redis_server.url, "--api-keys",
                    str(files / "keys.yaml"), "--contracts",
                    "tests.server.state.replica_contracts", "--replicas", "2",
                    "--execution-lease-s", str(LEASE_S), "--state-timeout-s", "2",
                    "--max-tokens-cap", "64")}
    for name in env:
        os.environ.pop(name, None)


def replica(shared: dict, name: str) -> ServerProcess:
    return ServerProcess("--state-url", shared["db"], *shared["args"], "--audit-log",
                         str(shared["files"] / f"audit-{name}.jsonl"))


@pytest.fixture(scope="module")
def replicas(shared) -> Iterator[list[ServerProcess]]:
    with replica(shared, "one") as one, replica(shared, "two") as two:
        yield [one, two]


def invoke(base: str, tool: str, arguments: dict, key: str, *, timeout: float = 60,
           headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{base}/v1/tools/{tool}/invoke", headers=headers or AUTH,
                      timeout=timeout, json={"arguments": arguments, "idempotency_key": key})


def chat(base: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", headers=AUTH, timeout=60, json={
        "model": "smollm2-135m-instruct", "max_tokens": 8,
        "messages": [{"role": "user", "content": "Hi!"}]})


def resolve(base: str, tool: str, key: str, outcome: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/tools/{tool}/executions/{key}/resolve", headers=AUTH,
                      timeout=30, json={"outcome": outcome, "note": "checked the ledger"})


def test_resolve_on_a_running_key_is_refused_and_the_write_runs_once(replicas, shared):
    tally, key = Tally("resolve on a running key"), f"idem_{uuid.uuid4().hex}"
    first = invoke(replicas[0].base_url, "post_ledger_entry", {"hold_s": 5}, key)
    tally.saw(first.status_code)  # past its 1 s limit; its thread runs on
    assert first.json()["outcome"] == "side_effect_unknown"
    assert "still running" in first.json()["problem"]["detail"]
    def ended() -> bool:  # the run's thread wrote its end line (its outcome follows)
        return bool(starts(shared["runs"], key)) and len(runs(shared["runs"], key)) >= 2
    while not ended():
        refused = resolve(replicas[1].base_url, "post_ledger_entry", key, "failed")
        tally.saw(refused.status_code)
        if refused.json().get("error", {}).get("code") == "nothing_to_resolve":
            # the run ended between the check and the call, and its outcome is kept (its end
            # line comes first): nothing runs to refuse, and nothing is left to settle
            assert ended(), refused.text
            break
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "execution_running"
        assert int(refused.headers["Retry-After"]) >= 1
        busy = invoke(replicas[1].base_url, "post_ledger_entry", {"hold_s": 5}, key)
        tally.saw(busy.status_code)
        if busy.status_code != 409 and ended():
            assert busy.json()["outcome"] == "succeeded", busy.text  # its kept outcome
            break
        assert busy.status_code == 409 and busy.json()["retryable"], busy.text
        time.sleep(0.5)
    def kept() -> bool:  # the thread's own outcome, stored when it ended
        answer = invoke(replicas[1].base_url, "post_ledger_entry", {"hold_s": 5}, key)
        tally.saw(answer.status_code)
        return answer.json().get("outcome") == "succeeded"
    assert until(kept, timeout_s=20)
    final = invoke(replicas[0].base_url, "post_ledger_entry", {"hold_s": 5}, key)
    tally.saw(final.status_code)
    assert final.json()["replayed"] and final.json()["result"]["entry"] == f"LE-{key}"
    tally.ran = starts(shared["runs"], key)
    tally.lost = 0 if final.json()["outcome"] == "succeeded" else 1
    tally.report()
    assert tally.ran == 1 and tally.lost == 0 and tally.answered == tally.sent
    assert resolve(replicas[1].base_url, "post_ledger_entry", key,
                   "failed").json()["error"]["code"] == "nothing_to_resolve"


def test_a_paused_replicas_late_finish_is_refused_after_its_key_was_resolved(
        replicas, shared):
    """The lease is what `resolve` trusts: a replica paused mid-write (SIGSTOP) stops
    renewing it; once it lapses the key is settled, an operator resolves it `failed` and
    it runs again on purpose. The paused run's finish, when it wakes, names a token that is
    no longer the key's: refused and audited, the newer outcome kept."""
    tally, key = Tally("late finish of a superseded run"), f"idem_{uuid.uuid4().hex}"
    with replica(shared, "paused") as paused:
        async def start_then_pause() -> httpx.Response:
            async with httpx.AsyncClient(timeout=60) as client:
                call = asyncio.ensure_future(client.post(
                    f"{paused.base_url}/v1/tools/transfer_funds/invoke", headers=AUTH,
                    json={"arguments": {"amount": 5, "hold_s": 2.5}, "idempotency_key": key}))
                assert await asyncio.to_thread(until, lambda: starts(shared["runs"], key),
                                               timeout_s=30)
                paused.send_signal(signal.SIGSTOP)
                await asyncio.sleep(LEASE_S + 1.5)  # its lease lapses
                settled = invoke(replicas[1].base_url, "transfer_funds",
                                 {"amount": 5, "hold_s": 2.5}, key)
                tally.saw(settled.status_code)
                assert settled.json()["outcome"] == "side_effect_unknown"
                done = resolve(replicas[1].base_url, "transfer_funds", key, "failed")
                tally.saw(done.status_code)
                assert done.status_code == 200, done.text
                again = invoke(replicas[1].base_url, "transfer_funds",
                               {"amount": 5, "hold_s": 2.5}, key)
                tally.saw(again.status_code)
                assert again.json()["outcome"] == "succeeded" and not again.json()["replayed"]
                paused.send_signal(signal.SIGCONT)
                return await call
        first = asyncio.run(start_then_pause())
        tally.saw(first.status_code)
        audit = shared["files"] / "audit-paused.jsonl"
        assert until(lambda: "late_finish_refused" in audit.read_text(), timeout_s=30)
    (refused,) = [json.loads(line) for line in audit.read_text().splitlines()
                  if "late_finish_refused" in line]
    # Its own outcome, whichever came first when it woke: the handler's end or its limit.
    assert refused["idempotency_key"] == key
    assert refused["outcome"] in ("succeeded", "side_effect_unknown")
    final = invoke(replicas[0].base_url, "transfer_funds", {"amount": 5, "hold_s": 2.5}, key)
    tally.saw(final.status_code)
    assert final.json()["result"]["pid"] == replicas[1].pid  # the second run's, kept
    tally.ran = starts(shared["runs"], key)
    tally.report()
    assert tally.ran == 2 and tally.answered == tally.sent  # the second by the resolution


def test_postgres_paused_and_restarted_during_a_write_loop(replicas, shared, postgres):
    tally, chats = Tally("postgres paused and restarted"), Tally("chat while paused")
    keys = [f"idem_{uuid.uuid4().hex}" for _ in range(24)]
    results: dict[str, dict] = {}

    async def write(i: int, key: str, client: httpx.AsyncClient) -> None:
        await asyncio.sleep(i * 0.3)  # a loop that spans the pause and the restart
        base = replicas[i % 2].base_url
        while key not in results:
            try:
                answer = await client.post(f"{base}/v1/tools/transfer_funds/invoke",
                                           headers=AUTH, json={"arguments": {
                                               "amount": 7, "hold_s": 0.2},
                                               "idempotency_key": key})
            except httpx.HTTPError:
                tally.saw(None)
                continue
            tally.saw(answer.status_code)
            if answer.status_code == 200:
                results[key] = answer.json()
            else:
                assert answer.status_code in (409, 503), answer.text
                assert answer.json()["retryable"] and answer.headers["Retry-After"]
                await asyncio.sleep(0.5)

    async def faults() -> None:
        await asyncio.sleep(2)
        postgres.pause()
        resume_at = time.monotonic() + 6
        try:
            for _ in range(3):  # plain chat needs no state: it answers
                answer = await asyncio.to_thread(chat, replicas[0].base_url)
                chats.saw(answer.status_code)
                assert answer.status_code == 200, answer.text
            await asyncio.sleep(max(0.0, resume_at - time.monotonic()))
        finally:
            postgres.resume()
        await asyncio.sleep(3)
        await asyncio.to_thread(postgres.restart)

    async def loop() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            await asyncio.wait_for(asyncio.gather(
                faults(), *(write(i, k, client) for i, k in enumerate(keys))), 240)
    asyncio.run(loop())
    assert all(results[k]["outcome"] == "succeeded" for k in keys)
    tally.ran = sum(starts(shared["runs"], k) for k in keys)
    replays = [invoke(replicas[(i + 1) % 2].base_url, "transfer_funds",
                      {"amount": 7, "hold_s": 0.2}, k) for i, k in enumerate(keys)]
    for answer in replays:
        tally.saw(answer.status_code)
    tally.lost = sum(not (r.json().get("replayed") and r.json()["result"] ==
                          results[k]["result"]) for r, k in zip(replays, keys, strict=True))
    tally.report()
    chats.report()
    assert [starts(shared["runs"], k) for k in keys] == [1] * len(keys)  # none twice
    assert tally.lost == 0 and tally.answered == tally.sent
    assert chats.statuses[200] == chats.sent == 3
    assert tally.statuses[503] > 0  # the pause was seen: answered 503, never a hang


def test_redis_restarted_under_load(replicas, redis_server):
    tally = Tally("redis restarted under load")
    slowest = 0.0

    async def load(client: httpx.AsyncClient, stop_at: float) -> None:
        nonlocal slowest
        i = 0
        while time.monotonic() < stop_at:
            started = time.monotonic()
            answer = await client.get(f"{replicas[i % 2].base_url}/v1/models",
                                      headers={"Authorization": f"Bearer {LIMITED}"})
            slowest = max(slowest, time.monotonic() - started)
            tally.saw(answer.status_code)
            assert answer.status_code in (200, 429, 503), answer.text
            if answer.status_code != 200:
                assert int(answer.headers["Retry-After"]) >= 1
            i += 1
            await asyncio.sleep(0.05)

    async def run() -> list[int]:
        stop_at = time.monotonic() + 12
        async with httpx.AsyncClient(timeout=30) as client:
            workers = [asyncio.ensure_future(load(client, stop_at)) for _ in range(4)]
            await asyncio.sleep(4)
            await asyncio.to_thread(redis_server.restart, 1.0)
            await asyncio.gather(*workers)
            await asyncio.sleep(1.0)  # the key's bucket refills a request
            return [(await client.get(f"{r.base_url}/v1/models", headers={
                "Authorization": f"Bearer {LIMITED}"})).status_code for r in replicas]
    after = asyncio.run(run())
    tally.report()
    print(f"slowest answer {slowest:.2f} s")
    assert tally.answered == tally.sent and tally.statuses[200] > 0
    assert after == [200, 200] and slowest < 10  # both recovered; nothing hung


def test_a_write_against_a_closed_port_runs_once_it_opens(replicas, shared):
    tally, key = Tally("write against a closed port that opens"), f"idem_{uuid.uuid4().hex}"
    for replica_ in replicas:  # closed: nothing sent, nothing stored, either replica
        answer = invoke(replica_.base_url, "notify_partner", {"order_id": "ORD-123"}, key)
        tally.saw(answer.status_code)
        body = answer.json()
        assert body["outcome"] == "failed" and body["problem"]["retryable"]
        assert not body["replayed"]
    with Partner(shared["port"]) as partner:
        ran = invoke(replicas[1].base_url, "notify_partner", {"order_id": "ORD-123"}, key)
        again = invoke(replicas[0].base_url, "notify_partner", {"order_id": "ORD-123"}, key)
    for answer in (ran, again):
        tally.saw(answer.status_code)
    assert ran.json()["outcome"] == "succeeded" and not ran.json()["replayed"]
    assert again.json()["replayed"] and again.json()["result"] == ran.json()["result"]
    tally.ran = len(partner.received)
    tally.lost = 0 if again.json()["result"] == {"notified": 1} else 1
    tally.report()
    assert tally.ran == 1 and tally.lost == 0 and tally.answered == tally.sent


def test_a_container_recreated_without_its_volume_runs_nothing_twice(shared, tmp_path,
                                                                      monkeypatch):
    """No Docker engine here: a container is a process and its writable layer a cache
    directory deleted with it. The replicas' state is Postgres's, so a replica recreated
    without its disk replays; one told it is one of several replicas refuses to start on
    an embedded SQLite store of its own."""
    tally, key = Tally("container recreated without a volume"), f"idem_{uuid.uuid4().hex}"
    layer = tmp_path / "layer-1"
    with ServerProcess("--state-url", shared["db"], *shared["args"], "--cache-dir",
                       str(layer)) as first:
        ran = invoke(first.base_url, "transfer_funds", {"amount": 9, "hold_s": 0}, key)
    tally.saw(ran.status_code)
    _remove(layer)  # the container and its writable layer are gone
    with ServerProcess("--state-url", shared["db"], *shared["args"], "--cache-dir",
                       str(tmp_path / "layer-2")) as second:
        again = invoke(second.base_url, "transfer_funds", {"amount": 9, "hold_s": 0}, key)
    tally.saw(again.status_code)
    assert again.json()["replayed"] and again.json()["result"] == ran.json()["result"]
    monkeypatch.delenv("STRICTCALL_TOOLS_DB", raising=False)  # tests/conftest.py's
    alone = ServerProcess(*shared["args"], "--cache-dir", str(tmp_path / "layer-3"),
                          startup_s=30)  # refused before any model is loaded
    with pytest.raises(RuntimeError, match="replicas must share one state store"), alone:
        pass
    tally.ran = starts(shared["runs"], key)
    tally.lost = 0 if again.json()["result"] == ran.json()["result"] else 1
    tally.report()
    assert tally.ran == 1 and tally.lost == 0 and tally.answered == tally.sent


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


def test_a_pod_replaced_mid_write_has_its_journal_replayed_by_the_next(shared, postgres,
                                                                       tmp_path):
    """The database pauses while a write runs: its outcome goes to the replica's journal
    (named by --replica-name, on its own volume). The pod is then killed (replaced), and
    its journal's last line torn. The pod that replaces it, with the same name and volume,
    cuts the torn line and applies the outcome: the key replays it, and it ran once."""
    tally, key = Tally("pod replaced mid-write"), f"idem_{uuid.uuid4().hex}"
    volume = tmp_path / "volume"
    pod = ("--state-url", shared["db"], *shared["args"], "--replica-name", "strictcall-0",
           "--cache-dir", str(volume), "--state-timeout-s", "1")
    with ServerProcess(*pod) as first:
        async def write_while_paused() -> httpx.Response:
            async with httpx.AsyncClient(timeout=90) as client:
                answer = asyncio.ensure_future(client.post(
                    f"{first.base_url}/v1/tools/transfer_funds/invoke", headers=AUTH,
                    json={"arguments": {"amount": 9, "hold_s": 2.0},
                          "idempotency_key": key}))
                await asyncio.sleep(1.0)  # claimed, and running
                postgres.pause()
                return await answer
        try:
            answered = asyncio.run(write_while_paused())
            tally.saw(answered.status_code)
            assert answered.status_code == 200 and answered.json()["outcome"] == "succeeded"
            journal = volume / "outcomes-strictcall-0.journal"
            assert journal.read_text().count('"op":"finish"') == 1  # journaled, not lost
            first.send_signal(signal.SIGKILL)  # the pod is replaced
            first.wait(10)
            with journal.open("a") as f:
                f.write('{"id":"torn","op":"fin')  # its last write, cut
        finally:
            postgres.resume()
    with ServerProcess(*pod) as second:
        assert "torn" not in journal.read_text()  # cut (then the file emptied, applied)
        def replayed() -> bool:
            answer = invoke(second.base_url, "transfer_funds", {"amount": 9, "hold_s": 2.0},
                            key)
            tally.saw(answer.status_code)
            return answer.status_code == 200 and answer.json().get("replayed") is True \
                and answer.json()["outcome"] == "succeeded"
        assert until(replayed, timeout_s=30)
    tally.ran = starts(shared["runs"], key)
    tally.report()
    assert tally.ran == 1
