"""Kafka's ``kafka.controller:type=KafkaController,name=LastAppliedRecordTimestamp`` as
its OffsetControlManager sets it: a standby takes the append time of each committed
batch it replays, the active controller the time it appended its own batch (Kafka's
handleScheduleAppend reads the clock), and -1 before anything was applied."""

from __future__ import annotations

import random

from ottla.controller.offset_control import OffsetControl
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.protocol.records import build_batch
from ottla.raft.messages import Committed, Entry
from ottla.timeline import SnapshotRegistry


def offset_control() -> OffsetControl:
    return OffsetControl(QuorumController(1, rng=random.Random(1), registry=SnapshotRegistry()))


def test_a_standby_takes_the_append_time_of_the_batches_it_replays() -> None:
    control = offset_control()
    assert control.last_applied_timestamp == -1
    batch = build_batch([(None, b"a no-op")], timestamp=1_700_000_000_123)
    control.on_committed(Committed(0, [Entry(1, [r.NoOpRecord()], 1, raw=bytes(batch))]))
    assert control.last_applied_timestamp == 1_700_000_000_123
    assert control.replayed_end == 1


def test_the_active_controller_takes_the_time_it_appended() -> None:
    control = offset_control()
    control.claim(1)
    control.before_append(0)
    control.replay_appended([r.NoOpRecord()], 0, now_ms=5_000)
    assert control.last_applied_timestamp == 5_000
    # Its own batch committing does not move it (Kafka sets it only on a standby).
    batch = build_batch([(None, b"a no-op")], timestamp=4_990)
    control.on_committed(Committed(0, [Entry(1, [r.NoOpRecord()], 1, raw=bytes(batch))]))
    assert control.last_applied_timestamp == 5_000
