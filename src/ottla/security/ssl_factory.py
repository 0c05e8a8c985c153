"""A listener's TLS that a dynamic config update may replace (Kafka's SslFactory over
its DefaultSslEngineFactory): the keystore and truststore keys of
``SslConfigs.RECONFIGURABLE_CONFIGS``, set per broker as
``listener.name.<listener>.<key>``. The server side is the listener's; the client side
is what the node's own connections to that listener on other nodes present and trust
(Kafka's client SslChannelBuilder, a ListenerReconfigurable too).

A new keystore is accepted only if it loads and keeps each entry's distinguished name
and subject alternative names (new names may be added) unless ``ssl.allow.dn.changes``
or ``ssl.allow.san.changes``; a truststore cannot be added to a listener without one.
A keystore cannot be added where there was none, nor removed.
New connections then get the new certificate; those already made keep theirs. The same
keys given again rebuild the listener's TLS only if a store's file was modified since it
was loaded (Kafka's file modification time), which is how a certificate renewed in
place is picked up: there is no file watcher, as in Kafka.

Refusals carry Kafka's messages, Java exception names included, as a Kafka broker sends
them back in AlterConfigs.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cryptography import x509

from ottla.common.config import ConfigError
from ottla.common.kafka_broker_configs import LISTENER_ONLY_SECURITY_CONFIGS
from ottla.common.server_config import BROKER_CONFIGS, KafkaConfig
from ottla.security.tls import (
    ClientTls,
    Keystore,
    ServerTls,
    StoreLoadError,
    client_tls,
    server_tls,
)

log = logging.getLogger(__name__)

RECONFIGURABLE_CONFIGS = tuple(sorted(LISTENER_ONLY_SECURITY_CONFIGS))
"""Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: the keys a dynamic update may change."""

_CONFIG_EXCEPTION = "org.apache.kafka.common.config.ConfigException"

Values = Callable[[str], object]
"""A listener's ``ssl.*`` keys, parsed: the static config with dynamic overrides."""


def listener_values(config: KafkaConfig, listener: str,
                    dynamic: Mapping[str, str | None] | None = None) -> Values:
    """A listener's ``ssl.*`` keys: its dynamic ``listener.name.<listener>.<key>`` (the
    broker's, over the cluster default's) for the reconfigurable keys, else
    ``server.properties`` (prefixed, then the node's own key)."""
    dynamic = dynamic or {}

    def value(key: str) -> object:
        prefixed = f"listener.name.{listener.lower()}.{key}"
        if key in LISTENER_ONLY_SECURITY_CONFIGS and dynamic.get(prefixed) is not None:
            return BROKER_CONFIGS[key].parse(dynamic[prefixed])
        return config.listener_value(listener, key)
    return value


class SslReconfigurationError(ConfigError):
    """A dynamic update of a listener's keystore or truststore that Kafka refuses."""


def _java_subject(name: x509.Name) -> str:
    """A DN as Java's X500Principal prints it (Kafka's messages): RFC 2253 order,
    ``", "`` between the parts."""
    return ", ".join(rdn.rfc4514_string() for rdn in reversed(name.rdns))


def _java_san(general_name: x509.GeneralName) -> tuple[int, str] | None:
    """A subject alternative name as Java's ``getSubjectAlternativeNames`` lists it:
    (GeneralName tag, value)."""
    if isinstance(general_name, x509.RFC822Name):
        return 1, general_name.value
    if isinstance(general_name, x509.DNSName):
        return 2, general_name.value
    if isinstance(general_name, x509.DirectoryName):
        return 4, _java_subject(general_name.value)
    if isinstance(general_name, x509.UniformResourceIdentifier):
        return 6, general_name.value
    if isinstance(general_name, x509.IPAddress):
        value = general_name.value
        return 7, str(value.exploded if isinstance(value, ipaddress.IPv6Address) else value)
    if isinstance(general_name, x509.RegisteredID):
        return 8, general_name.value.dotted_string
    return None


