"""Listener security from Kafka's keys: per-listener overrides, and a configuration that
cannot work refused at start with a message naming the key to set."""

from __future__ import annotations

import ssl

import pytest

from ottla.client.security import client_security
from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig, Listener, dev_defaults
from ottla.metadata.image import MetadataImage
from ottla.server.listener_security import listener_security
from tests.tls import CertificateAuthority

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')



def test_a_listener_prefixed_key_overrides_the_nodes_own() -> None:
    cfg = KafkaConfig({**dev_defaults(), "sasl.enabled.mechanisms": "PLAIN",
                       "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                       "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS})
    assert cfg.listener_value("SASL_SSL", "sasl.enabled.mechanisms") == ["SCRAM-SHA-512"]
    assert cfg.listener_value("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == ["PLAIN"]
    assert cfg.sasl_jaas_config("SASL_SSL", "PLAIN") == PLAIN_JAAS
    assert cfg.sasl_jaas_config("SASL_PLAINTEXT", "PLAIN") is None
    assert cfg.unknown == []  # per-listener keys are known keys


def security_of(cfg: KafkaConfig, name: str, protocol: str):
    return listener_security(cfg, Listener(name, "127.0.0.1", 0, protocol), MetadataImage)


def test_sasl_listeners_refuse_what_cannot_authenticate_anyone() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):  # Kafka's default mechanism
        security_of(KafkaConfig(dev_defaults()), "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match=r"plain\.sasl\.jaas\.config"):
        security_of(KafkaConfig({**dev_defaults(), "sasl.enabled.mechanisms": "PLAIN"}),
                    "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="JAAS"):
        security_of(KafkaConfig({
            **dev_defaults(), "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Module bogus;"}),
            "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    scram = security_of(KafkaConfig({**dev_defaults(), "sasl.enabled.mechanisms":
                                     "SCRAM-SHA-256,SCRAM-SHA-512"}),
                        "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    assert scram.new_authenticator is not None and scram.ssl_context is None
    assert sorted(scram.new_authenticator().mechanisms) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_tls_listeners_need_a_keystore_they_can_read(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no keystore"):
        security_of(KafkaConfig(dev_defaults()), "SSL", "SSL")
    ca = CertificateAuthority(tmp_path)
    server = ca.server()
    (tmp_path / "keystore.pem").write_bytes(server.pem())
    with pytest.raises(ConfigError, match="JKS"):
        security_of(KafkaConfig({**dev_defaults(),
                                 "ssl.keystore.location": str(tmp_path / "keystore.pem")}),
                    "SSL", "SSL")
    pem = {**dev_defaults(), "ssl.keystore.type": "PEM",
           "ssl.keystore.location": str(tmp_path / "keystore.pem")}
    secured = security_of(KafkaConfig(pem), "SSL", "SSL")
    assert secured.ssl_context is not None
    assert secured.ssl_context.verify_mode == ssl.CERT_NONE
    with pytest.raises(ConfigError, match="truststore"):
        security_of(KafkaConfig({**pem, "ssl.client.auth": "required"}), "SSL", "SSL")
    required = security_of(KafkaConfig({**pem, "ssl.client.auth": "required",
                                        "ssl.truststore.type": "PEM",
                                        "ssl.truststore.location": str(ca.cert_path)}),
                           "SSL", "SSL")
    assert required.ssl_context is not None
    assert required.ssl_context.verify_mode == ssl.CERT_REQUIRED
    p12 = server.pkcs12(tmp_path / "keystore.p12", "pw", ca.cert)
    pkcs12 = {**dev_defaults(), "ssl.keystore.type": "PKCS12",
              "ssl.keystore.location": str(p12)}
    assert security_of(KafkaConfig({**pkcs12, "ssl.keystore.password": "pw"}),
                       "SSL", "SSL").ssl_context is not None
    with pytest.raises(ConfigError, match="PKCS12"):
        security_of(KafkaConfig({**pkcs12, "ssl.keystore.password": "wrong"}), "SSL", "SSL")
    with pytest.raises(ConfigError, match=r"ssl\.enabled\.protocols"):
        security_of(KafkaConfig({**pem, "ssl.enabled.protocols": "TLSv1"}), "SSL", "SSL")


def test_a_nodes_own_connections_take_the_mechanisms_jaas_login() -> None:
    base = {**dev_defaults(),
            "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT"}
    assert client_security(KafkaConfig(base), "PLAINTEXT",
                           "sasl.mechanism.inter.broker.protocol") is None
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.controller\.protocol=GSSAPI"):
        client_security(KafkaConfig(base), "CONTROLLER", "sasl.mechanism.controller.protocol")
    found = client_security(KafkaConfig({
        **base, "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS}),
        "CONTROLLER", "sasl.mechanism.controller.protocol")
    assert found is not None
    assert (found.sasl_mechanism, found.username, found.password) == \
        ("PLAIN", "admin", "admin-secret")


def test_a_tools_java_client_properties_become_librdkafkas(tmp_path) -> None:
    """Kafka's --command-config names (what a user's existing file says) for the tools
    built on confluent-kafka."""
    from ottla.client.security import librdkafka_properties

    translated = librdkafka_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                            'required username="app" password="app-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/etc/client.pem",
        "ssl.endpoint.identification.algorithm": ""})
    assert translated == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "app", "sasl.password": "app-secret",
        "ssl.ca.location": "/etc/ca.pem", "ssl.certificate.location": "/etc/client.pem",
        "ssl.key.location": "/etc/client.pem", "ssl.endpoint.identification.algorithm": "none"}
    with pytest.raises(ConfigError, match="PEM"):
        librdkafka_properties({"ssl.truststore.location": "/etc/trust.jks"})


def test_a_tools_client_properties_secure_its_protocol_client(tmp_path) -> None:
    from ottla.client.security import properties_security

    assert properties_security({}) is None
    ca = CertificateAuthority(tmp_path)
    found = properties_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.cert_path)})
    assert found is not None and found.ssl_context is not None
    assert found.ssl_context.check_hostname  # https, Kafka's default
    assert (found.sasl_mechanism, found.username) == ("PLAIN", "admin")
    with pytest.raises(ConfigError, match="sasl"):
        properties_security({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        properties_security({"security.protocol": "TLS"})
