"""Topics as kafka-topics.sh and kafka-configs.sh show and change them: partitions with
their leader, replicas, ISR and offsets, configs with their
sources, and create, delete, alter a config, add partitions."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from ottla.cli.common import client_uuid_text
from ottla.cli.web_console.connection import TIMEOUT, Connection, failing


@dataclass
class TopicSummary:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    internal: bool
    size: int | None
    """Bytes on disk over every replica (DescribeLogDirs); None: not known."""


@dataclass
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    low: int
    high: int


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    """Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ..."""
    read_only: bool
    sensitive: bool


@dataclass
class TopicDetail:
    name: str
    topic_id: str
    partitions: list[PartitionRow]
    configs: list[ConfigRow]


T = TypeVar("T")


def _call(what: str, future: Future[T]) -> T:
    with failing(what):
        return future.result(TIMEOUT)


def list_topics(connection: Connection) -> list[TopicSummary]:
    with failing("Listing topics failed"):
        metadata = connection.admin().list_topics(timeout=TIMEOUT)
    sizes = _sizes(connection, [f"{b.host}:{b.port}" for b in metadata.brokers.values()])
    rows = []
    for name, topic in sorted(metadata.topics.items()):
        parts = list(topic.partitions.values())
        rows.append(TopicSummary(
            name, len(parts), len(parts[0].replicas) if parts else 0,
            sum(1 for p in parts if len(p.isrs) < len(p.replicas)), name.startswith("__"),
            sizes.get(name) if sizes is not None else None))
    return rows


def _sizes(connection: Connection, brokers: list[str]) -> dict[str, int] | None:
    """Bytes per topic over every broker's log dirs, as kafka-log-dirs.sh reads them;
    None when a broker does not tell (down, or DESCRIBE on the cluster denied)."""
    from ottla.cli.common import connect
    from ottla.protocol.api import ApiKey

    sizes: dict[str, int] = {}
    try:
        for address in brokers:
            with connect(address, "ottla-console", connection.properties) as client:
                described = client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
            if described.error_code != 0:
                return None
            for log_dir in described.results:
                for t in log_dir.topics:
                    sizes[t.name] = sizes.get(t.name, 0) + sum(
                        p.partition_size for p in t.partitions if not p.is_future_key)
    except (OSError, ConnectionError, SystemExit):  # SystemExit: authentication failed
        return None
    return sizes


def describe(connection: Connection, name: str) -> TopicDetail:
    from confluent_kafka import Consumer, TopicCollection, TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource

    admin = connection.admin()
    desc = _call(f"Topic '{name}'",
                 admin.describe_topics(TopicCollection([name]), request_timeout=TIMEOUT)[name])
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = _call(f"Configs of '{name}'",
                    admin.describe_configs([resource], request_timeout=TIMEOUT)[resource])
    consumer = Consumer(connection.conf | {"group.id": "ottla-console",
                                           "enable.auto.commit": False})
    try:
        with failing(f"Offsets of '{name}'"):
            marks = {p.id: consumer.get_watermark_offsets(TopicPartition(name, p.id),
                                                          timeout=TIMEOUT) or (-1, -1)
                     for p in desc.partitions}
    finally:
        consumer.close()
    partitions = [PartitionRow(p.id, p.leader.id if p.leader is not None else -1,
                               [r.id for r in p.replicas], [r.id for r in p.isr],
                               *marks[p.id]) for p in desc.partitions]
    configs = [ConfigRow(e.name, e.value, ConfigSource(e.source).name, e.is_read_only,
                         e.is_sensitive) for e in sorted(entries.values(), key=lambda e: e.name)]
    return TopicDetail(name, client_uuid_text(desc.topic_id), partitions, configs)


def create(connection: Connection, name: str, partitions: int | None,
           replication_factor: int | None, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    new = NewTopic(name, num_partitions=partitions or -1,
                   replication_factor=replication_factor or -1, config=configs)
    _call(f"Creating topic '{name}' failed",
          connection.admin().create_topics([new], operation_timeout=TIMEOUT,
                                           request_timeout=TIMEOUT)[name])


def delete(connection: Connection, name: str) -> None:
    _call(f"Deleting topic '{name}' failed",
          connection.admin().delete_topics([name], operation_timeout=TIMEOUT,
                                           request_timeout=TIMEOUT)[name])


def alter_config(connection: Connection, name: str, key: str, value: str | None) -> None:
    """Set ``key`` (``value`` None: delete the override, back to the default) with
    IncrementalAlterConfigs, as kafka-configs.sh --alter does."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value or "", incremental_operation=op)])
    _call(f"Altering '{key}' of '{name}' failed",
          connection.admin().incremental_alter_configs([resource],
                                                       request_timeout=TIMEOUT)[resource])


def add_partitions(connection: Connection, name: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    _call(f"Adding partitions to '{name}' failed",
          connection.admin().create_partitions([NewPartitions(name, total)],
                                               operation_timeout=TIMEOUT,
                                               request_timeout=TIMEOUT)[name])
