"""Kafka's RequestMetrics: requests per API name and version, and where their time went.

Recorded by the connection (``server/network.py``) for every request it answers (or,
for ``acks=0``, handles), from four ``perf_counter`` readings:

- start: the connection takes the frame to handle it. Kafka reads a connection's next
  request only once the previous response is sent, so frames queued behind a busy
  request here wait where Kafka's would wait unread, outside its TotalTimeMs too;
- local end: the handler returned (its response, or what it waits on);
- complete: the response exists (the same as local end unless the handler waited: a
  long-polling fetch, ``acks=all``, an admin request waiting on the controller);
- sent: the response was written to the transport (queued in the kernel or in the
  transport's buffer; Kafka stops its clock once the socket took the last byte).

TotalTimeMs is sent - start, LocalTimeMs local end - start, RemoteTimeMs complete -
local end, ResponseSendTimeMs sent - complete (encoding included). RequestQueueTimeMs
and ResponseQueueTimeMs do not exist here: there is no queue between the network and
the handlers, both run on the node's one event loop.

The time histograms keep the last ``RESERVOIR`` values of each request name (Kafka's
Yammer histograms keep 1028, biased to the last five minutes); quantiles are computed
from them when scraped, as Yammer's snapshots compute them. Fractions of a millisecond
are kept (Kafka rounds to whole milliseconds).

As in Kafka's ``RequestChannel``, a Fetch is recorded as ``Fetch`` and as
``FetchConsumer`` or ``FetchFollower``, and an AddPartitionsToTxn that only verifies
(KIP-890) as ``AddPartitionsToTxnVerification`` alone.
"""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey

RESERVOIR = 1024
"""Time values kept per request name (a power of two: the ring index is a mask)."""

FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
VERIFY_PARTITIONS_IN_TXN = "AddPartitionsToTxnVerification"


def request_name(api_key: ApiKey) -> str:
    """Kafka's ``ApiKeys.name``: the message name without ``Request`` (Produce,
    OffsetCommit, DescribeTopicPartitions...), which the member's name spells in capitals
    and underscores."""
    return "".join(part.capitalize() for part in api_key.name.split("_"))


REQUEST_NAMES = {int(key): request_name(key) for key in ApiKey}


class RequestMetrics:
    """The figures of one request name (Kafka's ``RequestMetrics``)."""

    __slots__ = ("count", "local", "local_sum", "name", "remote", "remote_sum", "requests",
                 "send", "send_sum", "total", "total_sum")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}
        """RequestsPerSec: requests per API version."""
        self.count = 0
        """Requests whose times were recorded (every one)."""
        self.total = [0.0] * RESERVOIR
        self.local = [0.0] * RESERVOIR
        self.remote = [0.0] * RESERVOIR
        self.send = [0.0] * RESERVOIR
        self.total_sum = self.local_sum = self.remote_sum = self.send_sum = 0.0

    def record(self, version: int, total: float, local: float, remote: float, send: float
               ) -> None:
        """One request of ``version``: its times in milliseconds."""
        requests = self.requests
        requests[version] = requests.get(version, 0) + 1
        i = self.count & (RESERVOIR - 1)
        self.count += 1
        self.total[i] = total
        self.local[i] = local
        self.remote[i] = remote
        self.send[i] = send
        self.total_sum += total
        self.local_sum += local
        self.remote_sum += remote
        self.send_sum += send

    def recent(self, values: list[float]) -> list[float]:
        """The kept values of one of the histograms (``total``, ``local``...), sorted."""
        return sorted(values[:min(self.count, RESERVOIR)])


class RequestChannelMetrics:
    """Every request name's ``RequestMetrics`` of one node (all its listeners), made on a
    name's first request."""

    def __init__(self) -> None:
        self.by_name: dict[str, RequestMetrics] = {}

    def metrics(self, name: str) -> RequestMetrics:
        metrics = self.by_name.get(name)
        if metrics is None:
            metrics = self.by_name[name] = RequestMetrics(name)
        return metrics

    def record(self, api_key: int, version: int, request: Any, start: float,
               local_end: float, complete: float, sent: float) -> None:
        """A request was handled: ``perf_counter`` readings in seconds (the module's
        docstring says when each is taken)."""
        total = (sent - start) * 1000
        local = (local_end - start) * 1000
        remote = (complete - local_end) * 1000
        send = (sent - complete) * 1000
        if api_key == ApiKey.FETCH:
            self.metrics(FETCH_FOLLOWER if _from_follower(request) else FETCH_CONSUMER
                         ).record(version, total, local, remote, send)
        elif api_key == ApiKey.ADD_PARTITIONS_TO_TXN and _verify_only(request):
            self.metrics(VERIFY_PARTITIONS_IN_TXN).record(version, total, local, remote, send)
            return
        self.metrics(REQUEST_NAMES.get(api_key, str(api_key))).record(
            version, total, local, remote, send)


def _from_follower(request: Any) -> bool:
    """A broker's fetch (Kafka's ``FetchRequest.isFromFollower``): ReplicaState's id from
    v15, ``replica_id`` before."""
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return replica_id >= 0


def _verify_only(request: Any) -> bool:
    """AddPartitionsToTxn v4+ from a broker whose every transaction only verifies
    (Kafka's ``allVerifyOnlyRequest``)."""
    transactions = getattr(request, "transactions", None)
    return bool(transactions) and all(t.verify_only for t in transactions)