@dataclass(frozen=True, slots=True)
class CertificateEntry:
    """One keystore entry as Kafka compares them (SslFactory.CertificateEntries)."""

    alias: str
    subject: x509.Name
    sans: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, keystore: Keystore) -> CertificateEntry:
        try:
            names = keystore.certificate.extensions.get_extension_for_class(
                x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            names = x509.SubjectAlternativeName([])
        sans = tuple(dict.fromkeys(s for s in map(_java_san, names) if s is not None))
        return cls(keystore.alias, keystore.certificate.subject, sans)

    @property
    def dn(self) -> str:
        return _java_subject(self.subject)

    def same_dn(self, other: CertificateEntry) -> bool:
        """Kafka compares the principals, else their RFC 2253 names ignoring case."""
        return self.subject == other.subject or \
            self.subject.rfc4514_string().lower() == other.subject.rfc4514_string().lower()

    def san_text(self) -> str:
        """The names as Kafka prints its ``HashSet`` of them (Java's iteration order)."""
        return "[" + ", ".join(f"[{tag}, {value}]" for tag, value in
                               _java_hash_set_order(self.sans)) + "]"


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _java_list_hash(tag: int, value: str) -> int:
    """``List.of(tag, value).hashCode()`` (String's over its UTF-16 code units)."""
    text, data = 0, value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        text = _int32(31 * text + int.from_bytes(data[i:i + 2], "big"))
    return _int32(31 * _int32(31 + tag) + text)


def _java_hash_set_order(items: tuple[tuple[int, str], ...]) -> list[tuple[int, str]]:
    """``new HashSet<>(items)``'s iteration order: by bucket of the spread hash in a
    table of at least 16, insertion order within a bucket."""
    capacity = 16
    while capacity < int(len(items) / 0.75) + 1:
        capacity *= 2

    def bucket(item: tuple[int, str]) -> int:
        h = _java_list_hash(*item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(items, key=bucket)  # stable: insertion order within a bucket


def _modified_ms(path: object) -> int | None:
    """A store file's modification time in ms (None: no file, or none to stat)."""
    if not path:
        return None
    try:
        return os.stat(str(path)).st_mtime_ns // 1_000_000
    except OSError:
        return None


class SslEngine:
    """One build of a listener's TLS from its keys (Kafka's DefaultSslEngineFactory):
    the context new connections get, what it was built from and when its files were
    last modified."""

    def __init__(self, values: Values, listener: str, client: bool = False) -> None:
        self.values = values
        self.listener = listener
        self.configs = {key: values(key) for key in RECONFIGURABLE_CONFIGS}
        self._files = {key: _modified_ms(self.configs[key])
                       for key in ("ssl.keystore.location", "ssl.truststore.location")}
        built: ServerTls | ClientTls = client_tls(values, listener) if client \
            else server_tls(values, listener)
        self.context = built.context
        self.keystore = None if built.keystore is None else CertificateEntry.of(built.keystore)
        self.has_truststore = built.has_truststore

    def should_be_rebuilt(self, configs: Mapping[str, object]) -> bool:
        """Other keys, or a store's file modified since it was loaded."""
        if dict(configs) != self.configs:
            return True
        return any(loaded is not None and _modified_ms(self.configs[key]) not in (None, loaded)
                   for key, loaded in self._files.items())


def _ensure_compatible(old: CertificateEntry | None, new: CertificateEntry | None,
                       values: Values) -> None:
    """Kafka's checks of a new keystore against the current one: present where it was,
    the same distinguished name, its subject alternative names kept."""
    if old is None:
        if new is not None:
            raise SslReconfigurationError(
                f"{_CONFIG_EXCEPTION}: Cannot add SSL keystore to an existing listener for "
                "which no keystore was configured.")
        return
    if new is None:
        raise SslReconfigurationError(
            f"{_CONFIG_EXCEPTION}: Cannot remove the SSL keystore from an existing listener "
            "for which a keystore was configured.")
    if not values("ssl.allow.dn.changes") and not new.same_dn(old):
        raise SslReconfigurationError(
            f"{_CONFIG_EXCEPTION}: Keystore DistinguishedName does not match:  "
            f"existing={{alias={old.alias}, DN={old.dn}}}, "
            f"new={{alias={new.alias}, DN={new.dn}}}")
    if not values("ssl.allow.san.changes") and not set(old.sans) <= set(new.sans):
        raise SslReconfigurationError(
            f"{_CONFIG_EXCEPTION}: Keystore SubjectAltNames do not match:  "
            f"existing={{alias={old.alias}, SAN={old.san_text()}}}, "
            f"new={{alias={new.alias}, SAN={new.san_text()}}}")


HANDSHAKE_ROUNDS = 8
"""Enough round trips for a TLS 1.2 or 1.3 handshake in memory."""


def _validation_contexts(engine: SslEngine) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server and a client context from the keys of ``engine``, as Kafka's
    SslEngineValidator makes them: the same keystore and truststore, no host name
    checked."""
    server = server_tls(engine.values, engine.listener).context
    client = client_tls(engine.values, engine.listener).context
    client.check_hostname = False
    return server, client


def _handshake(server_context: ssl.SSLContext, client_context: ssl.SSLContext) -> None:
    """A TLS handshake between the two in memory; raises ``ssl.SSLError`` if it fails."""
    to_server, from_server = ssl.MemoryBIO(), ssl.MemoryBIO()
    to_client, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    sides = [(client_context.wrap_bio(to_client, from_client, server_side=False),
              from_client, to_server),
             (server_context.wrap_bio(to_server, from_server, server_side=True),
              from_server, to_client)]
    pending = [True, True]
    for _ in range(HANDSHAKE_ROUNDS):
        for i, (side, outgoing, peer) in enumerate(sides):
            if pending[i]:
                try:
                    side.do_handshake()
                    pending[i] = False
                except ssl.SSLWantReadError:
                    pass
            peer.write(outgoing.read())
        if not any(pending):
            return
    raise ssl.SSLError("the handshake did not complete")


def _validate_handshakes(old: SslEngine, new: SslEngine) -> None:
    """Kafka's SslEngineValidator.validate, for a listener whose keystore its own
    truststore verifies (the inter-broker listener): the current server with a client
    of the new keys, and a server of the new keys with the current client, must both
    complete a handshake, so brokers on either side of the update still reach each
    other."""
    old_server, old_client = _validation_contexts(old)
    new_server, new_client = _validation_contexts(new)
    for server, client in ((old_server, new_client), (new_server, old_client)):
        try:
            _handshake(server, client)
        except ssl.SSLError as e:
            raise SslReconfigurationError(
                f"javax.net.ssl.SSLHandshakeException: {e.reason or e}") from e


def _kafka_cause(error: ConfigError) -> str:
    """The Java exception (``toString``) Kafka's engine factory fails with."""
    if isinstance(error, StoreLoadError):
        if error.kind == "PEM":
            return ("org.apache.kafka.common.errors.InvalidConfigurationException: "
                    f"Failed to load PEM SSL keystore {error.path}")
        return (f"org.apache.kafka.common.KafkaException: Failed to load SSL keystore "
                f"{error.path} of type {error.kind}")
    return f"{_CONFIG_EXCEPTION}: {error}"


def dynamic_config_message(cause: str) -> str:
    """What a broker answers for a dynamic config its reconfiguration refuses: Kafka's
    ConfigException("Invalid dynamic configuration", cause), whose (name, value)
    constructor makes this sentence."""
    return f"Invalid value {cause} for configuration Invalid dynamic configuration"


class SslFactory:
    """A TLS listener's server side, or a node's client side towards that listener,
    across dynamic updates.

    ``listener_context`` is the context a listener accepts with, for good: each new
    connection is handed the current build's context as its handshake starts (the SNI
    callback runs for every ClientHello, with or without a server name), so a rebuild
    reaches new connections without rebinding the port. A client connection takes
    ``context`` as it connects."""

    def __init__(self, values: Values, listener: str, client: bool = False,
                 verifiable_using_truststore: bool = False) -> None:
        self.listener = listener
        self.client = client
        self.verifiable_using_truststore = verifiable_using_truststore
        """Kafka's keystoreVerifiableUsingTruststore, set for the inter-broker listener:
        a new keystore or truststore must handshake with the current ones."""
        self.engine = SslEngine(values, listener, client)
        self.listener_context = self.engine.context
        if not client:
            self.listener_context.sni_callback = self._select

    @property
    def context(self) -> ssl.SSLContext:
        """What a new connection takes."""
        return self.engine.context

    def _select(self, connection: ssl.SSLObject, server_name: str | None,
                context: ssl.SSLContext) -> None:
        if self.engine.context is not context:
            connection.context = self.engine.context

    def validate_reconfiguration(self, values: Values) -> None:
        """Raise ``SslReconfigurationError`` (Kafka's message) if the listener could
        not take these keys. Only changed keys are checked, as Kafka checks a request:
        a file modified under the same keys is checked when it is reloaded."""
        if {key: values(key) for key in RECONFIGURABLE_CONFIGS} != self.engine.configs:
            self._new_engine(values)

    def reconfigure(self, values: Values) -> bool:
        """Take these keys for new connections; whether the TLS was rebuilt (the same
        keys and unmodified files keep it)."""
        engine = self._new_engine(values)
        if engine is self.engine:
            return False
        self.engine = engine
        log.info("Created new %s SSL engine builder for listener %s with keystore %s "
                 "truststore %s", "CLIENT" if self.client else "SERVER", self.listener,
                 engine.configs["ssl.keystore.location"] or
                 ("(inline)" if engine.keystore is not None else None),
                 engine.configs["ssl.truststore.location"] or
                 ("(inline)" if engine.has_truststore else None))
        return True

    def _new_engine(self, values: Values) -> SslEngine:
        """Kafka's SslFactory.createNewSslEngineFactory."""
        current = self.engine
        if not current.should_be_rebuilt({key: values(key) for key in RECONFIGURABLE_CONFIGS}):
            return current
        try:
            try:
                engine = SslEngine(values, self.listener, self.client)
            except ConfigError as e:
                raise SslReconfigurationError(_kafka_cause(e)) from e
            _ensure_compatible(current.keystore, engine.keystore, values)
            if not current.has_truststore and engine.has_truststore:
                raise SslReconfigurationError(
                    f"{_CONFIG_EXCEPTION}: Cannot add SSL truststore to an existing listener "
                    "for which no truststore was configured.")
            if self.verifiable_using_truststore and (
                    current.has_truststore or current.keystore is not None):
                _validate_handshakes(current, engine)
        except SslReconfigurationError as e:
            raise SslReconfigurationError(dynamic_config_message(
                f"{_CONFIG_EXCEPTION}: Validation of dynamic config update of SSLFactory "
                f"failed: {e}")) from e
        return engine
