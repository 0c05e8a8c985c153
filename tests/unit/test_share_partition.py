"""A share-partition's in-flight records (KIP-932, seed 001) without a broker: leases,
acknowledgements whole and in parts, redelivery and its limit, lock expiry, members
leaving, the in-flight cap, and the share-partition start offset."""

from __future__ import annotations

import random

from ottla.broker.share.share_partition import (
    DELIVERY_COUNT_EXCEEDED,
    REJECTED,
    RESTORED,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
)
from ottla.coordinator.share.combiner import combine_state_batches
from ottla.coordinator.share.state import PersisterStateBatch
from ottla.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                AcknowledgeType.REJECT, AcknowledgeType.GAP)
T0 = 1_000_000


def test_a_batch_is_leased_whole_and_accepted_whole() -> None:
    sp = SharePartition(start_offset=100)
    assert sp.acquire("m1", [(100, 109), (110, 119)], 500, T0) == [
        AcquiredRecords(100, 109, 1), AcquiredRecords(110, 119, 1)]
    assert sp.next_fetch_offset() == 120
    assert sp.acquire("m2", [(100, 109)], 500, T0) == []  # held by m1
    assert sp.acknowledge("m1", [(100, 109, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 110  # the terminal prefix is gone
    # Still leased: stored as available with the count before the lease, as Kafka's store
    # has it (it writes no acquired record).
    assert sp.state_batches() == [PersisterStateBatch(110, 119, RecordState.AVAILABLE, 0)]


def test_acknowledging_part_of_a_batch_splits_it_per_offset() -> None:
    sp = SharePartition(start_offset=0)
    sp.acquire("m1", [(0, 9)], 500, T0)
    assert sp.acknowledge("m1", [(0, 3, [ACCEPT]), (4, 6, [RELEASE, REJECT, ACCEPT])]) \
        == ErrorCode.none
    assert sp.start_offset == 4  # offset 4 was released: it pins the SPSO
    assert sp.next_fetch_offset() == 4
    assert sp.acquire("m2", [(0, 9)], 500, T0 + 1) == [AcquiredRecords(4, 4, 2)]
    assert sp.state_batches() == [  # the leased ones with their count before the lease
        PersisterStateBatch(4, 4, RecordState.AVAILABLE, 1),
        PersisterStateBatch(5, 5, RecordState.ARCHIVED, 1),
        PersisterStateBatch(6, 6, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(7, 9, RecordState.AVAILABLE, 0)]


def test_bad_acknowledgements_are_refused_and_change_nothing() -> None:
    """Kafka's SharePartition: another member's or a wrongly typed run is
    INVALID_RECORD_STATE, a run past the records fetched INVALID_REQUEST, and either
    undoes the runs before it; a run wholly below the start offset is already archived
    and ignored."""
    sp = SharePartition(start_offset=0)
    sp.acquire("m1", [(0, 4)], 500, T0)
    before = sp.state_batches()
    assert sp.acknowledge("m2", [(0, 4, [ACCEPT])]) == ErrorCode.invalid_record_state  # not its
    assert sp.acknowledge("m1", [(0, 1, [ACCEPT]), (7, 8, [ACCEPT])]) == \
        ErrorCode.invalid_request  # never fetched: the first run is undone too
    assert sp.acknowledge("m1", [(3, 6, [ACCEPT])]) == ErrorCode.invalid_request  # ends past
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT, RELEASE])]) == ErrorCode.invalid_record_state
    assert sp.acknowledge("m1", [(0, 4, [9])]) == ErrorCode.invalid_record_state
    assert sp.state_batches() == before and sp.start_offset == 0
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 5
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT])]) == ErrorCode.none  # twice: archived


def test_a_record_is_delivered_at_most_the_limit_then_archived() -> None:
    sp = SharePartition(start_offset=0, max_delivery_count=3)
    for delivery in (1, 2, 3):
        assert sp.acquire("m", [(0, 0)], 500, T0) == [AcquiredRecords(0, 0, delivery)]
        assert sp.acknowledge("m", [(0, 0, [RELEASE])]) == ErrorCode.none
    assert sp.start_offset == 1  # archived after its third delivery
    assert sp.acquire("m", [(0, 0)], 500, T0) == []


