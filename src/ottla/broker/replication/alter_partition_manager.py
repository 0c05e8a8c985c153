"""Sends a leader's ISR changes to the controller (Kafka's ``AlterPartitionManager``).

A partition's state decides an ISR change (a follower caught up, or one lagging past
``replica.lag.time.max.ms``) and keeps it pending; this sends every pending change in
one AlterPartition per round (KIP-497, with the members' broker epochs of KIP-903),
carrying the partition epoch the change was decided on, and hands each answer back to
its partition. The controller refuses a change decided on a stale partition epoch
(INVALID_UPDATE_VERSION) or leader epoch (FENCED_LEADER_EPOCH); the partition then
waits for the metadata that overtook it, and decides again on its next event.

Only an answer that says the change was not made (INELIGIBLE_REPLICA, or the whole
request refused) clears the pending change at once. A refusal because the partition moved
on may have been caused by this very change, made by an attempt whose answer was lost,
and a request that fails leaves it unknown: the change stays pending (the high watermark
keeps counting the members it adds) until the metadata settles it, and a failed request
is sent again, as Kafka's AlterPartitionManager and ``handleAlterPartitionError`` do.

A change the controller refused, or made with another leader, is a failed ISR update
(Kafka's FailedIsrUpdatesPerSec, ``on_failed``), unless a newer change of the partition
overtook it; a request that failed or was refused whole is not, as Kafka retries those.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from ottla.broker.replication.partition import Partition
from ottla.common.tasks import cancel_and_wait
from ottla.common.topics import TopicIdPartition
from ottla.metadata.isr_change import IsrChange
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 3
RETRY_BACKOFF_S = 0.5
NOT_MADE = frozenset({ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted})
"""Partition errors that say the controller did not make the change and the partition is
as the leader knows it."""



class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 send: Callable[[int, int, dict[str, object]], asyncio.Future[object]],
                 on_answer: Callable[[Partition, list[int] | None, int], None],
                 on_failed: Callable[[Partition], None] = lambda partition: None) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        self._on_answer = on_answer
        self._on_failed = on_failed
        self._queued: dict[TopicIdPartition, IsrChange] = {}
        self._partitions: dict[TopicIdPartition, Partition] = {}
        """The partition of each change queued or in flight: its answer goes back to it."""
        self._in_flight = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def close(self) -> None:
        """Stop sending (a broker shutting down): what is queued or being retried is
        left to the next leader, which decides its ISR from the metadata."""
        self._closed = True
        self._queued.clear()
        self._partitions.clear()
        await cancel_and_wait(self._task)

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """Queue ``change``, the ISR ``partition``'s leader proposes; it goes with the next
        AlterPartition, in place of an earlier change of the partition still queued."""
        if self._closed:
            return
        self._queued[change.key] = change
        self._partitions[change.key] = partition
        if not self._in_flight:
            self._in_flight = True
            asyncio.get_running_loop().call_soon(self._send_queued)

    def _send_queued(self) -> None:
        changes, self._queued = self._queued, {}
        if not changes or self._closed:
            self._in_flight = False
            return
        self._task = asyncio.ensure_future(self._round(changes))

    async def _round(self, changes: dict[TopicIdPartition, IsrChange]) -> None:
        partitions = {key: self._partitions[key] for key in changes}
        topics: dict[uuid.UUID, list[dict[str, object]]] = {}
        for change in changes.values():
            topics.setdefault(change.topic_id, []).append({
                "partition_index": change.partition, "leader_epoch": change.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epoch}
                                        for b, epoch in change.new_isr],
                "leader_recovery_state": change.leader_recovery_state,
                "partition_epoch": change.partition_epoch})
        body = {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch(),
                "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]}
        answered: dict[TopicIdPartition, tuple[list[int] | None, int]] = {}
        refused: set[TopicIdPartition] = set()
        """Changes the controller refused or made with another leader."""
        failed = False
        try:
            response = await self._send(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, body)
            top_error = getattr(response, "error_code", ErrorCode.unknown_server_error)
            if top_error != ErrorCode.none:
                log.warning("AlterPartition failed: %s", ErrorCode(top_error).name)
                answered = dict.fromkeys(changes, (None, -1))
            else:
                for topic in response.topics:  # type: ignore[attr-defined]
                    for p in topic.partitions:
                        key = (topic.topic_id, p.partition_index)
                        if p.error_code == ErrorCode.none and p.leader_id == self.broker_id:
                            answered[key] = (list(p.isr), p.partition_epoch)
                        elif p.error_code == ErrorCode.none:
                            # The change moved the leadership: the metadata will say.
                            answered[key] = (None, -1)
                            refused.add(key)
                        else:
                            refused.add(key)
                            log.info("AlterPartition of %s-%d: %s", partitions[key].topic,
                                     p.partition_index, ErrorCode(p.error_code).name)
                            if p.error_code in NOT_MADE:
                                answered[key] = (None, -1)
        except Exception as e:  # the controller unreachable: made or not, it is not known
            log.warning("AlterPartition could not reach the controller: %s", e)
            failed = True
            await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            for key, change in changes.items():
                if key in self._queued:
                    # The partition decided a newer change while this one was out (the
                    # metadata overtook it): this answer is out of date, and would clear
                    # the newer change's pending ISR, which the high watermark counts
                    # until the controller answers it (Kafka ignores it too).
                    continue
                if key in refused:
                    self._on_failed(partitions[key])
                if key not in answered:
                    if failed:  # ask again; meanwhile it stays pending
                        self._queued[key] = change
                        continue
                    self._partitions.pop(key, None)
                    continue  # pending until the metadata settles it
                self._partitions.pop(key, None)
                isr, epoch = answered[key]
                partition = partitions[key]
                try:
                    self._on_answer(partition, isr, epoch)
                except Exception:  # one partition's trouble must not stop later rounds
                    log.exception("Applying the AlterPartition answer of %s-%d failed",
                                  partition.topic, partition.index)
            self._send_queued()
