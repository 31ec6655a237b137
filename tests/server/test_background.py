"""Background tasks are supervised: an exception is logged, the task runs again, and
`failing()` (which /health shows) names it meanwhile."""

from __future__ import annotations

import asyncio

import server.background as background
from server.background import Background


def test_a_failing_task_runs_again_and_is_named_while_it_fails(monkeypatch, caplog):
    monkeypatch.setattr(background, "RESTART_S", 0.01)
    runs: list[int] = []

    async def sweeper() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise OSError("audit log pruning: disk full")
        await asyncio.sleep(10)  # the third run stays up

    async def scenario() -> dict[str, str]:
        tasks = Background()
        tasks.start(sweeper, "strictcall-sweeper")
        for _ in range(200):
            if len(runs) >= 3:
                break
            await asyncio.sleep(0.01)
        failing = tasks.failing()
        await tasks.stop()
        return failing

    failing = asyncio.run(scenario())
    assert len(runs) == 3
    assert failing == {"strictcall-sweeper": "OSError: audit log pruning: disk full"}
    assert "background task strictcall-sweeper failed" in caplog.text


def test_a_task_that_finishes_is_not_run_again():
    runs: list[int] = []

    async def once() -> None:
        runs.append(1)

    async def scenario() -> None:
        tasks = Background()
        tasks.start(once, "once")
        await asyncio.sleep(0.05)
        assert tasks.failing() == {}
        await tasks.stop()

    asyncio.run(scenario())
    assert runs == [1]
