"""Listeners by security protocol, with real clients: SASL_PLAINTEXT (PLAIN against JAAS
users, SCRAM against credentials in the metadata log), SSL with client certificates
mapped to principals by ``ssl.principal.mapping.rules``, and SASL_SSL with a PKCS12
keystore, all on one node beside its PLAINTEXT listener. Bad credentials and bad SASL
sequences get Kafka's errors and a closed connection, and the node stays up."""

from __future__ import annotations

import html
import signal
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.security.plain import plain_client_message
from tests.helpers import OttlaProcess, WireClient, free_port, terminate, wait_until
from tests.tls import CertificateAuthority

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
MAPPING_RULES = "RULE:^CN=([a-z]+),OU=clients,O=Ottla tests$/$1/L"
KEYSTORE_PASSWORD = "keystore-secret"


ISSUER, AUDIENCE = "https://issuer.ottla.test", "ottla"


@dataclass
class SecureNode:
    node: OttlaProcess
    ports: dict[str, int]
    ca: CertificateAuthority
    token_key: Any
    """The RSA key whose public half the SASL_SSL listener's JWKS holds (OAUTHBEARER)."""

    def token(self, key: Any = None, **claims: Any) -> tuple[str, float]:
        """A JWT for OAUTHBEARER (signed by ``token_key`` unless another key is given) and
        its expiry, as confluent-kafka's oauth_cb returns them."""
        import time

        import jwt

        now = int(time.time())
        body = {"sub": "token-user", "iat": now, "exp": now + 300, "aud": AUDIENCE,
                "iss": ISSUER, **claims}
        return (jwt.encode(body, key or self.token_key, algorithm="RS256",
                           headers={"kid": "test-key"}), float(body["exp"]))

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, listener: str, **settings: Any) -> dict[str, Any]:
        """A confluent-kafka config for ``listener``: the CA trusted on TLS listeners."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener),
                                  "security.protocol": listener}
        if "SSL" in listener:
            config["ssl.ca.location"] = str(self.ca.cert_path)
        config.update(settings)
        return config


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Iterator[SecureNode]:
    root: Path = tmp_path_factory.mktemp("secure")
    ca = CertificateAuthority(root / "tls")
    server = ca.server()
    (root / "tls" / "server-keystore.pem").write_bytes(server.pem())
    keystore = server.pkcs12(root / "tls" / "server.p12", KEYSTORE_PASSWORD, ca.cert)
    import json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    token_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(token_key.public_key()))
    (root / "jwks.json").write_text(json.dumps({"keys": [
        {**jwk, "kid": "test-key", "alg": "RS256", "use": "sig"}]}))
    ports = {name: free_port() for name in ("SASL_PLAINTEXT", "SSL", "SASL_SSL")}
    node = OttlaProcess(str(root / "data"))
    ports["PLAINTEXT"] = node.port
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required " +
            " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items())
            + ";")
    secured = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()
                       if name != "PLAINTEXT")
    node.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port},{secured}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},{secured}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "tls" / "server-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.cert_path),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": MAPPING_RULES,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
            f"file://{root / 'jwks.json'}",
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.audience": AUDIENCE,
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": str(keystore),
        "listener.name.sasl_ssl.ssl.keystore.password": KEYSTORE_PASSWORD,
        "num.partitions": "1",
    }
    node.start()
    try:
        yield SecureNode(node, ports, ca, token_key)
    finally:
        node.stop()


def round_trip(config: dict[str, Any], topic: str, count: int = 20) -> list[bytes]:
    """Produce ``count`` records with ``config`` and read them back with it."""
    producer = Producer({**config, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"%s-%d" % (topic.encode(), i))
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def read() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        return len(got) >= count
    try:
        wait_until(read, 60, 0, f"{count} records of {topic}")
    finally:
        consumer.close()
    return got


def authentication_error(config: dict[str, Any], timeout: float = 30) -> KafkaError:
    """The error a client reports when its connection is refused at authentication."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    wait_until(lambda: producer.poll(0.2) is not None and errors, timeout, 0,
               "an authentication error")
    return errors[0]


