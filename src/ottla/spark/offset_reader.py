"""Driver-side offset lookups: which partitions a source reads and where each range ends.

Like Spark's ``KafkaOffsetReader``, it never consumes records: partitions come from a
Metadata request and offsets from batched ListOffsets requests (earliest, latest or by
timestamp) through confluent-kafka's AdminClient. It is created per planning call and
closed, so reader objects stay picklable for the executors. With
``kafka.isolation.level=read_committed`` the requests ask for READ_COMMITTED, so
"latest" is the last stable offset: a range never reaches into an open transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as ClientOffsetSpec

from ottla.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

TP = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one partition: one Spark input split."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(self.until_offset - self.from_offset, 0)


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention or DeleteRecords) and failOnDataLoss."""


def data_loss(message: str) -> DataLossError:
    return DataLossError(
        f"{message}. Some data may have been lost because it is no longer available in "
        "the topic (retention, DeleteRecords or a deleted topic). If you want your query to "
        "continue anyway, set the source option 'failOnDataLoss' to 'false'.")


class OffsetReader:
    def __init__(self, options: SourceOptions, timeout_s: float = 30.0) -> None:
        self.options = options
        self.timeout_s = timeout_s
        self.admin = AdminClient(dict(options.client))
        self.isolation = (IsolationLevel.READ_COMMITTED if options.read_committed
                          else IsolationLevel.READ_UNCOMMITTED)

    def close(self) -> None:
        self.admin = None  # type: ignore[assignment]  # librdkafka frees it on collection

    def __enter__(self) -> OffsetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[TP]:
        """The topic-partitions the source's subscribe/pattern/assign strategy selects now."""
        metadata = self.admin.list_topics(timeout=self.timeout_s)
        found = {(name, p) for name, topic in metadata.topics.items()
                 if topic.error is None and self.options.matches(name)
                 for p in topic.partitions}
        if self.options.assign:
            missing = [tp for tp in self.options.assign if tp not in found]
            if missing:
                raise OptionError(f"assigned partitions do not exist: {missing}")
            return sorted(self.options.assign)
        return sorted(found)

    def _list(self, specs: dict[TP, ClientOffsetSpec]) -> dict[TP, int]:
        if not specs:
            return {}
        futures = self.admin.list_offsets(
            {TopicPartition(t, p): spec for (t, p), spec in specs.items()},
            isolation_level=self.isolation, request_timeout=self.timeout_s)
        result: dict[TP, int] = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as e:
                raise RuntimeError(
                    f"ListOffsets failed for {tp.topic}-{tp.partition}: {e}") from e
        return result

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list({tp: ClientOffsetSpec.earliest() for tp in tps})

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list({tp: ClientOffsetSpec.latest() for tp in tps})

    def resolve(self, spec: OffsetSpec, tps: list[TP], starting: bool) -> dict[TP, int]:
        """Concrete offsets for ``tps`` (never -1/-2); named partitions must be selected."""
        unknown = [tp for tp in (*spec.offsets, *spec.timestamps) if tp not in tps]
        if unknown:
            raise OptionError(f"offsets were given for partitions the query does not read: "
                              f"{sorted(unknown)}")
        if spec.by_timestamp:
            return self._by_timestamp(spec, tps, starting)
        wanted = {tp: spec.offsets.get(tp, spec.default) for tp in tps}
        earliest = self.earliest(tp for tp, o in wanted.items() if o == EARLIEST)
        latest = self.latest(tp for tp, o in wanted.items() if o == LATEST)
        return {tp: earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
                for tp, o in wanted.items()}

    def _by_timestamp(self, spec: OffsetSpec, tps: list[TP], starting: bool) -> dict[TP, int]:
        times = {tp: spec.timestamp if spec.timestamp is not None else spec.timestamps.get(tp)
                 for tp in tps}
        if spec.timestamp is None:
            missing = [tp for tp, ts in times.items() if ts is None]
            if missing:
                raise OptionError(f"no timestamp was given for partitions {sorted(missing)}")
        found = self._list({tp: ClientOffsetSpec.for_timestamp(ts)
                            for tp, ts in times.items() if ts is not None})
        unmatched = [tp for tp, offset in found.items() if offset < 0]
        if unmatched:
            # No record at or after the timestamp: Spark fails unless told to use latest.
            if starting and self.options.timestamp_strategy == "error":
                raise OptionError(
                    f"no offset matched the timestamp for partitions {sorted(unmatched)}; "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end")
            found.update(self.latest(unmatched))
        return found
