"""Transaction markers (Kafka's TransactionMarkerChannelManager): once a PrepareCommit or
PrepareAbort record is committed, the COMMIT or ABORT marker goes to every partition of
the transaction with WriteTxnMarkers to each partition's leader (this broker included,
over the same path), partitions whose leader moved are retried, and then the
transaction is completed in the log. A partition deleted meanwhile needs no marker. A
coordinator taking over a partition finds the transactions left in a Prepare state and
sends their markers again (markers are idempotent: a second one for a closed
transaction changes nothing a reader sees).

Kafka's two gauges of it (``kafka.coordinator.transaction:type=
TransactionMarkerChannelManager``) are read off the sets kept here:
UnknownDestinationQueueSize, the transactions with markers waiting for a partition's
leader to be known (Kafka queues a transaction's markers for such partitions as one
entry of its unknown-broker queue), and LogAppendRetryQueueSize, those whose completion
failed to append to ``__transaction_state`` for a reason worth retrying and wait to try
again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.broker.inter_broker import InterBrokerClients
from ottla.common.tasks import cancel_and_wait, wait_event
from ottla.common.topics import TopicPartition
from ottla.coordinator.runtime import CoordinatorState
from ottla.coordinator.transaction.shard import MarkerJob, TransactionCoordinatorShard
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
MARKER_RETRY_S = 0.1
MARKER_SCAN_S = 1.0
"""How often leftover markers are looked for without a kick (after timers abort, say)."""

# What a partition's marker answer means for the job.
_DONE = {ErrorCode.none, ErrorCode.unknown_topic_or_partition}
_GIVE_UP = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}
# A completion whose append failed with these is retried (Kafka's TransactionStateManager
# maps them to COORDINATOR_NOT_AVAILABLE, which its marker channel queues for retry); a
# moved coordinator (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR: Kafka's NOT_COORDINATOR)
# or a reloading one leaves the transaction to whoever loads it.
_RETRY_APPEND = {ErrorCode.coordinator_not_available, ErrorCode.unknown_topic_or_partition,
                 ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
                 ErrorCode.request_timed_out}


class TransactionMarkerChannelManager:
    def __init__(self, broker: BrokerContext,
                 coordinator: CoordinatorService[TransactionCoordinatorShard]) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._sending: dict[tuple[str, int, int], asyncio.Task[None]] = {}
        self._peers = InterBrokerClients(broker, "txn")
        self._scanner: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        """Set by ``kick``: the scanner looks at once instead of at its next round."""
        self.unknown_destination: set[tuple[str, int, int]] = set()
        """Transactions with markers for a partition without a known leader."""
        self.log_append_retry: set[tuple[str, int, int]] = set()
        """Transactions whose completion waits to be appended again."""

    def kick(self) -> None:
        """Look for markers to send (after a write, a load, or a timer's abort)."""
        self._wake.set()
        if self._scanner is None or self._scanner.done():
            self._scanner = asyncio.ensure_future(self._scan_forever())

    async def _scan_forever(self) -> None:
        while self.coordinator.runtime.contexts:
            self._wake.clear()  # a kick from here on wakes the wait below
            try:
                jobs = await self.coordinator.read_every_shard(
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
        context = self.coordinator.runtime.contexts.get(tp)
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
                done, leaderless = await self._write_markers(job, remaining, coordinator_epoch)
                remaining -= done
                if leaderless:
                    self.unknown_destination.add(key)
                else:
                    self.unknown_destination.discard(key)
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_S)
            if not await self._complete(tp, job, key):
                return
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
            self.unknown_destination.discard(key)
            self.log_append_retry.discard(key)

    async def _complete(self, tp: tuple[str, int], job: MarkerJob,
                        key: tuple[str, int, int]) -> bool:
        """Append the transaction's completion, again after a failure worth retrying;
        whether it was appended (not if the transaction left this coordinator)."""
        while True:
            try:
                await self.coordinator.write_to(tp, lambda shard, now:
                                                shard.complete_transaction(
                                                    now, job.transactional_id,
                                                    job.producer_id, job.producer_epoch))
                return True
            except KafkaError as e:
                if e.code not in _RETRY_APPEND:
                    raise
                log.info("Appending the completion of %s failed (%s); retrying",
                         job.transactional_id, e.code.name)
            self.log_append_retry.add(key)
            try:
                await asyncio.sleep(MARKER_RETRY_S)
            finally:
                self.log_append_retry.discard(key)
            if not self._is_pending(tp, job):
                return False

    async def _write_markers(self, job: MarkerJob, partitions: set[TopicPartition],
                             coordinator_epoch: int
                             ) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """One WriteTxnMarkers per leader of ``partitions``: the partitions done, and
        those whose leader is not known (no leader, or one not registered)."""
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        done: set[TopicPartition] = set()
        leaderless: set[TopicPartition] = set()
        image = self.broker.image
        for topic, index in partitions:
            registration = image.topics_by_name.get(topic)
            part = registration.partitions.get(index) if registration is not None else None
            if part is None:
                done.add((topic, index))  # deleted: nothing to mark
            elif part.leader >= 0 and part.leader in image.brokers:
                by_leader[part.leader].append((topic, index))
            else:
                leaderless.add((topic, index))
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
        return done, leaderless

    async def close(self) -> None:
        await cancel_and_wait(self._scanner)
        for task in list(self._sending.values()):
            await cancel_and_wait(task)
        await self._peers.close()
