"""Consumer lag under kafka_exporter's names (github.com/danielqsj/kafka_exporter), read
from the node's own state when scraped instead of by a separate exporter asking the
cluster with OffsetFetch and ListOffsets.

What a node serves (docs/observability.md, "Consumer lag"):

- for every group whose coordinator shard is loaded here (classic, KIP-848 ``consumer``
  and share groups): ``kafka_consumergroup_members{consumergroup}``;
- for every partition such a group has an offset for: ``current_offset`` (the committed
  offset as OffsetFetch reads it, as of the offsets partition's high watermark), per
  topic ``current_offset_sum``, and, where the partition's end is known, ``lag`` and
  ``lag_sum``. The end is the partition's high watermark (what kafka_exporter takes:
  ListOffsets latest, read_uncommitted): read here when this node leads the partition,
  else asked of its leader with one ListOffsets per broker before the scrape is
  collected, bounded by ``REMOTE_TIMEOUT_S``; a partition whose leader does not answer
  in time has no lag in that scrape;
- for share groups the share-partition states of the share coordinator shards loaded
  here: the start offset as the current offset, and the lag Kafka computes for
  ``kafka-share-groups --describe`` (KIP-1226: end - start - delivered);
- ``kafka_topic_partition_current_offset`` and ``..._oldest_offset`` (high watermark and
  log start) of the partitions this node leads.

Every group has one coordinator and every partition one leader, so the sum over the
nodes' scrapes is the cluster's view, each series once (a moving coordinator can show a
group on two nodes for one scrape).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from ottla.broker.broker import Broker
from ottla.broker.inter_broker import InterBrokerClients, latest_offsets
from ottla.common.topics import TopicPartition
from ottla.coordinator.group.share_group import has_lag, share_partition_lag
from ottla.coordinator.runtime import CoordinatorState
from ottla.protocol.errors import KafkaError

log = logging.getLogger(__name__)

REMOTE_TIMEOUT_S = 1.0
"""How long a scrape waits for other brokers' high watermarks (their ListOffsets run at
once, one per broker)."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's position on one partition: a consumer group's committed offset, or a
    share group's start offset with the records past it already delivered
    (``delivered`` None for consumer groups)."""

    group: str
    topic: str
    partition: int
    offset: int
    delivered: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition

    def lag(self, end_offset: int) -> int | None:
        """kafka_exporter's lag (end - committed, as it is: negative if the committed
        offset is past the end); a share group's as Kafka's share-group describe gives
        it, None where that is not known yet."""
        if self.delivered is None:
            return end_offset - self.offset
        if not has_lag(self.offset, self.delivered):
            return None
        return share_partition_lag(end_offset, self.offset, self.delivered)


class DeferredFamily(Metric):
    """A gauge family whose samples are made when first read: by the endpoint's writer
    thread, from rows the collector copied on the event loop. Building 10,000 samples
    takes some 100 ms here, which would otherwise stall the node's clients."""

    def __init__(self, name: str, documentation: str, make: Callable[[], list[Sample]]
                 ) -> None:
        self._made: list[Sample] | None = None
        super().__init__(name, documentation, "gauge")
        self._make = make

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self._made is None:
            self._made = self._make()
        return self._made

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._made = value or None


FAMILIES = (
    ("kafka_consumergroup_current_offset",
     "Current Offset of a ConsumerGroup at Topic/Partition"),
    ("kafka_consumergroup_current_offset_sum",
     "Current Offset of a ConsumerGroup at Topic for all partitions"),
    ("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition"),
    ("kafka_consumergroup_lag_sum",
     "Current Approximate Lag of a ConsumerGroup at Topic for all partitions"),
    ("kafka_consumergroup_members", "Amount of members in a consumer group"),
)
"""kafka_exporter's families, with its help texts."""


def lag_samples(members: Mapping[str, int], committed: Iterable[CommittedOffset],
                end_offsets: Mapping[TopicPartition, int]) -> list[list[Sample]]:
    """The samples of each of ``FAMILIES``: ``end_offsets`` holds the ends that are known;
    a partition without one has a current offset and no lag (and its topic's
    ``lag_sum`` leaves it out)."""
    current: list[Sample] = []
    current_sum: list[Sample] = []
    lag: list[Sample] = []
    lag_sum: list[Sample] = []
    group_members = [Sample(FAMILIES[4][0], {"consumergroup": group}, count)
                     for group, count in sorted(members.items())]
    sums: dict[tuple[str, str], list[int]] = {}
    for row in sorted(committed, key=lambda r: (r.group, r.topic, r.partition)):
        labels = {"consumergroup": row.group, "topic": row.topic,
                  "partition": str(row.partition)}
        current.append(Sample(FAMILIES[0][0], labels, row.offset))
        totals = sums.setdefault((row.group, row.topic), [0, 0, 0])
        totals[0] += row.offset
        end = end_offsets.get(row.tp)
        known = None if end is None else row.lag(end)
        if known is not None:
            lag.append(Sample(FAMILIES[2][0], labels, known))
            totals[1] += known
            totals[2] += 1
    for (group, topic), (offsets, lags, known_lags) in sums.items():
        labels = {"consumergroup": group, "topic": topic}
        current_sum.append(Sample(FAMILIES[1][0], labels, offsets))
        if known_lags:
            lag_sum.append(Sample(FAMILIES[3][0], labels, lags))
    return [current, current_sum, lag, lag_sum, group_members]


