"""The coordinator runtime's loading (Kafka's CoordinatorLoader): a partition replayed a
slice at a time answers COORDINATOR_LOAD_IN_PROGRESS until its last record is in, and a
load overtaken by an unload or a new load stops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ottla.coordinator.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    CoordinatorState,
    ShardContext,
)
from ottla.protocol.errors import ErrorCode, KafkaError

TP = ("__consumer_offsets", 3)


class Log:
    """A partition whose every write is committed at once."""

    def __init__(self, records: list[Any]) -> None:
        self.records = list(records)

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        self.records += records
        return len(self.records)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.records)

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        yield from enumerate(self.records)


class Counter:
    """A shard that sums what it replays."""

    def __init__(self, ctx: ShardContext) -> None:
        self.total = 0
        self.loaded_at: int | None = None

    def replay(self, offset: int, record: Any) -> None:
        self.total += record

    def on_written(self, end_offset: int) -> None: ...

    def on_committed(self, high_watermark: int) -> None: ...

    def on_loaded(self, now_ms: int) -> None:
        self.loaded_at = now_ms

    def on_unloaded(self) -> None: ...


def runtime(records: list[int]) -> CoordinatorRuntime[Counter]:
    return CoordinatorRuntime(Log(records), Counter)


def test_a_partition_loads_in_slices_and_answers_load_in_progress_meanwhile() -> None:
    rt = runtime([1] * 10)
    job = rt.begin_load(TP, 100)
    assert not job.step(4, 101)
    with pytest.raises(KafkaError) as e:
        rt.read(TP, lambda shard: shard.total)
    assert e.value.code == ErrorCode.coordinator_load_in_progress
    replies: list[Any] = []
    with pytest.raises(KafkaError) as e:
        rt.write(TP, lambda shard, now: CoordinatorResult([1], "ok"), replies.append, 102)
    assert e.value.code == ErrorCode.coordinator_load_in_progress
    assert not job.step(4, 103)
    assert job.step(4, 104)  # the last two records
    assert rt.read(TP, lambda shard: (shard.total, shard.loaded_at)) == (10, 104)
    rt.write(TP, lambda shard, now: CoordinatorResult([5], "ok"), replies.append, 105)
    assert replies == ["ok"] and rt.read(TP, lambda shard: shard.total) == 15


def test_a_load_overtaken_by_an_unload_or_a_new_load_stops() -> None:
    rt = runtime([1] * 10)
    first = rt.begin_load(TP, 0)
    assert not first.step(3, 0)
    rt.unload(TP)
    assert first.step(3, 0)  # over: nothing more replayed
    with pytest.raises(KafkaError) as e:
        rt.read(TP, lambda shard: shard.total)
    assert e.value.code == ErrorCode.not_coordinator
    second = rt.begin_load(TP, 0)
    third = rt.begin_load(TP, 0)
    assert second.step(100, 0) and second.context.state is not CoordinatorState.ACTIVE
    assert third.step(100, 0)
    assert rt.read(TP, lambda shard: shard.total) == 10


def test_a_failing_replay_leaves_the_partition_failed() -> None:
    rt = runtime([1, "not a number", 1])
    assert rt.begin_load(TP, 0).step(100, 0)
    with pytest.raises(KafkaError) as e:
        rt.read(TP, lambda shard: shard.total)
    assert e.value.code == ErrorCode.coordinator_not_available


class Replicated(Log):
    """A partition whose high watermark moves only when followers catch up."""

    def __init__(self, records: list[Any]) -> None:
        super().__init__(records)
        self.hw = len(records)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return self.hw


def test_a_committed_read_is_answered_once_what_it_saw_is_replicated() -> None:
    """A description that shows an uncommitted write waits for the high watermark, so a
    client is never told of state a failover would take back; a failover before that
    answers NOT_COORDINATOR."""
    log = Replicated([1, 1])
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime(log, Counter)
    rt.load(TP, 0)
    answers: list[Any] = []
    rt.read_committed(TP, lambda shard: shard.total, answers.append)
    assert answers == [2]  # nothing pending: at once
    writes: list[Any] = []
    rt.write(TP, lambda shard, now: CoordinatorResult([5], "joined"), writes.append, 1)
    rt.read_committed(TP, lambda shard: shard.total, answers.append)
    assert (writes, answers) == ([], [2])  # both wait for offset 3
    log.hw = 3
    rt.on_high_watermark(TP)
    assert (writes, answers) == (["joined"], [2, 7])
    rt.write(TP, lambda shard, now: CoordinatorResult([1], "again"), writes.append, 2)
    rt.read_committed(TP, lambda shard: shard.total, answers.append)
    rt.unload(TP)
    assert [type(a) for a in answers[2:]] == [KafkaError]
    assert answers[2].code == ErrorCode.not_coordinator


class Sessions(Counter):
    """A shard that expires a member's session 10 s after it joined (a timer, as the
    group managers keep sessions)."""

    def __init__(self, ctx: ShardContext) -> None:
        super().__init__(ctx)
        self.ctx = ctx
        self.expired_at: list[int] = []

    def join(self) -> None:
        self.ctx.schedule("session", 10_000, lambda shard, now: shard.expired_at.append(now))


@pytest.mark.parametrize("step_ms", [600_000, -600_000])
def test_a_session_expires_on_the_timers_clock_whatever_the_wall_clock_does(
        step_ms: int) -> None:
    """Timers run on the clock the driver gives (monotonic, as Kafka's coordinator runtime
    times sessions): the wall clock stepping ten minutes ahead expires no session early,
    and stepping ten minutes back holds none; the timer's write runs at the wall clock's
    now."""
    wall, mono = 1_700_000_000_000, 5_000
    clock = [mono]
    rt: CoordinatorRuntime[Sessions] = CoordinatorRuntime(Log([]), Sessions,
                                                          timer_ms=lambda: clock[0])
    rt.load(TP, wall)
    rt.write(TP, lambda shard, now: shard.join(), lambda response: None, wall)
    shard = rt.contexts[TP].shard
    rt.poll(wall + step_ms)
    assert shard.expired_at == [] and rt.next_deadline() == mono + 10_000
    clock[0] = mono + 9_999
    rt.poll(wall + step_ms + 9_999)
    assert shard.expired_at == []
    clock[0] = mono + 10_000
    rt.poll(wall + step_ms + 10_000)
    assert shard.expired_at == [max(wall, wall + step_ms + 10_000)]


def test_a_response_held_for_the_high_watermark_counts_its_wait_as_purgatory_time() -> None:
    """Kafka's ``event-purgatory-time-ms``: a write answered once replication covers it
    records how long it waited, on the timers' clock; one committed at once records 0."""
    log = Replicated([1])
    clock = [1_000]
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime(log, Counter,
                                                         timer_ms=lambda: clock[0])
    rt.load(TP, 0)
    writes: list[Any] = []
    rt.write(TP, lambda shard, now: CoordinatorResult([5], "joined"), writes.append, 1)
    clock[0] += 250
    log.hw = 2
    rt.on_high_watermark(TP)
    rt.write(TP, lambda shard, now: CoordinatorResult([], "read"), writes.append, 2)
    assert writes == ["joined", "read"]
    histogram = rt.metrics.event_purgatory_time
    reading_ms = 5_000
    assert (histogram.max(reading_ms), histogram.percentile(50, reading_ms),
            histogram.count(reading_ms)) == (250, 0, 2)


