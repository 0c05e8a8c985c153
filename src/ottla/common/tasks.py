"""Small asyncio helpers the node's long-running tasks share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def cancel_and_wait(task: asyncio.Future[object] | None) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it ended with (a task being
    stopped has nothing left to report)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``event`` or ``timeout_s``, whichever comes first. Not
    ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives as the
    event is set, and a task cancelled at shutdown then loops on forever."""
    raise_if_cancelled()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
    raise_if_cancelled()


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``awaitable``'s result, or TimeoutError after ``timeout_s``. Not
    ``asyncio.wait_for``: on Python 3.11 a cancellation that arrives as its awaitable
    completes is lost (the result is returned instead), and a task stopped at shutdown
    then runs on; ``asyncio.timeout`` delivers it."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


def raise_if_cancelled() -> None:
    """Raise CancelledError if the current task was asked to stop and something swallowed
    the request (``Task.cancelling``): a loop that waits here cannot outlive a cancel."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
