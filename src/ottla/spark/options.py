"""The options of Spark's Kafka source and sink, parsed once on the driver.

Names, defaults and JSON formats follow Spark's Kafka integration guide so that a job
written for ``format("kafka")`` runs with ``format("ottla")`` unchanged. Offsets in JSON
use ``-2`` for earliest and ``-1`` for latest, exactly as Spark does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ottla.common.topics import TopicPartition, is_internal_topic
from ottla.spark.java_regex import JavaRegexError, compile_java_regex, finds

FORMAT = "ottla"
"""The name ``format()`` takes for this source and sink."""

EARLIEST = -2
LATEST = -1


# Options that belong to the connector itself rather than to the client.
_CLIENT_PREFIX = "kafka."
# Client settings Spark's source owns: it assigns partitions itself and never commits.
_FORBIDDEN_CLIENT_KEYS = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "offsets are tracked by Spark's checkpoint, not committed",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "key.serializer": "keys are always written as binary",
    "value.serializer": "values are always written as binary",
}
# The sink owns the transactional id: one per query and task (ottla.spark.exactly_once).
_FORBIDDEN_SINK_KEYS = {
    "transactional.id": "set the sink option exactlyOnce=true (and transactionalIdPrefix)",
}
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# How executors read: fetched batches decoded column-wise, or confluent-kafka's consumer.
READERS = ("columnar", "consumer")
DEFAULT_TRANSACTIONAL_ID_PREFIX = "ottla-spark"
DEFAULT_POLL_TIMEOUT_MS = 120_000  # kafkaConsumer.pollTimeoutMs, as Spark's


class OptionError(ValueError):
    """A Spark option is missing, malformed or contradicts another one."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: a word, per-partition offsets, or timestamps."""

    default: int = LATEST  # EARLIEST or LATEST, for partitions not named in ``offsets``
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None  # one timestamp for every partition
    timestamps: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def by_timestamp(self) -> bool:
        return self.timestamp is not None or bool(self.timestamps)


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = field(default_factory=OffsetSpec)
    ending: OffsetSpec = field(default_factory=OffsetSpec)
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000  # Spark's default "15m"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    # kafka.isolation.level, kept out of ``client`` because the AdminClient (a producer
    # to librdkafka) refuses consumer settings; Spark's (Java's) default, not librdkafka's.
    isolation_level: str = "read_uncommitted"
    reader: str = READERS[0]

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads (before partition filtering)."""
        if self.assign:
            return any(t == topic for t, _ in self.assign)
        if self.subscribe:
            return topic in self.subscribe
        assert self.subscribe_pattern is not None
        # As Spark's Kafka source: Java's Pattern found in the name, internal topics left out.
        return not is_internal_topic(topic) and finds(self.subscribe_pattern, topic)


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None = None
    exactly_once: bool = False
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed, as librdkafka configuration."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith(_CLIENT_PREFIX):
            continue
        name = key[len(_CLIENT_PREFIX):]
        if name in _FORBIDDEN_CLIENT_KEYS:
            raise OptionError(
                f"Kafka option '{name}' is not supported: {_FORBIDDEN_CLIENT_KEYS[name]}")
        config[name] = value
    if "bootstrap.servers" not in config:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    return config


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark passes options case-insensitively; the kafka.* keys keep their case.
    return {k.lower(): v for k, v in options.items()}


def _parse_bool(name: str, value: str) -> bool:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise OptionError(f"option '{name}' must be true or false, got {value!r}")


def _parse_positive(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {value!r}") from None
    if number <= 0:
        raise OptionError(f"option '{name}' must be positive, got {number}")
    return number


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}


def _parse_duration_ms(name: str, value: str) -> int:
    """A time string as Spark reads one (JavaUtils.timeStringAsMs): a number and an
    optional unit (us, ms, s, m/min, h, d), milliseconds when there is none."""
    match = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", value.strip().lower())
    if not match or (match.group(2) or "ms") not in _TIME_UNITS_MS:
        raise OptionError(f"option '{name}' must be a duration such as 30s, 5m or 100ms, "
                          f"got {value!r}")
    ms = int(int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"])
    if ms < 0:
        raise OptionError(f"option '{name}' must not be negative, got {value!r}")
    return ms


def _parse_partition_json(name: str, text: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` -> ``{("topic", 0): 23, ("topic", 1): -1}``."""
    try:
        raw = json.loads(text)
        return {(topic, int(p)): int(v) for topic, parts in raw.items()
                for p, v in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"option '{name}' must be JSON like {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, "
            f"got {text!r}") from None


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1], "topicB": [2]}`` as in Spark's ``assign`` option."""
    try:
        raw = json.loads(text)
        pairs = tuple((topic, int(p)) for topic, parts in raw.items() for p in parts)
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {text!r}") from None
    if not pairs:
        raise OptionError("option 'assign' names no partitions")
    return pairs


