"""Tells the controller in which log dir this broker put each replica (Kafka's
``AssignmentsManager``, KIP-858).

A broker with one log dir needs none of this: the controller places its replicas in that
dir itself. With several, the controller records a new replica as ``UNASSIGNED`` and the
broker, once it has made the log (or whenever the metadata names another dir than the one
holding it), queues an assignment here. Queued assignments go in one AssignReplicasToDirs
per round (at most 2,250, as Kafka), one round in flight at a time, 100 ms after the first
one queued so that a topic's partitions travel together. Before a round, assignments the
metadata no longer supports (the topic or partition gone, or this broker no longer a
replica) are dropped. A request that fails as a whole is sent again after a backoff that
doubles from 100 ms to 10 s; a partition the controller refuses is queued again, unless a
newer assignment of it came meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ottla.common.backoff import ExponentialBackoff
from ottla.common.tasks import cancel_and_wait
from ottla.common.topics import TopicIdPartition
from ottla.metadata.image import MetadataImage
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ASSIGN_REPLICAS_TO_DIRS_VERSION = 0
MAX_ASSIGNMENTS_PER_REQUEST = 2250
"""Kafka's bound: what fits in one request under the controller's limits."""
BACKOFF_INITIAL_MS = 100
BACKOFF_MAX_MS = 10_000


class AssignmentsManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 send: Callable[[int, int, dict[str, Any]], Awaitable[Any]],
                 image: Callable[[], MetadataImage],
                 backoff: ExponentialBackoff | None = None) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        self._image = image
        self._backoff = backoff or ExponentialBackoff(BACKOFF_INITIAL_MS, BACKOFF_MAX_MS,
                                                      jitter=0.02)
        self._ready: dict[TopicIdPartition, uuid.UUID] = {}
        """Assignments waiting for the next round: partition -> directory."""
        self._in_flight: dict[TopicIdPartition, uuid.UUID] = {}
        self.global_failures = 0
        """Rounds failed as a whole in a row (they set the backoff)."""
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Assignments queued or in flight (Kafka's QueuedReplicaToDirAssignments)."""
        return len(self._ready) + len(self._in_flight)

    def on_assignment(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID
                      ) -> None:
        """The replica ``(topic_id, partition)`` is in log dir ``directory``: tell the
        controller (in place of an earlier assignment of it not yet sent)."""
        if self._closed:
            return
        key = (topic_id, partition)
        if self._ready.get(key) == directory or \
                (key not in self._ready and self._in_flight.get(key) == directory):
            return
        self._ready[key] = directory
        self._schedule()

    def _schedule(self) -> None:
        """Arm the next round (Kafka's ``AssignmentsManagerDeadlineFunction``): after the
        backoff while rounds fail, at once when more than a round's worth waits, else after
        the initial interval; an earlier round already armed stays."""
        if self._closed or self._in_flight or not self._ready:
            return
        if self.global_failures > 0:
            delay_ms = self._backoff.backoff(self.global_failures)
        elif len(self._ready) > MAX_ASSIGNMENTS_PER_REQUEST:
            delay_ms = 0.0
        else:
            delay_ms = self._backoff.initial_ms
        loop = asyncio.get_running_loop()
        due = loop.time() + delay_ms / 1000
        if self._timer is not None and self._due <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._due = due
        self._timer = loop.call_at(due, self._send_ready)

    def _valid(self, key: TopicIdPartition, image: MetadataImage) -> bool:
        """Kafka's ``Assignment.valid``: the partition exists and this broker is one of
        its replicas."""
        topic = image.topics_by_id.get(key[0])
        part = topic.partitions.get(key[1]) if topic is not None else None
        return part is not None and self.broker_id in part.replicas

    def _send_ready(self) -> None:
        self._timer = None
        if self._closed or self._in_flight:
            return
        image = self._image()
        batch: dict[TopicIdPartition, uuid.UUID] = {}
        invalid = 0
        for key in list(self._ready):
            if len(batch) >= MAX_ASSIGNMENTS_PER_REQUEST:
                break
            directory = self._ready.pop(key)
            if self._valid(key, image):
                batch[key] = directory
            else:
                invalid += 1
        if invalid:
            log.info("Dropped %d directory assignments the metadata no longer needs", invalid)
        if not batch:
            self._schedule()
            return
        self._in_flight = batch
        self._task = asyncio.ensure_future(self._round(batch))

    async def _round(self, batch: dict[TopicIdPartition, uuid.UUID]) -> None:
        directories: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (topic_id, partition), directory in batch.items():
            directories.setdefault(directory, {}).setdefault(topic_id, []).append(partition)
        body = {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch(),
                "directories": [
                    {"id_": directory, "topics": [
                        {"topic_id": topic_id, "partitions": [{"partition_index": p}
                                                              for p in partitions]}
                        for topic_id, partitions in topics.items()]}
                    for directory, topics in directories.items()]}
        unanswered = dict(batch)
        try:
            response = await self._send(ApiKey.ASSIGN_REPLICAS_TO_DIRS,
                                        ASSIGN_REPLICAS_TO_DIRS_VERSION, body)
            error = getattr(response, "error_code", ErrorCode.unknown_server_error)
            if error != ErrorCode.none:
                raise RuntimeError(f"response-level error {ErrorCode(error).name}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.global_failures += 1
            log.warning("AssignReplicasToDirs of %d replicas failed (%s); retrying",
                        len(batch), e)
        else:
            self.global_failures = 0
            for directory in response.directories:
                for topic in directory.topics:
                    for p in topic.partitions:
                        key = (topic.topic_id, p.partition_index)
                        if key not in unanswered:
                            continue
                        if p.error_code == ErrorCode.none:
                            del unanswered[key]
                        else:
                            log.info("Assigning %s-%d to directory %s: %s", topic.topic_id,
                                     p.partition_index, directory.id_,
                                     ErrorCode(p.error_code).name)
        finally:
            self._in_flight = {}
            for key, directory in unanswered.items():
                self._ready.setdefault(key, directory)  # a newer assignment wins
        self._schedule()

    async def close(self) -> None:
        """Stop sending (a broker shutting down): the next start sends again what the
        metadata still lacks."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._ready.clear()
        await cancel_and_wait(self._task)
