"""The transaction coordinator's state machine and its records, without a coordinator:
Kafka's transitions (TransactionMetadataTest's cases), KIP-360 retries and fencing,
transactions v2 epoch bumps, and ``__transaction_state`` bytes as Kafka lays them out."""

from __future__ import annotations

import pytest

from ottla.coordinator.transaction.metadata import (
    MAX_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    new_transaction,
)
from ottla.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from ottla.protocol.errors import ErrorCode

S = TransactionState
T0 = 1_700_000_000_000


def initialized(epoch: int = 0) -> TransactionMetadata:
    fresh = new_transaction("payments", 1000, 60_000, T0)
    md = fresh.bump_epoch(60_000, None, T0)
    assert isinstance(md, TransactionMetadata)
    while md.producer_epoch < epoch:
        md = md.bump_epoch(60_000, None, T0)
        assert isinstance(md, TransactionMetadata)
    return md


def test_a_transaction_commits_through_kafkas_states() -> None:
    md = initialized()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.EMPTY, 0, -1)
    md = md.add_partitions(frozenset({("orders", 0)}), T0 + 10)
    assert (md.state, md.start_ms) == (S.ONGOING, T0 + 10)
    md = md.add_partitions(frozenset({("orders", 1)}), T0 + 20)
    assert md.start_ms == T0 + 10 and md.partitions == {("orders", 0), ("orders", 1)}
    md = md.prepare_end(commit=True, client_version=0, next_producer_id=-1, now_ms=T0 + 30)
    assert (md.state, md.producer_epoch) == (S.PREPARE_COMMIT, 0)  # v1: no bump
    md = md.complete(T0 + 40)
    assert (md.state, md.partitions, md.producer_epoch) == (S.COMPLETE_COMMIT, frozenset(), 0)
    md = md.add_partitions(frozenset({("orders", 2)}), T0 + 50)  # the next transaction
    assert (md.state, md.start_ms) == (S.ONGOING, T0 + 50)


@pytest.mark.parametrize("state, target", [
    (S.EMPTY, "prepare_commit"), (S.COMPLETE_COMMIT, "prepare_abort"),
    (S.PREPARE_COMMIT, "add"), (S.PREPARE_ABORT, "add"), (S.EMPTY, "fence"),
    (S.ONGOING, "dead"), (S.PREPARE_COMMIT, "bump")])
def test_transitions_kafka_forbids_are_refused(state: TransactionState, target: str) -> None:
    md = TransactionMetadata("t", 5, 3, 60_000, state, T0,
                             frozenset({("x", 0)}) if state.pending else frozenset(), T0)
    actions = {"prepare_commit": lambda: md.prepare_end(
                   commit=True, client_version=0, next_producer_id=-1, now_ms=T0),
               "prepare_abort": lambda: md.prepare_end(
                   commit=False, client_version=0, next_producer_id=-1, now_ms=T0),
               "add": lambda: md.add_partitions(frozenset({("x", 1)}), T0),
               "fence": md.fence_epoch, "dead": md.dead,
               "bump": lambda: md.bump_epoch(60_000, None, T0)}
    with pytest.raises(IllegalTransition):
        actions[target]()


def test_init_producer_id_retries_and_fencing_follow_kip_360() -> None:
    md = initialized(epoch=3)
    again = md.bump_epoch(60_000, expected_epoch=3, now_ms=T0)  # recovering producer
    assert isinstance(again, TransactionMetadata)
    assert (again.producer_epoch, again.last_producer_epoch) == (4, 3)
    retried = again.bump_epoch(60_000, expected_epoch=3, now_ms=T0)  # its retry
    assert isinstance(retried, TransactionMetadata)
    assert (retried.producer_epoch, retried.last_producer_epoch) == (4, 3)
    assert again.bump_epoch(60_000, expected_epoch=1, now_ms=T0) == ErrorCode.producer_fenced
    new_instance = again.bump_epoch(30_000, expected_epoch=None, now_ms=T0 + 1)
    assert isinstance(new_instance, TransactionMetadata)
    assert (new_instance.producer_epoch, new_instance.last_producer_epoch,
            new_instance.timeout_ms) == (5, -1, 30_000)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    md = TransactionMetadata("t", 7, MAX_EPOCH - 1, 60_000, S.COMPLETE_ABORT, T0)
    assert md.epoch_exhausted
    with pytest.raises(IllegalTransition):
        md.bump_epoch(60_000, None, T0)
    rotated = md.rotate_producer_id(8, 60_000, T0, record_last_epoch=True)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_epoch,
            rotated.previous_producer_id) == (8, 0, MAX_EPOCH - 1, 7)