def create_topic(secure: SecureNode, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


# --- SASL/PLAIN -------------------------------------------------------------------------

def test_sasl_plain_users_of_the_jaas_config_produce_and_consume(secure) -> None:
    topic = create_topic(secure, "plain-topic")
    config = secure.client("SASL_PLAINTEXT", **{"sasl.mechanism": "PLAIN",
                                                "sasl.username": "alice",
                                                "sasl.password": "alice-secret"})
    assert len(round_trip(config, topic)) == 20


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_sasl_plain_with_bad_credentials_is_refused(secure, user, password) -> None:
    error = authentication_error(secure.client(
        "SASL_PLAINTEXT", **{"sasl.mechanism": "PLAIN", "sasl.username": user,
                             "sasl.password": password}))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism PLAIN" in error.str()


def test_a_mechanism_the_listener_does_not_enable_is_refused(secure) -> None:
    error = authentication_error(secure.client(
        "SASL_SSL", **{"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                       "sasl.password": "alice-secret"}))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "SCRAM-SHA-512" in error.str()  # what the listener offers instead


# --- SASL/SCRAM -------------------------------------------------------------------------

def scram_user(secure: SecureNode, user: str, password: str, mechanism: ScramMechanism,
               iterations: int = 8192) -> None:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    futures[user].result(30)


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256,
                                       ScramMechanism.SCRAM_SHA_512])
def test_scram_users_created_by_the_admin_api_produce_and_consume(secure, mechanism) -> None:
    name = "SCRAM-SHA-256" if mechanism == ScramMechanism.SCRAM_SHA_256 else "SCRAM-SHA-512"
    user = f"user-{mechanism}"
    scram_user(secure, user, "s3cret", mechanism)
    topic = create_topic(secure, f"scram-{mechanism}")
    config = secure.client("SASL_PLAINTEXT", **{"sasl.mechanism": name,
                                                "sasl.username": user,
                                                "sasl.password": "s3cret"})
    wait_until(lambda: _authenticates(config), 30, 0.2, "the credential to reach the broker")
    assert len(round_trip(config, topic)) == 20
    wrong = authentication_error({**config, "sasl.password": "not-it"})
    assert wrong.code() == KafkaError._AUTHENTICATION
    other = authentication_error({**config, "sasl.username": "nobody"})
    assert other.code() == KafkaError._AUTHENTICATION


def _authenticates(config: dict[str, Any]) -> bool:
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=5)
    except Exception:
        return False
    return not errors


def test_sasl_ssl_with_scram_sha_512_on_a_pkcs12_keystore(secure) -> None:
    scram_user(secure, "tls-user", "tls-secret", ScramMechanism.SCRAM_SHA_512)
    topic = create_topic(secure, "sasl-ssl-topic")
    config = secure.client("SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512",
                                          "sasl.username": "tls-user",
                                          "sasl.password": "tls-secret"})
    wait_until(lambda: _authenticates(config), 30, 0.2, "the credential to reach the broker")
    assert len(round_trip(config, topic)) == 20


def test_kafka_python_and_aiokafka_authenticate_with_scram(secure) -> None:
    """Two independent SASL implementations: kafka-python with SCRAM-SHA-256 over
    SASL_PLAINTEXT, aiokafka with SCRAM-SHA-512 over SASL_SSL."""
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    scram_user(secure, "py-user", "py-secret", ScramMechanism.SCRAM_SHA_256)
    scram_user(secure, "py-user", "py-secret", ScramMechanism.SCRAM_SHA_512)
    topic = create_topic(secure, "python-clients")
    wait_until(lambda: _authenticates(secure.client(
        "SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "py-user",
                       "sasl.password": "py-secret"})), 30, 0.2, "the credentials")
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "py-user", "sasl_plain_password": "py-secret"}
    producer = KafkaProducer(bootstrap_servers=secure.bootstrap("SASL_PLAINTEXT"), **sasl)
    for i in range(5):
        producer.send(topic, b"kafka-python-%d" % i)
    producer.flush(30)
    producer.close()

    async def aiokafka_round() -> list[bytes]:
        context = ssl.create_default_context(cafile=str(secure.ca.cert_path))
        settings = {"bootstrap_servers": secure.bootstrap("SASL_SSL"),
                    "security_protocol": "SASL_SSL", "ssl_context": context,
                    "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "py-user",
                    "sasl_plain_password": "py-secret"}
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, b"aiokafka-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == 10:
                        break
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(aiokafka_round())
    assert sorted(got) == sorted([b"kafka-python-%d" % i for i in range(5)] +
                                 [b"aiokafka-%d" % i for i in range(5)])
    consumer = KafkaConsumer(topic, bootstrap_servers=secure.bootstrap("SASL_PLAINTEXT"),
                             auto_offset_reset="earliest", consumer_timeout_ms=10000, **sasl)
    assert len([m for _, m in zip(range(10), consumer, strict=False)]) == 10
    consumer.close()


