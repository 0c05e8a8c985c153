"""What a node is doing, on demand: ``kill -USR2 <pid>`` writes every thread's stack and
every asyncio task's stack to its log (stderr). A node that hangs (on shutdown, say) can
then be read before it is killed; the test harness asks for it before its SIGKILL."""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import signal
import sys

log = logging.getLogger(__name__)

DUMP_SIGNAL = signal.SIGUSR2


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Thread stacks from faulthandler (written even while the event loop is blocked) and
    the tasks' stacks from the loop once it runs the handler."""
    loop.add_signal_handler(DUMP_SIGNAL, dump_tasks)
    # Installed after the loop's handler, faulthandler's runs first and then chains to it.
    faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=True)


def dump_tasks() -> None:
    """Log the stack of every task not done, the coroutine each is awaiting in."""
    out = io.StringIO()
    tasks = [t for t in asyncio.all_tasks() if not t.done()]
    out.write(f"{len(tasks)} asyncio tasks:\n")
    for task in tasks:
        out.write(f"--- {task.get_name()}: {task.get_coro()!r}\n")
        task.print_stack(limit=20, file=out)
    log.warning("%s", out.getvalue())