def test_expired_locks_and_departed_members_give_records_back() -> None:
    sp = SharePartition(start_offset=0, lock_duration_ms=30_000)
    sp.acquire("m1", [(0, 4)], 500, T0)
    sp.acquire("m2", [(5, 9)], 500, T0 + 10_000)
    assert sp.expire_locks(T0 + 29_999) == T0 + 30_000
    assert sp.expire_locks(T0 + 30_000) == T0 + 40_000  # m1's lease is over
    assert sp.acquire("m3", [(0, 9)], 500, T0 + 30_001) == [AcquiredRecords(0, 4, 2)]
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT])]) == ErrorCode.invalid_record_state
    assert sp.release_member("m2") == 5
    assert sp.next_fetch_offset() == 5


def test_the_in_flight_cap_and_record_limit_bound_what_is_leased() -> None:
    sp = SharePartition(start_offset=0, max_record_locks=15)
    assert sp.acquire("m", [(0, 9), (10, 19), (20, 29)], 500, T0) == [
        AcquiredRecords(0, 9, 1), AcquiredRecords(10, 19, 1)]  # whole batches
    assert sp.acquire("m", [(20, 29)], 500, T0) == []  # 20 locks held, cap 15
    sp.acknowledge("m", [(0, 9, [ACCEPT]), (10, 19, [ACCEPT])])
    exact = SharePartition(start_offset=0)
    assert exact.acquire("m", [(0, 9)], 4, T0, record_limit=True) == [
        AcquiredRecords(0, 3, 1)]
    assert exact.next_fetch_offset() == 4
    assert exact.acquire("m", [(4, 9)], 4, T0, record_limit=True) == [
        AcquiredRecords(4, 7, 1)]


def test_records_in_flight_count_from_the_start_offset_as_in_kafka() -> None:
    """Kafka's numInFlightRecords is the cached span from the start offset: records
    settled behind one still leased count too. At the cap no new batch is leased, but
    records released inside the span still are (lastOffsetAndMaxRecordsToAcquire)."""
    sp = SharePartition(start_offset=0, max_record_locks=20)
    assert sp.acquire("m", [(0, 9), (10, 19)], 500, T0) == [
        AcquiredRecords(0, 9, 1), AcquiredRecords(10, 19, 1)]
    # 1-19 settle; record 0 stays leased, so the start offset stays at 0: 20 in flight.
    sp.acknowledge("m", [(1, 9, [ACCEPT]), (10, 19, [RELEASE])])
    assert sp.acquired_count() == 1 and sp.in_flight_count() == 20
    assert sp.acquire("m", [(10, 19), (20, 29)], 500, T0) == [AcquiredRecords(10, 19, 2)]
    assert sp.acquire("m", [(20, 29)], 500, T0) == []  # at the cap: nothing new
    sp.acknowledge("m", [(0, 0, [ACCEPT]), (10, 19, [ACCEPT])])
    assert sp.in_flight_count() == 0
    assert sp.acquire("m", [(20, 29)], 500, T0) == [AcquiredRecords(20, 29, 1)]


def test_a_single_large_batch_is_leased_whole_in_batch_mode_exactly_in_record_limit() -> None:
    """MaxRecords is a soft limit in batch_optimized mode (Kafka leases up to the end of
    the batch holding the last wanted offset) and exact in record_limit mode."""
    sp = SharePartition(start_offset=0)
    assert sp.acquire("m", [(0, 4999)], 500, T0) == [AcquiredRecords(0, 4999, 1)]
    exact = SharePartition(start_offset=0)
    assert exact.acquire("m", [(0, 4999)], 500, T0, record_limit=True) == [
        AcquiredRecords(0, 499, 1)]


def test_acknowledging_record_by_record_is_linear() -> None:
    """A client acknowledging 5,000 records of one batch with random types sends
    thousands of runs; each touches only its own offsets (this took minutes, and held
    the broker's event loop, when every run copied and sorted the whole batch)."""
    rng = random.Random(7)
    sp = SharePartition(start_offset=0)
    sp.acquire("m", [(0, 4999)], 5000, T0)
    runs = []
    for offset in range(5000):
        kind = rng.choice([ACCEPT, RELEASE, REJECT])
        if runs and runs[-1][2] == [kind] and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset, [kind])
        else:
            runs.append((offset, offset, [kind]))
    assert len(runs) > 2000
    update = sp.begin_acknowledge("m", runs, T0)
    assert not isinstance(update, ErrorCode)
    sp.commit(update)
    released = {o for f, la, (k,) in runs if k == RELEASE for o in range(f, la + 1)}
    assert sp.acquired_count() == 0
    again = sp.acquire("m2", [(0, 4999)], 5000, T0)
    assert {o for a in again for o in range(a.first_offset, a.last_offset + 1)} == released
    assert {a.delivery_count for a in again} == {2}