def test_kafkas_java_client_over_sasl_ssl_and_mutual_tls(secure, tmp_path) -> None:
    """Kafka's own client: a KafkaProducer authenticating with SCRAM-SHA-512 over TLS (a
    PEM truststore), a KafkaConsumer presenting a client certificate (PEM keystore)."""
    from tests.java_clients import run

    scram_user(secure, "java-user", "java-secret", ScramMechanism.SCRAM_SHA_512)
    topic = create_topic(secure, "java-secured")
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(secure.ca.cert_path)}
    sasl_ssl = {**trust, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                    'required username="java-user" password="java-secret";'}
    wait_until(lambda: _authenticates(secure.client(
        "SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "java-user",
                       "sasl.password": "java-secret"})), 30, 0.2, "the credentials")
    events = run({"op": "produce", "bootstrap": secure.bootstrap("SASL_SSL"), "topic": topic,
                  "count": 100, "config": {**sasl_ssl, "acks": "all"}})
    (summary,) = [e for e in events if e["event"] == "produced"]
    assert summary["errors"] == [] and summary["acked"] == 100
    client = secure.ca.client("client-java", O="Ottla tests", OU="clients", CN="java")
    keystore = tmp_path / "java-client.pem"
    keystore.write_bytes(client.pem())
    read = run({"op": "consume", "bootstrap": secure.bootstrap("SSL"), "topics": [topic],
                "group": "java-mtls", "count": 100, "timeout_ms": 30000,
                "config": {**trust, "security.protocol": "SSL", "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(keystore)}})
    assert [e["value"] for e in read if e["event"] == "record"] == \
        [f"v{i}" for i in range(100)]


def test_oauthbearer_tokens_signed_by_the_jwks_key_are_accepted_others_refused(
        secure) -> None:
    """SASL_SSL with OAUTHBEARER (Kafka's OAuthBearerValidatorCallbackHandler: a JWKS,
    the expected audience and issuer): confluent-kafka's oauth_cb hands it the token."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    topic = create_topic(secure, "oauth-topic")

    def settings(token: tuple[str, float]) -> dict[str, Any]:
        return secure.client("SASL_SSL", **{"sasl.mechanism": "OAUTHBEARER",
                                            "oauth_cb": lambda _config: token})
    assert len(round_trip(settings(secure.token()), topic)) == 20
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for refused in (secure.token(key=stranger), secure.token(aud="another-service"),
                    secure.token(iss="https://elsewhere.test")):
        error = authentication_error(settings(refused))
        assert error.code() == KafkaError._AUTHENTICATION, error


# --- SSL with client certificates --------------------------------------------------------

def test_a_client_certificate_that_the_rules_map_produces_and_consumes(secure) -> None:
    client = secure.ca.client("client-carol", O="Ottla tests", OU="clients", CN="carol")
    topic = create_topic(secure, "mtls-topic")
    config = secure.client("SSL", **{"ssl.certificate.location": str(client.cert_path),
                                     "ssl.key.location": str(client.key_path)})
    assert len(round_trip(config, topic)) == 20


def test_without_a_certificate_or_with_one_no_rule_maps_the_client_is_refused(secure) -> None:
    error = authentication_error(secure.client("SSL"))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    unmapped = secure.ca.client("client-ops", O="Ottla tests", OU="operators", CN="dave")
    error = authentication_error(secure.client(
        "SSL", **{"ssl.certificate.location": str(unmapped.cert_path),
                  "ssl.key.location": str(unmapped.key_path)}))
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def test_a_certificate_from_another_ca_is_refused(secure, tmp_path) -> None:
    stranger = CertificateAuthority(tmp_path / "other").client(
        "client-x", O="Ottla tests", OU="clients", CN="eve")
    error = authentication_error(secure.client(
        "SSL", **{"ssl.certificate.location": str(stranger.cert_path),
                  "ssl.key.location": str(stranger.key_path)}))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                            KafkaError._ALL_BROKERS_DOWN)


# --- ACLs ---------------------------------------------------------------------------------

def test_without_an_authorizer_the_acl_apis_answer_security_disabled(secure) -> None:
    """As Kafka's brokers without authorizer.class.name."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                         "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as created:
        admin.create_acls([binding])[binding].result(30)
    assert created.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka hands DescribeAcls' top-level error to nobody (an empty list): ask it raw.
    with WireClient(secure.bootstrap("PLAINTEXT")) as client:
        described = client.request(ApiKey.DESCRIBE_ACLS, 3, {
            "resource_type_filter": 1, "resource_name_filter": None,
            "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
            "operation": 1, "permission_type": 1})
    assert (described.error_code, described.error_message) == (
        ErrorCode.security_disabled, "No Authorizer is configured on the broker")


def test_a_node_with_an_authorizer_other_than_kafkas_standard_one_refuses_to_start(
        tmp_path) -> None:
    import subprocess
    import sys

    started = subprocess.run(
        [sys.executable, "-m", "ottla", "server", "--override", f"log.dirs={tmp_path}",
         "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"],
        capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    assert "Ottla has only org.apache.kafka.metadata.authorizer.StandardAuthorizer" in \
        started.stderr


# --- the SASL state machine on the wire --------------------------------------------------

def closed(client: WireClient) -> bool:
    """Whether the server closed the connection (reads nothing more)."""
    try:
        client.recv_frame()
    except (ConnectionError, OSError, EOFError, struct.error):
        return True
    return False


def test_a_request_before_authentication_closes_the_connection(secure) -> None:
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        versions = client.api_versions()  # allowed before authentication
        assert versions.error_code == ErrorCode.none
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= \
            {k.api_key for k in versions.api_keys}
        client.send(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        assert closed(client)


def test_handshake_errors_answer_then_close(secure) -> None:
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        answer = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert sorted(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed(client)
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"x"})
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert closed(client)
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1,
                              {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {
            "auth_bytes": plain_client_message("alice", "nope")})
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == ("Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism PLAIN")
        assert closed(client)


def test_a_truncated_scram_exchange_fails_cleanly(secure) -> None:
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1,
                              {"mechanism": "SCRAM-SHA-256"}).error_code == ErrorCode.none
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n="})
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert closed(client)


def test_a_v0_handshake_exchanges_bare_tokens_then_serves_requests(secure) -> None:
    """Clients before KIP-152 send the mechanism's tokens without a Kafka header."""
    with WireClient(secure.bootstrap("SASL_PLAINTEXT")) as client:
        assert client.request(ApiKey.SASL_HANDSHAKE, 0,
                              {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        token = plain_client_message("admin", "admin-secret")
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.recv_frame() == b""
        assert client.api_versions().error_code == ErrorCode.none


def test_sasl_requests_on_a_plaintext_listener_are_an_illegal_state(secure) -> None:
    with WireClient(secure.bootstrap("PLAINTEXT")) as client:
        answer = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert answer.error_code == ErrorCode.illegal_sasl_state
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b""})
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert client.api_versions().error_code == ErrorCode.none  # still open


def test_garbage_on_secured_listeners_leaves_the_node_up(secure) -> None:
    for listener in ("SASL_PLAINTEXT", "SSL", "SASL_SSL"):
        with socket.create_connection(("127.0.0.1", secure.ports[listener]), 5) as sock:
            sock.sendall(struct.pack(">i", 12) + uuid.uuid4().bytes[:12])
            sock.settimeout(5)
            try:
                while sock.recv(4096):
                    pass
            except (TimeoutError, ConnectionError):
                pass
    with WireClient(secure.bootstrap("PLAINTEXT")) as client:
        assert client.api_versions().error_code == ErrorCode.none


def test_a_stalled_tls_or_sasl_handshake_is_cut_at_the_idle_limit(tmp_path) -> None:
    """Slow loris: a client that opens a connection and stalls in the TLS handshake, or
    halfway through its SASL exchange, is disconnected after connections.max.idle.ms."""
    import time

    ca = CertificateAuthority(tmp_path / "tls")
    (tmp_path / "tls" / "keystore.pem").write_bytes(ca.server().pem())
    node = OttlaProcess(str(tmp_path / "data"))
    ssl_port, sasl_port = free_port(), free_port()
    node.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port},"
                     f"SSL://127.0.0.1:{ssl_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                                f"SSL://127.0.0.1:{ssl_port},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "tls" /
                                                                "keystore.pem"),
        "connections.max.idle.ms": "2000"}
    node.start()
    try:
        for port, opening in ((ssl_port, b""), (sasl_port, b"\x00\x00\x00\x40\x00\x11")):
            with socket.create_connection(("127.0.0.1", port), 5) as sock:
                sock.sendall(opening)  # nothing, or the start of a SaslHandshake frame
                sock.settimeout(15)
                started = time.monotonic()
                assert sock.recv(4096) == b""  # closed by the node, not by the timeout
                assert time.monotonic() - started < 12
        with WireClient(node.bootstrap) as client:
            assert client.api_versions().error_code == ErrorCode.none
    finally:
        node.stop()


