"""The controller driver on a stand-in Raft log: batching, the purgatory, renouncing."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerResult, NotControllerError
from ottla.metadata import records as r
from ottla.raft.messages import Committed, Entry
from ottla.server.controller_driver import MAX_RECORDS_PER_BATCH, ControllerDriver
from ottla.timeline import SnapshotRegistry


class Replica:
    epoch_start_offset = 0


class StandInRaft:
    """A leader whose log commits only when the test says so."""

    def __init__(self) -> None:
        self.epoch = 1
        self.is_leader = True
        self.leader_id: int | None = 1
        self.replica = Replica()
        self.entries: list[Entry] = [Entry(1, None)]  # the leader-change entry
        self.committed = 0

    @property
    def end_offset(self) -> int:
        return sum(e.count for e in self.entries)

    def propose(self, records: list[Any]) -> int | None:
        if not self.is_leader:
            return None
        base = self.end_offset
        self.entries.append(Entry(self.epoch, tuple(records), len(records)))
        return base

    def commit_all(self, driver: ControllerDriver) -> None:
        offset, base = 0, 0
        newly = []
        for entry in self.entries:
            if offset >= self.committed:
                if not newly:
                    base = offset
                newly.append(entry)
            offset += entry.count
        self.committed = offset
        driver.on_committed(Committed(base, newly))


async def active_driver() -> tuple[ControllerDriver, StandInRaft]:
    raft = StandInRaft()
    controller = QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry())
    driver = ControllerDriver(controller, raft, bootstrap_records=lambda: [],  # type: ignore[arg-type]
                              max_idle_interval_ms=0)
    controller.replay(r.FeatureLevelRecord(name="metadata.version", feature_level=25))
    raft.commit_all(driver)  # commits the leader-change entry: the controller claims
    assert driver.is_active
    await asyncio.sleep(0)  # let activation run (nothing to abort or bootstrap)
    return driver, raft


async def test_an_operation_too_big_for_one_batch_is_one_transaction() -> None:
    driver, raft = await active_driver()
    many = [r.NoOpRecord() for _ in range(MAX_RECORDS_PER_BATCH * 2 + 5)]
    pending = asyncio.ensure_future(driver.submit(lambda c: ControllerResult(many, "done")))
    await asyncio.sleep(0)
    sizes = [e.count for e in raft.entries[1:]]
    assert sizes == [1, MAX_RECORDS_PER_BATCH, MAX_RECORDS_PER_BATCH, 5, 1]
    assert isinstance(raft.entries[1].payload[0], r.BeginTransactionRecord)
    assert isinstance(raft.entries[-1].payload[0], r.EndTransactionRecord)
    assert not pending.done()
    raft.commit_all(driver)
    assert await asyncio.wait_for(pending, 1) == "done"
    raft.is_leader = False
    driver.on_raft_state()  # renounce: stops the periodic tasks


async def test_a_caller_waits_for_the_stable_offset_and_fails_on_renounce() -> None:
    driver, raft = await active_driver()
    first = asyncio.ensure_future(driver.submit(lambda c: ControllerResult(
        [r.BeginTransactionRecord(name="t"), r.NoOpRecord()], "first")))
    await asyncio.sleep(0)
    raft.commit_all(driver)
    # Committed, but inside a transaction that has not ended: not stable yet.
    assert not first.done() and driver.offsets.transaction_start > 0
    second = asyncio.ensure_future(driver.submit(lambda c: ControllerResult(
        [r.EndTransactionRecord()], "second")))
    await asyncio.sleep(0)
    raft.is_leader = False
    raft.epoch = 2
    driver.on_raft_state()  # renounce before the end commits
    for future in (first, second):
        with pytest.raises(NotControllerError):
            await asyncio.wait_for(future, 1)
    # Back to the committed state, where the transaction is still open.
    assert driver.offsets.transaction_start > 0 and not driver.is_active


async def test_the_active_controller_sweeps_expired_delegation_tokens() -> None:
    """Every ``delegation.token.expiry.check.interval.ms`` the active controller writes a
    RemoveDelegationTokenRecord for each token past its expiry (Kafka's
    SWEEP_EXPIRED_DELEGATION_TOKENS), and nothing for a live one."""
    raft = StandInRaft()
    now = [1_700_000_000.0]
    controller = QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry(),
                                  delegation_token_secret_key="secret")
    driver = ControllerDriver(controller, raft, bootstrap_records=lambda: [],  # type: ignore[arg-type]
                              max_idle_interval_ms=0, token_sweep_interval_ms=20,
                              clock=lambda: now[0])
    controller.replay(r.FeatureLevelRecord(name="metadata.version", feature_level=25))
    for token_id, expiry in (("short", 1_700_000_000_500), ("long", 1_700_000_100_000)):
        controller.replay(r.DelegationTokenRecord(
            owner="User:alice", requester="User:alice", issue_timestamp=0,
            max_timestamp=expiry, expiration_timestamp=expiry, token_id=token_id))
    raft.commit_all(driver)
    assert driver.is_active
    now[0] += 1  # past the short token's expiry only

    def removals() -> list[str]:
        return [rec.token_id for e in raft.entries[1:] for rec in e.payload or ()
                if isinstance(rec, r.RemoveDelegationTokenRecord)]
    for _ in range(200):  # at most 2 s for the first sweep
        if removals():
            break
        await asyncio.sleep(0.01)
    assert removals() == ["short"]
    raft.commit_all(driver)
    assert sorted(controller.image.delegation_tokens) == ["long"]
    raft.is_leader = False
    driver.on_raft_state()  # renounce: stops the periodic tasks


async def test_a_step_of_the_wall_clock_fences_no_broker_a_silent_session_does() -> None:
    """Broker sessions are measured on the monotonic clock, as Kafka's
    BrokerHeartbeatManager measures them: the active controller's wall clock jumping ten
    minutes ahead (an NTP step) fences no broker; a broker silent for longer than
    ``broker.session.timeout.ms`` of monotonic time is fenced."""
    raft = StandInRaft()
    wall, mono = [1_700_000_000.0], [1000.0]
    controller = QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry())
    driver = ControllerDriver(controller, raft, bootstrap_records=lambda: [],  # type: ignore[arg-type]
                              max_idle_interval_ms=0, session_timeout_ms=80,
                              clock=lambda: wall[0], monotonic=lambda: mono[0])
    controller.replay(r.FeatureLevelRecord(name="metadata.version", feature_level=25))
    controller.replay(r.RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.UUID(int=2),
                                             broker_epoch=5, fenced=False))
    raft.commit_all(driver)
    assert driver.is_active

    def fenced() -> list[int]:
        return [rec.id for e in raft.entries[1:] for rec in e.payload or ()
                if isinstance(rec, r.FenceBrokerRecord)]
    await asyncio.sleep(0.05)  # the first checks start broker 2's session
    wall[0] += 600
    await asyncio.sleep(0.2)  # 20 checks (one every 10 ms)
    assert fenced() == []
    mono[0] += 0.081
    for _ in range(200):  # at most 2 s for the next check
        if fenced():
            break
        await asyncio.sleep(0.01)
    assert fenced() == [2]


async def test_the_next_check_comes_when_the_first_session_runs_out() -> None:
    """As Kafka's BrokerHeartbeatManager schedules it: with a 9 s session (a periodic step
    of 1.125 s), a broker last heard 8.5 s ago is looked at again in 0.5 s, not a whole
    step later; with no broker, the step."""
    raft = StandInRaft()
    mono = [1000.0]
    controller = QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry())
    driver = ControllerDriver(controller, raft, bootstrap_records=lambda: [],  # type: ignore[arg-type]
                              max_idle_interval_ms=0, session_timeout_ms=9000,
                              monotonic=lambda: mono[0])
    assert driver._until_next_check(1.125) == 1.125
    controller.replay(r.RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.UUID(int=2),
                                             broker_epoch=5, fenced=False))
    controller.cluster.last_heartbeat_ms[2] = driver.session_ms()
    mono[0] += 8.5
    assert driver._until_next_check(1.125) == pytest.approx(0.501)
    mono[0] += 1.0  # overdue: the next turn comes at once (bounded below)
    assert driver._until_next_check(1.125) == pytest.approx(0.01)


async def test_operations_and_raft_events_are_counted_and_timed() -> None:
    """Kafka's QuorumControllerMetrics: EventQueueOperationsStartedCount counts every
    event its queue runs, operations (refused ones too) and the Raft client's (committed
    batches, leader changes); EventQueueProcessingTimeMs the time of those that
    succeeded; NewActiveControllersCount each leader change to a known leader."""
    raft = StandInRaft()
    clock = [10.0]  # seconds; only the operations below move it
    controller = QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry())
    driver = ControllerDriver(controller, raft, bootstrap_records=lambda: [],  # type: ignore[arg-type]
                              max_idle_interval_ms=0, perf_counter=lambda: clock[0])
    controller.replay(r.FeatureLevelRecord(name="metadata.version", feature_level=25))
    driver.on_raft_state()  # the replica learns it leads epoch 1
    raft.commit_all(driver)  # the leader-change entry: the controller claims
    assert driver.is_active and driver.new_active_controllers == 1
    assert driver.operations_started == 2
    await asyncio.sleep(0)  # activation: nothing to abort or bootstrap

    def taking(ms: float, records: list[Any], response: str) -> Any:
        def op(c: QuorumController) -> ControllerResult:
            clock[0] += ms / 1000
            return ControllerResult(records, response)
        return op
    write = asyncio.ensure_future(driver.submit(taking(4, [r.NoOpRecord()], "written")))
    await asyncio.sleep(0)
    raft.commit_all(driver)
    assert await asyncio.wait_for(write, 1) == "written"
    assert await driver.submit(taking(0.5, [], "read")) == "read"
    assert driver.operations_started == 5  # 2 operations, 3 Raft events
    count, total, kept = driver.processing_time_ms.snapshot()
    assert count == 5 and total == pytest.approx(4.5)
    assert kept == pytest.approx([0, 0, 0, 0.5, 4.0])

    raft.is_leader, raft.epoch, raft.leader_id = False, 2, None
    driver.on_raft_state()  # an election under way: no leader yet
    assert driver.new_active_controllers == 1
    with pytest.raises(NotControllerError):
        await driver.submit(taking(1, [r.NoOpRecord()], "refused"))
    assert driver.operations_started == 7  # started, as Kafka's event, then refused
    assert driver.processing_time_ms.snapshot()[0] == 6
    raft.leader_id = 2
    driver.on_raft_state()
    driver.on_raft_state()  # the same leader and epoch again
    assert driver.new_active_controllers == 2
