"""The transaction coordinator service on a broker (Kafka's TransactionCoordinator with its
TransactionMarkerChannelManager): the coordinator service over ``__transaction_state``
with transaction shards, producer ids for them, and the sending of transaction markers.

Markers: once a PrepareCommit or PrepareAbort record is committed, the service writes
the COMMIT or ABORT marker to every partition of the transaction with WriteTxnMarkers to
each partition's leader (this broker included, over the same path), retrying partitions
whose leader moved, and then completes the transaction in the log. A partition deleted
meanwhile needs no marker. A coordinator taking over a partition finds the transactions
left in a Prepare state and sends their markers again (markers are idempotent: a second
one for a closed transaction changes nothing a reader sees).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.broker.coordinators.producer_id_manager import ProducerIdManager
from ottla.broker.inter_broker import InterBrokerClients
from ottla.common.features import TRANSACTION_VERSION
from ottla.common.tasks import cancel_and_wait, wait_event
from ottla.common.topics import TRANSACTION_STATE_TOPIC
from ottla.coordinator.runtime import CoordinatorState
from ottla.coordinator.transaction.metadata import TransactionMetadata
from ottla.coordinator.transaction.shard import (
    MarkerJob,
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionCoordinatorShard,
    decode_record,
    encode_record,
)
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
MARKER_RETRY_S = 0.1
MARKER_SCAN_S = 1.0
"""How often leftover markers are looked for without a kick (after timers abort, say)."""

TopicPartition = tuple[str, int]

# What a partition's marker answer means for the job.
_DONE = {ErrorCode.none, ErrorCode.unknown_topic_or_partition}
_GIVE_UP = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}


class TransactionCoordinatorService(CoordinatorService[TransactionCoordinatorShard]):
    topic_name = TRANSACTION_STATE_TOPIC
    kind = "transaction coordinator"

    def __init__(self, broker: BrokerContext, producer_ids: ProducerIdManager) -> None:
        config = broker.config
        self.producer_ids = producer_ids
        self.txn_config = TransactionConfig(
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"])
        super().__init__(
            broker, config["transaction.state.log.num.partitions"],
            config["transaction.state.log.replication.factor"],
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
             "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "unclean.leader.election.enable": "false"},
            lambda ctx: TransactionCoordinatorShard(ctx, self.txn_config),
            lambda record: encode_record(record, self._log_value_version()), decode_record)
        self._spare_producer_id: int | None = None
        self._sending: dict[tuple[str, int, int], asyncio.Task[None]] = {}
        self._peers = InterBrokerClients(broker, "txn")
        self._scanner: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        """Set by ``kick``: the scanner looks at once instead of at its next round."""

    @property
    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (KIP-890)."""
        return self.broker.image.features.get(TRANSACTION_VERSION, 0)

    def _log_value_version(self) -> int:
        """Kafka's ``transactionLogValueVersion``: the flexible value (which keeps the
        client's transaction version across a failover) from transaction.version 1."""
        return 1 if self.transaction_version >= 1 else 0

    # --- producer ids ---------------------------------------------------------------------

    async def _reserve_producer_id(self) -> None:
        """Have a producer id at hand (from the controller's blocks) for the operation about
        to run, as Kafka's coordinator takes one synchronously."""
        if self._spare_producer_id is None:
            try:
                self._spare_producer_id = await self.producer_ids.generate(
                    self.broker.broker_epoch)
            except (KafkaError, ConnectionError) as e:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 f"No producer id available yet: {e}") from e

    def _take_producer_id(self) -> int:
        if self._spare_producer_id is None:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "No producer id at hand")
        producer_id, self._spare_producer_id = self._spare_producer_id, None
        return producer_id

    # --- the APIs ---------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> ProducerIdAndEpoch:
        await self._reserve_producer_id()
        answer: ProducerIdAndEpoch = await self.write(
            transactional_id, lambda shard, now: shard.init_producer_id(
                now, transactional_id, timeout_ms, expected, self._take_producer_id))
        self.kick()
        return answer

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: frozenset[TopicPartition],
                             client_version: int = 0) -> ErrorCode:
        error: ErrorCode = await self.write(
            transactional_id, lambda shard, now: shard.add_partitions(
                now, transactional_id, producer_id, producer_epoch, partitions,
                client_version))
        return error

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: frozenset[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        found: dict[TopicPartition, ErrorCode] = self.read(
            transactional_id, lambda shard: shard.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions))
        return found

    async def verify_remote_or_local(self, transactional_id: str, producer_id: int,
                                     producer_epoch: int,
                                     partitions: frozenset[TopicPartition],
                                     add: bool = False) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: ask the transactional id's coordinator (this broker's shard,
        or another broker with AddPartitionsToTxn v5 ``verify_only``) whether each
        partition is in the producer's ongoing transaction. With ``add`` (transactions
        v2, part 2) the partitions join the transaction instead, opening it if none is
        open; CONCURRENT_TRANSACTIONS (the last one's markers are still being written)
        is retried for up to ``add.partitions.to.txn.retry.backoff.max.ms``."""
        backoff_ms = self.broker.config["add.partitions.to.txn.retry.backoff.ms"]
        deadline = self.broker.now_ms() + \
            self.broker.config["add.partitions.to.txn.retry.backoff.max.ms"]
        while True:
            answers = await self._verify_or_add(transactional_id, producer_id,
                                                producer_epoch, partitions, add)
            if not add or ErrorCode.concurrent_transactions not in answers.values() or \
                    self.broker.now_ms() + backoff_ms > deadline:
                return answers
            await asyncio.sleep(backoff_ms / 1000)

    async def _verify_or_add(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: frozenset[TopicPartition],
                             add: bool) -> dict[TopicPartition, ErrorCode]:
        coordinator = self.coordinator_for(transactional_id)
        if coordinator == self.broker.node_id:
            if add:
                error = await self.add_partitions(transactional_id, producer_id,
                                                  producer_epoch, partitions, 2)
                return dict.fromkeys(partitions, error)
            return self.verify_partitions(transactional_id, producer_id, producer_epoch,
                                          partitions)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in partitions:
            by_topic[topic].append(index)
        response = await self._peers.request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 5, {
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

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool, client_version: int = 0
                              ) -> ProducerIdAndEpoch:
        """EndTxn; ``client_version`` 2 (EndTxn v5) bumps the epoch, and may need a new
        producer id when the epoch is exhausted."""
        if client_version >= 2:
            await self._reserve_producer_id()
        answer: ProducerIdAndEpoch = await self.write(
            transactional_id, lambda shard, now: shard.end_transaction(
                now, transactional_id, producer_id, producer_epoch, commit, client_version,
                self._take_producer_id))
        self.kick()
        return answer

    # --- administration (DescribeTransactions, ListTransactions) --------------------------

    async def describe_transaction(self, transactional_id: str) -> TransactionMetadata:
        """The id's state once the log has it committed, from this broker's shard alone:
        NOT_COORDINATOR if another broker leads its partition (and no topic is created),
        COORDINATOR_LOAD_IN_PROGRESS while loading, TRANSACTIONAL_ID_NOT_FOUND."""
        found: TransactionMetadata = await self._read_committed(
            self.partition_for(transactional_id),
            lambda shard: shard.describe(transactional_id))
        return found

    async def transaction_states(self) -> list[TransactionMetadata]:
        """Every transactional id of the partitions this broker leads; as Kafka, one
        partition still loading makes the whole answer COORDINATOR_LOAD_IN_PROGRESS."""
        if self._loading or any(c.state is CoordinatorState.LOADING
                                for c in self.runtime.contexts.values()):
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             "The coordinator is loading")
        found: list[TransactionMetadata] = await self.read_every_shard(
            lambda shard: list(shard.transactions.values()))
        return found

    # --- markers ----------------------------------------------------------------------------

    def on_loaded(self, tp: tuple[str, int]) -> None:
        self.kick()

    def kick(self) -> None:
        """Look for markers to send (after a write, a load, or a timer's abort)."""
        self._wake.set()
        if self._scanner is None or self._scanner.done():
            self._scanner = asyncio.ensure_future(self._scan_forever())

    async def _scan_forever(self) -> None:
        while self.runtime.contexts:
            self._wake.clear()  # a kick from here on wakes the wait below
            try:
                jobs = await self.read_every_shard(
                    lambda shard: [(shard.ctx.tp, job) for job in shard.pending_markers()])
            except Exception:
                log.exception("Looking for transaction markers to send failed")
                jobs = []
            for tp, job in jobs:
                key = (job.transactional_id, job.producer_id, job.producer_epoch)
                # The jobs were read before the wait for the high watermark: one may
                # have been completed since (and its sender gone), and its markers sent
                # again would end the id's next transaction. Only a job still pending
                # in the live state gets a sender.
                if key not in self._sending and self._is_pending(tp, job):
                    self._sending[key] = asyncio.ensure_future(self._send(tp, job, key))
            await wait_event(self._wake, MARKER_SCAN_S)

    def _is_pending(self, tp: tuple[str, int], job: MarkerJob) -> bool:
        context = self.runtime.contexts.get(tp)
        return context is not None and context.state is CoordinatorState.ACTIVE and \
            context.shard.is_pending(job)

    async def _send(self, tp: tuple[str, int], job: MarkerJob, key: tuple[str, int, int]
                    ) -> None:
        try:
            remaining = set(job.partitions)
            while remaining:
                if not self._is_pending(tp, job):
                    return  # moved (its new coordinator sends them), or done
                coordinator_epoch = self.broker.replica_manager.partitions[tp].leader_epoch
                remaining -= await self._write_markers(job, remaining, coordinator_epoch)
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_S)
            future, reply = self._future()
            self.runtime.write(tp, lambda shard, now: shard.complete_transaction(
                now, job.transactional_id, job.producer_id, job.producer_epoch), reply,
                self.broker.now_ms())
            await future
            log.debug("Transaction of %s (producer %d, epoch %d) %s", job.transactional_id,
                      job.producer_id, job.producer_epoch,
                      "committed" if job.commit else "aborted")
        except KafkaError as e:
            log.info("Markers of %s not completed here: %s", job.transactional_id, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Sending the markers of %s failed", job.transactional_id)
        finally:
            self._sending.pop(key, None)

    async def _write_markers(self, job: MarkerJob, partitions: set[TopicPartition],
                             coordinator_epoch: int) -> set[TopicPartition]:
        """One WriteTxnMarkers per leader of ``partitions``; the partitions done."""
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        done: set[TopicPartition] = set()
        for topic, index in partitions:
            registration = self.broker.image.topics_by_name.get(topic)
            part = registration.partitions.get(index) if registration is not None else None
            if part is None:
                done.add((topic, index))  # deleted: nothing to mark
            elif part.leader >= 0:
                by_leader[part.leader].append((topic, index))
        for leader, tps in by_leader.items():
            topics: dict[str, list[int]] = defaultdict(list)
            for topic, index in tps:
                topics[topic].append(index)
            try:
                response = await self._peers.request(
                    leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, {"markers": [{
                        "producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
                        "transaction_result": job.commit,
                        "coordinator_epoch": coordinator_epoch,
                        "topics": [{"name": t, "partition_indexes": ps}
                                   for t, ps in topics.items()]}]})
            except KafkaError as e:
                log.debug("WriteTxnMarkers to broker %d failed: %s", leader, e)
                continue
            for marker in response.markers:
                for topic in marker.topics:
                    for p in topic.partitions:
                        error = ErrorCode(p.error_code)
                        if error in _DONE or error in _GIVE_UP:
                            if error in _GIVE_UP:
                                log.warning("Marker for %s-%d of %s refused: %s", topic.name,
                                            p.partition_index, job.transactional_id,
                                            error.name)
                            done.add((topic.name, p.partition_index))
        return done

    async def close(self) -> None:
        await cancel_and_wait(self._scanner)
        for task in list(self._sending.values()):
            await cancel_and_wait(task)
        await self._peers.close()
