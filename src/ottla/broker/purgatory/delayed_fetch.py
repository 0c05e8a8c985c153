"""A fetch waiting for data (Kafka's DelayedFetch): sans-I/O, it reads its partitions
again through a callback when the replica manager's fetch purgatory tries it (a
partition's high watermark or log end moved) and answers through another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ottla.broker.purgatory.delayed_operation import DelayedOperation

R = TypeVar("R")


class DelayedFetch(DelayedOperation, Generic[R]):
    """A fetch that found less than ``min_bytes``. ``read`` reads its partitions again and
    returns the result when the fetch may answer (enough bytes, an error, news for a
    session), else None; at the deadline ``read_anyway`` gives what there is."""

    def __init__(self, deadline_ms: int, read: Callable[[], R | None],
                 read_anyway: Callable[[], R], respond: Callable[[R], None]) -> None:
        super().__init__(deadline_ms)
        self._read = read
        self._read_anyway = read_anyway
        self._respond = respond
        self._result: R | None = None

    def try_complete(self, now_ms: int) -> bool:
        result = self._read()
        if result is None:
            return False
        self._result = result
        return self.force_complete()

    def on_complete(self) -> None:
        result = self._result if self._result is not None else self._read_anyway()
        self._respond(result)