def lag_families(members: Mapping[str, int], committed: Iterable[CommittedOffset],
                 end_offsets: Mapping[TopicPartition, int]) -> list[Metric]:
    """``FAMILIES``, made (``lag_samples``) when first read."""
    made: list[list[list[Sample]]] = []
    rows = (dict(members), list(committed), dict(end_offsets))

    def family(i: int) -> Callable[[], list[Sample]]:
        def make() -> list[Sample]:
            if not made:
                made.append(lag_samples(*rows))
            return made[0][i]
        return make
    return [DeferredFamily(name, doc, family(i)) for i, (name, doc) in enumerate(FAMILIES)]


class ConsumerLagCollector:
    """The lag of the groups this broker coordinates and the offsets of the partitions it
    leads. ``prepare`` (awaited by the endpoint before it collects) fetches the high
    watermarks of partitions led elsewhere; ``collect`` reads everything else from the
    coordinator shards and the replica manager, on the event loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._remote: dict[TopicPartition, int] = {}

    def groups(self) -> tuple[dict[str, int], list[CommittedOffset]]:
        """Members per group and the groups' offsets, from the loaded shards."""
        members: dict[str, int] = {}
        committed: list[CommittedOffset] = []
        for context in list(self.broker.group_coordinator.runtime.contexts.values()):
            if context.state is not CoordinatorState.ACTIVE:
                continue
            shard = context.shard
            for group_id, group in shard.groups.items():
                members[group_id] = len(group.members)
            committed.extend(CommittedOffset(group, topic, partition, offset)
                             for group, topic, partition, offset
                             in shard.offset_metadata.committed_offsets())
        topics = self.broker.image.topics_by_id
        for context in list(self.broker.share_coordinator.runtime.contexts.values()):
            if context.state is not CoordinatorState.ACTIVE:
                continue
            for key, state in context.shard.states.items():
                topic = topics.get(key.topic_id)
                if topic is not None and state.start_offset >= 0:
                    committed.append(CommittedOffset(
                        key.group_id, topic.name, key.partition, state.start_offset,
                        state.delivery_complete_count))
        return members, committed

    def _led_here(self) -> Iterator[tuple[TopicPartition, int, int]]:
        """(partition, high watermark, log start) of every partition led here."""
        for tp, partition in list(self.broker.replica_manager.partitions.items()):
            if partition.is_leader:
                yield tp, partition.high_watermark, partition.log.log_start_offset

    def _remote_partitions(self, committed: Iterable[CommittedOffset]
                           ) -> dict[int, list[TopicPartition]]:
        """The partitions with offsets here that another broker leads, by leader."""
        image = self.broker.image
        node_id = self.broker.node_id
        by_leader: dict[int, set[TopicPartition]] = {}
        for row in committed:
            topic = image.topics_by_name.get(row.topic)
            registration = None if topic is None else topic.partitions.get(row.partition)
            if registration is not None and registration.leader >= 0 and \
                    registration.leader != node_id:
                by_leader.setdefault(registration.leader, set()).add(row.tp)
        return {leader: sorted(tps) for leader, tps in by_leader.items()}

    async def prepare(self) -> None:
        """Ask each other leader for the high watermarks of the partitions the groups here
        have offsets on; whatever has not answered within ``REMOTE_TIMEOUT_S`` is left
        without a lag in this scrape."""
        self._remote = {}
        _, committed = self.groups()
        wanted = self._remote_partitions(committed)
        if not wanted:
            return
        peers = InterBrokerClients(self.broker, "metrics")
        try:
            answers = await asyncio.wait_for(asyncio.gather(
                *(latest_offsets(peers, leader, tps, timeout=REMOTE_TIMEOUT_S)
                  for leader, tps in wanted.items()), return_exceptions=True),
                REMOTE_TIMEOUT_S + 0.5)
        except TimeoutError:
            answers = []
        finally:
            await peers.close()
        for answer in answers:
            if isinstance(answer, BaseException):
                log.debug("High watermarks for the lag metrics failed: %r", answer)
                continue
            self._remote.update((tp, end) for tp, end in answer.items()
                                if not isinstance(end, KafkaError))

    def collect(self) -> Iterator[Metric]:
        members, committed = self.groups()
        led = list(self._led_here())
        ends = dict(self._remote)
        ends.update((tp, high_watermark) for tp, high_watermark, _ in led)
        yield from lag_families(members, committed, ends)
        yield DeferredFamily("kafka_topic_partition_current_offset",
                             "Current Offset of a Broker at Topic/Partition",
                             lambda: [Sample("kafka_topic_partition_current_offset",
                                             {"topic": t, "partition": str(p)}, end)
                                      for (t, p), end, _ in sorted(led)])
        yield DeferredFamily("kafka_topic_partition_oldest_offset",
                             "Oldest Offset of a Broker at Topic/Partition",
                             lambda: [Sample("kafka_topic_partition_oldest_offset",
                                             {"topic": t, "partition": str(p)}, start)
                                      for (t, p), _, start in sorted(led)])
