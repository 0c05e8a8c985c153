"""Broker and controller configuration: ``server.properties`` keys, Kafka's defaults.

Unknown keys are reported and ignored, as Kafka does; a known key with a bad value is an
error that stops the node before it binds a port.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ottla.common.config import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    at_least,
    between,
    non_duplicate_values,
    off_or_at_least,
    one_of,
    parse_value,
)
from ottla.common.kafka_broker_configs import (
    KAFKA_BROKER_CONFIGS,
    PER_BROKER,
    READ_ONLY,
)
from ottla.common.kafka_broker_configs import mode as kafka_mode
from ottla.common.topic_configs import TOPIC_CONFIGS

log = logging.getLogger(__name__)
T = ConfigType

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

_HOST_PORT = re.compile(r"^(\[[^\]]*\]|[^:\[\]]*):(\d{1,5})$")


def _host_port(name: str, value: str | None) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port``; an empty host binds every interface; port 0 any free
    one), or None for an empty value."""
    if not value:
        return None
    match = _HOST_PORT.match(value.strip())
    if not match or int(match.group(2)) > 65535:
        raise ConfigError(f"Invalid value {value} for configuration {name}: expected "
                          "host:port")
    return match.group(1).strip("[]"), int(match.group(2))


# Broker keys: (name, type, default, doc[, validator]). Keys the node does not act on yet
# are accepted so that a Kafka server.properties starts Ottla; docs/configuration.md says
# which ones have an effect.
_KEYS: list[ConfigKey] = [
    ConfigKey("process.roles", T.LIST, [], "The roles of this node: broker, controller or both.",
              one_of("broker", "controller"), read_only=True, no_default=True),
    ConfigKey("node.id", T.INT, -1, "The node id of this server.", read_only=True,
              no_default=True),
    ConfigKey("broker.id", T.INT, -1, "Synonym of node.id.", read_only=True),
    ConfigKey("controller.quorum.voters", T.LIST, [],
              "The static voters of the metadata quorum: id@host:port,...", read_only=True),
    ConfigKey("controller.quorum.bootstrap.servers", T.LIST, [],
              "Controllers to bootstrap the quorum connection from.", read_only=True),
    ConfigKey("controller.quorum.election.timeout.ms", T.INT, 1000,
              "How long a voter waits without a leader before asking for votes.",
              at_least(1), read_only=True),
    ConfigKey("controller.quorum.fetch.timeout.ms", T.INT, 2000,
              "How long a follower goes without hearing from its leader before it looks "
              "for a new one.", at_least(1), read_only=True),
    ConfigKey("controller.quorum.election.backoff.max.ms", T.INT, 1000,
              "The largest random wait before a new election.", at_least(0), read_only=True),
    ConfigKey("controller.quorum.request.timeout.ms", T.INT, 2000,
              "How long a replica waits for an answer from another.", at_least(1),
              read_only=True),
    ConfigKey("metadata.log.max.record.bytes.between.snapshots", T.LONG, 20971520,
              "Bytes of metadata batches applied before the next snapshot.", at_least(1),
              read_only=True),
    ConfigKey("metadata.log.max.snapshot.interval.ms", T.LONG, 3600000,
              "The longest time between two snapshots when the log has changed (0: never).",
              at_least(0), read_only=True),
    ConfigKey("metadata.max.idle.interval.ms", T.INT, 500,
              "How often an idle active controller writes a NoOpRecord (0: never).",
              at_least(0), read_only=True),
    ConfigKey("controller.listener.names", T.LIST, [],
              "Names of the listeners the controller serves.", read_only=True,
              no_default=True),
    ConfigKey("listeners", T.LIST, ["PLAINTEXT://:9092"],
              "Listeners: NAME://host:port, comma separated.", read_only=True),
    ConfigKey("advertised.listeners", T.LIST, None,
              "Listeners published to clients if different from listeners.", read_only=True),
    ConfigKey("listener.security.protocol.map", T.LIST,
              ["SASL_SSL:SASL_SSL", "PLAINTEXT:PLAINTEXT", "SSL:SSL",
               "SASL_PLAINTEXT:SASL_PLAINTEXT"],
              "Map of listener names to security protocols.", read_only=True,
              kafka_type=T.STRING),
    ConfigKey("inter.broker.listener.name", T.STRING, None,
              "The listener brokers use to talk to each other.", read_only=True),
    ConfigKey("log.dirs", T.LIST, None, "The directories holding the log data.", read_only=True),
    ConfigKey("log.dir", T.LIST, ["/tmp/kafka-logs"], "Used if log.dirs is not set.",
              read_only=True),
    ConfigKey("cordoned.log.dirs", T.LIST, [],
              "A comma-separated list of the directories that are cordoned. Entries in this "
              "list must be entries in log.dirs or log.dir configuration. This can also be "
              "set to * to cordon all log directories.", non_duplicate_values),
    ConfigKey("metadata.log.dir", T.STRING, None,
              "Where the metadata log lives; defaults to the first log dir.", read_only=True),
    ConfigKey("num.partitions", T.INT, 1, "Default partition count of new topics.", at_least(1)),
    ConfigKey("default.replication.factor", T.INT, 1, "Default replication factor of new topics.",
              at_least(1)),
    ConfigKey("auto.create.topics.enable", T.BOOLEAN, True,
              "Create a topic when a client asks for its metadata.", read_only=True),
    ConfigKey("delete.topic.enable", T.BOOLEAN, True, "Allow topics to be deleted.",
              read_only=True),
    ConfigKey("message.max.bytes", T.INT, 1048588,
              "The largest record batch size allowed (topic default of max.message.bytes).",
              at_least(0)),
    ConfigKey("log.segment.bytes", T.INT, 1073741824, "The size of a log segment file.",
              at_least(14)),
    ConfigKey("log.roll.ms", T.LONG, None, "Maximum age of a segment before it is rolled."),
    ConfigKey("log.roll.hours", T.INT, 168, "Maximum age of a segment in hours.", at_least(1)),
    ConfigKey("log.roll.jitter.ms", T.LONG, None, "Jitter subtracted from the roll time."),
    ConfigKey("log.roll.jitter.hours", T.INT, 0, "Jitter in hours.", at_least(0)),
    ConfigKey("log.retention.ms", T.LONG, None, "How long logs are kept (-1: forever)."),
    ConfigKey("log.retention.minutes", T.INT, None, "How long logs are kept, in minutes."),
    ConfigKey("log.retention.hours", T.INT, 168, "How long logs are kept, in hours."),
    ConfigKey("log.retention.bytes", T.LONG, -1, "The largest a partition may grow."),
    ConfigKey("log.retention.check.interval.ms", T.LONG, 300000,
              "How often retention is checked.", at_least(1)),
    ConfigKey("log.index.size.max.bytes", T.INT, 10485760, "Offset index size bound.",
              at_least(4)),
    ConfigKey("log.index.interval.bytes", T.INT, 4096, "Bytes between offset index entries.",
              at_least(0)),
    ConfigKey("log.flush.interval.messages", T.LONG, LONG_MAX,
              "Appends between two fsyncs of a log.", at_least(1)),
    ConfigKey("log.flush.interval.ms", T.LONG, None, "Milliseconds between two fsyncs of a log."),
    ConfigKey("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX,
              "How often logs are checked for flush.ms."),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", T.INT, 60000,
              "How often the recovery point checkpoint is written.", at_least(0)),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000,
              "How often the log start offset checkpoint is written.", at_least(0)),
    ConfigKey("log.cleanup.policy", T.LIST, ["delete"], "Default cleanup policy.",
              one_of("compact", "delete")),
    ConfigKey("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner."),
    ConfigKey("log.cleaner.backoff.ms", T.LONG, 15000,
              "How long the cleaner sleeps when no log needs cleaning.", at_least(0)),
    ConfigKey("log.cleaner.delete.retention.ms", T.LONG, 86400000, "Tombstone retention."),
    ConfigKey("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Minimum compaction lag."),
    ConfigKey("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, "Maximum compaction lag."),
    ConfigKey("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Minimum dirty ratio.",
              between(0, 1)),
    ConfigKey("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before deleting files."),
    ConfigKey("log.preallocate", T.BOOLEAN, False, "Preallocate new segment files."),
    ConfigKey("log.page.cache.window.bytes", T.LONG, -1,
              "Ottla: how many of each segment's newest bytes stay in the page cache; older "
              "ones are written back and dropped (-1: all stay, as in Kafka).",
              off_or_at_least(4096)),
    ConfigKey("log.message.timestamp.type", T.STRING, "CreateTime", "Default timestamp type.",
              one_of("CreateTime", "LogAppendTime")),
    ConfigKey("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX,
              "How far in the past a CreateTime timestamp may be."),
    ConfigKey("log.message.timestamp.after.max.ms", T.LONG, 3600000,
              "How far in the future a CreateTime timestamp may be."),
    ConfigKey("log.local.retention.ms", T.LONG, -2, "Local retention with tiered storage."),
    ConfigKey("log.local.retention.bytes", T.LONG, -2, "Local retention with tiered storage."),
    ConfigKey("compression.type", T.STRING, "producer", "Default compression of topics.",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigKey("compression.gzip.level", T.INT, -1, "gzip level."),
    ConfigKey("compression.lz4.level", T.INT, 9, "lz4 level."),
    ConfigKey("compression.zstd.level", T.INT, 3, "zstd level."),
    ConfigKey("min.insync.replicas", T.INT, 1, "Default min.insync.replicas.", at_least(1)),
    ConfigKey("unclean.leader.election.enable", T.BOOLEAN, False, "Unclean leader election."),
    ConfigKey("socket.request.max.bytes", T.INT, 104857600,
              "The largest request frame accepted.", at_least(1), read_only=True),
    ConfigKey("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF (-1: OS default)."),
    ConfigKey("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF (-1: OS default)."),
    ConfigKey("connections.max.idle.ms", T.LONG, 600000,
              "Connections on which no byte moved for this long are closed (-1: never).",
              read_only=True),
    ConfigKey("queued.max.request.bytes", T.LONG, 104857600,
              "Bytes of requests read but not yet handled, node-wide; a connection whose "
              "next frame does not fit waits (-1: no limit). Kafka's default is -1.",
              read_only=True),
    ConfigKey("max.decompressed.batch.bytes", T.INT, 67108864,
              "The most bytes the records of one produced compressed batch may decompress "
              "to; a batch that needs more is refused with INVALID_RECORD.", at_least(1024),
              read_only=True),
    ConfigKey("max.connections", T.INT, 2147483647,
              "Connections the node accepts in all; more are closed at once.", at_least(0),
              read_only=True),
    ConfigKey("max.connections.per.ip", T.INT, 2147483647,
              "Connections the node accepts from one address; more are closed at once.",
              at_least(0), read_only=True),
    ConfigKey("max.connections.per.ip.overrides", T.STRING, "",
              "Per-address limits: host:count,host:count.", read_only=True),
    ConfigKey("max.connection.creation.rate", T.INT, 2147483647,
              "Connections a listener accepts per second (per listener with "
              "listener.name.<listener>.max.connection.creation.rate, and on the whole "
              "node without the prefix); beyond it the listener stops accepting for the "
              "throttle time. The inter-broker and controller listeners are exempt from "
              "the node-wide rate.", at_least(0), read_only=True),
    ConfigKey("num.network.threads", T.INT, 3, "Accepted for compatibility; one event loop."),
    ConfigKey("num.io.threads", T.INT, 8, "Accepted for compatibility; one event loop."),
    ConfigKey("num.recovery.threads.per.data.dir", T.INT, 2, "Accepted for compatibility."),
    ConfigKey("max.incremental.fetch.session.cache.slots", T.INT, 1000,
              "The most incremental fetch sessions kept (KIP-227).", at_least(0)),
    ConfigKey("fetch.max.bytes", T.INT, 57671680, "The most bytes a fetch response carries.",
              at_least(1024)),
    ConfigKey("max.request.partition.size.limit", T.INT, 2000,
              "The most partitions a DescribeTopicPartitions response carries.", at_least(1)),
    ConfigKey("replica.lag.time.max.ms", T.LONG, 30000,
              "A follower that has not caught up with its leader's log end for this long "
              "leaves the ISR.", at_least(1)),
    ConfigKey("replica.selector.class", T.STRING, None,
              "org.apache.kafka.common.replica.RackAwareReplicaSelector lets consumers that "
              "set client.rack read from a replica in their rack (KIP-392)."),
    ConfigKey("num.replica.fetchers", T.INT, 1,
              "Fetchers per source broker; each partition uses one.", at_least(1)),
    ConfigKey("replica.fetch.max.bytes", T.INT, 1048576,
              "Bytes a follower asks per partition (at least one batch).", at_least(0)),
    ConfigKey("replica.fetch.response.max.bytes", T.INT, 10485760,
              "Bytes a follower asks per fetch (at least one batch).", at_least(0)),
    ConfigKey("replica.fetch.min.bytes", T.INT, 1,
              "Bytes a follower's fetch waits for.", at_least(1)),
    ConfigKey("replica.fetch.wait.max.ms", T.INT, 500,
              "Longest a follower's fetch waits at its leader.", at_least(0)),
    ConfigKey("replica.fetch.backoff.ms", T.INT, 1000,
              "Pause of a follower after a failed fetch.", at_least(0)),
    ConfigKey("replica.socket.timeout.ms", T.INT, 30000,
              "Timeout of a follower's fetch request.", at_least(1)),
    ConfigKey("leader.replication.throttled.rate", T.LONG, LONG_MAX,
              "Bytes/s this broker sends to followers of the partitions its topics list in "
              "leader.replication.throttled.replicas, while they are out of sync.",
              at_least(0)),
    ConfigKey("follower.replication.throttled.rate", T.LONG, LONG_MAX,
              "Bytes/s this broker fetches for the partitions its topics list in "
              "follower.replication.throttled.replicas, while it is out of sync.",
              at_least(0)),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX,
              "Bytes/s this broker copies for replicas moving between its log dirs "
              "(AlterReplicaLogDirs).", at_least(0)),
    ConfigKey("alter.log.dirs.replication.quota.window.num", T.INT, 11,
              "Samples kept to measure the rate of copies between log dirs.",
              at_least(1), read_only=True),
    ConfigKey("alter.log.dirs.replication.quota.window.size.seconds", T.INT, 1,
              "Length of each sample of the rate of copies between log dirs.",
              at_least(1), read_only=True),
    ConfigKey("replication.quota.window.num", T.INT, 11,
              "Samples kept to measure a replication throttle's rate.", at_least(1)),
    ConfigKey("replication.quota.window.size.seconds", T.INT, 1,
              "Length of each replication throttle sample.", at_least(1)),
    ConfigKey("quota.window.num", T.INT, 11,
              "Samples kept to measure a client's rate against its client quotas.",
              at_least(1), read_only=True),
    ConfigKey("quota.window.size.seconds", T.INT, 1,
              "Length of each client quota sample.", at_least(1), read_only=True),
    ConfigKey("controller.quota.window.num", T.INT, 11,
              "Samples of the controller mutation quota: a client may create or delete "
              "this many windows' worth of partitions at once (KIP-599's burst).",
              at_least(1), read_only=True),
    ConfigKey("controller.quota.window.size.seconds", T.INT, 1,
              "Length of each controller mutation quota sample.", at_least(1),
              read_only=True),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000,
              "How often the high watermarks are written to replication-offset-checkpoint.",
              at_least(1)),
    ConfigKey("producer.id.expiration.ms", T.INT, 86400000,
              "Idle producer ids are forgotten after this long.", at_least(1)),
    ConfigKey("transactional.id.expiration.ms", T.INT, 604800000, "Idle transactional ids."),
    ConfigKey("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets.",
              at_least(1)),
    ConfigKey("offsets.topic.replication.factor", T.SHORT, 3, "RF of __consumer_offsets.",
              at_least(1)),
    ConfigKey("transaction.state.log.replication.factor", T.SHORT, 3,
              "Replication factor of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.min.isr", T.INT, 2,
              "min.insync.replicas of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.num.partitions", T.INT, 50,
              "Partitions of __transaction_state.", at_least(1)),
    ConfigKey("transaction.state.log.segment.bytes", T.INT, 104857600,
              "Segment size of __transaction_state.", at_least(1)),
    ConfigKey("transaction.max.timeout.ms", T.INT, 900000,
              "The longest transaction timeout a producer may ask for.", at_least(1)),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
              "How often transactions past their timeout are aborted.", at_least(1)),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
              "How often idle transactional ids are removed.", at_least(1)),
    ConfigKey("share.coordinator.state.topic.replication.factor", T.SHORT, 3, "RF of share state."),
    ConfigKey("offsets.topic.segment.bytes", T.INT, 104857600,
              "Segment size of __consumer_offsets.", at_least(1)),
    ConfigKey("offsets.topic.compression.codec", T.INT, 0, "Codec of __consumer_offsets."),
    ConfigKey("offsets.commit.timeout.ms", T.INT, 5000, "Write timeout of a coordinator.",
              at_least(1)),
    ConfigKey("offsets.load.buffer.size", T.INT, 5242880, "Read buffer when loading.",
              at_least(1)),
    ConfigKey("offset.metadata.max.bytes", T.INT, 4096,
              "The longest metadata string an offset commit may carry."),
    ConfigKey("offsets.retention.minutes", T.INT, 10080,
              "How long offsets of an empty group (or an unsubscribed topic) are kept.",
              at_least(1)),
    ConfigKey("offsets.retention.check.interval.ms", T.LONG, 600000,
              "How often offsets are checked for expiry.", at_least(1)),
    ConfigKey("group.initial.rebalance.delay.ms", T.INT, 3000,
              "How long a new classic group waits for more members before its first "
              "rebalance completes."),
    ConfigKey("group.min.session.timeout.ms", T.INT, 6000,
              "The smallest session timeout a classic member may ask for."),
    ConfigKey("group.max.session.timeout.ms", T.INT, 1800000,
              "The largest session timeout a classic member may ask for."),
    ConfigKey("group.max.size", T.INT, 2147483647, "The most members of a classic group.",
              at_least(1)),
    ConfigKey("group.coordinator.rebalance.protocols", T.LIST, ["classic", "consumer"],
              "The group protocols the coordinator serves.", one_of("classic", "consumer",
                                                                   "share", "streams")),
    ConfigKey("group.coordinator.threads", T.INT, 4, "Accepted for compatibility; one loop."),
    ConfigKey("group.coordinator.append.linger.ms", T.INT, -1,
              "Accepted; coordinator records are appended per operation."),
    ConfigKey("group.consumer.session.timeout.ms", T.INT, 45000,
              "Session timeout of consumer-protocol members."),
    ConfigKey("group.consumer.min.session.timeout.ms", T.INT, 45000, "Its lower bound."),
    ConfigKey("group.consumer.max.session.timeout.ms", T.INT, 60000, "Its upper bound."),
    ConfigKey("group.consumer.heartbeat.interval.ms", T.INT, 5000,
              "Heartbeat interval given to consumer-protocol members."),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", T.INT, 5000, "Its lower bound."),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", T.INT, 15000, "Its upper bound."),
    ConfigKey("group.consumer.assignors", T.LIST, ["uniform", "range"],
              "Server-side assignors; the first is the default."),
    ConfigKey("group.consumer.assignment.interval.ms", T.INT, 1000,
              "The least time between two target-assignment computations of a consumer "
              "group (a group's consumer.assignment.interval.ms beats it).", at_least(0)),
    ConfigKey("group.consumer.max.size", T.INT, 2147483647,
              "The most members of a consumer group.", at_least(1)),
    ConfigKey("group.consumer.migration.policy", T.STRING, "bidirectional",
              "Whether groups may move between the classic and consumer protocols.",
              one_of("disabled", "upgrade", "downgrade", "bidirectional",
                     case_sensitive=False)),
    ConfigKey("group.consumer.regex.refresh.interval.ms", T.INT, 600000,
              "How often subscription regexes are resolved again."),
    ConfigKey("broker.session.timeout.ms", T.INT, 9000, "Broker session timeout."),
    ConfigKey("broker.heartbeat.interval.ms", T.INT, 2000, "Broker heartbeat interval."),
    ConfigKey("log.dir.failure.timeout.ms", T.LONG, 30000,
              "How long a broker waits for the controller to learn of a failed log dir "
              "before it shuts down.", at_least(1), read_only=True),
    ConfigKey("broker.rack", T.STRING, None, "The rack of this broker.", read_only=True),
    ConfigKey("auto.leader.rebalance.enable", T.BOOLEAN, True, "Preferred leader balancing."),
    ConfigKey("leader.imbalance.check.interval.seconds", T.LONG, 300,
              "How often the controller moves leaderships back to preferred replicas."),
    ConfigKey("queued.max.requests", T.INT, 500, "Requests queued per connection.", at_least(1)),
    ConfigKey("delegation.token.secret.key", T.PASSWORD, None,
              "Secret key to generate and verify delegation tokens; the same on every node "
              "(brokers and controllers). Unset or empty: delegation tokens are disabled.",
              read_only=True, sensitive=True),
    ConfigKey("delegation.token.max.lifetime.ms", T.LONG, 7 * 24 * 60 * 60 * 1000,
              "The most a token lives, renewals included.", at_least(1), read_only=True),
    ConfigKey("delegation.token.expiry.time.ms", T.LONG, 24 * 60 * 60 * 1000,
              "How long a token lives before it must be renewed.", at_least(1),
              read_only=True),
    ConfigKey("delegation.token.expiry.check.interval.ms", T.LONG, 60 * 60 * 1000,
              "How often the active controller removes expired tokens.", at_least(1),
              read_only=True),
    ConfigKey("prometheus.listener", T.STRING, "",
              "Ottla: host:port on which the node serves GET /metrics (Prometheus text "
              "format, Kafka's metric names as the JMX exporter gives them); empty: off.",
              _host_port, read_only=True),
]
def _kafka_keys() -> list[ConfigKey]:
    """The keys Kafka defines that Ottla does not define above, from Kafka's table: accepted
    in server.properties and (where Kafka allows) by AlterConfigs, not acted on."""
    own = {key.name for key in _KEYS}
    keys = []
    for name, type_, default, flags in KAFKA_BROKER_CONFIGS:
        if name in own:
            continue
        keys.append(ConfigKey(
            name, type_, parse_value(name, type_, default),
            "Kafka config; accepted and stored, not acted on by Ottla.",
            sensitive=type_ == ConfigType.PASSWORD,
            read_only=kafka_mode(flags) == READ_ONLY))
    return keys


