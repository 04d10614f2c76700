"""A stream's total deadline, step by step: each step runs in the caller's own task (no task per SSE chunk),
a step that outlasts what is left is cancelled as TimeoutError, and a cancellation from outside stays one."""

from __future__ import annotations

import asyncio

import pytest

from console.sglang.httpbound import Deadline


async def test_steps_run_in_the_callers_task_and_share_one_budget() -> None:
    caller = asyncio.current_task()
    seen: list[asyncio.Task[object] | None] = []

    async def step(s: float) -> str:
        seen.append(asyncio.current_task())
        await asyncio.sleep(s)
        return "ok"

    d = Deadline(0.3)
    assert await d.run(step(0.1)) == "ok"
    assert seen == [caller]  # `wait_for` on Python 3.11 ran it in a task of its own
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await d.run(slow())  # 0.2 s left of the 0.3, not a fresh 0.3
    assert cancelled.is_set()
    with pytest.raises(TimeoutError):
        d.left()
    assert await Deadline(None).run(step(0)) == "ok"


async def test_a_cancel_from_outside_is_not_a_timeout() -> None:
    started = asyncio.Event()

    async def reader() -> None:
        started.set()
        await Deadline(10).run(asyncio.sleep(10))

    t = asyncio.create_task(reader())
    await started.wait()
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
