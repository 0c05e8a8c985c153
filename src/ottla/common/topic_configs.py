"""The topic-level configs: Kafka's names, types, defaults and the broker keys that
supply each default (its synonyms). The controller validates against them, brokers
resolve each log's effective config from them (``storage.log_config``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ottla.common.config import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    at_least,
    between,
    one_of,
)

T = ConfigType


def _compression_levels(name: str, value: Any) -> None:
    if value is not None and value != -1 and not 1 <= value <= 9:
        raise ConfigError(f"Invalid value {value} for configuration {name}: "
                          "Value must be between 1 and 9, or -1 (the default level)")


ALL_REPLICAS = "*"


def _replica_entries(value: Any) -> list[str]:
    entries = value if isinstance(value, list) else str(value or "").split(",")
    return [str(e).strip() for e in entries if str(e).strip()]


def throttled_partitions(value: Any, broker_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value names for
    ``broker_id`` (entries ``partition:broker``); None for ``*`` (every partition)."""
    entries = _replica_entries(value)
    if entries == [ALL_REPLICAS]:
        return None
    found = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        if broker.strip().isdigit() and int(broker) == broker_id and partition.strip().isdigit():
            found.add(int(partition))
    return frozenset(found)


def throttled_replicas(name: str, value: Any) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` entries."""
    entries = _replica_entries(value)
    if entries == [ALL_REPLICAS]:
        return
    for entry in entries:
        partition, colon, broker = entry.partition(":")
        if not (colon and partition.strip().isdigit() and broker.strip().isdigit()):
            raise ConfigError(
                f"Invalid value {','.join(entries)} for configuration {name}: {name} must "
                "be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


TOPIC_CONFIGS = ConfigDef([
    ConfigKey("cleanup.policy", T.LIST, ["delete"],
              "The retention policy to use on log segments: delete, compact or both.",
              one_of("compact", "delete"), synonyms=("log.cleanup.policy",)),
    ConfigKey("compression.type", T.STRING, "producer",
              "The final compression type for the topic; 'producer' keeps the producer's.",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              synonyms=("compression.type",)),
    ConfigKey("compression.gzip.level", T.INT, -1, "The gzip level when recompressing.",
              _compression_levels, synonyms=("compression.gzip.level",)),
    ConfigKey("compression.lz4.level", T.INT, 9, "The lz4 level when recompressing.",
              between(1, 17), synonyms=("compression.lz4.level",)),
    ConfigKey("compression.zstd.level", T.INT, 3, "The zstd level when recompressing.",
              between(-131072, 22), synonyms=("compression.zstd.level",)),
    ConfigKey("delete.retention.ms", T.LONG, 86400000,
              "How long tombstones are kept in a compacted topic.", at_least(0),
              synonyms=("log.cleaner.delete.retention.ms",)),
    ConfigKey("errors.deadletterqueue.group.enable", T.BOOLEAN, False,
              "Whether share groups may write their dead-letter records here (KIP-1191)."),
    ConfigKey("file.delete.delay.ms", T.LONG, 60000,
              "How long a deleted segment stays on disk before its files are removed.",
              at_least(0), synonyms=("log.segment.delete.delay.ms",)),
    ConfigKey("flush.messages", T.LONG, LONG_MAX,
              "Messages appended between two fsyncs of the log.", at_least(1),
              synonyms=("log.flush.interval.messages",)),
    ConfigKey("flush.ms", T.LONG, LONG_MAX,
              "Milliseconds between two fsyncs of the log.", at_least(0),
              synonyms=("log.flush.interval.ms",)),
    ConfigKey("follower.replication.throttled.replicas", T.LIST, [],
              "Replicas (partition:broker, or *) whose follower fetches are throttled.",
              throttled_replicas),
    ConfigKey("index.interval.bytes", T.INT, 4096,
              "Bytes appended between two entries of the offset index.", at_least(0),
              synonyms=("log.index.interval.bytes",)),
    ConfigKey("leader.replication.throttled.replicas", T.LIST, [],
              "Replicas (partition:broker, or *) whose leader-side replication is "
              "throttled.", throttled_replicas),
    ConfigKey("local.retention.bytes", T.LONG, -2,
              "Local retention with tiered storage (-2: use retention.bytes).", at_least(-2),
              synonyms=("log.local.retention.bytes",)),
    ConfigKey("local.retention.ms", T.LONG, -2,
              "Local retention with tiered storage (-2: use retention.ms).", at_least(-2),
              synonyms=("log.local.retention.ms",)),
    ConfigKey("max.compaction.lag.ms", T.LONG, LONG_MAX,
              "The longest a message stays ineligible for compaction.", at_least(1),
              synonyms=("log.cleaner.max.compaction.lag.ms",)),
    ConfigKey("max.decompressed.message.bytes", T.INT, 2147483639,
              "The largest decompressed size of one record the broker accepts in a "
              "compressed batch (produce validation); larger records are INVALID_RECORD.",
              between(1, 2147483639), synonyms=("max.decompressed.message.bytes",)),
    ConfigKey("max.message.bytes", T.INT, 1048588,
              "The largest record batch size allowed by Kafka (after compression).",
              at_least(0), synonyms=("message.max.bytes",)),
    ConfigKey("message.timestamp.after.max.ms", T.LONG, 3600000,
              "How far in the future a CreateTime timestamp may be.", at_least(0),
              synonyms=("log.message.timestamp.after.max.ms",)),
    ConfigKey("message.timestamp.before.max.ms", T.LONG, LONG_MAX,
              "How far in the past a CreateTime timestamp may be.", at_least(0),
              synonyms=("log.message.timestamp.before.max.ms",)),
    ConfigKey("message.timestamp.type", T.STRING, "CreateTime",
              "Whether record timestamps are the producer's (CreateTime) or the broker's.",
              one_of("CreateTime", "LogAppendTime"),
              synonyms=("log.message.timestamp.type",)),
    ConfigKey("min.cleanable.dirty.ratio", T.DOUBLE, 0.5,
              "The dirty ratio above which the cleaner compacts a log.", between(0, 1),
              synonyms=("log.cleaner.min.cleanable.ratio",)),
    ConfigKey("min.compaction.lag.ms", T.LONG, 0,
              "The shortest a message stays uncompacted.", at_least(0),
              synonyms=("log.cleaner.min.compaction.lag.ms",)),
    ConfigKey("min.insync.replicas", T.INT, 1,
              "The fewest in-sync replicas that must acknowledge an acks=all write.",
              at_least(1), synonyms=("min.insync.replicas",)),
    ConfigKey("preallocate", T.BOOLEAN, False,
              "Whether to preallocate the file of a new segment.",
              synonyms=("log.preallocate",)),
    ConfigKey("remote.storage.enable", T.BOOLEAN, False, "Tiered storage (not supported)."),
    ConfigKey("retention.bytes", T.LONG, -1,
              "The largest a partition may grow before old segments are deleted.",
              synonyms=("log.retention.bytes",)),
    ConfigKey("retention.ms", T.LONG, 604800000,
              "How long a segment is kept before it is deleted (-1: forever).", at_least(-1),
              synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    ConfigKey("segment.bytes", T.INT, 1073741824, "The segment file size of the log.",
              at_least(14), synonyms=("log.segment.bytes",)),
    ConfigKey("segment.index.bytes", T.INT, 10485760,
              "The size of the offset index, which bounds the entries of a segment.",
              at_least(4), synonyms=("log.index.size.max.bytes",)),
    ConfigKey("segment.jitter.ms", T.LONG, 0,
              "Random jitter subtracted from segment.ms.", at_least(0),
              synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours")),
    ConfigKey("segment.ms", T.LONG, 604800000,
              "The age after which a segment is rolled even if it is not full.", at_least(1),
              synonyms=("log.roll.ms", "log.roll.hours")),
    ConfigKey("unclean.leader.election.enable", T.BOOLEAN, False,
              "Whether an out-of-sync replica may become leader.",
              synonyms=("unclean.leader.election.enable",)),
])


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic config overrides, rejecting unknown keys as CreateTopics does."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    return TOPIC_CONFIGS.parse({k: v for k, v in configs.items() if v is not None})