BROKER_CONFIGS = ConfigDef([*_KEYS, *_kafka_keys()])

# Keys AlterConfigs may change on a broker (Kafka's DynamicBrokerConfig.AllDynamicConfigs and
# the broker quota configs), and those only per broker id, never as the cluster default.
DYNAMIC_BROKER_KEYS = frozenset(
    name for name, _, _, flags in KAFKA_BROKER_CONFIGS if kafka_mode(flags) != READ_ONLY)
PER_BROKER_KEYS = frozenset(
    name for name, _, _, flags in KAFKA_BROKER_CONFIGS if kafka_mode(flags) == PER_BROKER)
INTERNAL_BROKER_KEYS = frozenset(
    name for name, _, _, flags in KAFKA_BROKER_CONFIGS
    if {"internal", "dynamic-only"} & set(flags.split(","))) | {
    "group.consumer.regex.refresh.interval.ms"}
"""Keys DescribeConfigs lists only once they are set: Kafka's internal ones (among them
the regex refresh interval, one of Ottla's own keys here) and those that exist only as
dynamic configs (the replication throttles)."""

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(-?\d+)$")
_LISTENER_NAME = re.compile(r"^\s*([A-Za-z0-9_]+)://")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def protocol_id(self) -> int:
        return SECURITY_PROTOCOLS[self.security_protocol]


