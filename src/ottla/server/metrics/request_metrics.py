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

Beside the times, as Kafka's ``RequestMetrics``: RequestBytes (the request's body, its
header left out as Kafka's ``sizeOfBodyInBytes`` leaves it), ThrottleTimeMs (the
throttle time the response carries) and ErrorsPerSec (each error code of the response,
``error_counts`` says how they are counted), the errors under the API's own name alone
(``Fetch``, ``AddPartitionsToTxn``), as Kafka's ``updateErrorMetrics`` marks them.
"""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import REQUEST_NAMES, ApiKey
from ottla.protocol.requests import NO_RESPONSE, CloseConnection
from ottla.server.metrics.error_counts import error_counts, throttle_ms

RESERVOIR = 1024
"""Time values kept per request name (a power of two: the ring index is a mask)."""

FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
VERIFY_PARTITIONS_IN_TXN = "AddPartitionsToTxnVerification"




class RequestMetrics:
    """The figures of one request name (Kafka's ``RequestMetrics``)."""

    __slots__ = ("bytes", "bytes_sum", "count", "errors", "local", "local_sum", "name",
                 "remote", "remote_sum", "requests", "send", "send_sum", "throttle",
                 "throttle_sum", "total", "total_sum")

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
        self.bytes = [0.0] * RESERVOIR
        """RequestBytes: the request bodies' sizes."""
        self.throttle = [0.0] * RESERVOIR
        """ThrottleTimeMs: the responses' throttle times."""
        self.total_sum = self.local_sum = self.remote_sum = self.send_sum = 0.0
        self.bytes_sum = self.throttle_sum = 0.0
        self.errors: dict[int, int] = {}
        """ErrorsPerSec: how often each error code was answered."""

    def record(self, version: int, total: float, local: float, remote: float, send: float,
               request_bytes: int = 0, throttle: int = 0) -> None:
        """One request of ``version``: its times in milliseconds, its body's size and the
        response's throttle time."""
        requests = self.requests
        requests[version] = requests.get(version, 0) + 1
        i = self.count & (RESERVOIR - 1)
        self.count += 1
        self.total[i] = total
        self.local[i] = local
        self.remote[i] = remote
        self.send[i] = send
        self.bytes[i] = request_bytes
        self.throttle[i] = throttle
        self.bytes_sum += request_bytes
        self.throttle_sum += throttle
        self.total_sum += total
        self.local_sum += local
        self.remote_sum += remote
        self.send_sum += send

    def count_errors(self, counts: dict[int, int]) -> None:
        errors = self.errors
        for code, n in counts.items():
            errors[code] = errors.get(code, 0) + n

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
               local_end: float, complete: float, sent: float, *, response: object = None,
               request_bytes: int = 0, closed: CloseConnection | None = None) -> None:
        """A request was handled: ``perf_counter`` readings in seconds (the module's
        docstring says when each is taken), the response the handler gave (None or
        ``NO_RESPONSE``: none was sent, no errors are counted) and the size of the
        request's body. ``closed``: the handler closed the connection instead, and the
        errors its unsent response would have had are counted (Kafka's
        ``closeConnection``)."""
        total = (sent - start) * 1000
        local = (local_end - start) * 1000
        remote = (complete - local_end) * 1000
        send = (sent - complete) * 1000
        answered = response is not None and response is not NO_RESPONSE
        throttle = throttle_ms(response) if answered else 0
        name = REQUEST_NAMES.get(api_key, str(api_key))
        if answered:
            self.metrics(name).count_errors(error_counts(api_key, response))
        elif closed is not None and closed.error_counts:
            self.metrics(name).count_errors({int(code): n for code, n
                                             in closed.error_counts.items()})
        if api_key == ApiKey.FETCH:
            self.metrics(FETCH_FOLLOWER if _from_follower(request) else FETCH_CONSUMER
                         ).record(version, total, local, remote, send, request_bytes, throttle)
        elif api_key == ApiKey.ADD_PARTITIONS_TO_TXN and _verify_only(request):
            self.metrics(VERIFY_PARTITIONS_IN_TXN).record(
                version, total, local, remote, send, request_bytes, throttle)
            return
        self.metrics(name).record(version, total, local, remote, send, request_bytes, throttle)


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
