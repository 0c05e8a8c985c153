"""The share coordinator shard on the coordinator runtime, without a network: Kafka's
``__share_group_state`` bytes, the answers of Initialize/Write/Read/Delete and
ReadSummary ShareGroupState, snapshots between updates, the batch combiner, fencing, the
cold-snapshot and prune timers, and a failover that rebuilds the same state from the
bytes of the log."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import pytest

from ottla.coordinator.runtime import CoordinatorResult, CoordinatorRuntime
from ottla.coordinator.share.combiner import combine_state_batches
from ottla.coordinator.share.records import (
    RecordType,
    ShareStateRecord,
    UnknownShareRecord,
    snapshot_record,
    tombstone,
    update_record,
)
from ottla.coordinator.share.shard import (
    READ_UNINITIALIZED,
    WRITE_UNINITIALIZED,
    DeleteStateAnswer,
    InitializeStateAnswer,
    PersisterStateBatch,
    ReadStateAnswer,
    ReadStateSummaryAnswer,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    SharePartitionKey,
    WriteStateAnswer,
    decode_record,
    encode_record,
)
from ottla.coordinator.share.state import ShareGroupOffset, ShareUpdate
from ottla.protocol.errors import ErrorCode

TP = ("__share_group_state", 3)
T0 = 1_700_000_000_000
TOPIC = uuid.UUID(bytes=bytes(range(16)))
KEY = SharePartitionKey("orders-workers", TOPIC, 0)
OTHER = SharePartitionKey("orders-workers", TOPIC, 1)
B = PersisterStateBatch
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
CONFIG = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=3,
                                cold_partition_snapshot_interval_ms=10_000,
                                prune_interval_ms=60_000)
OK = ErrorCode.none


class Log:
    """__share_group_state as bytes; every write committed at once unless ``held``."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.held: int | None = None

    def append(self, tp: tuple[str, int], records: list[Any], now_ms: int) -> int:
        self.entries += [encode_record(r) for r in records]
        return len(self.entries)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        return len(self.entries) if self.held is None else self.held

    def read(self, tp: tuple[str, int]) -> Iterator[tuple[int, Any]]:
        for offset, (key, value) in enumerate(self.entries):
            yield offset, decode_record(key, value)

    def records(self) -> list[ShareStateRecord]:
        return [decode_record(k, v) for k, v in self.entries]

    def kinds(self, start: int = 0) -> str:
        """S snapshot, U update, T tombstone, for each record from ``start``."""
        return "".join("T" if r.value is None else "S" if r.record_type is RecordType.SNAPSHOT
                       else "U" for r in self.records()[start:])


class Coordinator:
    def __init__(self, log: Log | None = None, config: ShareCoordinatorConfig = CONFIG,
                 now: int = T0, pruned: list[int] | None = None) -> None:
        self.log = log or Log()
        self.now = now
        listener = None if pruned is None else pruned.append
        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            self.log, lambda ctx: ShareCoordinatorShard(ctx, config, listener))
        self.runtime.load(TP, now)

    @property
    def shard(self) -> ShareCoordinatorShard:
        return self.runtime.active(TP).shard

    def call(self, operation: Any, now: int | None = None) -> Any:
        self.now = max(self.now, now or self.now)
        answers: list[Any] = []
        self.runtime.write(TP, operation, answers.append, self.now)
        assert len(answers) == 1
        return answers[0]

    def init(self, key: SharePartitionKey = KEY, state_epoch: int = 0, start_offset: int = 0,
             now: int | None = None) -> InitializeStateAnswer:
        return self.call(lambda s, n: s.initialize_state(n, key, state_epoch, start_offset),
                         now)

    def write(self, batches: Sequence[PersisterStateBatch], key: SharePartitionKey = KEY,
              state_epoch: int = 0, leader_epoch: int = 0, start_offset: int = -1,
              dcc: int = -1, now: int | None = None) -> WriteStateAnswer:
        return self.call(lambda s, n: s.write_state(n, key, state_epoch, leader_epoch,
                                                    start_offset, dcc, batches), now)

    def read(self, key: SharePartitionKey = KEY, leader_epoch: int = 0,
             now: int | None = None) -> ReadStateAnswer:
        return self.call(lambda s, n: s.read_state(n, key, leader_epoch), now)

    def summary(self, key: SharePartitionKey = KEY) -> ReadStateSummaryAnswer:
        return self.runtime.read(TP, lambda s: s.read_state_summary(key, 0))

    def delete(self, key: SharePartitionKey = KEY) -> DeleteStateAnswer:
        return self.call(lambda s, n: s.delete_state(n, key))

    def poll(self, now: int) -> None:
        self.now = max(self.now, now)
        self.runtime.poll(now)