def test_a_write_not_replicated_within_the_write_timeout_is_coordinator_not_available(
) -> None:
    """Kafka's write timeout (``offsets.commit.timeout.ms``, 5 s): a write whose records
    the high watermark has not reached by then is answered COORDINATOR_NOT_AVAILABLE,
    which clients retry, instead of holding the request (and its connection, whose next
    requests wait behind it) until replication comes back. The appended records stay:
    once committed, they count."""
    log = Replicated([1])
    clock = [1_000]
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime(log, Counter,
                                                         timer_ms=lambda: clock[0],
                                                         write_timeout_ms=5_000)
    deadlines: list[int] = []
    rt.on_timer_change = deadlines.append
    rt.load(TP, 0)
    answers: list[Any] = []
    rt.write(TP, lambda shard, now: CoordinatorResult([5], "committed"), answers.append, 1)
    assert deadlines[-1] == rt.next_deadline() == 6_000
    clock[0] = 5_999
    rt.poll(2)
    assert answers == []
    rt.write(TP, lambda shard, now: CoordinatorResult([2], "later"), answers.append, 3)
    clock[0] = 6_000
    rt.poll(4)
    assert [a.code for a in answers] == [ErrorCode.coordinator_not_available]
    assert rt.next_deadline() == 10_999  # the second write's own timeout
    log.hw = 3
    rt.on_high_watermark(TP)
    assert answers[1:] == ["later"] and rt.contexts[TP].shard.total == 8
    assert rt.next_deadline() is None


def test_a_write_may_carry_its_own_timeout_or_none() -> None:
    """A result's ``write_timeout_ms`` replaces the runtime's for its answer (Kafka's
    transaction coordinator times each append out after the transaction's timeout); a
    runtime without one holds answers until the high watermark comes."""
    log = Replicated([1])
    clock = [0]
    rt: CoordinatorRuntime[Counter] = CoordinatorRuntime(log, Counter,
                                                         timer_ms=lambda: clock[0])
    rt.load(TP, 0)
    answers: list[Any] = []
    rt.write(TP, lambda shard, now: CoordinatorResult([5], "held"), answers.append, 1)
    rt.write(TP, lambda shard, now: CoordinatorResult([2], "timed", write_timeout_ms=60_000),
             answers.append, 1)
    assert rt.next_deadline() == 60_000
    clock[0] = 59_999
    rt.poll(2)
    assert answers == []
    clock[0] = 600_000
    rt.poll(3)
    assert [getattr(a, "code", a) for a in answers] == [ErrorCode.coordinator_not_available]
    assert "60000 ms" in answers[0].message and rt.next_deadline() is None
    log.hw = 3
    rt.on_high_watermark(TP)
    assert answers[1:] == ["held"]