def _offset_spec(opts: dict[str, str], prefix: str, default: int,
                 allow_earliest: bool = True) -> OffsetSpec:
    """Starting or ending position; a timestamp option wins over an offsets option."""
    name = f"{prefix}offsets"
    if (ts := opts.get(f"{prefix}timestamp")) is not None:
        try:
            return OffsetSpec(default=default, timestamp=int(ts))
        except ValueError:
            raise OptionError(f"option '{prefix}Timestamp' must be a number of ms, "
                              f"got {ts!r}") from None
    if (by_ts := opts.get(f"{prefix}offsetsbytimestamp")) is not None:
        return OffsetSpec(default=default,
                          timestamps=_parse_partition_json(f"{prefix}OffsetsByTimestamp", by_ts))
    text = opts.get(name)
    if text is None:
        return OffsetSpec(default=default)
    word = text.strip().lower()
    if word == "earliest":
        if not allow_earliest:
            raise OptionError(f"option '{prefix}Offsets' cannot be 'earliest'")
        return OffsetSpec(default=EARLIEST)
    if word == "latest":
        return OffsetSpec(default=LATEST)
    offsets = _parse_partition_json(f"{prefix}Offsets", text)
    if not allow_earliest and EARLIEST in offsets.values():
        raise OptionError(f"option '{prefix}Offsets' cannot use -2 (earliest)")
    return OffsetSpec(default=default, offsets=offsets)


def parse_source(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate the reader options the way Spark's Kafka source does."""
    client = client_config(options)
    isolation = client.pop("isolation.level", ISOLATION_LEVELS[0]).strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise OptionError("option 'kafka.isolation.level' must be read_uncommitted or "
                          f"read_committed, got {isolation!r}")
    opts = _lower(options)
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or "
                          f"'assign' must be specified, got {len(strategies)}")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option 'subscribe' names no topics")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            compile_java_regex(pattern)
        except JavaRegexError as e:
            raise OptionError(f"option 'subscribePattern' {pattern!r} cannot be matched as "
                              f"Java's Pattern matches it: {e}") from None
    else:
        assign = _parse_assign(opts["assign"])

    if streaming and any(k.startswith("ending") for k in opts):
        raise OptionError("ending offsets are not valid in streaming queries")
    starting = _offset_spec(opts, "starting", LATEST if streaming else EARLIEST)
    if not streaming and starting.default == LATEST and not starting.offsets \
            and not starting.by_timestamp and "startingoffsets" in opts:
        raise OptionError("option 'startingOffsets' cannot be 'latest' for batch queries")
    ending = _offset_spec(opts, "ending", LATEST, allow_earliest=False)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got {strategy!r}")
    reader = opts.get("reader", READERS[0]).strip().lower()
    if reader not in READERS:
        raise OptionError(f"option 'reader' must be columnar or consumer, got {reader!r}")
    max_per_trigger = _parse_positive("maxOffsetsPerTrigger", opts.get("maxoffsetspertrigger"))
    min_per_trigger = _parse_positive("minOffsetsPerTrigger", opts.get("minoffsetspertrigger"))
    if min_per_trigger and max_per_trigger and min_per_trigger > max_per_trigger:
        raise OptionError(f"the value of minOffsetsPerTrigger ({min_per_trigger}) is higher "
                          f"than the maxOffsetsPerTrigger ({max_per_trigger})")
    delay = _parse_duration_ms("maxTriggerDelay", opts.get("maxtriggerdelay", "15m"))
    poll = _parse_positive("kafkaConsumer.pollTimeoutMs",
                           opts.get("kafkaconsumer.polltimeoutms")) or DEFAULT_POLL_TIMEOUT_MS
    return SourceOptions(
        client=client, subscribe=subscribe, subscribe_pattern=pattern, assign=assign,
        starting=starting, ending=ending, timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        min_partitions=_parse_positive("minPartitions", opts.get("minpartitions")),
        max_records_per_partition=_parse_positive(
            "maxRecordsPerPartition", opts.get("maxrecordsperpartition")),
        fail_on_data_loss=_parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_parse_bool("includeHeaders", opts.get("includeheaders", "false")),
        poll_timeout_ms=poll,
        isolation_level=isolation,
        reader=reader,
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    client = client_config(options)
    for name, hint in _FORBIDDEN_SINK_KEYS.items():
        if name in client:
            raise OptionError(f"Kafka option '{name}' is not supported: {hint}")
    opts = _lower(options)
    prefix = opts.get("transactionalidprefix", DEFAULT_TRANSACTIONAL_ID_PREFIX).strip()
    if not prefix:
        raise OptionError("option 'transactionalIdPrefix' must not be empty")
    return SinkOptions(
        client=client, topic=opts.get("topic"),
        exactly_once=_parse_bool("exactlyOnce", opts.get("exactlyonce", "false")),
        transactional_id_prefix=prefix)
