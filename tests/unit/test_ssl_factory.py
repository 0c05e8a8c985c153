"""A TLS listener's keystore and truststore changed by dynamic broker configs (Kafka's
SslFactory): what is accepted, what is refused with Kafka's message (the strings of
Kafka 4.4's SslFactory, DefaultSslEngineFactory and DynamicBrokerConfig), and that the
certificate a new handshake gets is the one accepted last."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.security.ssl_factory import (
    CertificateEntry,
    SslFactory,
    SslReconfigurationError,
    listener_values,
)
from tests.tls import CertificateAuthority

KEY = "listener.name.ssl.ssl.keystore.location"
PREFIX = ("Invalid value org.apache.kafka.common.config.ConfigException: Validation of "
          "dynamic config update of SSLFactory failed: ")
SUFFIX = " for configuration Invalid dynamic configuration"


def _server_name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Ottla tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Listener:
    """An SSL listener's factory from a static PEM keystore, and the CA behind it."""

    def __init__(self, root: Path, ca_name: str = "Ottla Test CA", **static: str) -> None:
        self.root = root
        self.ca = CertificateAuthority(root / "ca", ca_name)
        self.keystore("a.pem")
        self.config = KafkaConfig({**dev_defaults(), "ssl.keystore.type": "PEM",
                                   "ssl.keystore.location": str(root / "a.pem"), **static})
        self.factory = SslFactory(listener_values(self.config, "SSL"), "SSL")

    def keystore(self, file_name: str, cn: str = "localhost",
                 sans: list[x509.GeneralName] | None = None) -> str:
        """A PEM keystore (key and certificate) signed by the CA."""
        issued = self.ca.issue(file_name, _server_name(cn), server=sans is None)
        if sans is not None:  # a certificate with just these names
            now = datetime.datetime.now(datetime.UTC)
            builder = (x509.CertificateBuilder().subject_name(_server_name(cn))
                       .issuer_name(self.ca.cert.subject).public_key(issued.key.public_key())
                       .serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5))
                       .not_valid_after(now + datetime.timedelta(days=1)))
            if sans:
                builder = builder.add_extension(x509.SubjectAlternativeName(sans), False)
            issued.cert_path.write_bytes(builder.sign(self.ca.key, hashes.SHA256())
                                         .public_bytes(serialization.Encoding.PEM))
        path = self.root / file_name
        path.write_bytes(issued.key_path.read_bytes() + issued.cert_path.read_bytes())
        return str(path)

    def values(self, **dynamic: str):
        return listener_values(self.config, "SSL", dynamic)

    def served(self) -> x509.Certificate:
        """The certificate a new client handshake gets from the listener."""
        client = ssl.create_default_context(cafile=str(self.ca.cert_path))
        client.check_hostname = False
        server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
        server = self.factory.listener_context.wrap_bio(server_in, server_out,
                                                        server_side=True)
        peer = client.wrap_bio(client_in, client_out, server_side=False)
        for _ in range(10):
            done = True
            for side in (peer, server):
                try:
                    side.do_handshake()
                except ssl.SSLWantReadError:
                    done = False
            server_in.write(client_out.read())
            client_in.write(server_out.read())
            if done:
                break
        der = peer.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)


