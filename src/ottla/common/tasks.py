"""Small asyncio helpers the node's long-running tasks share."""

from __future__ import annotations

import asyncio
import contextlib


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
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