# --- the records ------------------------------------------------------------------------------

def test_records_are_byte_exact_with_kafkas_layouts() -> None:
    key = SharePartitionKey("g", uuid.UUID(int=1), 3)
    state = ShareGroupOffset(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=10,
                             delivery_complete_count=5, create_timestamp=100,
                             write_timestamp=200, state_batches=(B(10, 19, ACKED, 1),))
    k, v = encode_record(snapshot_record(key, state))
    # int16 type 0 | int16 length, "g" | uuid | int32 partition (not flexible)
    assert k.hex() == "0000" "0001" "67" "00000000000000000000000000000001" "00000003"
    assert v is not None and v.hex() == (
        "0000"                                    # value version 0
        "00000001" "00000002" "00000003"          # snapshot, state, leader epoch
        "000000000000000a"                        # start offset
        "0000000000000064" "00000000000000c8"     # create and write timestamps
        "02"                                      # compact array: one batch
        "000000000000000a" "0000000000000013" "02" "0001" "00"  # a batch and its tags
        "01" "00" "04" "00000005")                # tag 0 DeliveryCompleteCount = 5
    assert decode_record(k, v) == snapshot_record(key, state)

    update = ShareUpdate(snapshot_epoch=1, leader_epoch=-1, start_offset=-1,
                         delivery_complete_count=-1, state_batches=())
    k, v = encode_record(update_record(key, update))
    assert k.hex().startswith("0001")
    assert v is not None and v.hex() == (
        "0000" "00000001" "ffffffff" "ffffffffffffffff" "01" "00")  # -1 count: no tag
    assert decode_record(k, v) == update_record(key, update)

    k, v = encode_record(tombstone(key))
    assert (k.hex()[:4], v) == ("0000", None)
    assert decode_record(k, v) == tombstone(key)


def test_unknown_record_types_and_versions_are_refused() -> None:
    k, v = encode_record(update_record(KEY, ShareUpdate(0, 0, 0, 0)))
    with pytest.raises(UnknownShareRecord):
        decode_record(b"\x00\x02" + k[2:], v)
    assert v is not None
    with pytest.raises(UnknownShareRecord):
        decode_record(k, b"\x00\x01" + v[2:])
    with pytest.raises(ValueError):
        encode_record(ShareStateRecord(KEY, RecordType.SNAPSHOT, ShareUpdate(0, 0, 0, 0)))


def test_the_coordinator_key_prints_the_topic_id_as_kafka_does() -> None:
    assert KEY.coordinator_key == "orders-workers:AAECAwQFBgcICQoLDA0ODw:0"


# --- Initialize, Write, Read ------------------------------------------------------------------

def test_a_share_partition_is_initialized_written_and_read() -> None:
    c = Coordinator()
    assert c.init(state_epoch=1, start_offset=100) == InitializeStateAnswer(OK)
    assert c.log.kinds() == "S"
    assert c.shard.states[KEY] == ShareGroupOffset(0, 1, 0, 100, 0, T0, T0, ())
    assert c.write([B(100, 109, ACKED, 1), B(110, 119, AVAILABLE, 1)], state_epoch=1,
                   dcc=10) == WriteStateAnswer(OK)
    assert c.log.kinds() == "SU"
    assert c.read() == ReadStateAnswer(OK, None, 1, 100,
                                       (B(100, 109, ACKED, 1), B(110, 119, AVAILABLE, 1)))
    assert len(c.log.entries) == 2  # the same leader epoch: nothing written
    assert c.summary() == ReadStateSummaryAnswer(OK, None, 1, 0, 100, 10)