def _touch_later(path: str) -> None:
    """A modification time that differs from the one loaded, whatever the clock's grain."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def test_a_new_keystore_with_the_same_names_reaches_new_handshakes(tmp_path) -> None:
    listener = Listener(tmp_path)
    first = listener.served()
    renewed = listener.keystore("b.pem")
    listener.factory.validate_reconfiguration(listener.values(**{KEY: renewed}))
    assert listener.served() == first  # validating changes nothing
    assert listener.factory.reconfigure(listener.values(**{KEY: renewed}))
    second = listener.served()
    assert second != first and second.subject == first.subject


def test_the_same_location_is_reloaded_only_when_its_file_was_modified(tmp_path) -> None:
    listener = Listener(tmp_path)
    location = listener.keystore("b.pem")
    listener.factory.reconfigure(listener.values(**{KEY: location}))
    before = listener.served()
    assert not listener.factory.reconfigure(listener.values(**{KEY: location}))
    assert listener.served() == before
    Path(location).write_bytes(Path(listener.keystore("c.pem")).read_bytes())
    _touch_later(location)
    assert listener.factory.reconfigure(listener.values(**{KEY: location}))
    assert listener.served() != before
    assert not listener.factory.reconfigure(listener.values(**{KEY: location}))


def test_a_keystore_for_another_name_is_refused_unless_dn_changes_are_allowed(tmp_path
                                                                              ) -> None:
    listener = Listener(tmp_path)
    other = listener.keystore("other.pem", cn="elsewhere")
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.reconfigure(listener.values(**{KEY: other}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Keystore "
        "DistinguishedName does not match:  existing={alias=kafka, DN=CN=localhost, "
        "O=Ottla tests}, new={alias=kafka, DN=CN=elsewhere, O=Ottla tests}" + SUFFIX)
    first = listener.served()
    assert first.subject == _server_name("localhost")
    allowed = Listener(tmp_path / "allowed", **{"ssl.allow.dn.changes": "true"})
    assert allowed.factory.reconfigure(allowed.values(**{KEY: allowed.keystore(
        "other.pem", cn="elsewhere")}))
    assert allowed.served().subject == _server_name("elsewhere")


def test_subject_alternative_names_may_be_added_but_not_dropped(tmp_path) -> None:
    listener = Listener(tmp_path)
    more = listener.keystore("more.pem", sans=[
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
        x509.DNSName("broker.example")])
    assert listener.factory.reconfigure(listener.values(**{KEY: more}))
    fewer = listener.keystore("fewer.pem", sans=[x509.DNSName("localhost")])
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.validate_reconfiguration(listener.values(**{KEY: fewer}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Keystore SubjectAltNames "
        "do not match:  existing={alias=kafka, SAN=[[2, localhost], [7, 127.0.0.1], "
        "[2, broker.example]]}, new={alias=kafka, SAN=[[2, localhost]]}" + SUFFIX)
    allowed = Listener(tmp_path / "allowed", **{"ssl.allow.san.changes": "true"})
    allowed.factory.validate_reconfiguration(allowed.values(**{KEY: allowed.keystore(
        "fewer.pem", sans=[x509.DNSName("localhost")])}))


def test_a_keystore_that_does_not_load_is_refused(tmp_path) -> None:
    listener = Listener(tmp_path)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a keystore")
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.validate_reconfiguration(listener.values(**{KEY: str(garbage)}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.errors.InvalidConfigurationException: Failed to "
        f"load PEM SSL keystore {garbage}" + SUFFIX)
    with pytest.raises(SslReconfigurationError, match="Failed to load PEM SSL keystore"):
        listener.factory.validate_reconfiguration(listener.values(
            **{KEY: str(tmp_path / "missing.pem")}))
    p12 = listener.ca.server("p12").pkcs12(tmp_path / "b.p12", "right", listener.ca.cert)
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.validate_reconfiguration(listener.values(**{
            KEY: str(p12), "listener.name.ssl.ssl.keystore.type": "PKCS12",
            "listener.name.ssl.ssl.keystore.password": "wrong"}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.KafkaException: Failed to load SSL keystore "
        f"{p12} of type PKCS12" + SUFFIX)
    assert listener.factory.reconfigure(listener.values(**{
        KEY: str(p12), "listener.name.ssl.ssl.keystore.type": "PKCS12",
        "listener.name.ssl.ssl.keystore.password": "right"}))


def test_a_truststore_cannot_be_added_to_a_listener_without_one(tmp_path) -> None:
    listener = Listener(tmp_path)
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.validate_reconfiguration(listener.values(**{
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(listener.ca.cert_path)}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Cannot add SSL truststore "
        "to an existing listener for which no truststore was configured." + SUFFIX)


def test_names_are_listed_in_the_order_of_javas_hash_set() -> None:
    """Kafka prints the names as a java.util.HashSet; the expected orders are what
    ``new HashSet<>(names)`` printed on Java 17."""
    many = [(2, f"h{i}.example") for i in range(14)] + [(7, "10.0.0.3")]
    assert CertificateEntry("kafka", _server_name("x"), tuple(many)).san_text() == (
        "[[2, h9.example], [2, h8.example], [2, h10.example], [2, h0.example], "
        "[2, h11.example], [2, h6.example], [2, h2.example], [2, h1.example], "
        "[2, h7.example], [2, h4.example], [2, h13.example], [2, h5.example], "
        "[2, h12.example], [2, h3.example], [7, 10.0.0.3]]")


def test_a_request_checks_changed_keys_only_and_a_broken_reload_keeps_the_old(tmp_path
                                                                              ) -> None:
    """Kafka validates a request's listener keys only when they change; a file modified
    under the same keys is checked when it is reloaded, and a reload it fails leaves the
    listener as it was."""
    listener = Listener(tmp_path)
    before = listener.served()
    location = str(tmp_path / "a.pem")
    Path(location).write_text("broken\n")
    _touch_later(location)
    listener.factory.validate_reconfiguration(listener.values())
    with pytest.raises(SslReconfigurationError, match="Failed to load PEM SSL keystore"):
        listener.factory.reconfigure(listener.values())
    assert listener.served() == before


def _client_certificate(client: ssl.SSLContext, ca: CertificateAuthority,
                        server_keystore: Path) -> x509.Certificate | None:
    """The certificate a listener that asks for one (trusting ``ca``) gets from a new
    handshake of ``client``; None if the listener refuses it."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(server_keystore)
    server_context.load_verify_locations(cafile=str(ca.cert_path))
    server_context.verify_mode = ssl.CERT_REQUIRED
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    peer = client.wrap_bio(client_in, client_out, server_side=False,
                           server_hostname="localhost")
    try:
        for _ in range(10):
            done = True
            for side in (peer, server):
                try:
                    side.do_handshake()
                except ssl.SSLWantReadError:
                    done = False
            server_in.write(client_out.read())
            client_in.write(server_out.read())
            if done:
                break
    except ssl.SSLError:
        return None
    der = server.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der) if der else None


