"""The asyncio helpers every long-running task of a node waits with must never lose a
cancellation: a lost one leaves the task running, and the node hangs on shutdown."""

from __future__ import annotations

import asyncio

import pytest

from ottla.common.tasks import wait_event, within


async def test_within_delivers_a_cancel_that_arrives_as_its_future_completes() -> None:
    """Python 3.11's ``asyncio.wait_for`` returns the result here and drops the cancel
    (the heartbeat loop of a broker stopping as its heartbeat's response came in)."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(within(future, 10))
    await asyncio.sleep(0)  # the task waits on the future
    future.set_result(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_within_times_out_and_returns_in_time() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await within(future, 0.01)
    assert await within(asyncio.sleep(0, result=7), 1) == 7


async def test_a_loop_on_wait_event_ends_even_when_a_cancel_was_swallowed() -> None:
    """A cancel that something inside an iteration swallowed still ends the loop at its
    next wait."""
    event = asyncio.Event()
    iterations = 0

    async def loop() -> None:
        nonlocal iterations
        while True:
            iterations += 1
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass  # swallowed, as a careless library call could
            await wait_event(event, 10)

    task = asyncio.ensure_future(loop())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)
    assert iterations == 1


async def test_wait_event_returns_on_the_event_or_the_timeout() -> None:
    event = asyncio.Event()
    event.set()
    await asyncio.wait_for(wait_event(event, 10), 1)
    await asyncio.wait_for(wait_event(asyncio.Event(), 0.01), 1)