def test_before_initialization_writes_and_reads_are_invalid_and_the_summary_is_empty() -> None:
    c = Coordinator()
    assert c.write([B(0, 9, ACKED, 1)]) == \
        WriteStateAnswer(ErrorCode.invalid_request, WRITE_UNINITIALIZED)
    assert c.read() == ReadStateAnswer(ErrorCode.invalid_request, READ_UNINITIALIZED)
    assert c.summary() == ReadStateSummaryAnswer(OK, None, 0, 0, -1, -1)
    bad = SharePartitionKey("g", TOPIC, -1)
    assert c.init(bad).error == ErrorCode.invalid_request
    assert c.summary(bad).error == ErrorCode.invalid_request
    assert c.log.entries == []


def test_an_initialization_without_a_start_offset_has_no_delivery_complete_count() -> None:
    c = Coordinator()
    c.init(start_offset=-1)
    assert c.summary() == ReadStateSummaryAnswer(OK, None, 0, 0, -1, -1)


def test_a_snapshot_follows_every_n_updates_with_the_merged_state() -> None:
    c = Coordinator()
    c.init(start_offset=0)
    for i in range(7):
        c.write([B(i, i, ACKED, 1)])
    assert c.log.kinds() == "SUUUSUUU"
    snapshot = c.log.records()[4].value
    assert snapshot == ShareGroupOffset(1, 0, 0, 0, 0, T0, T0, (B(0, 3, ACKED, 1),))
    assert c.read().state_batches == (B(0, 6, ACKED, 1),)

    every = Coordinator(config=ShareCoordinatorConfig(snapshot_update_records_per_snapshot=0))
    every.init()
    for i in range(3):
        every.write([B(i, i, ACKED, 1)])
    assert every.log.kinds() == "SSSS"
    assert [r.value.snapshot_epoch for r in every.log.records()
            if isinstance(r.value, ShareGroupOffset)] == [0, 1, 2, 3]


# --- the batch combiner -----------------------------------------------------------------------