# --- a cluster with nothing in clear text ------------------------------------------------

CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="controller" password="controller-secret" '
                   'user_controller="controller-secret";')
BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


def secure_cluster(root: Path, controllers: int = 3, brokers: int = 2
                   ) -> tuple[dict[int, OttlaProcess], CertificateAuthority]:
    """Controllers and brokers whose every listener is SASL_SSL: PLAIN between controllers
    and from brokers to controllers (SCRAM cannot authenticate there, as in Kafka: its
    credentials live in the metadata log), SCRAM-SHA-512 between brokers and for clients,
    with the SCRAM users created by ``ottla storage format --add-scram``."""
    import subprocess
    import sys

    from ottla.common.uuids import random_uuid

    ca = CertificateAuthority(root / "tls")
    keystore = root / "tls" / "node-keystore.pem"
    keystore.write_bytes(ca.server("node").pem())
    cluster_id = random_uuid()
    nodes: dict[int, OttlaProcess] = {}
    for i in range(1, controllers + 1):
        nodes[i] = OttlaProcess(str(root / f"controller-{i}"), roles="controller", node_id=i)
    for j in range(1, brokers + 1):
        nodes[100 + j] = OttlaProcess(str(root / f"broker-{j}"), roles="broker",
                                      node_id=100 + j)
    voters = ",".join(f"{i}@127.0.0.1:{nodes[i].controller_port}"
                      for i in range(1, controllers + 1))
    for node in nodes.values():
        props = {
            "process.roles": node.roles, "node.id": str(node.node_id),
            "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:SASL_SSL,BROKER:SASL_SSL",
            "log.dirs": node.data_dir,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert_path),
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        }
        if node.is_broker:
            props.update({
                "listeners": f"BROKER://127.0.0.1:{node.port}",
                "advertised.listeners": f"BROKER://127.0.0.1:{node.port}",
                "inter.broker.listener.name": "BROKER",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.broker.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
                "offsets.topic.replication.factor": "2",
                "broker.session.timeout.ms": "4000",
                "broker.heartbeat.interval.ms": "500"})
        else:
            props.update({"listeners": f"CONTROLLER://127.0.0.1:{node.controller_port}",
                          "broker.session.timeout.ms": "4000"})
        node.config_file = str(root / f"node-{node.node_id}.properties")
        Path(node.config_file).write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        formatted = subprocess.run(
            [sys.executable, "-m", "ottla", "storage", "format", "--cluster-id", cluster_id,
             "--config", node.config_file,
             "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
             "--add-scram", "SCRAM-SHA-512=[name=app,password=app-secret]"],
            capture_output=True, text=True, timeout=60)
        assert formatted.returncode == 0, formatted.stderr
    return nodes, ca


