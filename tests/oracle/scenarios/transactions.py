"""Transaction errors: InitProducerId fencing an older instance, and what that instance
then gets from AddPartitionsToTxn, EndTxn and Produce; EndTxn in states that do not allow
it; coordinator look-ups of ids that do not exist; a timeout above the maximum."""

from __future__ import annotations

from ottla.protocol.api import ApiKey
from tests.oracle.model import Json, scenario
from tests.oracle.scenarios.common import (
    add_partitions,
    end_txn,
    init_producer_id,
    produce_txn,
    transaction,
    wait_for_markers,
)
from tests.oracle.target import Target


@scenario("Transactions", ci=True)
def transaction_fencing(t: Target) -> Json:
    """A producer opens a transaction on a partition; a second InitProducerId for its
    transactional id fences it (and aborts its transaction). The old epoch then tries
    AddPartitionsToTxn, Produce, EndTxn and InitProducerId with its id and epoch; the new
    epoch commits an empty transaction, commits a real one, and retries the commit."""
    name, txn = t.topic("a"), t.topic("txn")
    t.create_topic(name, 2)
    r: dict[str, Json] = {}
    old = transaction(t, txn, name, 0, ["open"], None, t.now)
    pid, stale = old["producer_id"], old["epoch"]
    fenced = init_producer_id(t, txn)
    r["init_again"] = fenced
    epoch = fenced["producer_epoch"]
    r["add_partitions_stale_epoch"] = add_partitions(t, txn, pid, stale, name, [1])
    r["produce_stale_epoch"] = produce_txn(t, txn, pid, stale, name, 1, ["zombie"], 0, t.now)
    r["produce_stale_epoch_same_partition"] = produce_txn(t, txn, pid, stale, name, 0,
                                                          ["zombie"], 1, t.now)
    r["end_txn_stale_epoch"] = end_txn(t, txn, pid, stale, True)
    r["init_with_stale_epoch"] = t.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": txn, "transaction_timeout": 60000, "producer_id": pid,
        "producer_epoch": stale})
    r["end_txn_empty_commit"] = end_txn(t, txn, pid, epoch, True)
    r["end_txn_empty_abort"] = end_txn(t, txn, pid, epoch, False)
    current = {"producer_id": pid, "epoch": epoch, "sequence": 0}
    transaction(t, txn, name, 1, ["committed"], None, t.now, current)
    r["commit"] = end_txn(t, txn, pid, epoch, True)
    wait_for_markers(t, txn, True)  # until then Kafka answers CONCURRENT_TRANSACTIONS
    r["commit_retried"] = end_txn(t, txn, pid, epoch, True)
    r["abort_after_commit"] = end_txn(t, txn, pid, epoch, False)
    r["epoch_above_current"] = end_txn(t, txn, pid, epoch + 3, True)
    return r


@scenario("Transactions")
def transaction_unknown_ids(t: Target) -> Json:
    """AddPartitionsToTxn and EndTxn for a transactional id never initialised, a producer
    id that is not the id's, an unknown topic; InitProducerId with a timeout above
    transaction.max.timeout.ms, with no transactional id (idempotence), and an
    idempotent producer's Produce of a sequence out of order."""
    name, txn = t.topic("a"), t.topic("txn")
    t.create_topic(name, 1)
    r: dict[str, Json] = {}
    init = init_producer_id(t, txn)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    never = t.topic("never")
    t.find_coordinator(never, key_type=1)
    r["add_partitions_unknown_txn_id"] = add_partitions(t, never, pid, epoch, name, [0])
    r["end_txn_unknown_txn_id"] = end_txn(t, never, pid, epoch, True)
    r["add_partitions_wrong_producer_id"] = add_partitions(t, txn, pid + 7, epoch, name, [0])
    r["add_partitions_unknown_topic"] = add_partitions(t, txn, pid, epoch, t.topic("nope"),
                                                       [0])
    r["add_partitions_unknown_partition"] = add_partitions(t, txn, pid, epoch, name, [5])
    r["end_txn_wrong_producer_id"] = end_txn(t, txn, pid + 7, epoch, False)
    r["init_timeout_too_large"] = init_producer_id(t, t.topic("slow"), timeout_ms=3_600_000)
    idempotent = init_producer_id(t, None)
    r["init_idempotent"] = idempotent
    ipid, iepoch = idempotent["producer_id"], idempotent["producer_epoch"]
    r["idempotent_first"] = t.produce_batch(name, 0, [(None, b"i0")], timestamp=t.now,
                                            producer_id=ipid, producer_epoch=iepoch,
                                            base_sequence=0)
    r["idempotent_sequence_gap"] = t.produce_batch(name, 0, [(None, b"i5")], timestamp=t.now,
                                                   producer_id=ipid, producer_epoch=iepoch,
                                                   base_sequence=5)
    r["idempotent_duplicate"] = t.produce_batch(name, 0, [(None, b"i0")], timestamp=t.now,
                                                producer_id=ipid, producer_epoch=iepoch,
                                                base_sequence=0)
    r["transactional_batch_without_transaction"] = t.produce_batch(
        name, 0, [(None, b"t")], timestamp=t.now, producer_id=pid, producer_epoch=epoch,
        base_sequence=0, transactional=True, transactional_id=txn)
    return r
