"""The node's receiver of client telemetry (Kafka's ClientTelemetryExporter plugin): it
keeps each client instance's last pushed values for ``/metrics``, under the names the
OpenTelemetry-to-Prometheus conventions give them. Sans-I/O: pushes and scrapes say what
time it is.

- Names: every character outside ``[a-zA-Z0-9_:]`` becomes ``_``
  (``org.apache.kafka.producer.record.queue.time.max`` is
  ``org_apache_kafka_producer_record_queue_time_max``); a monotonic sum is a counter,
  served with ``_total``. No unit suffix is added (KIP-714's names carry their unit).
- Labels: ``client_instance_id`` (Kafka's text form) and ``client_id`` (of the request),
  then the resource's and the data point's attributes, their keys made label names the
  same way (a leading digit gets ``key_``); an attribute named like one of the first two
  is served as ``exported_<name>``.
- Values: a gauge's last value; a sum pushed as deltas is added up from the first push
  seen here (so a counter starts over if the client pushes to another broker and back),
  a cumulative one is taken as it is.
- A client's series go once it has not pushed for ``STALE_INTERVALS`` push intervals, and
  at least ``STALE_MIN_MS`` (the time Kafka keeps a silent client instance): a client's
  last push, and the terminating push of one that closed, stays for a scrape or two.
- Names in the node's own namespaces (``kafka_``, ``process_``) are not taken, and a
  client gets at most ``MAX_SERIES_PER_CLIENT`` series.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from ottla.broker.telemetry import otlp
from ottla.broker.telemetry.client_metrics_manager import ClientInstance, TelemetryTooLarge
from ottla.common.uuids import kafka_uuid_text

STALE_INTERVALS = 3
STALE_MIN_MS = 60_000
MAX_SERIES_PER_CLIENT = 2000
DECOMPRESSED_FACTOR = 16
"""A payload may decompress to this many times ``telemetry.max.bytes`` (which bounds what
is sent); past it the push is TELEMETRY_TOO_LARGE."""
RESERVED_PREFIXES = ("kafka_", "process_")
INSTANCE_LABEL = "client_instance_id"
CLIENT_ID_LABEL = "client_id"

_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")

Labels = tuple[tuple[str, str], ...]


def metric_name(otlp_name: str) -> str:
    """The Prometheus name of an OTLP metric (without a counter's ``_total``)."""
    name = _INVALID_NAME.sub("_", otlp_name)
    if name[:1].isdigit():
        name = "_" + name
    return name.removesuffix("_total")


def label_name(key: str) -> str:
    name = _INVALID_LABEL.sub("_", key)
    if name[:1].isdigit():
        name = "key_" + name
    elif name.startswith("__"):
        name = "key" + name
    return name or "key_"


@dataclass(slots=True)
class Series:
    counter: bool
    value: float


@dataclass(slots=True)
class ClientSeries:
    """What one client instance pushed last."""

    labels: Labels
    """``client_instance_id`` and ``client_id``."""
    push_interval_ms: int
    last_push_ms: int
    series: dict[tuple[str, Labels], Series] = field(default_factory=dict)

    def stale(self, now_ms: int) -> bool:
        return now_ms - self.last_push_ms > max(STALE_MIN_MS,
                                                STALE_INTERVALS * self.push_interval_ms)


class ClientTelemetryExporter:
    def __init__(self, telemetry_max_bytes: int) -> None:
        self.decompressed_limit = DECOMPRESSED_FACTOR * telemetry_max_bytes
        self.clients: dict[uuid.UUID, ClientSeries] = {}

    def export(self, instance: ClientInstance, compression_type: int, payload: bytes,
               now_ms: int) -> None:
        """Take one accepted push (``ClientTelemetryReceiver``)."""
        try:
            points = otlp.decode(compression_type, payload, self.decompressed_limit)
        except otlp.PayloadTooLarge as e:
            raise TelemetryTooLarge(str(e)) from e
        self.expire(now_ms)
        client = self.clients.get(instance.instance_id)
        if client is None:
            client = self.clients[instance.instance_id] = ClientSeries(
                ((INSTANCE_LABEL, kafka_uuid_text(instance.instance_id)),
                 (CLIENT_ID_LABEL, instance.client.client_id)),
                instance.push_interval_ms, now_ms)
        client.push_interval_ms = instance.push_interval_ms
        client.last_push_ms = now_ms
        for point in points:
            name = metric_name(point.name)
            if name.startswith(RESERVED_PREFIXES):
                continue
            key = (name, self._labels(point.attributes))
            series = client.series.get(key)
            if series is None:
                if len(client.series) >= MAX_SERIES_PER_CLIENT:
                    continue
                client.series[key] = Series(point.counter, point.value)
            elif point.delta:
                series.value += point.value
            else:
                series.value = point.value

    @staticmethod
    def _labels(attributes: Labels) -> Labels:
        labels: dict[str, str] = {}
        for key, value in attributes:
            name = label_name(key)
            if name in (INSTANCE_LABEL, CLIENT_ID_LABEL):
                name = "exported_" + name
            labels[name] = value
        return tuple(sorted(labels.items()))

    def expire(self, now_ms: int) -> None:
        for instance_id in [i for i, c in self.clients.items() if c.stale(now_ms)]:
            del self.clients[instance_id]

    def samples(self, now_ms: int) -> Iterator[tuple[str, bool, Labels, float]]:
        """(name, counter, labels, value) of every series of the clients still pushing."""
        self.expire(now_ms)
        for client in list(self.clients.values()):
            for (name, labels), series in client.series.items():
                yield name, series.counter, client.labels + labels, series.value
