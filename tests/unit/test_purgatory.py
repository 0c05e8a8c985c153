"""The purgatory's deadlines run on the clock its driver gives (monotonic in a broker,
as Kafka's purgatory times them): a parked Fetch or Produce waits its max wait, whatever
the wall clock does meanwhile."""

from __future__ import annotations

import pytest

from ottla.broker.purgatory.delayed_operation import (
    DelayedOperation,
    DelayedOperationPurgatory,
)

WALL = 1_700_000_000_000


class Parked(DelayedOperation):
    """A request nothing completes: only its deadline answers it."""

    def __init__(self, deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.answered = False

    def try_complete(self, now_ms: int) -> bool:
        return False

    def on_complete(self) -> None:
        self.answered = True


@pytest.mark.parametrize("step_ms", [600_000, -600_000])
def test_a_parked_request_is_answered_after_its_wait_whatever_the_wall_clock_does(
        step_ms: int) -> None:
    """Parked for 500 ms, then the wall clock steps ten minutes ahead or back: it is not
    answered at once, nor held for ten minutes, but answered after its 500 ms."""
    clock = [5_000]
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory(
        "Fetch", timer_ms=lambda: clock[0])
    operation = Parked(WALL + 500)
    assert not purgatory.try_complete_else_watch(operation, ["topic-0"], WALL)
    assert purgatory.next_deadline() == 5_500
    assert purgatory.expire(WALL + step_ms) == 0 and not operation.answered
    clock[0] = 5_499
    assert purgatory.expire(WALL + step_ms + 499) == 0 and not operation.answered
    clock[0] = 5_500
    assert purgatory.expire(WALL + step_ms + 500) == 1 and operation.answered
    assert purgatory.next_deadline() is None
