"""The ``ottla`` format: PySpark's Python Data Source API over the Kafka protocol.

Planning (partitions, offsets) happens on the driver through :class:`OffsetReader`;
records are read on executors by fetching raw batches and decoding them column-wise
(:mod:`ottla.spark.fetch_reader`; ``reader=consumer`` uses confluent-kafka instead),
written with confluent-kafka, and exchanged with Spark as Arrow batches. Streaming
offsets are Spark's Kafka source JSON, ``{"topic": {"0": 42}}``, so a checkpoint says
exactly where each partition stands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ottla.spark.exactly_once import WriteTask, write_exactly_once
from ottla.spark.offset_ranges import TriggerGate, rate_limit, split
from ottla.spark.offset_reader import TP, OffsetRange, OffsetReader, data_loss
from ottla.spark.options import (
    EARLIEST,
    FORMAT,
    OptionError,
    SinkOptions,
    SourceOptions,
    parse_sink,
    parse_source,
)
from ottla.spark.producer_writer import check_columns, write_batches
from ottla.spark.save_mode import refused

log = logging.getLogger(__name__)

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"


class OttlaDataSource(DataSource):
    """Spark's Kafka source and sink, by the name ``ottla``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        headers = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return SCHEMA_DDL + (HEADERS_DDL if headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return OttlaBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OttlaStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> OttlaWriter:
        if overwrite:
            raise refused("Overwrite")
        options = parse_sink(self.options)
        if options.exactly_once:
            raise OptionError(
                "option 'exactlyOnce' applies to streaming writes (writeStream) only: a "
                "batch write has no micro-batch id that would make a retried write "
                "idempotent")
        return OttlaWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> OttlaStreamWriter:
        return OttlaStreamWriter(parse_sink(self.options), schema)


class RangePartition(InputPartition):
    """One Spark task: an offset range of one topic-partition."""

    def __init__(self, value: OffsetRange) -> None:
        super().__init__(value)


def _read(options: SourceOptions, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
    if partition is None or partition.value is None:
        return iter(())  # Spark reads one empty split when there are none
    # Imported here, on the executors: the driver plans a streaming query in a Python
    # process Spark starts for each query, and the record decoders (the protocol's
    # schemas above all) would add about 0.3 s to every query's start.
    from ottla.spark.fetch_reader import read_range_columnar, unusable_because
    from ottla.spark.partition_reader import read_range

    read = read_range
    if options.reader == "columnar":
        why_not = unusable_because(options.client)
        if why_not is None:
            read = read_range_columnar
        else:
            log.info("reading %s with the consumer reader: %s", partition.value, why_not)
    return read(partition.value, options.client, options.include_headers,
                options.fail_on_data_loss, options.poll_timeout_ms, options.isolation_level)


class OttlaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        with OffsetReader(self.options) as offsets:
            tps = offsets.partitions()
            start = offsets.resolve(self.options.starting, tps, starting=True)
            end = offsets.resolve(self.options.ending, tps, starting=False)
        ranges = []
        for t, p in tps:
            if start[(t, p)] > end[(t, p)]:
                raise OptionError(f"starting offset {start[(t, p)]} of {t}-{p} is after "
                                  f"its ending offset {end[(t, p)]}")
            ranges.append(OffsetRange(t, p, start[(t, p)], end[(t, p)]))
        splits = split(ranges, self.options.min_partitions,
                       self.options.max_records_per_partition)
        return [RangePartition(r) for r in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


def to_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: dict[str, Any]) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items()
            for p, o in parts.items()}


class OttlaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches between per-partition offsets; new partitions start at earliest."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offsets: OffsetReader | None = None
        self._target: dict[TP, int] | None = None  # fixed end for Trigger.AvailableNow
        self._gate = (TriggerGate(options.min_offsets_per_trigger,
                                  options.max_trigger_delay_ms)
                      if options.min_offsets_per_trigger else None)

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a copy for read(); the admin client stays on the driver.
        return {**self.__dict__, "_offsets": None}

    @property
    def offsets(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.options)
        return self._offsets

    def initialOffset(self) -> dict:
        tps = self.offsets.partitions()
        return to_json(self.offsets.resolve(self.options.starting, tps, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        # Python has no composite limit: the minimum is applied from the options (see
        # latestOffset); ReadAllAvailable from Spark (Trigger.Once) then means "all".
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = self.offsets.partitions()
        gone = sorted(tp for tp in begin if tp not in tps)
        if gone and self.options.fail_on_data_loss:
            raise data_loss(f"partitions {gone} were deleted")
        new = [tp for tp in tps if tp not in begin]
        begin.update(self.offsets.earliest(new))
        latest = self.offsets.latest(tps)
        if self._target is not None:
            # Nothing after the moment the AvailableNow query started.
            latest = {tp: min(o, self._target.get(tp, begin[tp])) for tp, o in latest.items()}
        for tp in tps:
            if latest[tp] < begin[tp]:
                if self.options.fail_on_data_loss:
                    raise data_loss(f"{tp[0]}-{tp[1]} went back from offset {begin[tp]} "
                                    f"to {latest[tp]}")
                begin[tp] = latest[tp]
            latest[tp] = max(latest[tp], begin[tp])
        # As Spark's Kafka source: all-available wins, AvailableNow reads everything up to
        # its target, then the minimum may hold the batch back, then the maximum caps it.
        if self._gate is not None and self._target is None and \
                not isinstance(limit, ReadAllAvailable) and \
                self._gate.holds_back(begin, latest, int(time.time() * 1000)):
            return to_json(begin)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json(latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, until = from_json(start), from_json(end)
        ranges = [OffsetRange(t, p, begin.get((t, p), EARLIEST), o)
                  for (t, p), o in sorted(until.items())]
        # A new partition's range starts at EARLIEST, so its size is unknown here.
        known = [r for r in ranges if r.from_offset >= 0]
        fresh = [r for r in ranges if r.from_offset < 0 and r.until_offset > 0]
        splits = split(known, self.options.min_partitions,
                       self.options.max_records_per_partition)
        return [RangePartition(r) for r in splits + fresh]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in the cluster."""

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None


class CommitMessage(WriterCommitMessage):
    def __init__(self, records: int, already_written: bool = False) -> None:
        self.records = records
        self.already_written = already_written  # exactlyOnce: a replay found it committed


class OttlaWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_columns(schema.fieldNames(), options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommitMessage:
        return CommitMessage(write_batches(iterator, self.options))


class OttlaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_columns(schema.fieldNames(), options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommitMessage:
        if self.options.exactly_once:
            outcome = write_exactly_once(iterator, self.options, WriteTask.current())
            return CommitMessage(outcome.records, already_written=outcome.already_written)
        return CommitMessage(write_batches(iterator, self.options))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are acknowledged (or, with exactlyOnce, each task's transaction is
        committed) by the time a task ends; nothing more to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records cannot be taken back; Spark retries the batch (with
        exactlyOnce, the retry skips the tasks whose transaction committed)."""
