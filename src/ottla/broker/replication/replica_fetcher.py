"""Followers: fetch from each partition's leader and append what it has (Kafka's
``ReplicaFetcherManager`` and ``ReplicaFetcherThread``).

A broker that hosts a replica it does not lead fetches it from the leader the metadata
image names, with the leader epoch the image gave (never a local guess). Partitions are
spread over ``num.replica.fetchers`` fetchers per source broker; each fetcher is one task
that sends one Fetch (v17: topic ids, ``ReplicaState`` with this broker's id and epoch)
for all its partitions at a time, long-polling at the leader
(``replica.fetch.wait.max.ms``), in an incremental fetch session (KIP-227: after the
first, a fetch names only the partitions whose position moved), and appends the leader's
batches as they are.

Truncation follows the leader-epoch protocol (KIP-101, KIP-279, Fetch v12+): each fetch
names the epoch of this replica's last batch; a leader on which that epoch ends earlier
answers with where it ends (DivergingEpoch), and the follower cuts its log back there
(or to where its own copy of that epoch ends, if earlier) before fetching again. So a
replica that led with records nobody else got drops them, and they are never served.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ottla.broker.fetch_session import FetchSessionHandler
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.partition_state import truncation_offset
from ottla.broker.replication.replication_quota import ReplicationQuota
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.client.security import ClientSecurity
from ottla.common.features import (
    METADATA_VERSION_LEVEL,
    replica_fetch_version,
    replica_list_offsets_version,
)
from ottla.common.server_config import KafkaConfig
from ottla.common.tasks import cancel_and_wait, wait_event
from ottla.common.topics import TopicPartition
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
Endpoint = tuple[str, int]
"""(host, port) of a broker's inter-broker listener."""


@dataclass(slots=True)
class FollowerState:
    partition: Partition
    leader_id: int
    leader_epoch: int
    backoff_until_ms: int = 0
    in_sync: bool = False
    """Caught up with the leader's high watermark at the last answer: a replica in sync
    is never throttled (Kafka's ``isReplicaInSync``)."""
    last_error: ErrorCode = ErrorCode.none
    """The leader's last answer for it: a new error is logged once, not every backoff."""
    lag: int = 0
    """Records the leader's high watermark was past this replica's log end after its last
    answer was applied, 0 at best (Kafka's ``FetcherLagMetrics``)."""