def test_a_cluster_with_nothing_in_clear_text_replicates_and_elects(tmp_path) -> None:
    nodes, ca = secure_cluster(tmp_path)
    brokers = [n for n in nodes.values() if n.is_broker]
    config = {"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
              "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.cert_path),
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
              "sasl.password": "app-secret"}
    try:
        for node in nodes.values():
            node.start(wait=False)
        admin = AdminClient(config)

        def brokers_up() -> bool:
            try:
                return len(admin.describe_cluster(request_timeout=5).result(10).nodes) == 2
            except Exception:
                return False
        wait_until(brokers_up, 60, 0.5, "both brokers registered, over SASL_SSL")
        # Ottla's own tools with Kafka's --command-config (Java client property names).
        client_properties = tmp_path / "client.properties"
        client_properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="app" password="app-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.cert_path}\n")
        controller_properties = tmp_path / "controller.properties"
        controller_properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="controller" password="controller-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.cert_path}\n")
        tool = _tool_runner(config["bootstrap.servers"])
        tool("topics", "--create", "--topic", "secured", "--partitions", "2",
             "--replication-factor", "2", "--command-config", client_properties)
        users = tool("configs", "--describe", "--entity-type", "users",
                     "--command-config", client_properties)
        assert "SCRAM credential configs for user-principal 'app' are SCRAM-SHA-512" in users
        quorum = _tool_runner(nodes[1].controller)(
            "metadata-quorum", "--bootstrap-controller", nodes[1].controller,
            "--command-config", controller_properties, "describe", "--status")
        assert "CurrentVoters" in quorum
        assert "SASL_SSL" not in tool("log-dirs", "--describe", "--command-config",
                                      client_properties)
        first = round_trip(config, "secured", 40)
        assert sorted(first) == sorted(b"secured-%d" % i for i in range(40))
        # The brokers replicate to each other (SCRAM-SHA-512 on BROKER): both in sync.
        wait_until(lambda: all(len(p.isrs) == 2 for p in admin.list_topics(
            "secured", timeout=10).topics["secured"].partitions.values()),
            30, 0.2, "two in-sync replicas of each partition")
        # Lose the active controller: the others elect over SASL_SSL (PLAIN) and the
        # brokers follow the new one; then a broker, whose partitions move to the other.
        active = _active_controller(nodes)
        nodes[active].kill9()
        admin.create_topics([NewTopic("after-election", 1, 2)])["after-election"].result(60)
        nodes[101].kill9()
        producer = Producer({**config, "acks": "all"})
        for i in range(10):
            producer.produce("after-election", value=b"%d" % i)
        assert producer.flush(60) == 0
    finally:
        for node in nodes.values():
            node.stop(check=False)


