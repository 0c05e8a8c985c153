"""The group coordinator service on a broker (Kafka's GroupCoordinatorService): the
generic coordinator service over ``__consumer_offsets`` with group shards. The share
groups' offsets admin APIs build on it in ``broker.share.offsets_admin``."""

from __future__ import annotations

import uuid

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.common.topics import OFFSETS_TOPIC
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_protocol import ConsumerGroupConfig
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard
from ottla.coordinator.group.share_group import ShareGroupConfig
from ottla.coordinator.runtime import CoordinatorState
from ottla.metadata.image import ConfigResourceType


class GroupCoordinatorService(CoordinatorService[GroupCoordinatorShard]):
    topic_name = OFFSETS_TOPIC
    kind = "group coordinator"

    def __init__(self, broker: BrokerContext) -> None:
        config = broker.config
        self.group_config = GroupConfig.from_config(config)
        def overrides(group_id: str) -> dict[str, str]:
            return broker.image.configs.get((ConfigResourceType.GROUP, group_id), {})
        self.consumer_config = ConsumerGroupConfig.from_config(config, overrides,
                                                               broker.dynamic_config)
        self.share_config = ShareGroupConfig.from_config(config, overrides)
        self.metrics = GroupCoordinatorMetrics()
        super().__init__(
            broker, config["offsets.topic.num.partitions"],
            config["offsets.topic.replication.factor"],
            {"cleanup.policy": "compact", "compression.type": "producer",
             "segment.bytes": str(config["offsets.topic.segment.bytes"])},
            lambda ctx: GroupCoordinatorShard(ctx, self.group_config, topics=self.user_topics,
                                              consumer_config=self.consumer_config,
                                              share_config=self.share_config,
                                              metrics=self.metrics),
            rec.encode, rec.decode, write_timeout_ms=config["offsets.commit.timeout.ms"])

    def user_topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        """User topics of the metadata image: name -> (topic id, partition count)."""
        return {name: (t.topic_id, len(t.partitions))
                for name, t in self.broker.image.topics_by_name.items()
                if not name.startswith("__")}

    def transaction_ended(self, tp: tuple[str, int], producer_id: int, commit: bool,
                          offset: int) -> None:
        """WriteTxnMarkers wrote a marker for ``producer_id`` to an offsets partition at
        ``offset``: its shard decides the producer's pending offsets now, as replaying
        the marker from the log decides them after a failover."""
        context = self.runtime.contexts.get(tp)
        if context is None or context.state is not CoordinatorState.ACTIVE:
            return  # not (yet) loaded here: its loading replays the marker
        self.runtime.write(tp, lambda shard, now: shard.transaction_ended(
            now, producer_id, commit, offset), lambda response: None, self.broker.now_ms())
