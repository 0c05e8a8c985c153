"""The log side of transactions without a broker: producer state following open
transactions and their markers (the last stable offset's bound), marker checks, and the
aborted-transaction index in Kafka's ``.txnindex`` format."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    CONTROL_ABORT,
    build_batch,
    build_marker,
    control_record_type,
    decode_records,
    marker_coordinator_epoch,
    read_header,
)
from ottla.storage.producer_state import CompletedTxn, ProducerStateManager
from ottla.storage.transaction_index import AbortedTxn, TransactionIndex


def txn_batch(pid: int, epoch: int, seq: int, offset: int, n: int = 1) -> bytes:
    return build_batch([(b"k", b"v")] * n, base_offset=offset, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=True)


def test_a_marker_is_a_control_batch_as_kafka_writes_it() -> None:
    marker = build_marker(producer_id=7, producer_epoch=3, commit=False, coordinator_epoch=12,
                          timestamp=1000, base_offset=40)
    header = read_header(marker)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (7, 3, 40)
    (record,) = decode_records(marker, 0, header)
    assert control_record_type(record.key) == CONTROL_ABORT
    assert record.key == b"\x00\x00\x00\x00" and record.value == b"\x00\x00\x00\x00\x00\x0c"
    assert marker_coordinator_epoch(record.value) == 12


def test_open_transactions_bound_the_last_stable_offset_until_their_markers() -> None:
    state = ProducerStateManager()
    state.update(read_header(txn_batch(1, 0, 0, 10, 3)), 10, 12)
    state.update(read_header(txn_batch(2, 0, 0, 13)), 13, 13)
    state.update(read_header(txn_batch(1, 0, 3, 14)), 14, 14)
    assert state.first_unstable_offset() == 10
    commit = read_header(build_marker(producer_id=1, producer_epoch=0, commit=True,
                                      coordinator_epoch=0, timestamp=0, base_offset=15))
    assert state.end_transaction(commit, 15, False, 0) == CompletedTxn(1, 10, 15, False)
    assert state.first_unstable_offset() == 13
    abort = read_header(build_marker(producer_id=2, producer_epoch=0, commit=False,
                                     coordinator_epoch=0, timestamp=0, base_offset=16))
    assert state.end_transaction(abort, 16, True, 0) == CompletedTxn(2, 13, 16, True)
    assert state.first_unstable_offset() is None
    state.update(read_header(txn_batch(1, 0, 4, 17)), 17, 17)  # its next transaction
    assert state.first_unstable_offset() == 17
    state.truncate()
    assert state.first_unstable_offset() is None


def test_a_marker_from_an_older_epoch_or_coordinator_is_refused() -> None:
    state = ProducerStateManager()
    state.update(read_header(txn_batch(1, 5, 0, 0)), 0, 0)
    with pytest.raises(KafkaError) as e:
        state.check_marker(1, 4, 0)
    assert e.value.code == ErrorCode.invalid_producer_epoch
    marker = read_header(build_marker(producer_id=1, producer_epoch=5, commit=True,
                                      coordinator_epoch=3, timestamp=0, base_offset=1))
    state.end_transaction(marker, 1, False, 3)
    with pytest.raises(KafkaError) as e:
        state.check_marker(1, 5, 2)
    assert e.value.code == ErrorCode.transaction_coordinator_fenced
    state.check_marker(1, 6, 3)  # a bumped epoch from the same coordinator
    state.check_marker(99, 0, 0)  # a producer this partition never saw


def test_a_coordinators_batch_of_a_new_epoch_needs_no_sequence() -> None:
    """TxnOffsetCommit's batch in ``__consumer_offsets`` is built by the group coordinator
    without sequence numbers: a producer instance with a bumped epoch writes it (Kafka
    checks sequences for clients' batches only); an older epoch is still fenced."""
    state = ProducerStateManager()
    state.update(read_header(txn_batch(1, 0, -1, 0)), 0, 0)
    assert state.check(read_header(txn_batch(1, 1, -1, 1))) is None
    with pytest.raises(KafkaError) as e:
        state.check(read_header(txn_batch(1, 1, 5, 1)))  # a client's batch still is
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    state.update(read_header(txn_batch(1, 2, -1, 1)), 1, 1)
    with pytest.raises(KafkaError) as e:
        state.check(read_header(txn_batch(1, 1, -1, 2)))
    assert e.value.code == ErrorCode.invalid_producer_epoch


def test_a_verification_is_good_until_the_producer_appends_again() -> None:
    """Kafka's VerificationGuard: a guard taken before asking the coordinator holds until
    any batch or marker of that producer is appended."""
    state = ProducerStateManager()
    guard = state.verification_guard(1)
    assert state.guard_holds(1, guard)
    abort = read_header(build_marker(producer_id=1, producer_epoch=0, commit=False,
                                     coordinator_epoch=0, timestamp=0, base_offset=0))
    state.end_transaction(abort, 0, True, 0)  # the transaction ended meanwhile
    assert not state.guard_holds(1, guard) and not state.has_ongoing(1)
    guard = state.verification_guard(1)
    state.update(read_header(txn_batch(1, 0, 0, 1)), 1, 1)
    assert not state.guard_holds(1, guard) and state.has_ongoing(1)
    assert state.guard_holds(2, state.verification_guard(2))


def test_the_aborted_transaction_index_is_kafkas_file(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TransactionIndex(path, 100)
    index.append(AbortedTxn(7, 100, 110, 100))
    index.append(AbortedTxn(8, 105, 120, 111))
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 68 and data[:34] == bytes.fromhex(
        "0000" "0000000000000007" "0000000000000064" "000000000000006e" "0000000000000064")
    with pytest.raises(ValueError):
        index.append(AbortedTxn(9, 90, 115, 111))  # markers come in offset order
    again = TransactionIndex(path, 100)
    assert again.entries == index.entries
    assert again.collect(111, 130) == ([AbortedTxn(8, 105, 120, 111)], False)
    assert again.collect(0, 105) == ([AbortedTxn(7, 100, 110, 100)], True)
    assert again.collect(0, 100) == ([], True)  # an entry's stable offset reached it
    again.truncate_to(120)
    assert again.entries == [AbortedTxn(7, 100, 110, 100)]
    assert TransactionIndex(path, 100).entries == again.entries
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn entry after a crash
    assert TransactionIndex(path, 100).entries == again.entries



# --- the log ------------------------------------------------------------------------------

def make_log(path: str, clean: bool = False, **configs: str) -> Any:
    from ottla.storage.log import Log
    from ottla.storage.log_config import LogConfig

    return Log(path, "t", 0, LogConfig.resolve(configs), now_ms=1000, clean_shutdown=clean)


def lead(log: Any, data: bytes) -> int:
    """Append as a single-replica leader: the high watermark follows the log end."""
    batch = bytearray(data)
    first = log.append_as_leader(batch, read_header(batch), 0, now_ms=1000).first_offset
    log.high_watermark = log.log_end_offset
    return first


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> bytes:
    return build_marker(producer_id=pid, producer_epoch=epoch, commit=commit,
                        coordinator_epoch=coordinator_epoch, timestamp=1000)


def transactions(log: Any) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.entries]


def test_a_marker_above_the_high_watermark_still_holds_the_last_stable_offset(
        tmp_path) -> None:
    """Kafka's unreplicatedTxns: until the high watermark passes a transaction's marker a
    new leader could lack the marker, so the transaction still bounds the LSO."""
    log = make_log(str(tmp_path / "t-0"))
    lead(log, build_batch([(b"k", b"plain")]))  # 0
    lead(log, txn_batch(1, 0, 0, 0, 2))  # 1-2
    batch = bytearray(marker(1, 0, commit=True))
    log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)  # 3, not replicated
    assert log.first_unstable_offset() == 1
    log.high_watermark = 3
    assert log.first_unstable_offset() == 1  # the marker itself is not below it yet
    log.high_watermark = 4
    assert log.first_unstable_offset() is None