def _tool_runner(bootstrap: str):
    """``ottla <tool> --bootstrap-server|controller ... args``: its output; fails the test
    with the tool's errors if it does not exit 0."""
    import subprocess
    import sys

    def run(tool: str, *args: object) -> str:
        where = [] if "--bootstrap-controller" in args else ["--bootstrap-server", bootstrap]
        done = subprocess.run([sys.executable, "-m", "ottla", tool, *where,
                               *map(str, args)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"ottla {tool}: {done.stdout}{done.stderr}"
        return done.stdout
    return run


def _active_controller(nodes: dict[int, OttlaProcess]) -> int:
    """The controller that last became active, from the controllers' own logs (the quorum
    is asked over its SASL_SSL listener by nothing else here)."""
    import re

    def newest() -> int | None:
        epochs = {}
        for i, node in nodes.items():
            if not node.is_broker:
                found = re.findall(r"Active controller for epoch (\d+)", node.log())
                if found:
                    epochs[i] = int(found[-1])
        return max(epochs, key=epochs.__getitem__) if epochs else None
    return wait_until(newest, 30, 0.2, "an active controller")


def test_the_web_console_speaks_sasl_with_the_command_config(secure, tmp_path) -> None:
    """``ottla console --command-config`` on a SASL_PLAINTEXT listener: the pages work
    with the right credentials (the AdminClient and the wire client alike) and say why
    with wrong ones, never with a stack trace."""
    def console(password: str) -> tuple[subprocess.Popen[bytes], str]:
        properties = tmp_path / f"console-{password}.properties"
        properties.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="alice" password="{password}";\n')
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ottla", "console", "--bootstrap-server",
             secure.bootstrap("SASL_PLAINTEXT"), "--port", str(port), "--command-config",
             str(properties)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return proc, f"http://127.0.0.1:{port}"

    def fetch(url: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with urllib.request.urlopen(url, data=data, timeout=30) as response:
                return response.status, html.unescape(response.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, html.unescape(e.read().decode())

    right, right_url = console(PLAIN_USERS["alice"])
    wrong, wrong_url = console("not-her-password")
    try:
        for url in (right_url, wrong_url):
            wait_until(lambda url=url: fetch(f"{url}/static/console.css")[0] == 200, 30,
                       0.2, "the console")
        # DescribeQuorum over SASL, the wire client's: the console may serve the page
        # before its first answer, so wait for the row (bounded).
        wait_until(lambda: (lambda got: got[0] == 200 and "<td>Leader</td>" in got[1])(
            fetch(f"{right_url}/")), 30, 0.5, "the quorum's leader on the cluster page")
        status, page = fetch(f"{right_url}/topics", {"name": "console-sasl"})
        assert status == 200 and "Created topic console-sasl." in page, page
        status, page = fetch(f"{wrong_url}/")
        assert status in (400, 503), page
        # The broker's reason as librdkafka reports it: Kafka's SaslServerAuthenticator text.
        assert "Authentication failed during authentication due to invalid credentials with " \
               "SASL mechanism PLAIN" in page, page
        assert "Traceback" not in page
    finally:
        for proc in (right, wrong):
            code, how = terminate(proc, signal.SIGTERM, 10)
            assert code == 0, f"the console did not exit cleanly ({code}, {how})"