def test_a_hanging_transaction_is_fenced_then_aborted() -> None:
    md = initialized(epoch=2).add_partitions(frozenset({("a", 0)}), T0)
    fenced = md.fence_epoch()
    assert (fenced.state, fenced.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 3)
    aborting = fenced.prepare_end(commit=False, client_version=0, next_producer_id=-1,
                                   now_ms=T0 + 1)
    assert (aborting.state, aborting.partitions) == (S.PREPARE_ABORT, {("a", 0)})
    assert aborting.complete(T0 + 2).state is S.COMPLETE_ABORT


def test_transactions_v2_bump_the_epoch_at_every_end_and_overflow_to_the_next_id() -> None:
    md = initialized(epoch=4).add_partitions(frozenset({("a", 0)}), T0)
    ending = md.prepare_end(commit=True, client_version=2, next_producer_id=-1, now_ms=T0)
    assert (ending.producer_epoch, ending.last_producer_epoch) == (5, 4)
    assert ending.complete(T0).producer_epoch == 5
    last = TransactionMetadata("t", 9, MAX_EPOCH - 1, 60_000, S.ONGOING, T0,
                               frozenset({("a", 0)}), T0)
    overflowing = last.prepare_end(commit=False, client_version=2, next_producer_id=10,
                                   now_ms=T0)
    done = overflowing.complete(T0 + 1)
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id,
            done.next_producer_id) == (10, 0, 9, -1)


def test_records_round_trip_in_both_value_versions() -> None:
    md = initialized(epoch=1).add_partitions(frozenset({("orders", 1), ("orders", 0),
                                                        ("audit", 3)}), T0 + 5)
    for version in (0, 1):
        value = decode_value(encode_value(md.to_value(), version))
        assert value is not None
        back = TransactionMetadata.from_value("payments", value)
        assert (back.state, back.partitions, back.producer_epoch, back.start_ms) == \
            (md.state, md.partitions, md.producer_epoch, md.start_ms)
    assert TransactionMetadata.from_value("payments", decode_value(  # type: ignore[arg-type]
        encode_value(initialized().to_value(), 0))).partitions == frozenset()
    assert decode_value(encode_value(None, 1)) is None  # a tombstone
    assert decode_key(encode_key("payments")) == "payments"


def test_the_bytes_are_kafkas() -> None:
    """Key: int16 0 + string. Value v0: fixed-width fields and int32-counted arrays;
    v1: compact arrays and strings, tagged fields only where not default."""
    assert encode_key("tx") == bytes.fromhex("0000" "0002" "7478")
    value = TransactionLogValue(producer_id=5, producer_epoch=2, transaction_timeout_ms=60000,
                                transaction_status=1, partitions={"t": (0, 1)},
                                last_update_timestamp_ms=10, start_timestamp_ms=9)
    assert encode_value(value, 0) == bytes.fromhex(
        "0000" "0000000000000005" "0002" "0000ea60" "01" "00000001" "0001" "74"
        "00000002" "00000000" "00000001" "000000000000000a" "0000000000000009")
    assert encode_value(value, 1) == bytes.fromhex(
        "0001" "0000000000000005" "0002" "0000ea60" "01" "02" "0274" "03" "00000000"
        "00000001" "00" "000000000000000a" "0000000000000009" "00")
    tagged = encode_value(TransactionLogValue(
        producer_id=5, producer_epoch=0, transaction_timeout_ms=1, transaction_status=0,
        partitions=None, last_update_timestamp_ms=0, start_timestamp_ms=-1,
        previous_producer_id=4, client_transaction_version=2), 1)
    assert tagged is not None
    # null compact array (0), then tags 0 (8 bytes) and 2 (2 bytes)
    assert tagged.endswith(bytes.fromhex("02" "00" "08" "0000000000000004" "02" "02" "0002"))