AUTHORIZER_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found"})
"""Keys of the authorizer (Kafka's StandardAuthorizer reads them from the node's
properties; they are not broker configs): known, so not reported as unknown, and read
from ``KafkaConfig.originals`` (``ottla.security.authorizer``)."""


def _listener_key(name: str) -> bool:
    """``listener.name.<listener>.<key>``: a per-listener value of a known key (or of a
    mechanism's ``sasl.jaas.config``)."""
    if not name.startswith("listener.name."):
        return False
    rest = name[len("listener.name."):].split(".", 1)
    if len(rest) != 2:
        return False
    key = rest[1]
    return key in BROKER_CONFIGS or key.split(".", 1)[-1] == "sasl.jaas.config"


def dev_defaults() -> dict[str, str]:
    """What ``ottla server`` with no config runs: one combined node on 127.0.0.1."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map":
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "SASL_SSL:SASL_SSL",
        "log.dirs": "./ottla-data",
        # As Kafka's sample config: internal topics on one node, and no wait for more
        # members before a new group's first rebalance.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


CORDON_ALL = "*"


def cordoned_log_dirs_error(cordoned: Sequence[str], log_dirs: Sequence[str]) -> str | None:
    """What Kafka's ``KafkaConfig.validateCordonedLogDirs`` requires of a broker's
    ``cordoned.log.dirs`` (statically and for a dynamic update alike): ``*`` alone, or
    entries of ``log.dirs`` (compared as written). None when it holds."""
    if CORDON_ALL in cordoned:
        return None if len(cordoned) == 1 else \
            "When cordoned.log.dirs is set to *, it must not contain other values"
    missing = [d for d in cordoned if d not in log_dirs]
    if missing:
        return ("All entries in cordoned.log.dirs must be present in log.dirs or log.dir. "
                f"Missing entries : {','.join(missing)}")
    return None


def resolve_cordoned_log_dirs(cordoned: Sequence[str], log_dirs: Sequence[str]) -> list[str]:
    """The log dirs ``cordoned.log.dirs`` names (Kafka's ``cordonedLogDirs``: ``*`` is
    every one)."""
    return list(log_dirs) if CORDON_ALL in cordoned else list(cordoned)


class KafkaConfig:
    """The parsed, validated configuration of one node."""

    definitions = BROKER_CONFIGS
    dynamic_keys = DYNAMIC_BROKER_KEYS

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals = dict(props)
        self.unknown = sorted(k for k in props if k not in BROKER_CONFIGS
                              and k not in AUTHORIZER_KEYS and not _listener_key(k))
        for name in self.unknown:
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        self.values: dict[str, Any] = {k.name: k.default for k in BROKER_CONFIGS.keys.values()}
        self.explicit = BROKER_CONFIGS.parse(props)
        self.values.update(self.explicit)
        self._normalise_listener_names()
        self._validate()

    def _normalise_listener_names(self) -> None:
        """Listener names in upper case wherever they are named (Kafka's
        ``ListenerName.normalised``): ``controller.listener.names=controller`` names
        the listener ``listeners=controller://...`` binds, and both are CONTROLLER."""
        values = self.values
        values["controller.listener.names"] = [
            name.strip().upper() for name in values["controller.listener.names"]]
        if values["inter.broker.listener.name"]:
            values["inter.broker.listener.name"] = \
                values["inter.broker.listener.name"].strip().upper()
        values["listener.security.protocol.map"] = [
            f"{name.strip().upper()}{sep}{protocol}" for name, sep, protocol in
            (entry.partition(":") for entry in values["listener.security.protocol.map"])]
        for key in ("listeners", "advertised.listeners"):
            if values[key]:
                values[key] = [_LISTENER_NAME.sub(lambda m: m.group(1).upper() + "://", e)
                               for e in values[key]]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    # --- derived values --------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.values["node.id"]

    @property
    def roles(self) -> set[str]:
        return set(self.values["process.roles"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self.values["log.dirs"] or self.values["log.dir"])

    @property
    def metadata_log_dir(self) -> str:
        return self.values["metadata.log.dir"] or self.log_dirs[0]

    @property
    def all_log_dirs(self) -> list[str]:
        """Every directory this node formats and owns: log dirs and the metadata log dir."""
        return list(dict.fromkeys([*self.log_dirs, self.metadata_log_dir]))

    @property
    def security_protocol_map(self) -> dict[str, str]:
        result = {}
        for entry in self.values["listener.security.protocol.map"]:
            name, sep, protocol = entry.partition(":")
            if not sep or protocol.strip() not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid value {entry} for configuration "
                                  "listener.security.protocol.map")
            result[name.strip()] = protocol.strip()
        return result

    def _parse_listeners(self, entries: list[str], key: str) -> list[Listener]:
        protocol_map = self.security_protocol_map
        listeners = []
        for entry in entries:
            match = _LISTENER.match(entry.strip())
            if not match:
                raise ConfigError(f"Invalid value {entry} for configuration {key}: "
                                  "expected NAME://host:port")
            name, host, port = match.group(1), match.group(2).strip("[]"), int(match.group(3))
            if name not in protocol_map:
                raise ConfigError(f"No security protocol defined for listener {name} "
                                  "(set listener.security.protocol.map)")
            if not 0 <= port <= 65535:
                raise ConfigError(f"Invalid port {port} in {key}")
            listeners.append(Listener(name, host, port, protocol_map[name]))
        names = [listener.name for listener in listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"Each listener must have a different name: {key}={entries}")
        return listeners

    def listener_value(self, listener: str, key: str) -> Any:
        """``key`` for one listener: ``listener.name.<listener>.<key>`` if set (Kafka's
        per-listener override), else the node's own value."""
        prefixed = f"listener.name.{listener.lower()}.{key}"
        if prefixed in self.originals:
            return BROKER_CONFIGS[key].parse(self.originals[prefixed])
        return self.values.get(key)

    def sasl_jaas_config(self, listener: str, mechanism: str) -> str | None:
        """The JAAS configuration of ``mechanism`` on ``listener``:
        ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else
        ``sasl.jaas.config``."""
        prefixed = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        value = self.originals.get(prefixed) or self.values.get("sasl.jaas.config")
        return str(value) if value else None

    @property
    def listeners(self) -> list[Listener]:
        return self._parse_listeners(self.values["listeners"], "listeners")

    @property
    def controller_listener_names(self) -> list[str]:
        return list(self.values["controller.listener.names"])

    @property
    def broker_listeners(self) -> list[Listener]:
        return [ln for ln in self.listeners if ln.name not in self.controller_listener_names]

    @property
    def advertised_controller_listeners(self) -> list[Listener]:
        """Where a controller says it listens (Kafka's
        ``effectiveAdvertisedControllerListeners``): each controller listener as
        advertised.listeners names it, else as ``listeners`` does, in
        controller.listener.names order (the inter-controller one first); an unspecified
        host as 127.0.0.1, as a broker's; port 0 stays 0 (the caller knows the bound one)."""
        raw = self.values["advertised.listeners"]
        advertised = {ln.name: ln for ln in self._parse_listeners(raw, "advertised.listeners")
                      } if raw else {}
        bound = {ln.name: ln for ln in self.listeners}
        result = []
        for name in self.controller_listener_names:
            listener = advertised.get(name) or bound.get(name)
            if listener is not None:
                host = listener.host if listener.host not in ("", "0.0.0.0", "::") \
                    else "127.0.0.1"
                result.append(Listener(name, host, listener.port, listener.security_protocol))
        return result

    @property
    def advertised_listeners(self) -> list[Listener]:
        """What clients are told to connect to; the broker listeners by default, with an
        unspecified host published as 127.0.0.1 (an IPv4 address on loopback setups)."""
        raw = self.values["advertised.listeners"]
        listeners = (self._parse_listeners(raw, "advertised.listeners") if raw
                     else self.broker_listeners)
        result = []
        for listener in listeners:
            if listener.name in self.controller_listener_names:
                continue
            host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            result.append(Listener(listener.name, host, listener.port,
                                   listener.security_protocol))
        return result

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        voters = {}
        for entry in self.values["controller.quorum.voters"]:
            match = re.match(r"^(\d+)@(\[[^\]]*\]|[^:]+):(\d+)$", entry.strip())
            if not match:
                raise ConfigError(f"Invalid value {entry} for configuration "
                                  "controller.quorum.voters: expected id@host:port")
            voters[int(match.group(1))] = (match.group(2).strip("[]"), int(match.group(3)))
        return voters

    @property
    def prometheus_listener(self) -> tuple[str, int] | None:
        """Where GET /metrics is served (``prometheus.listener``), or None when off."""
        return _host_port("prometheus.listener", self.values["prometheus.listener"])

    @property
    def connection_overrides(self) -> dict[str, int]:
        """max.connections.per.ip.overrides as {host: limit}."""
        overrides: dict[str, int] = {}
        for entry in (self.values["max.connections.per.ip.overrides"] or "").split(","):
            if not entry.strip():
                continue
            host, _, count = entry.strip().rpartition(":")
            if not host or not count.isdigit():
                raise ConfigError(f"Invalid value {entry} for configuration "
                                  "max.connections.per.ip.overrides: expected host:count")
            overrides[host] = int(count)
        return overrides

    def topic_defaults(self, dynamic: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Topic config defaults from this broker's config (and dynamic broker configs),
        following each topic config's list of broker synonyms."""
        dynamic = dynamic or {}
        defaults: dict[str, Any] = {}
        for name, key in TOPIC_CONFIGS.keys.items():
            for synonym in key.synonyms:
                value = self.synonym_value(synonym, dynamic)
                if value is not None:
                    defaults[name] = _convert_synonym(synonym, value)
                    break
        return defaults

    def synonym_value(self, synonym: str, dynamic: Mapping[str, str] | None = None) -> Any:
        """The value of a broker key: dynamic override, else server.properties or default;
        ``None`` when neither is set (so the next synonym applies)."""
        if dynamic and synonym in dynamic:
            return BROKER_CONFIGS[synonym].parse(dynamic[synonym])
        if synonym in self.explicit:
            return self.explicit[synonym]
        return self.values.get(synonym)

    # --- validation --------------------------------------------------------------------

    def _validate(self) -> None:
        # Each of node.id and broker.id stands for the other when only one is set, as if
        # set in server.properties (Kafka's populateSynonyms: both STATIC_BROKER_CONFIG).
        for name, other in (("node.id", "broker.id"), ("broker.id", "node.id")):
            if self.values[name] < 0 and self.values[other] >= 0:
                self.values[name] = self.explicit[name] = self.values[other]
        if not self.roles:
            raise ConfigError("process.roles must be set (broker, controller or both)")
        if self.node_id < 0:
            raise ConfigError("node.id must be set to a non-negative integer")
        listeners = self.listeners
        names = {ln.name for ln in listeners}
        if "controller" in self.roles:
            if not self.controller_listener_names:
                raise ConfigError("controller.listener.names must be set on a controller")
            missing = [n for n in self.controller_listener_names if n not in names]
            if missing:
                raise ConfigError(f"controller.listener.names {missing} must appear in listeners")
        if "broker" in self.roles and not self.broker_listeners:
            raise ConfigError("listeners must include a listener that is not a controller "
                              "listener on a broker")
        ibl = self.values["inter.broker.listener.name"]
        if ibl is not None and "broker" in self.roles and ibl not in names:
            raise ConfigError(f"inter.broker.listener.name {ibl} must appear in listeners")
        if not self.log_dirs:
            raise ConfigError("log.dirs must name at least one directory")
        if "broker" in self.roles:
            cordoned = cordoned_log_dirs_error(self.values["cordoned.log.dirs"], self.log_dirs)
            if cordoned is not None:
                raise ConfigError(f"requirement failed: {cordoned}")
        queued = self.values["queued.max.request.bytes"]
        if queued > 0 and queued < self.values["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes must be larger or equal to "
                              "socket.request.max.bytes")
        self.connection_overrides  # noqa: B018 - parses and validates
        self.quorum_voters  # noqa: B018 - parses and validates


def _convert_synonym(synonym: str, value: Any) -> Any:
    if synonym.endswith(".hours"):
        return value * 3600000 if value >= 0 else value
    if synonym.endswith(".minutes"):
        return value * 60000 if value >= 0 else value
    return value
