"""The payload of a PushTelemetry: an OpenTelemetry ``MetricsData`` (OTLP protobuf), as
KIP-714 clients send it, compressed with the codec the request names. Decoded with the
``opentelemetry-proto`` messages into plain points, one per data point, with the
resource's and the data point's attributes.

KIP-714 clients push gauges and sums (monotonic ones are counters); with the delta
temporality the broker asks for, a sum's points are increments since the last push.
Histograms, exponential histograms and summaries are not part of KIP-714's metrics and
are skipped.

``opentelemetry.proto`` loads protobuf and its generated classes (some 60 ms): it is
imported by the first push, not by a node that receives none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ottla.protocol.compression import (
    CompressionError,
    CompressionType,
    OutputTooLarge,
    decompress_into,
)

DELTA = 1
"""OTLP's AGGREGATION_TEMPORALITY_DELTA (2 is cumulative)."""


class PayloadTooLarge(Exception):
    """A payload that decompresses to more than the limit."""


@dataclass(frozen=True, slots=True)
class Point:
    """One data point of a pushed metric."""

    name: str
    """The OTLP metric name (``org.apache.kafka.producer.record.queue.time.max``)."""
    counter: bool
    """A monotonic sum (a Prometheus counter); otherwise a gauge."""
    delta: bool
    """A sum whose value is the increment since the previous push."""
    attributes: tuple[tuple[str, str], ...]
    """The resource's attributes, then the data point's (a later key wins)."""
    value: float


def decompress(compression_type: int, payload: bytes, limit: int) -> bytes:
    """The payload decompressed, at most ``limit`` bytes (``PayloadTooLarge`` past it,
    ``CompressionError`` if it does not decode)."""
    if compression_type == CompressionType.NONE:
        if len(payload) > limit:
            raise PayloadTooLarge(f"{len(payload)} bytes")
        return payload
    room = min(limit, max(1 << 16, 16 * len(payload)))
    while True:
        out = bytearray(room)
        try:
            return bytes(memoryview(out)[:decompress_into(compression_type, payload, out)])
        except OutputTooLarge:
            if room >= limit:
                raise PayloadTooLarge(f"more than {limit} bytes decompressed") from None
            room = limit


def _text(value: Any) -> str:
    """An OTLP AnyValue as a label value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "array_value":
        return ",".join(_text(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return ",".join(f"{kv.key}={_text(kv.value)}" for kv in value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    return str(getattr(value, kind))


def _attributes(attributes: Any) -> tuple[tuple[str, str], ...]:
    return tuple((kv.key, _text(kv.value)) for kv in attributes)


def decode(compression_type: int, payload: bytes, limit: int) -> list[Point]:
    """Every gauge and sum data point of a pushed ``MetricsData``. Raises
    ``PayloadTooLarge``, or ``CompressionError``/protobuf's ``DecodeError`` for a payload
    that cannot be read."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    data = MetricsData()
    try:
        data.ParseFromString(decompress(compression_type, payload, limit))
    except DecodeError as e:
        raise CompressionError(f"not an OTLP MetricsData: {e}") from e
    points: list[Point] = []
    for resource_metrics in data.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    data_points, counter, delta = metric.gauge.data_points, False, False
                elif kind == "sum":
                    data_points = metric.sum.data_points
                    counter = metric.sum.is_monotonic
                    delta = metric.sum.aggregation_temporality == DELTA
                else:
                    continue
                for point in data_points:
                    value = point.as_double if point.WhichOneof("value") == "as_double" \
                        else float(point.as_int)
                    points.append(Point(metric.name, counter, delta,
                                        resource + _attributes(point.attributes), value))
    return points