def test_a_log_tracks_open_transactions_and_indexes_the_aborted(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "300"})
    lead(log, build_batch([(b"k", b"plain")]))  # 0: not transactional
    lead(log, txn_batch(1, 0, 0, 0, 2))  # 1-2: producer 1 opens
    lead(log, txn_batch(2, 0, 0, 0))  # 3: producer 2 opens
    assert log.first_unstable_offset() == 1
    assert lead(log, marker(1, 0, commit=False)) == 4
    assert log.first_unstable_offset() == 3
    assert transactions(log) == [AbortedTxn(1, 1, 4, 3)]
    lead(log, marker(2, 0, commit=True))  # 5
    assert log.first_unstable_offset() is None and len(transactions(log)) == 1
    lead(log, txn_batch(2, 0, 1, 0))  # 6
    lead(log, marker(2, 0, commit=False))  # 7
    assert transactions(log)[-1] == AbortedTxn(2, 6, 7, 8)
    assert log.collect_aborted(0, 8) == [AbortedTxn(1, 1, 4, 3), AbortedTxn(2, 6, 7, 8)]
    assert log.collect_aborted(5, 8) == [AbortedTxn(2, 6, 7, 8)]
    assert log.collect_aborted(0, 3) == [AbortedTxn(1, 1, 4, 3)]