def test_gaps_are_archived_and_the_start_offset_moves_past_them() -> None:
    sp = SharePartition(start_offset=0)
    sp.acquire("m", [(0, 9)], 500, T0)
    assert sp.acknowledge("m", [(0, 9, [ACCEPT] * 3 + [GAP] * 2 + [ACCEPT] * 5)]) == \
        ErrorCode.none
    assert sp.start_offset == 10 and sp.state_batches() == []


def test_an_acknowledgement_settles_only_once_written_and_a_failed_write_undoes_it() -> None:
    """Seed 001's persist-before-commit: records being acknowledged are neither
    redelivered nor passed by the start offset until the write succeeds; a failed write
    leaves them leased as before, and a lease that ran out meanwhile then ends."""
    sp = SharePartition(start_offset=0, lock_duration_ms=1_000)
    sp.acquire("m1", [(0, 4), (5, 9)], 500, T0)
    update = sp.begin_acknowledge("m1", [(0, 4, [RELEASE]), (5, 9, [ACCEPT])])
    assert not isinstance(update, ErrorCode)
    assert update.batches == [PersisterStateBatch(0, 4, RecordState.AVAILABLE, 1),
                              PersisterStateBatch(5, 9, RecordState.ACKNOWLEDGED, 1)]
    assert (update.start_offset, update.delivery_complete_count) == (0, 5)
    assert sp.acquire("m2", [(0, 9)], 500, T0 + 1) == []  # released, not yet written
    assert sp.next_fetch_offset() == 10
    sp.rollback(update)
    assert sp.acknowledge("m2", [(0, 4, [ACCEPT])]) == ErrorCode.invalid_record_state
    sp.expire_locks(T0 + 1_000)  # m1's leases ran out while the write failed
    assert sp.acquire("m2", [(0, 9)], 500, T0 + 1_001) == [
        AcquiredRecords(0, 4, 2), AcquiredRecords(5, 9, 2)]
    update = sp.begin_acknowledge("m2", [(0, 9, [ACCEPT] * 10)])
    assert not isinstance(update, ErrorCode)  # written from the start offset as it is
    assert (update.start_offset, update.delivery_complete_count) == (0, 10)
    sp.expire_locks(T0 + 1_002)
    assert sp.start_offset == 0  # an expiry elsewhere does not pass unwritten records
    sp.commit(update)
    assert sp.start_offset == 10 and sp.state_batches() == []


def test_a_write_stored_though_its_answer_was_lost_keeps_what_was_accepted_before(
        ) -> None:
    """As Kafka's SharePartition, an acknowledgement is written with the start offset
    the partition has, not the one it will have: the start offset moves once the write
    succeeded, and the next write carries it. A write that fails at the leader (timed
    out) may yet be stored by the share coordinator; had it carried the start offset it
    would give, the coordinator would have dropped the state below it, and the leader's
    next write, from the start offset as it stayed, would leave an accepted record with
    no state: a new leader delivers it again (chaos run seed 22, share-accepted-twice)."""
    sp = SharePartition(start_offset=0)
    stored: tuple[int, list[PersisterStateBatch]] = (0, [])

    def store(start: int, batches: list[PersisterStateBatch]) -> None:
        nonlocal stored  # as the share coordinator merges a write
        stored = (start, combine_state_batches(stored[1], batches, start))

    sp.acquire("m", [(0, 4)], 500, T0)
    first = sp.begin_acknowledge("m", [(0, 4, [ACCEPT] * 3 + [RELEASE, ACCEPT])])
    assert not isinstance(first, ErrorCode)
    store(first.start_offset, first.batches)
    sp.commit(first)  # 0-2 and 4 accepted, 3 released: the start offset is 3
    assert sp.acquire("m", [(0, 4), (5, 9)], 500, T0 + 1) == [
        AcquiredRecords(3, 3, 2), AcquiredRecords(5, 9, 1)]
    lost = sp.begin_acknowledge("m", [(3, 3, [ACCEPT]), (5, 9, [ACCEPT])])
    assert not isinstance(lost, ErrorCode)
    assert (lost.start_offset, lost.delivery_complete_count) == (3, 7)
    store(lost.start_offset, lost.batches)
    sp.rollback(lost)  # stored, but the leader was told it failed: still m's
    assert sp.acquire("m", [(10, 14)], 500, T0 + 2) == [AcquiredRecords(10, 14, 1)]
    later = sp.begin_acknowledge("m", [(10, 14, [ACCEPT])])
    assert not isinstance(later, ErrorCode)
    store(later.start_offset, later.batches)
    sp.commit(later)
    restored = SharePartition.from_state(*stored)  # the leader changed
    again = restored.acquire("m2", [(0, 4), (5, 9), (10, 14)], 500, T0 + 3)
    assert 4 not in {o for a in again for o in range(a.first_offset, a.last_offset + 1)}
    assert restored.start_offset == 15  # the lost write's acceptances were stored too


