"""The group coordinator's gauges, counted when scraped over the ``__consumer_offsets``
shards loaded here (Kafka's GroupCoordinatorMetrics): the Yammer gauges of
``kafka.coordinator.group:type=GroupMetadataManager`` (NumGroups and the rest, which
count classic groups only; deprecated in Kafka 4.4) and their successors in the
``group-coordinator-metrics`` metrics group (groups by protocol, and by state for each
kind)."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.broker.coordinators.group_coordinator import GroupCoordinatorService
from ottla.coordinator.group.classic import ClassicState
from ottla.coordinator.group.consumer_group import ConsumerGroupState
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.offset_metadata_manager import OffsetMetadataManager
from ottla.coordinator.group.share_group import ShareGroupState
from ottla.coordinator.runtime import CoordinatorState
from ottla.server.metrics.jmx_names import gauge, group_metric

GROUP = "group-coordinator-metrics"

CLASSIC_GAUGES: tuple[tuple[str, ClassicState | None], ...] = (
    ("NumGroups", None),
    ("NumGroupsPreparingRebalance", ClassicState.PREPARING_REBALANCE),
    ("NumGroupsCompletingRebalance", ClassicState.COMPLETING_REBALANCE),
    ("NumGroupsStable", ClassicState.STABLE),
    ("NumGroupsDead", ClassicState.DEAD),
    ("NumGroupsEmpty", ClassicState.EMPTY),
)
"""GroupMetadataManager's gauges of classic groups: all of them (None) or one state's."""

BY_STATE: tuple[tuple[str, str, type[enum.Enum]], ...] = (
    ("classic", "classic-group-count", ClassicState),
    ("consumer", "consumer-group-count", ConsumerGroupState),
    ("share", "share-group-count", ShareGroupState),
)
"""Each group kind: its ``protocol`` tag of ``group-count``, the metric counting it by
``state`` (Kafka's state names, its enums' values here too)."""


class GroupCoordinatorCollector:
    """``kafka_coordinator_group_groupmetadatamanager_*`` and
    ``kafka_server_group_coordinator_metrics_*`` of the groups coordinated here. The
    exporter's rules match the tagged group-coordinator-metrics beans only by folding
    the tag into the name; here, as for ``connection_count``, the tag is a label."""

    def __init__(self, coordinator: GroupCoordinatorService) -> None:
        self.coordinator = coordinator

    def counts(self) -> tuple[Counter[tuple[str, str]], int]:
        """Groups by (kind, state) and the committed offsets, over the active shards."""
        groups: Counter[tuple[str, str]] = Counter()
        offsets = 0
        for context in list(self.coordinator.runtime.contexts.values()):
            if context.state is not CoordinatorState.ACTIVE:
                continue
            store: GroupStore = context.shard.groups
            for group in store.values():
                groups[(group.group_type, group.state.value)] += 1
            committed: OffsetMetadataManager = context.shard.offset_metadata
            offsets += sum(1 for _ in committed.committed_offsets())
        return groups, offsets

    def collect(self) -> Iterator[Metric]:
        groups, offsets = self.counts()
        classic = {state: n for (kind, state), n in groups.items() if kind == "classic"}
        for name, state in CLASSIC_GAUGES:
            value = sum(classic.values()) if state is None else classic.get(state.value, 0)
            yield GaugeMetricFamily(
                gauge("kafka.coordinator.group", "GroupMetadataManager", name),
                f"Classic groups{'' if state is None else ' ' + state.value} coordinated "
                f"here (kafka.coordinator.group:type=GroupMetadataManager,name={name})",
                value=value)
        yield GaugeMetricFamily(
            gauge("kafka.coordinator.group", "GroupMetadataManager", "NumOffsets"),
            "Committed offsets of the groups coordinated here "
            "(kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets)",
            value=offsets)
        yield GaugeMetricFamily(group_metric(GROUP, "offset-count"),
                                f"Committed offsets of the groups coordinated here "
                                f"(kafka.server:type={GROUP} offset-count)", value=offsets)
        by_protocol = GaugeMetricFamily(
            group_metric(GROUP, "group-count"),
            f"Groups coordinated here by protocol (kafka.server:type={GROUP},"
            f"protocol=P group-count)", labels=("protocol",))
        for kind, metric, states in BY_STATE:
            by_protocol.add_metric((kind,), sum(n for (k, _), n in groups.items()
                                                if k == kind))
            by_state = GaugeMetricFamily(
                group_metric(GROUP, metric),
                f"{kind.capitalize()} groups coordinated here by state "
                f"(kafka.server:type={GROUP},state=S {metric})", labels=("state",))
            for state in states:
                by_state.add_metric((state.value,), groups[(kind, state.value)])
            yield by_state
        yield by_protocol
        yield GaugeMetricFamily(
            group_metric(GROUP, "offset-commit-count"),
            f"Offsets committed through this node's coordinator since it started, one per "
            f"partition (kafka.server:type={GROUP} offset-commit-count); rate() for "
            f"offset-commit-rate", value=self.coordinator.metrics.offset_commits)
        yield GaugeMetricFamily(
            group_metric(GROUP, "offset-deletion-count"),
            f"Offsets OffsetDelete removed through this node's coordinator since it "
            f"started (kafka.server:type={GROUP} offset-deletion-count); rate() for "
            f"offset-deletion-rate", value=self.coordinator.metrics.offset_deletions)
        yield GaugeMetricFamily(
            group_metric(GROUP, "offset-expiration-count"),
            f"Offsets expired by offsets.retention.minutes on this node's coordinator since "
            f"it started (kafka.server:type={GROUP} offset-expiration-count); rate() for "
            f"offset-expiration-rate", value=self.coordinator.metrics.offset_expirations)
        yield GaugeMetricFamily(
            group_metric(GROUP, "group-completed-rebalance-count"),
            f"Classic groups' rebalances completed here since the node started, each when "
            f"the leader's SyncGroup made the group Stable (kafka.server:type={GROUP} "
            f"group-completed-rebalance-count)",
            value=self.coordinator.metrics.classic_completed_rebalances)
        yield GaugeMetricFamily(
            group_metric(GROUP, "consumer-group-rebalance-count"),
            f"Consumer (KIP-848) groups' epochs bumped here since the node started "
            f"(kafka.server:type={GROUP} consumer-group-rebalance-count)",
            value=self.coordinator.metrics.consumer_rebalances)
