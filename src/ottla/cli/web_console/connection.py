"""The console's clients of one cluster: long-lived, so that librdkafka reconnects by
itself when the cluster comes back, and short timeouts, so that a page whose cluster is
gone says so in seconds instead of hanging."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ottla.cli.common import client_config

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient

    from ottla.client.blocking import BlockingClient

TIMEOUT = 5.0
"""Seconds a page waits for the cluster before it shows an error."""


class ConsoleError(Exception):
    """What the page shows instead of its content: Kafka's own error text where there is
    one (never a stack trace). ``status``: 400 for what was asked, 503 for a cluster
    that does not answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def kafka_message(error: BaseException) -> str:
    """The text of a confluent-kafka error (a ``KafkaException`` carries a ``KafkaError``
    whose ``str()`` is the broker's error message when it sent one)."""
    inner = error.args[0] if error.args else error
    text = inner.str() if hasattr(inner, "str") else str(inner)
    return text or type(error).__name__


@contextlib.contextmanager
def failing(what: str) -> Iterator[None]:
    """Turn a client's failure into a ConsoleError that starts with ``what``: Kafka's
    error text, or that the cluster did not answer in time. Both timeouts are a 503:
    the future's TimeoutError and librdkafka's own ``_TIMED_OUT``, whichever of the two
    equal bounds ends first (librdkafka's, on a busy machine)."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        yield
    except KafkaException as e:
        inner = e.args[0] if e.args else None
        timed_out = isinstance(inner, KafkaError) and inner.code() == KafkaError._TIMED_OUT
        raise ConsoleError(f"{what}: {kafka_message(e)}", 503 if timed_out else 400) from e
    except TimeoutError as e:
        raise ConsoleError(f"{what}: the cluster did not answer within {TIMEOUT:g} s.",
                           503) from e


@dataclass
class Connection:
    """The bootstrap servers, the client properties (``--command-config``) and the
    clients made from them, made once and shared by every request."""

    bootstrap: str
    properties: dict[str, str] = field(default_factory=dict)
    _admin: AdminClient | None = None
    _producer: Producer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _was_down: bool = False
    _last_error: tuple[float, str] | None = None

    @property
    def conf(self) -> dict[str, Any]:
        return client_config(self.bootstrap, self.properties) | {
            "client.id": "ottla-console", "socket.connection.setup.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 1000, "error_cb": self._client_error}

    def _client_error(self, error: KafkaError) -> None:
        self._last_error = (time.monotonic(), error.str())

    def recent_error(self) -> str | None:
        """The clients' last error of the last 30 s (librdkafka reports a failed
        authentication there, while the request that needed it just times out)."""
        if self._admin is not None:
            self._admin.poll(0)  # the admin client serves its error_cb here
        if self._last_error is None or time.monotonic() - self._last_error[0] > 30:
            return None
        return self._last_error[1]

    def admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(self.conf)
            return self._admin

    def renew_admin(self) -> None:
        """Drop the admin client for a new one. After a broker restarts, librdkafka
        (2.16) can leave the old one's group-coordinator requests waiting forever while
        a new client is answered at once: the group pages renew it on a timeout."""
        with self._lock:
            self._admin = None

    def producer(self) -> Producer:
        from confluent_kafka import Producer

        with self._lock:
            if self._producer is None:
                # Never create a topic by producing to it (librdkafka's producer would,
                # where the broker allows it): the topics page creates topics.
                self._producer = Producer(self.conf | {
                    "linger.ms": 0, "message.timeout.ms": int(TIMEOUT * 1000),
                    "allow.auto.create.topics": False})
            return self._producer

    def check_listening(self) -> None:
        """Fail at once unless some bootstrap server accepts a TCP connection: a cluster
        that is down is said so in milliseconds, not after librdkafka's timeouts."""
        errors = []
        for address in self.bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
            except (OSError, ValueError) as e:
                errors.append(f"{address.strip()}: {getattr(e, 'strerror', None) or e}")
                continue
            if self._was_down:  # back: a new admin client (see renew_admin)
                self._was_down = False
                self.renew_admin()
            return
        self._was_down = True
        raise ConsoleError(f"The cluster at {self.bootstrap} is not reachable "
                           f"({'; '.join(errors)}).", 503)

    def check_reachable(self) -> None:
        """Fail unless a broker answers a Metadata request now. librdkafka (2.16) aborts
        the process when a request to a group coordinator fails on a dropped connection
        (confluentinc/librdkafka#4605), so the group pages ask this first: a cluster
        that is gone is found by a request that fails cleanly."""
        with failing(f"The cluster at {self.bootstrap} did not answer"):
            self.admin().list_topics(timeout=TIMEOUT)

    def protocol_client(self) -> BlockingClient:
        """A wire client to the first broker that answers, for the APIs confluent-kafka
        does not expose (DescribeQuorum, ApiVersions' features)."""
        from ottla.cli.common import connect

        try:
            return connect(self.bootstrap, "ottla-console", self.properties)
        except (OSError, ConnectionError) as e:
            raise ConsoleError(f"No broker of {self.bootstrap} answered: {e}", 503) from e
        except SystemExit as e:  # the tools' connect() ends them on an authentication error
            raise ConsoleError(str(e.code).removeprefix("error: ")) from e

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1)