COMBINER_CASES = [  # Kafka's PersisterStateBatchCombinerTest: so far, new, start, expected
    ([B(100, 130, 0, 1)], [], 120, [B(120, 130, 0, 1)]),
    ([], [B(100, 130, 0, 1)], 120, [B(120, 130, 0, 1)]),
    ([], [], 120, []),
    ([B(100, 110, 0, 1)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(100, 105, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(100, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 108, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 110, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(111, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ([B(100, 110, 0, 1), B(121, 130, 0, 1)], [B(111, 119, 2, 2), B(116, 123, 2, 2)], -1,
     [B(100, 110, 0, 1), B(111, 123, 2, 2), B(124, 130, 0, 1)]),  # Kafka's table drops
    # 124-130 here (a case its test does not run); the pruned case below keeps it
    ([B(100, 110, 0, 1)], [B(101, 105, 1, 2), B(101, 115, 2, 2), B(101, 120, 3, 2)], -1,
     [B(100, 100, 0, 1), B(101, 120, 3, 2)]),
    ([B(100, 110, 0, 1), B(121, 130, 0, 1)], [B(111, 119, 2, 2), B(116, 123, 2, 2)], 120,
     [B(120, 123, 2, 2), B(124, 130, 0, 1)]),
    ([B(111, 120, 0, 1)], [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2)], -1,
     [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2), B(120, 120, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(100, 110, 0, 2)], -1, [B(100, 110, 0, 2)]),
    ([B(100, 110, 0, 3)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 3)]),
    ([B(100, 110, 0, 1)], [B(100, 105, 0, 2)], -1, [B(100, 105, 0, 2), B(106, 110, 0, 1)]),
    ([B(100, 110, 0, 3)], [B(100, 105, 0, 1)], -1, [B(100, 110, 0, 3)]),
    ([B(100, 110, 0, 1)], [B(100, 115, 0, 2)], -1, [B(100, 115, 0, 2)]),
    ([B(100, 110, 0, 3)], [B(100, 115, 0, 1)], -1, [B(100, 110, 0, 3), B(111, 115, 0, 1)]),
    ([B(100, 115, 0, 1)], [B(105, 110, 1, 1)], -1,
     [B(100, 104, 0, 1), B(105, 110, 1, 1), B(111, 115, 0, 1)]),
    ([B(100, 115, 1, 1)], [B(105, 110, 0, 1)], -1, [B(100, 115, 1, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 110, 0, 2)], -1, [B(100, 104, 0, 1), B(105, 110, 0, 2)]),
    ([B(100, 110, 0, 2)], [B(105, 110, 0, 1)], -1, [B(100, 110, 0, 2)]),
    ([B(100, 110, 0, 1)], [B(105, 115, 0, 2)], -1, [B(100, 104, 0, 1), B(105, 115, 0, 2)]),
    ([B(100, 110, 0, 2)], [B(105, 115, 0, 1)], -1, [B(100, 110, 0, 2), B(111, 115, 0, 1)]),
]


@pytest.mark.parametrize(("so_far", "new", "start", "expected"), COMBINER_CASES)
def test_the_combiner_gives_kafkas_batches(so_far: list[PersisterStateBatch],
                                           new: list[PersisterStateBatch], start: int,
                                           expected: list[PersisterStateBatch]) -> None:
    assert combine_state_batches(so_far, new, start) == expected


def _per_offset(batches: Sequence[PersisterStateBatch], start: int
                ) -> dict[int, tuple[int, int]]:
    """The model: each offset (at or above ``start``) has the highest (count, state) of the
    batches that cover it."""
    best: dict[int, tuple[int, int]] = {}
    for b in batches:
        for o in range(max(b.first_offset, start), b.last_offset + 1):
            best[o] = max(best.get(o, (-1, -1)), (b.delivery_count, b.delivery_state))
    return best


def _random_batches(rng: random.Random, n: int) -> list[PersisterStateBatch]:
    out = []
    for _ in range(n):
        first = rng.randrange(0, 40)
        out.append(B(first, first + rng.randrange(0, 8), rng.choice((0, 2, 4)),
                     rng.randrange(1, 4)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_the_combiner_keeps_the_highest_delivery_of_every_offset(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        so_far, new = _random_batches(rng, rng.randrange(0, 5)), _random_batches(rng, 4)
        start = rng.choice((-1, rng.randrange(0, 30)))
        combined = combine_state_batches(so_far, new, start)
        assert _per_offset(combined, -1) == _per_offset([*so_far, *new], start)
        assert all(a.last_offset < b.first_offset for a, b in pairwise(combined))


def test_partial_acknowledgements_split_runs_and_later_deliveries_override() -> None:
    c = Coordinator()
    c.init(start_offset=0)
    c.write([B(0, 9, AVAILABLE, 1)])
    c.write([B(3, 5, ACKED, 1)])  # an acknowledgement in the middle of the run
    assert c.read().state_batches == (B(0, 2, AVAILABLE, 1), B(3, 5, ACKED, 1),
                                      B(6, 9, AVAILABLE, 1))
    c.write([B(6, 9, AVAILABLE, 2)])  # delivered again: the higher count wins
    c.write([B(8, 9, ARCHIVED, 2)])
    assert c.read().state_batches == (B(0, 2, AVAILABLE, 1), B(3, 5, ACKED, 1),
                                      B(6, 7, AVAILABLE, 2), B(8, 9, ARCHIVED, 2))
    c.write([B(0, 2, ACKED, 1)], start_offset=6)  # the start offset passes the acks
    assert c.read().start_offset == 6
    assert c.read().state_batches == (B(6, 7, AVAILABLE, 2), B(8, 9, ARCHIVED, 2))
    assert c.log.kinds() == "SUUUSU"
    snapshot, last = c.log.records()[4].value, c.log.records()[5].value
    assert isinstance(snapshot, ShareGroupOffset)  # the merged state of the 3 updates
    assert snapshot.state_batches == (B(0, 2, AVAILABLE, 1), B(3, 5, ACKED, 1),
                                      B(6, 7, AVAILABLE, 2), B(8, 9, ARCHIVED, 2))
    assert last == ShareUpdate(1, 0, 6, -1, ())  # the acks below the start offset: gone


def test_an_update_out_of_order_with_the_start_offset_loses_no_batch() -> None:
    """Kafka's testNonSequentialBatchUpdates: batch 1 acknowledged, the start offset moved
    past it with batch 3's acknowledgement; batch 2, still in flight, stays."""
    c = Coordinator(config=ShareCoordinatorConfig(snapshot_update_records_per_snapshot=0))
    c.init(start_offset=100)
    c.write([B(100, 109, 1, 1), B(110, 119, 1, 2), B(120, 129, 1, 0)], start_offset=100,
            dcc=0)
    c.write([B(100, 109, ACKED, 1)], dcc=10)
    c.write([B(120, 129, ACKED, 1)], start_offset=110, dcc=10)
    assert c.shard.states[KEY] == ShareGroupOffset(
        3, 0, 0, 110, 10, T0, T0, (B(110, 119, 1, 2), B(120, 129, ACKED, 1)))


# --- fencing ------------------------------------------------------------------------------------

def test_stale_state_and_leader_epochs_are_fenced_and_change_nothing() -> None:
    c = Coordinator()
    c.init(state_epoch=2, start_offset=0)
    c.read(leader_epoch=5)
    c.write([B(0, 4, ACKED, 1)], state_epoch=2, leader_epoch=5)
    state, written = c.shard.states[KEY], len(c.log.entries)
    assert c.write([B(0, 9, ARCHIVED, 3)], state_epoch=1, leader_epoch=5) == \
        WriteStateAnswer(ErrorCode.fenced_state_epoch)
    assert c.write([B(0, 9, ARCHIVED, 3)], state_epoch=2, leader_epoch=4) == \
        WriteStateAnswer(ErrorCode.fenced_leader_epoch)
    assert c.read(leader_epoch=4) == ReadStateAnswer(ErrorCode.fenced_leader_epoch)
    assert c.init(state_epoch=1) == InitializeStateAnswer(ErrorCode.fenced_state_epoch)
    assert (c.shard.states[KEY], len(c.log.entries)) == (state, written)
    # -1 epochs are not checked by a write
    assert c.write([B(5, 5, ACKED, 1)], state_epoch=-1, leader_epoch=-1).error == OK


def test_a_reinitialization_with_a_new_state_epoch_starts_afresh() -> None:
    c = Coordinator()
    c.init(state_epoch=0, start_offset=0)
    c.write([B(0, 9, ACKED, 1)])
    assert c.init(state_epoch=1, start_offset=50) == InitializeStateAnswer(OK)
    assert c.shard.states[KEY] == ShareGroupOffset(1, 1, 0, 50, 0, T0, T0, ())
    assert c.write([B(50, 51, ACKED, 1)], state_epoch=0).error == ErrorCode.fenced_state_epoch


def test_a_new_leaders_read_records_its_epoch_and_fences_the_old_leader() -> None:
    c = Coordinator()
    c.init(start_offset=0)
    c.write([B(0, 4, ACKED, 1)], leader_epoch=0)
    assert c.read(leader_epoch=3) == ReadStateAnswer(OK, None, 0, 0, (B(0, 4, ACKED, 1),))
    assert c.log.records()[-1] == update_record(KEY, ShareUpdate(0, 3, 0, -1, ()))
    assert c.summary().leader_epoch == 3
    assert c.write([B(5, 5, ACKED, 1)], leader_epoch=2).error == ErrorCode.fenced_leader_epoch
    written = len(c.log.entries)
    assert c.read(leader_epoch=3).error == OK
    assert len(c.log.entries) == written  # the epoch is recorded already
    failover = Coordinator(c.log)
    assert failover.write([B(5, 5, ACKED, 1)], leader_epoch=2).error == \
        ErrorCode.fenced_leader_epoch
    assert failover.summary().leader_epoch == 3


# --- Delete -------------------------------------------------------------------------------------

def test_delete_writes_a_snapshot_tombstone_and_forgets_the_epochs() -> None:
    c = Coordinator()
    c.init(state_epoch=4)
    c.read(leader_epoch=7)
    assert c.delete() == DeleteStateAnswer(OK)
    assert c.log.records()[-1] == tombstone(KEY)
    assert KEY not in c.shard.states
    assert c.read().error == ErrorCode.invalid_request
    assert c.summary() == ReadStateSummaryAnswer(OK)
    written = len(c.log.entries)
    assert c.delete() == DeleteStateAnswer(OK)  # nothing to delete: nothing written
    assert len(c.log.entries) == written
    assert c.init(state_epoch=0) == InitializeStateAnswer(OK)  # the epochs went with it
    assert c.shard.states[KEY].snapshot_epoch == 0
    assert c.read(leader_epoch=1).error == OK
    failover = Coordinator(c.log)
    assert failover.shard.states == c.shard.states


def test_the_state_of_deleted_topics_is_removed() -> None:
    c = Coordinator()
    other_topic = SharePartitionKey("g", uuid.uuid4(), 0)
    for key in (KEY, OTHER, other_topic):
        c.init(key)
    assert c.call(lambda s, n: s.cleanup_deleted_topics({TOPIC})) is None
    assert set(c.shard.states) == {other_topic}


# --- timers -------------------------------------------------------------------------------------

def test_cold_share_partitions_are_snapshotted_again_but_not_forever() -> None:
    c = Coordinator()
    c.init(KEY)
    c.init(OTHER, now=T0 + 5_000)
    c.write([B(0, 0, ACKED, 1)], now=T0 + 6_000)
    start = len(c.log.entries)
    c.poll(T0 + 10_000)  # KEY's snapshot is 10 s old, OTHER's 5 s
    assert c.log.kinds(start) == "S"
    assert c.shard.states[KEY] == ShareGroupOffset(1, 0, 0, 0, 0, T0, T0 + 10_000,
                                                   (B(0, 0, ACKED, 1),))
    c.poll(T0 + 20_000)  # OTHER's turn, and KEY's again (its snapshot is 10 s old too)
    assert c.log.kinds(start) == "SSS"
    assert c.shard.states[OTHER].write_timestamp == T0 + 20_000
    c.poll(T0 + 30_000)
    c.poll(T0 + 40_000)
    assert c.log.kinds(start) == "SSS"  # every state is a cold snapshot: a quiet coordinator
    assert c.shard._updates[KEY] == 0


def test_the_redundant_offset_moves_up_as_snapshots_are_committed() -> None:
    c = Coordinator()
    assert c.shard.last_redundant_offset() is None
    c.init(KEY)                          # 0
    c.init(OTHER)                        # 1
    assert c.shard.last_redundant_offset() is None  # offset 0 is needed: nothing below it
    for i in range(4):                   # 2, 3, 4 updates, 5 snapshot of KEY
        c.write([B(i, i, ACKED, 1)])
    assert c.log.kinds() == "SSUUUS"
    assert c.shard.last_redundant_offset() == 1  # OTHER's snapshot is the oldest needed
    c.init(OTHER, state_epoch=1)         # 6
    assert c.shard.last_redundant_offset() == 5
    c.log.held = len(c.log.entries)      # the next writes are not committed yet
    answers: list[Any] = []
    c.runtime.write(TP, lambda s, n: s.initialize_state(n, KEY, 1, 0), answers.append, T0)
    assert (answers, c.shard.last_redundant_offset()) == ([], 5)
    c.log.held = None
    c.runtime.on_high_watermark(TP)
    assert (answers, c.shard.last_redundant_offset()) == ([InitializeStateAnswer(OK)], 6)
    c.delete(OTHER)                      # 8: the tombstone ends OTHER's need
    c.write([B(9, 9, ACKED, 1)], state_epoch=1)  # 9 update
    assert c.shard.last_redundant_offset() == 7
    assert Coordinator(c.log).shard.last_redundant_offset() == 7


def test_the_prune_timer_hands_the_driver_the_redundant_offset() -> None:
    pruned: list[int] = []
    c = Coordinator(pruned=pruned, config=ShareCoordinatorConfig(prune_interval_ms=60_000))
    c.init(KEY)
    c.init(OTHER)
    c.init(KEY, state_epoch=1)
    c.poll(T0 + 59_999)
    assert pruned == []
    c.poll(T0 + 60_000)
    assert pruned == [1]
    c.init(OTHER, state_epoch=1)
    c.poll(T0 + 120_000)
    assert pruned == [1, 2]


# --- failover -----------------------------------------------------------------------------------

KEYS = [SharePartitionKey(g, t, p) for g in ("a", "b") for t in (TOPIC, uuid.UUID(int=7))
        for p in (0, 1)]


def _random_operation(rng: random.Random, c: Coordinator, epochs: dict[SharePartitionKey,
                      list[int]]) -> None:
    key = rng.choice(KEYS)
    state_epoch, leader_epoch = epochs.setdefault(key, [0, 0])
    now = c.now + rng.randrange(0, 4_000)
    roll = rng.random()
    if key not in c.shard.states and rng.random() < 0.8:
        roll = 0.0  # mostly initialize first, as a leader does
    if roll < 0.1:
        epochs[key][0] += rng.choice((0, 1))
        c.init(key, epochs[key][0], rng.choice((-1, rng.randrange(0, 50))), now=now)
    elif roll < 0.2:
        epochs[key][1] += 1
        c.read(key, epochs[key][1] + rng.choice((-1, 0)), now=now)
    elif roll < 0.25:
        c.delete(key)
    elif roll < 0.3:
        c.poll(now)
    else:
        start = rng.choice((-1, -1, rng.randrange(0, 40)))
        c.write(_random_batches(rng, rng.randrange(0, 4)), key,
                state_epoch + rng.choice((0, 0, -1)), leader_epoch + rng.choice((0, 0, -1)),
                start, rng.choice((-1, rng.randrange(0, 20))), now=now)


def _answers(c: Coordinator) -> list[tuple[Any, ...]]:
    shard = c.shard
    out: list[tuple[Any, ...]] = []
    for key in KEYS:
        epoch = shard._leader_epochs.get(key, 0)  # the recorded epoch: a pure read
        out.append((c.runtime.read(TP, lambda s, k=key, e=epoch: s.read_state(0, k, e)),
                    c.summary(key)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_a_new_coordinator_rebuilds_the_same_state_from_the_log(seed: int) -> None:
    rng = random.Random(seed)
    config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=rng.randrange(0, 5),
                                    cold_partition_snapshot_interval_ms=10_000)
    c = Coordinator(config=config)
    epochs: dict[SharePartitionKey, list[int]] = {}
    for step in range(1, 241):
        _random_operation(rng, c, epochs)
        if step % 60 == 0:
            failover = Coordinator(c.log, config=config, now=c.now)
            assert failover.shard.states == c.shard.states
            assert failover.shard._leader_epochs == c.shard._leader_epochs
            assert failover.shard._state_epochs == c.shard._state_epochs
            assert failover.shard._updates == c.shard._updates
            assert failover.shard.last_redundant_offset() == c.shard.last_redundant_offset()
            assert _answers(failover) == _answers(c)
    kinds = c.log.kinds()
    assert {"S", "U", "T"} <= set(kinds) or config.snapshot_update_records_per_snapshot == 0
    for state in c.shard.states.values():
        batches = state.state_batches
        assert all(a.last_offset < b.first_offset for a, b in pairwise(batches))
        assert state.start_offset == -1 or all(b.first_offset >= state.start_offset
                                               for b in batches)
    for key, value in c.log.entries:
        assert encode_record(decode_record(key, value)) == (key, value)


def test_operations_return_coordinator_results() -> None:
    c = Coordinator()
    result = c.shard.initialize_state(T0, KEY, 0, 0)
    assert isinstance(result, CoordinatorResult) and result.records[0].key == KEY
    assert KEY not in c.shard.states  # only the runtime's replay changes the state