def test_a_marker_from_a_fenced_producer_epoch_is_refused(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    lead(log, txn_batch(1, 3, 0, 0))
    with pytest.raises(KafkaError) as e:
        lead(log, marker(1, 2, commit=True))
    assert e.value.code == ErrorCode.invalid_producer_epoch
    assert log.log_end_offset == 1 and log.first_unstable_offset() == 0


@pytest.mark.parametrize("clean", [True, False])
def test_a_reloaded_log_has_the_same_transactions(tmp_path, clean: bool) -> None:
    """After a clean shutdown the .txnindex files are read; after a crash the recovered
    segments' indexes are rebuilt from their markers."""
    path = str(tmp_path / "t-0")
    log = make_log(path, **{"segment.bytes": "250"})
    lead(log, txn_batch(1, 0, 0, 0))
    lead(log, txn_batch(2, 0, 0, 0))
    lead(log, marker(1, 0, commit=False))
    lead(log, txn_batch(3, 0, 0, 0))
    lead(log, marker(2, 0, commit=False))
    expected = transactions(log)
    log.flush()
    log.close()
    if not clean:
        for name in os.listdir(path):
            if name.endswith(".txnindex"):
                os.unlink(os.path.join(path, name))
    again = make_log(path, clean=clean)
    assert transactions(again) == expected == [AbortedTxn(1, 0, 2, 1), AbortedTxn(2, 1, 4, 3)]
    assert again.first_unstable_offset() == 0  # no marker known to be replicated yet
    again.high_watermark = again.log_end_offset  # the checkpoint, as a partition sets it
    assert again.first_unstable_offset() == 3  # producer 3 is still open


def test_truncation_drops_the_aborts_above_and_reopens_the_transactions(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    lead(log, txn_batch(1, 0, 0, 0))
    lead(log, marker(1, 0, commit=False))
    assert log.first_unstable_offset() is None
    log.truncate_to(1)
    assert transactions(log) == [] and log.first_unstable_offset() == 0


def test_a_follower_appends_markers_as_they_come(tmp_path) -> None:
    leader = make_log(str(tmp_path / "leader"))
    lead(leader, txn_batch(1, 0, 0, 0))
    lead(leader, marker(1, 0, commit=False))
    data = leader.read(0, 1 << 20).records.read()
    follower = make_log(str(tmp_path / "follower"))
    follower.append_as_follower(data, 1000)
    assert transactions(follower) == transactions(leader) == [AbortedTxn(1, 0, 1, 2)]
