"""Helpers shared by the client tools."""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, Any

from ottla.common.uuids import kafka_uuid_text

if TYPE_CHECKING:
    from ottla.client.blocking import BlockingClient


def parse_properties(items: list[str] | None, flag: str) -> dict[str, str]:
    """``key=value`` items of a repeatable flag."""
    props = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: {flag} expects key=value, got {item!r}")
        props[key.strip()] = value
    return props


def client_uuid_text(value: Any) -> str:
    """A confluent-kafka ``Uuid`` as Kafka prints ids (``Uuid.toString()``: URL-safe
    base64 without padding); confluent-kafka's own ``str`` uses the standard alphabet."""
    if value is None:
        return ""
    bits = (value.get_most_significant_bits() % (1 << 64)) << 64 | \
        value.get_least_significant_bits() % (1 << 64)
    return kafka_uuid_text(uuid.UUID(int=bits))


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def read_command_config(path: str | None) -> dict[str, str]:
    """The client properties of a tool's ``--command-config`` file (Kafka's Java client
    names: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ...)."""
    if not path:
        return {}
    from ottla.common.config import load_properties

    try:
        with open(path, encoding="utf-8") as f:
            return load_properties(f.read())
    except OSError as e:
        raise SystemExit(f"error: cannot read --command-config {path}: {e.strerror}") from e


def client_config(bootstrap: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A confluent-kafka config: ``extra`` client properties in Kafka's Java names are
    translated to librdkafka's (``librdkafka_properties``)."""
    from ottla.client.security import librdkafka_properties
    from ottla.common.config import ConfigError

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    try:
        conf.update(librdkafka_properties({k: str(v) for k, v in (extra or {}).items()}))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from e
    return conf


def connect(bootstrap: str, client_id: str, properties: dict[str, str] | None = None
            ) -> BlockingClient:
    """A protocol client to the first broker of a comma-separated bootstrap list that
    answers (Kafka's tools take a list), secured as the client ``properties`` say."""
    from ottla.client.blocking import BlockingClient
    from ottla.client.security import AuthenticationFailed, properties_security
    from ottla.common.config import ConfigError

    try:
        security = properties_security(properties or {})
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from e
    last: OSError | None = None
    for address in bootstrap.split(","):
        try:
            return BlockingClient(address.strip(), client_id=client_id, security=security)
        except AuthenticationFailed as e:
            raise SystemExit(f"error: authentication with {address.strip()} failed: {e}") \
                from e
        except OSError as e:
            last = e
    raise ConnectionError(f"no broker of {bootstrap} answered: {last}")


class BrokerConnections:
    """A tool's connections to the brokers its requests name: Kafka's Admin sends a
    BROKER config resource to the broker it names (a broker answers for its own id
    only), everything else to any broker (the bootstrap connection here). A broker the
    cluster does not list is asked through the bootstrap connection, whose refusal names
    the id it expected."""

    def __init__(self, bootstrap: BlockingClient, client_id: str,
                 properties: dict[str, str]) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.properties = properties
        self._open: dict[str, BlockingClient] = {}
        self._addresses: dict[int, str] | None = None

    def __enter__(self) -> BrokerConnections:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self._open.values():
            client.close()

    def to_broker(self, name: str) -> BlockingClient:
        """The connection to broker ``name`` (an id, as a BROKER resource names it)."""
        from ottla.protocol.api import ApiKey

        if self._addresses is None:
            metadata = self.bootstrap.request(ApiKey.METADATA, 12, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            self._addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
        address = self._addresses.get(int(name)) if name.isdigit() else None
        if address is None:
            return self.bootstrap
        if address not in self._open:
            self._open[address] = connect(address, self.client_id, self.properties)
        return self._open[address]