def test_a_new_leader_rebuilds_the_partition_from_the_stored_state() -> None:
    """Stored batches come back with their delivery counts; what was leased and never
    settled (a gap in the stored state) is delivered again as new."""
    stored = [PersisterStateBatch(10, 14, RecordState.ACKNOWLEDGED, 1),
              PersisterStateBatch(20, 24, RecordState.AVAILABLE, 3),
              PersisterStateBatch(25, 29, RecordState.ARCHIVED, 5)]
    sp = SharePartition.from_state(5, stored, max_delivery_count=5)
    assert sp.start_offset == 5 and sp.end_offset == 30
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("m", [(0, 9), (10, 19), (20, 29)], 500, T0) == [
        AcquiredRecords(5, 9, 1), AcquiredRecords(15, 19, 1), AcquiredRecords(20, 24, 4)]
    assert sp.acknowledge("m", [(5, 9, [ACCEPT]), (15, 24, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 30 and sp.delivery_complete_count() == 0


def test_a_new_leader_delivers_a_record_leased_at_its_last_delivery_within_the_limit(
        ) -> None:
    """A record leased at its last delivery when the state is written (with another
    record's acknowledgement) comes back to a new leader at most once more, with the
    count at the limit: Kafka writes no acquired record, so its store has the count the
    record was last made available with (found by tests/simulation/test_share_simulation
    seed 1)."""
    sp = SharePartition(start_offset=0, max_delivery_count=2)
    sp.acquire("m1", [(0, 1)], 500, T0)
    assert sp.acknowledge("m1", [(0, 1, [RELEASE])]) == ErrorCode.none
    assert sp.acquire("m2", [(0, 1)], 500, T0 + 1) == [AcquiredRecords(0, 1, 2)]
    update = sp.begin_acknowledge("m2", [(0, 0, [ACCEPT])])
    assert not isinstance(update, ErrorCode)
    assert (update.start_offset, update.batches) == (0, [
        PersisterStateBatch(0, 0, RecordState.ACKNOWLEDGED, 2),
        PersisterStateBatch(1, 1, RecordState.AVAILABLE, 1)])  # offset 1 still leased
    sp.commit(update)
    restored = SharePartition.from_state(update.start_offset, update.batches,
                                         max_delivery_count=2)  # the leader changed
    assert restored.acquire("m3", [(0, 1)], 500, T0 + 2) == [AcquiredRecords(1, 1, 2)]
    restored.expire_locks(T0 + 2 + restored.lock_duration_ms)
    assert restored.acquire("m3", [(0, 1)], 500, T0 + 3) == []  # archived at the limit
    assert restored.start_offset == 2


def test_a_failed_write_does_not_undo_what_other_records_of_its_batch_did_meanwhile(
        ) -> None:
    """While an acknowledgement of one record is written, the others of its batch run out
    of their lease and go to the dead-letter queue; the write then fails. Only the
    acknowledged record is as before: the dead letters stay archived, not sent again
    (found by tests/simulation/test_share_simulation seed 42)."""
    sp = SharePartition(start_offset=0, max_delivery_count=1, lock_duration_ms=1_000,
                        dead_letter=True)
    sp.acquire("m1", [(0, 3)], 500, T0)
    update = sp.begin_acknowledge("m1", [(0, 0, [AcknowledgeType.RENEW])], T0 + 900)
    assert not isinstance(update, ErrorCode)
    sp.expire_locks(T0 + 1_000)  # offsets 1-3 ran out at their last delivery
    assert sp.archiving() == [(1, 3, 1, DELIVERY_COUNT_EXCEEDED)]
    assert sp.archived(1, 3) == 3  # the dead-letter queue has them
    sp.rollback(update)
    assert sp.archiving() == []
    assert sp.acknowledge("m1", [(0, 0, [ACCEPT])]) == ErrorCode.none  # still m1's
    assert sp.start_offset == 4


def test_with_a_dead_letter_queue_spent_and_rejected_records_wait_for_it() -> None:
    """KIP-1191: a record that used its deliveries, or was rejected, is ARCHIVING (stored
    as such, and it holds the start offset) until the queue has it; then ARCHIVED."""
    sp = SharePartition(start_offset=0, max_delivery_count=2, dead_letter=True)
    sp.acquire("m", [(0, 4)], 500, T0)
    assert sp.acknowledge("m", [(0, 4, [RELEASE, REJECT, ACCEPT, ACCEPT, GAP])]) == \
        ErrorCode.none
    assert sp.acquire("m", [(0, 4)], 500, T0) == [AcquiredRecords(0, 0, 2)]
    assert sp.acknowledge("m", [(0, 0, [RELEASE])]) == ErrorCode.none  # its last delivery
    assert sp.archiving() == [(0, 0, 2, DELIVERY_COUNT_EXCEEDED), (1, 1, 1, REJECTED)]
    assert sp.start_offset == 0  # pinned until the queue has them
    assert [b.delivery_state for b in sp.state_batches()[:2]] == [RecordState.ARCHIVING] * 2
    assert sp.acquire("m", [(0, 4)], 500, T0) == []  # never delivered again
    assert sp.archived(0, 1) == 2
    assert sp.archiving() == [] and sp.start_offset == 5

    restored = SharePartition.from_state(
        10, [PersisterStateBatch(10, 12, RecordState.ARCHIVING, 5)], dead_letter=True)
    assert restored.archiving() == [(10, 12, 5, RESTORED)]


def test_without_a_dead_letter_queue_spent_records_are_archived_at_once() -> None:
    sp = SharePartition(start_offset=0, max_delivery_count=1)
    sp.acquire("m", [(0, 1)], 500, T0)
    assert sp.acknowledge("m", [(0, 1, [RELEASE, REJECT])]) == ErrorCode.none
    assert sp.archiving() == [] and sp.start_offset == 2


def test_markers_and_aborted_batches_are_archived_not_delivered() -> None:
    """A transaction marker (or, reading committed, an aborted batch) between delivered
    batches is archived as it is reached, so the start offset moves over it."""
    sp = SharePartition(start_offset=0)
    assert sp.acquire("m", [(0, 4), (6, 9)], 500, T0, skipped=[(5, 5)]) == [
        AcquiredRecords(0, 4, 1), AcquiredRecords(6, 9, 1)]
    assert sp.acknowledge("m", [(0, 4, [ACCEPT]), (6, 9, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 10
    restored = SharePartition.from_state(
        0, [PersisterStateBatch(3, 4, RecordState.ACKNOWLEDGED, 1)])
    assert restored.acquire("m", [(0, 1)], 500, T0, skipped=[(2, 2)]) == [
        AcquiredRecords(0, 1, 1)]
    restored.acknowledge("m", [(0, 1, [ACCEPT])])
    assert restored.start_offset == 5  # the never-delivered marker at 2 was archived


def test_renew_keeps_the_records_with_a_fresh_lock() -> None:
    """KIP-1222: a member that needs longer renews its acquisition lock; the records stay
    its own past the first deadline, and nothing is written as settled."""
    sp = SharePartition(start_offset=0, lock_duration_ms=1_000)
    sp.acquire("m", [(0, 4)], 500, T0)
    assert sp.acknowledge("m", [(0, 4, [AcknowledgeType.RENEW])], now_ms=T0 + 900) == \
        ErrorCode.none
    assert sp.expire_locks(T0 + 1_000) == T0 + 1_900  # still held, until the new deadline
    assert sp.acknowledge("x", [(0, 4, [AcknowledgeType.RENEW])], T0 + 901) == \
        ErrorCode.invalid_record_state  # not its records
    sp.expire_locks(T0 + 1_900)
    assert sp.acquire("m2", [(0, 4)], 500, T0 + 1_901) == [AcquiredRecords(0, 4, 2)]
