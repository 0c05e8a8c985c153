"""A broker's SSL listener certificate changed while it runs, as Kafka 4.4 allows: an
IncrementalAlterConfigs of ``listener.name.ssl.ssl.keystore.location`` for the broker
(``kafka-configs --entity-type brokers --entity-name 1 --alter --add-config ...``) takes a
keystore with the same names for new connections while the ones already made keep
going; setting the same location again reloads a file renewed in place; a keystore that
does not load or that names another subject is refused with Kafka's error; the setting is
in the metadata log, so it survives a restart."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from ottla.client.security import ClientSecurity
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import OttlaProcess, WireClient, free_port, wait_until
from tests.tls import CertificateAuthority

LOCATION = "listener.name.ssl.ssl.keystore.location"
PREFIX = ("Invalid value org.apache.kafka.common.config.ConfigException: Validation of "
          "dynamic config update of SSLFactory failed: ")
SUFFIX = " for configuration Invalid dynamic configuration"


@dataclass
class SslNode:
    node: OttlaProcess
    ssl_port: int
    ca: CertificateAuthority
    root: Path

    def keystore(self, file_name: str, cn: str = "localhost") -> tuple[Path, x509.Certificate]:
        """A PEM keystore signed by the CA, with the subject O=Ottla tests,CN=``cn``."""
        issued = self.ca.issue(file_name, x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Ottla tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn)]), server=True)
        path = self.root / f"{file_name}-keystore.pem"
        path.write_bytes(issued.pem())
        return path, issued.cert

    def connect(self) -> WireClient:
        """A new TLS connection to the SSL listener, verifying it against the CA."""
        context = ssl.create_default_context(cafile=str(self.ca.cert_path))
        return WireClient(f"127.0.0.1:{self.ssl_port}", security=ClientSecurity(context))

    def served(self) -> x509.Certificate:
        """The certificate a new connection gets."""
        with self.connect() as client:
            return peer(client)

    def alter(self, **configs: str) -> None:
        """IncrementalAlterConfigs SET of broker 1's configs, as kafka-configs sends it."""
        admin = AdminClient({"bootstrap.servers": self.node.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()])
        admin.incremental_alter_configs([resource])[resource].result(30)


def peer(client: WireClient) -> x509.Certificate:
    der = client.sock.getpeercert(binary_form=True)  # type: ignore[attr-defined]
    assert der is not None
    return x509.load_der_x509_certificate(der)


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.fixture
def ssl_node(tmp_path) -> Iterator[SslNode]:
    ca = CertificateAuthority(tmp_path / "tls")
    ssl_port = free_port()
    node = OttlaProcess(str(tmp_path / "data"))
    holder = SslNode(node, ssl_port, ca, tmp_path)
    first, _ = holder.keystore("a")
    node.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port},"
                     f"SSL://127.0.0.1:{ssl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                                f"SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(first),
    }
    node.start()
    try:
        yield holder
    finally:
        node.stop()


def test_a_new_keystore_reaches_new_connections_and_old_ones_keep_going(ssl_node) -> None:
    """...and deleting the dynamic config brings back the one of server.properties."""
    old = ssl_node.connect()
    try:
        first = peer(old)
        second_path, second = ssl_node.keystore("b")
        assert _der(second) != _der(first)
        ssl_node.alter(**{LOCATION: str(second_path)})
        wait_until(lambda: _der(ssl_node.served()) == _der(second), 30, 0.1,
                   "new connections to get the new certificate")
        assert old.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).error_code == 0
        assert _der(peer(old)) == _der(first)
        admin = AdminClient({"bootstrap.servers": ssl_node.node.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(LOCATION, None, incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: _der(ssl_node.served()) == _der(first), 30, 0.1,
                   "the static keystore back once the dynamic one is deleted")
    finally:
        old.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_a_keystore_that_does_not_load_or_names_another_subject_is_refused(ssl_node
                                                                           ) -> None:
    first = ssl_node.served()
    garbage = ssl_node.root / "garbage.pem"
    garbage.write_text("not a keystore\n")
    with pytest.raises(KafkaException) as refused:
        ssl_node.alter(**{LOCATION: str(garbage)})
    error = refused.value.args[0]
    assert error.code() == ErrorCode.invalid_request
    assert error.str() == (
        PREFIX + "org.apache.kafka.common.errors.InvalidConfigurationException: Failed to "
        f"load PEM SSL keystore {garbage}" + SUFFIX)
    other_path, _ = ssl_node.keystore("other", cn="elsewhere")
    with pytest.raises(KafkaException) as refused:
        ssl_node.alter(**{LOCATION: str(other_path)})
    error = refused.value.args[0]
    assert error.code() == ErrorCode.invalid_request
    assert error.str() == (
        PREFIX + "org.apache.kafka.common.config.ConfigException: Keystore "
        "DistinguishedName does not match:  existing={alias=kafka, DN=CN=localhost, "
        "O=Ottla tests}, new={alias=kafka, DN=CN=elsewhere, O=Ottla tests}" + SUFFIX)
    admin = AdminClient({"bootstrap.servers": ssl_node.node.bootstrap})
    legacy = ConfigResource(ResourceType.BROKER, "1", set_config={LOCATION: str(other_path)})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([legacy])[legacy].result(30)  # AlterConfigs checks the same
    assert refused.value.args[0].code() == ErrorCode.invalid_request
    assert "Keystore DistinguishedName does not match" in refused.value.args[0].str()
    assert _der(ssl_node.served()) == _der(first)
    resource = ConfigResource(ResourceType.BROKER, "1")
    described = admin.describe_configs([resource])[resource].result(30)
    assert LOCATION not in described  # nothing was written


def test_the_same_location_reloads_a_renewed_file_and_survives_a_restart(ssl_node
                                                                         ) -> None:
    location, second = ssl_node.keystore("b")
    ssl_node.alter(**{LOCATION: str(location)})
    wait_until(lambda: _der(ssl_node.served()) == _der(second), 30, 0.1,
               "new connections to get the second certificate")
    renewed_path, renewed = ssl_node.keystore("c")
    location.write_bytes(renewed_path.read_bytes())
    assert _der(ssl_node.served()) == _der(second)  # no file watcher, as in Kafka
    ssl_node.alter(**{LOCATION: str(location)})
    wait_until(lambda: _der(ssl_node.served()) == _der(renewed), 30, 0.1,
               "the renewed file to be loaded again")

    ssl_node.node.stop()
    ssl_node.node.start()
    assert _der(ssl_node.served()) == _der(renewed)
    admin = AdminClient({"bootstrap.servers": ssl_node.node.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entry = admin.describe_configs([resource])[resource].result(30)[LOCATION]
    assert entry.value == str(location)
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
