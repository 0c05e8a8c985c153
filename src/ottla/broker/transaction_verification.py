"""KIP-890 on the partition leaders (Kafka's AddPartitionsToTxnManager and
VerificationGuard), for Produce and TxnOffsetCommit alike.

Part 1: a transactional write that would open the producer's transaction on a partition
is allowed only if the transactional id's coordinator has the partition in the
producer's ongoing transaction; otherwise a late write after an abort (or a producer
that skipped AddPartitionsToTxn) would leave a transaction open that nobody ends. The
leader takes a guard before asking: the answer holds only if nothing of the producer
was appended to the partition meanwhile (a marker written while the answer was on the
wire ended the transaction it verified).

Part 2 (transactions v2): the client sends no AddPartitionsToTxn or AddOffsetsToTxn; the
leader asks the coordinator to add the partition instead, and the producer's epoch,
bumped by every EndTxn, is what keeps a late write out (no guard).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.transaction_coordinator import TransactionCoordinatorService
from ottla.broker.inter_broker import InterBrokerClients
from ottla.broker.replication.partition import Partition
from ottla.common.topics import TopicPartition
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

ADD_PARTITIONS_TO_TXN_VERSION = 5
"""The broker-to-broker version: ``verify_only`` per transaction, TRANSACTION_ABORTABLE."""
CLIENT_VERSION_V2 = 2
"""The transaction client version of a partition a leader adds (transactions v2)."""


@dataclass(frozen=True, slots=True)
class Verification:
    """One partition's answer: the coordinator's error (NONE: the write may go on) and
    the guard taken before asking, which the append checks (None with transactions v2,
    or where this broker does not host the partition)."""

    error: ErrorCode
    guard: int | None = None


class AddPartitionsToTxnManager:
    def __init__(self, broker: BrokerContext,
                 coordinator: TransactionCoordinatorService) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._peers = InterBrokerClients(broker, "txn-verify")

    @staticmethod
    def in_transaction(partition: Partition, producer_id: int, producer_epoch: int) -> bool:
        """The producer's transaction, at this epoch, is already open on the partition:
        nothing to verify."""
        state = partition.log.producer_state.producers.get(producer_id)
        return state is not None and state.current_txn_first_offset is not None and \
            state.producer_epoch == producer_epoch

    @staticmethod
    def begin(partition: Partition, producer_id: int, producer_epoch: int,
              first_sequence: int, supports_epoch_bump: bool, now_ms: int) -> None:
        """A batch from ``first_sequence`` is verified with the coordinator: a later batch
        of the producer is refused OUT_OF_ORDER_SEQUENCE_NUMBER until one of its
        transactional batches is appended (Kafka's VerificationStateEntry), so one that
        overtakes a batch whose verification fails and is retried cannot leave a gap."""
        partition.log.producer_state.begin_verification(
            producer_id, first_sequence, producer_epoch, supports_epoch_bump, now_ms)

    @staticmethod
    def guard_holds(partition: Partition, producer_id: int, guard: int | None) -> bool:
        """Whether a verification still holds at append time (Kafka's VerificationGuard):
        no guard taken, the transaction open here, or nothing of the producer appended
        since the guard was taken."""
        producer_state = partition.log.producer_state
        return guard is None or producer_state.has_ongoing(producer_id) or \
            producer_state.guard_holds(producer_id, guard)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: dict[TopicPartition, Partition | None], add: bool
                     ) -> dict[TopicPartition, Verification]:
        """Ask the coordinator about ``partitions`` (each with its hosted partition, for
        the guard): whether each is in the producer's ongoing transaction, or with
        ``add`` to add it. An unreachable coordinator is each partition's error."""
        guards = {} if add else {
            tp: p.log.producer_state.verification_guard(producer_id)
            for tp, p in partitions.items() if p is not None}
        try:
            answers = await self._ask(transactional_id, producer_id, producer_epoch,
                                      frozenset(partitions), add)
        except KafkaError as e:
            answers = dict.fromkeys(partitions, e.code)
        return {tp: Verification(answers.get(tp, ErrorCode.invalid_txn_state), guards.get(tp))
                for tp in partitions}

    async def _ask(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: frozenset[TopicPartition], add: bool
                   ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answers; with ``add``, CONCURRENT_TRANSACTIONS (the last
        transaction's markers are still being written) is retried for up to
        ``add.partitions.to.txn.retry.backoff.max.ms``."""
        config = self.broker.config
        backoff_ms = config["add.partitions.to.txn.retry.backoff.ms"]
        deadline = self.broker.now_ms() + config["add.partitions.to.txn.retry.backoff.max.ms"]
        while True:
            answers = await self._ask_once(transactional_id, producer_id, producer_epoch,
                                           partitions, add)
            if not add or ErrorCode.concurrent_transactions not in answers.values() or \
                    self.broker.now_ms() + backoff_ms > deadline:
                return answers
            await asyncio.sleep(backoff_ms / 1000)

    async def _ask_once(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: frozenset[TopicPartition], add: bool
                        ) -> dict[TopicPartition, ErrorCode]:
        """This broker's shard, or the coordinator's broker with AddPartitionsToTxn v5."""
        coordinator = self.coordinator.coordinator_for(transactional_id)
        if coordinator == self.broker.node_id:
            if add:
                error = await self.coordinator.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions,
                    CLIENT_VERSION_V2)
                return dict.fromkeys(partitions, error)
            return self.coordinator.verify_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in partitions:
            by_topic[topic].append(index)
        response = await self._peers.request(
            coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION, {
                "transactions": [{"transactional_id": transactional_id,
                                  "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": not add,
                                  "topics": [{"name": t, "partitions": ps}
                                             for t, ps in by_topic.items()]}]})
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(response.error_code), "verification failed")
        return {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
                for txn in response.results_by_transaction for t in txn.topic_results
                for p in t.results_by_partition}

    async def close(self) -> None:
        await self._peers.close()
