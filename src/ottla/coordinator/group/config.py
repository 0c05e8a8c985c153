"""The broker configs of the group coordinator shared by its managers: the classic-group
limits, the offset limits and retention, and the migration policy between the two group
protocols (the other KIP-848 ones are ConsumerGroupConfig)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ottla.common.config import INT_MAX
from ottla.common.server_config import KafkaConfig


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's ConsumerGroupMigrationPolicy): whether
    a non-empty classic group may become a consumer group (upgrade) and back (downgrade).
    Empty groups change kind whatever the policy."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)

    @classmethod
    def parse(cls, name: str | None) -> MigrationPolicy:
        """Case-insensitive; anything unknown is DISABLED, as in Kafka."""
        try:
            return cls((name or "").lower())
        except ValueError:
            return cls.DISABLED


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The ``group.*`` and ``offset*`` broker configs the shard obeys (Kafka's defaults)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT_MAX
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL

    @classmethod
    def from_config(cls, config: KafkaConfig) -> GroupConfig:
        return cls(config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"],
                   config["group.initial.rebalance.delay.ms"], config["group.max.size"],
                   config["offset.metadata.max.bytes"],
                   config["offsets.retention.minutes"] * 60_000,
                   config["offsets.retention.check.interval.ms"],
                   MigrationPolicy.parse(config["group.consumer.migration.policy"]))
