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