CLIENT_KEY = "listener.name.broker.ssl.keystore.location"
CLIENT_TRUST = "listener.name.broker.ssl.truststore.location"


def test_a_nodes_own_connections_present_and_trust_what_was_set_last(tmp_path) -> None:
    """The client side of the inter-broker listener (Kafka's client SslChannelBuilder,
    reconfigured from ``listener.name.<listener>.ssl.*`` as the listener is): a CA
    rotation reaches the next handshake, the context a connection takes is the new one."""
    from ottla.client.security import client_security

    old_ca, new_ca = (CertificateAuthority(tmp_path / n, f"{n} CA") for n in ("old", "new"))
    stores = {}
    for name, ca in (("old", old_ca), ("new", new_ca)):
        issued = ca.server(f"{name}-node")
        stores[name] = tmp_path / f"{name}-keystore.pem"
        stores[name].write_bytes(issued.pem())
    both = tmp_path / "both.pem"
    both.write_bytes(old_ca.cert_path.read_bytes() + new_ca.cert_path.read_bytes())
    config = KafkaConfig({
        **dev_defaults(), "listener.security.protocol.map":
            "BROKER:SSL,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(stores["old"]),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(old_ca.cert_path)})
    security = client_security(config, "BROKER", "sasl.mechanism.inter.broker.protocol")
    assert security is not None and isinstance(security.tls, SslFactory)
    factory = security.tls
    assert security.ssl_context is not None
    presented = _client_certificate(security.ssl_context, old_ca, stores["old"])
    assert presented is not None and presented.issuer == old_ca.cert.subject
    # A listener that trusts the new CA only refuses it, and is not trusted by it.
    assert _client_certificate(security.ssl_context, new_ca, stores["new"]) is None

    assert factory.reconfigure(listener_values(config, "BROKER", {
        CLIENT_KEY: str(stores["new"]), CLIENT_TRUST: str(both)}))
    presented = _client_certificate(security.ssl_context, new_ca, stores["new"])
    assert presented is not None and presented.issuer == new_ca.cert.subject
    assert _client_certificate(security.ssl_context, old_ca, stores["old"]) is None
    # The keys as they are: nothing rebuilt.
    assert not factory.reconfigure(listener_values(config, "BROKER", {
        CLIENT_KEY: str(stores["new"]), CLIENT_TRUST: str(both)}))


def test_a_keystore_cannot_be_added_to_or_removed_from_a_nodes_client_side(tmp_path
                                                                            ) -> None:
    """Kafka's SslFactory refuses both, whichever side it is."""
    ca = CertificateAuthority(tmp_path / "ca")
    keystore = tmp_path / "keystore.pem"
    keystore.write_bytes(ca.server("node").pem())
    trusting = {**dev_defaults(), "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(ca.cert_path), "ssl.keystore.type": "PEM"}
    without = SslFactory(listener_values(KafkaConfig(trusting), "BROKER"), "BROKER",
                         client=True)
    with pytest.raises(SslReconfigurationError) as refused:
        without.validate_reconfiguration(listener_values(KafkaConfig(trusting), "BROKER", {
            CLIENT_KEY: str(keystore)}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Cannot add SSL keystore "
        "to an existing listener for which no keystore was configured." + SUFFIX)
    config = KafkaConfig({**trusting, "ssl.keystore.location": str(keystore)})
    with_one = SslFactory(listener_values(config, "BROKER"), "BROKER", client=True)
    with pytest.raises(SslReconfigurationError) as refused:
        with_one.validate_reconfiguration(listener_values(config, "BROKER", {CLIENT_KEY: ""}))
    assert str(refused.value) == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Cannot remove the SSL "
        "keystore from an existing listener for which a keystore was configured." + SUFFIX)


TRUST = "listener.name.ssl.ssl.truststore.location"


def _inter_broker_listener(tmp_path: Path, verifiable: bool) -> tuple[Listener, Listener]:
    """An SSL listener trusting its own CA (as brokers trust each other's certificates)
    whose factory checks new keys with a handshake where ``verifiable`` (Kafka's
    keystoreVerifiableUsingTruststore, the inter-broker listener's); and a second CA's
    listener, to issue certificates the first does not trust."""
    listener = Listener(tmp_path / "one", **{
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / "one" / "ca" /
                                                                      "ca.pem")})
    listener.factory = SslFactory(listener_values(listener.config, "SSL"), "SSL",
                                  verifiable_using_truststore=verifiable)
    return listener, Listener(tmp_path / "two", ca_name="Another Test CA")


def test_an_inter_broker_keystore_its_peers_would_not_trust_is_refused(tmp_path) -> None:
    """Kafka's SslEngineValidator: on the inter-broker listener a new keystore must
    complete a handshake with the current truststore (and the current keystore with the
    new one), or brokers on either side of the update could not reach each other. A
    certificate of another CA is refused until the truststore trusts both CAs; then it
    is taken. Another listener is not checked that way."""
    listener, other = _inter_broker_listener(tmp_path, verifiable=True)
    foreign = other.keystore("foreign.pem")
    with pytest.raises(SslReconfigurationError) as refused:
        listener.factory.validate_reconfiguration(listener.values(**{KEY: foreign}))
    message = str(refused.value)
    assert message.startswith(PREFIX + "javax.net.ssl.SSLHandshakeException: ") and \
        message.endswith(SUFFIX), message
    both = tmp_path / "both.pem"
    both.write_bytes(listener.ca.cert_path.read_bytes() + other.ca.cert_path.read_bytes())
    assert listener.factory.reconfigure(listener.values(**{TRUST: str(both)}))
    listener.factory.validate_reconfiguration(listener.values(**{KEY: foreign,
                                                                 TRUST: str(both)}))

    plain, _ = _inter_broker_listener(tmp_path / "plain", verifiable=False)
    plain.factory.validate_reconfiguration(plain.values(**{KEY: foreign}))