class ReplicaFetcher:
    """One fetcher for one source broker: a task fetching its partitions in turn."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, index: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.index = index
        self.partitions: dict[TopicPartition, FollowerState] = {}
        self._client: AsyncClient | None = None
        self._endpoint: Endpoint | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[None] | None = None
        self.session = FetchSessionHandler()

    def add(self, state: FollowerState) -> None:
        self.partitions[(state.partition.topic, state.partition.index)] = state
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        if self._client is not None:
            await self._client.close()

    async def _run(self) -> None:
        manager = self.manager
        while self.partitions:
            now = manager.now_ms()
            ready = {tp: s for tp, s in self.partitions.items() if s.backoff_until_ms <= now}
            throttled = [s for tp, s in ready.items() if manager.throttled(tp, s, now)]
            if throttled:
                # Over follower.replication.throttled.rate: leave them out for a while.
                self._back_off(throttled, now)
                ready = {tp: s for tp, s in ready.items() if s.backoff_until_ms <= now}
            if not ready:
                wait = min(s.backoff_until_ms for s in self.partitions.values()) - now
                self._wake.clear()
                await wait_event(self._wake, max(0.0, wait / 1000))
                continue
            client = self._connect()
            if client is None:
                self._back_off(ready.values(), now)
                continue
            try:
                response = await client.request(
                    ApiKey.FETCH, replica_fetch_version(self.manager.metadata_level()),
                    self._request(ready),
                    timeout=(manager.config["replica.socket.timeout.ms"]
                             + manager.config["replica.fetch.wait.max.ms"]) / 1000)
            except (NodeUnavailable, TimeoutError, OSError) as e:
                log.debug("Fetch from broker %d failed: %s", self.leader_id, e)
                self.session.reset()
                self._back_off(ready.values(), manager.now_ms())
                continue
            self.session.handle_response(response.error_code, response.session_id)
            if response.error_code in (ErrorCode.fetch_session_id_not_found,
                                       ErrorCode.invalid_fetch_session_epoch):
                log.info("Fetch session with broker %d: %s; starting a new one",
                         self.leader_id, ErrorCode(response.error_code).name)
                continue
            if response.error_code != ErrorCode.none:
                log.info("Fetch from broker %d: %s", self.leader_id,
                         ErrorCode(response.error_code).name)
                self._back_off(ready.values(), manager.now_ms())
                continue
            out_of_range = self._process(ready, response)
            if out_of_range:
                await self._reset_out_of_range(client, out_of_range)

    async def _reset_out_of_range(self, client: AsyncClient,
                                  states: dict[TopicPartition, FollowerState]) -> None:
        """Kafka's ``fetchOffsetAndTruncate``: a leader answers OFFSET_OUT_OF_RANGE with
        no watermarks, so ask it where its log ends (ListOffsets LATEST as a replica: its
        log end) and, unless that is before this replica's end, where it starts
        (EARLIEST)."""
        manager = self.manager
        ends = await self._list_offsets(client, states, LATEST_TIMESTAMP)
        behind = {}
        for tp, end in ends.items():
            state = states[tp]
            if self._still_current(tp, state) and \
                    not manager.truncate_to_leader_end(state, end):
                behind[tp] = state
        if behind:
            starts = await self._list_offsets(client, behind, EARLIEST_TIMESTAMP)
            for tp, start in starts.items():
                if self._still_current(tp, behind[tp]):
                    manager.start_at_leader_start(behind[tp], start)

    async def _list_offsets(self, client: AsyncClient,
                            states: dict[TopicPartition, FollowerState], timestamp: int
                            ) -> dict[TopicPartition, int]:
        """ListOffsets of ``states`` at the leader as this replica (replica id: this
        broker, so LATEST is the leader's log end); a partition not answered (an error,
        or the request failing) backs off and is left out."""
        manager = self.manager
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), state in states.items():
            by_topic.setdefault(topic, []).append({
                "partition_index": index, "current_leader_epoch": state.leader_epoch,
                "timestamp": timestamp})
        try:
            version = replica_list_offsets_version(manager.metadata_level())
            response = await client.request(ApiKey.LIST_OFFSETS, version, {
                # v10+'s TimeoutMs (for tiered storage) left at 0, as Kafka's fetcher does
                "replica_id": manager.broker_id, "isolation_level": 0, "timeout": 0,
                "topics": [
                    {"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                timeout=manager.config["replica.socket.timeout.ms"] / 1000)
        except (NodeUnavailable, TimeoutError, OSError) as e:
            log.debug("ListOffsets from broker %d failed: %s", self.leader_id, e)
            self._back_off(states.values(), manager.now_ms())
            return {}
        offsets: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if tp in states and p.error_code == ErrorCode.none:
                    offsets[tp] = p.offset
        failed = [state for tp, state in states.items() if tp not in offsets]
        if failed:
            log.info("ListOffsets from broker %d answered no offset for %s (backing off)",
                     self.leader_id, ", ".join(f"{t}-{i}" for t, i in states
                                               if (t, i) not in offsets))
            self._back_off(failed, manager.now_ms())
        return offsets

    def _still_current(self, tp: TopicPartition, state: FollowerState) -> bool:
        return self.partitions.get(tp) is state and \
            state.partition.leader_epoch == state.leader_epoch

    def _connect(self) -> AsyncClient | None:
        endpoint = self.manager.endpoint_of(self.leader_id)
        if endpoint is None:
            return None
        if endpoint != self._endpoint or self._client is None:
            if self._client is not None:
                self._closing = asyncio.ensure_future(self._client.close())
            self.session.reset()  # a session lives on one broker
            self._client = AsyncClient(endpoint[0], endpoint[1],
                                       client_id=f"broker-{self.manager.broker_id}-fetcher-"
                                                 f"{self.index}",
                                       security=self.manager.security)
            self._endpoint = endpoint
        return self._client

    def _back_off(self, states: Any, now_ms: int) -> None:
        for state in states:
            state.backoff_until_ms = now_ms + self.manager.config["replica.fetch.backoff.ms"]

    def _request(self, ready: dict[TopicPartition, FollowerState]) -> dict[str, Any]:
        """A Fetch of ``ready`` in this fetcher's session (KIP-227): after the first, only
        partitions whose position changed are named, so an idle partition costs the
        leader nothing to parse."""
        config = self.manager.config
        entries: dict[tuple[Any, int], dict[str, Any]] = {}
        for state in ready.values():
            partition = state.partition
            log_ = partition.log
            entries[(partition.topic_id, partition.index)] = {
                "partition": partition.index, "current_leader_epoch": state.leader_epoch,
                "fetch_offset": log_.log_end_offset,
                "last_fetched_epoch": log_.leader_epoch_cache.latest_epoch,
                "log_start_offset": log_.log_start_offset,
                "partition_max_bytes": config["replica.fetch.max.bytes"],
                "replica_directory_id": uuid.UUID(int=0)}
        session_id, epoch, send, forget = self.session.build(entries)
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (topic_id, _), entry in send.items():
            topics.setdefault(topic_id, []).append(entry)
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in forget:
            forgotten.setdefault(topic_id, []).append(index)
        return {"cluster_id": None,
                "replica_state": {"replica_id": self.manager.broker_id,
                                  "replica_epoch": self.manager.broker_epoch()},
                "max_wait": config["replica.fetch.wait.max.ms"],
                "min_bytes": config["replica.fetch.min.bytes"],
                "max_bytes": config["replica.fetch.response.max.bytes"],
                "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic_id": t, "partitions": ps}
                                          for t, ps in forgotten.items()],
                "rack_id": ""}

    def _process(self, ready: dict[TopicPartition, FollowerState], response: Any
                 ) -> dict[TopicPartition, FollowerState]:
        """Apply each partition's answer; those OFFSET_OUT_OF_RANGE are returned, for
        ``_reset_out_of_range``."""
        by_id = {(s.partition.topic_id, s.partition.index): (tp, s) for tp, s in ready.items()}
        out_of_range: dict[TopicPartition, FollowerState] = {}
        for topic in response.responses:
            for data in topic.partitions:
                found = by_id.get((topic.topic_id, data.partition_index))
                if found is None:
                    continue
                tp, state = found
                if not self._still_current(tp, state):
                    continue  # moved on while the fetch was out
                if data.error_code == ErrorCode.offset_out_of_range:
                    out_of_range[tp] = state
                    continue
                try:
                    self.manager.apply(state, data)
                except KafkaError as e:
                    log.warning("Replicating %s-%d from broker %d failed: %s", *tp,
                                self.leader_id, e)
                    self._back_off([state], self.manager.now_ms())
                except Exception:
                    # One partition's failure (a disk error while truncating) must not end
                    # the task that replicates every partition of this fetcher.
                    log.exception("Replicating %s-%d from broker %d failed", *tp,
                                  self.leader_id)
                    self._back_off([state], self.manager.now_ms())
        return out_of_range


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, config: KafkaConfig,
                 endpoint_of: Callable[[int], Endpoint | None],
                 broker_epoch: Callable[[], int], now_ms: Callable[[], int],
                 on_appended: Callable[[Partition, bool], None],
                 quota: ReplicationQuota | None = None,
                 security: ClientSecurity | None = None,
                 metadata_level: Callable[[], int] = lambda: METADATA_VERSION_LEVEL
                 ) -> None:
        self.broker_id = broker_id
        self.metadata_level = metadata_level
        """The finalized metadata.version, which picks the Fetch and ListOffsets versions
        sent to leaders (as Kafka's ``RemoteLeaderEndPoint``)."""
        self.security = security
        """TLS and SASL towards leaders' inter-broker listener."""
        self.config = config
        self.endpoint_of = endpoint_of
        self.broker_epoch = broker_epoch
        self.now_ms = now_ms
        self._on_appended = on_appended
        self.quota = quota
        """follower.replication.throttled.rate over the partitions listed for this broker
        in follower.replication.throttled.replicas (KIP-73)."""
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, ReplicaFetcher] = {}
        self.topic_stats: BrokerTopicStats | None = None
        """Counts the bytes replicated here (set with the broker's, when the node serves
        metrics)."""

    def follow(self, partition: Partition, leader_id: int) -> None:
        """Fetch ``partition`` from ``leader_id`` in the partition's current leader epoch
        (from now on, replacing whatever it fetched before)."""
        tp = (partition.topic, partition.index)
        current = self._assigned.get(tp)
        if current is not None:
            state = current.partitions.get(tp)
            if current.leader_id == leader_id and state is not None and \
                    state.leader_epoch == partition.leader_epoch and state.partition is partition:
                return
            current.remove(tp)
        index = hash(tp) % self.config["num.replica.fetchers"]
        fetcher = self._fetchers.get((leader_id, index))
        if fetcher is None:
            fetcher = self._fetchers[(leader_id, index)] = ReplicaFetcher(self, leader_id, index)
        fetcher.add(FollowerState(partition, leader_id, partition.leader_epoch))
        self._assigned[tp] = fetcher
        log.info("Following %s-%d from broker %d in leader epoch %d", *tp, leader_id,
                 partition.leader_epoch)

    def throttled(self, tp: TopicPartition, state: FollowerState, now_ms: int) -> bool:
        """Kafka's ``shouldFollowerThrottle``."""
        return self.quota is not None and \
            self.quota.should_throttle(tp[0], tp[1], state.in_sync, now_ms)

    def unfollow(self, tp: TopicPartition) -> None:
        fetcher = self._assigned.pop(tp, None)
        if fetcher is not None:
            fetcher.remove(tp)

    def max_lag(self) -> int:
        """The largest lag of the partitions followed, 0 when none (Kafka's ``MaxLag``
        of ``ReplicaFetcherManager``): a partition no longer followed no longer counts."""
        return max((state.lag for fetcher in self._fetchers.values()
                    for state in fetcher.partitions.values()), default=0)

    def followed(self) -> dict[TopicPartition, int]:
        """Partition -> the broker it is fetched from."""
        return {tp: f.leader_id for tp, f in self._assigned.items()}

    async def shutdown(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._assigned.clear()
        for fetcher in fetchers:
            await fetcher.close()

    # --- one partition's answer -------------------------------------------------------------

    def apply(self, state: FollowerState, data: Any) -> None:
        """Act on one partition of the leader's Fetch response."""
        partition = state.partition
        log_ = partition.log
        error = data.error_code
        now = self.now_ms()
        if error != ErrorCode.none:
            # Not (or no longer) the leader, an epoch the leader does not know yet: wait
            # for the metadata that says who leads now. (OFFSET_OUT_OF_RANGE is the
            # fetcher's: ``ReplicaFetcher._reset_out_of_range``.)
            if error != state.last_error:
                log.info("Fetch of %s-%d from broker %d: %s (backing off)", partition.topic,
                         partition.index, state.leader_id, ErrorCode(error).name)
            state.last_error = ErrorCode(error)
            state.backoff_until_ms = now + self.config["replica.fetch.backoff.ms"]
            return
        state.last_error = ErrorCode.none
        diverging = data.diverging_epoch
        if diverging is not None and (diverging.epoch != -1 or diverging.end_offset != -1):
            self._truncate_on_divergence(partition, diverging.epoch, diverging.end_offset)
            return
        appended = 0
        if data.records:
            appended = partition.append_as_follower(data.records, now)
            if self.quota is not None and self.quota.is_throttled(partition.topic,
                                                                  partition.index):
                self.quota.record(len(data.records), now)
            if self.topic_stats is not None:
                # All the leader sent, as Kafka counts it (a batch cut short included).
                self.topic_stats.replication_bytes_in += len(data.records)
        # The high watermark first: the leader's log start may be past the one this
        # replica had, and a log start never passes the high watermark (as Kafka's
        # processPartitionData orders them).
        moved = partition.update_follower_high_watermark(data.high_watermark)
        if 0 <= data.log_start_offset <= log_.log_end_offset and \
                data.log_start_offset > log_.log_start_offset:
            log_.delete_records_before(data.log_start_offset)
        state.lag = max(0, data.high_watermark - log_.log_end_offset)
        state.in_sync = state.lag == 0
        if appended or moved:
            self._on_appended(partition, moved)

    def _truncate_on_divergence(self, partition: Partition, leader_epoch: int,
                                leader_end_offset: int) -> None:
        """Kafka's ``getOffsetTruncationState``: cut back to where the leader's copy of the
        epoch ends, or this replica's own copy of it if that ends earlier; if this replica
        never had that epoch, to where its largest earlier epoch ends, and ask again."""
        log_ = partition.log
        end = log_.log_end_offset
        target = truncation_offset(log_.leader_epoch_cache, leader_epoch, leader_end_offset,
                                   log_.log_start_offset, end)
        log.info("Truncating %s-%d from %d to %d: its epoch %d ends there on the leader",
                 partition.topic, partition.index, end, target, leader_epoch)
        partition.truncate_to(target)

    def truncate_to_leader_end(self, state: FollowerState, leader_end: int) -> bool:
        """Out of range, first step: if the leader's log ends before this replica's (it
        has more than the leader, and no epoch told where they part), cut back to the
        leader's end and return True; else False (the leader's start decides)."""
        partition = state.partition
        end = partition.log.log_end_offset
        if leader_end >= end:
            return False
        log.warning("Truncating %s-%d from %d to the leader's log end %d (out of range)",
                    partition.topic, partition.index, end, leader_end)
        partition.truncate_to(leader_end)
        state.lag = 0
        return True

    def start_at_leader_start(self, state: FollowerState, leader_start: int) -> None:
        """Out of range, second step: if the leader deleted what this replica would
        fetch next (its log starts past this replica's end), start over at its start."""
        partition = state.partition
        if leader_start > partition.log.log_end_offset:
            log.warning("Starting %s-%d over at the leader's log start %d (out of range)",
                        partition.topic, partition.index, leader_start)
            partition.truncate_fully_and_start_at(leader_start, self.now_ms())
