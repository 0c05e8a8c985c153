"""A ShareFetch that acquired nothing, waiting for records (Kafka's DelayedShareFetch).

It parks in the share-partition manager's purgatory under the share-partitions it
fetches from, and is tried again whenever one of them moves: a high watermark that
moved, records given back (released, a lock that expired, a member that left), or an
acknowledgement that settled records. Acquiring happens in ``try_complete``, on the
spot, so a fetch already waiting takes what an acknowledgement freed before the
acknowledging member's own next fetch does. At its ``max_wait`` it answers with one
last try, empty if that finds nothing.

Sans-I/O: it acquires and answers through callbacks, and is given ``now_ms`` (the
manager's monotonic clock, which its deadline and the locks it takes are on too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ottla.broker.purgatory.delayed_operation import DelayedOperation

R = TypeVar("R")


class DelayedShareFetch(DelayedOperation, Generic[R]):
    def __init__(self, deadline_ms: int, acquire: Callable[[int], R | None],
                 empty: Callable[[], R], respond: Callable[[R], None]) -> None:
        """``acquire(now_ms)`` leases records for the member and returns the answer, or
        None when it found nothing to lease (and leased nothing); ``empty`` is the
        answer with no records (at the deadline after a last try, or at shutdown)."""
        super().__init__(deadline_ms)
        self._acquire = acquire
        self._empty = empty
        self._respond = respond
        self._result: R | None = None

    def try_complete(self, now_ms: int) -> bool:
        result = self._acquire(now_ms)
        if result is None:
            return False
        self._result = result
        return self.force_complete()

    def on_expiration(self) -> None:
        """A last try, its locks counted from the deadline (the purgatory gives no
        clock here; the timer fires at most a loop turn after it)."""
        self._result = self._acquire(self.deadline_ms)

    def on_complete(self) -> None:
        self._respond(self._result if self._result is not None else self._empty())
