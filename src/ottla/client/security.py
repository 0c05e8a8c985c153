"""How a node's own connections (inter-broker, to the controllers, between controllers)
speak the security protocol of the listener they reach: TLS from the same ``ssl.*`` keys,
then SASL with ``sasl.mechanism.inter.broker.protocol`` (or
``sasl.mechanism.controller.protocol``) and the username and password of that
mechanism's JAAS configuration on the listener, as Kafka's brokers do. A node's TLS
client side is an ``SslFactory`` that dynamic ``listener.name.<listener>.ssl.*`` updates
replace for new connections."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.server_config import KafkaConfig
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.security.jaas import JaasError, client_credentials, parse_jaas_config
from ottla.security.plain import plain_client_message
from ottla.security.scram import ScramClient, ScramError, ScramMechanism
from ottla.security.ssl_factory import SslFactory, listener_values
from ottla.security.tls import ssl_client_context

_SIZE = struct.Struct(">i")


class AuthenticationFailed(ConnectionError):
    """The node at the other end refused this node's credentials."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    tls: ssl.SSLContext | SslFactory | None = None
    """A tool's fixed context, or a node's client side across dynamic updates."""
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The context a new connection takes."""
        return self.tls.context if isinstance(self.tls, SslFactory) else self.tls


def client_security(config: KafkaConfig, listener: str | None, mechanism_key: str
                    ) -> ClientSecurity | None:
    """What connecting to ``listener`` of another node takes; None for PLAINTEXT."""
    if listener is None:
        return None
    protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return None
    factory = SslFactory(listener_values(config, listener), listener, client=True) \
        if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "SSL":
        return ClientSecurity(factory)
    mechanism = str(config.listener_value(listener, mechanism_key) or "")
    jaas = config.sasl_jaas_config(listener, mechanism)
    try:
        credentials = client_credentials(parse_jaas_config(jaas)) if jaas else None
    except JaasError as e:
        raise ConfigError(f"The JAAS configuration of {mechanism} on {listener}: {e}") from e
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") or credentials is None:
        raise ConfigError(
            f"Listener {listener} is {protocol}: this node connects to it with "
            f"{mechanism_key}={mechanism or '(unset)'}, which needs to be PLAIN or SCRAM "
            f"with username and password in listener.name.{listener.lower()}."
            f"{mechanism.lower() or '<mechanism>'}.sasl.jaas.config")
    return ClientSecurity(factory, mechanism, *credentials)


def _exchange(security: ClientSecurity) -> Generator[bytes, bytes, None]:
    """The client's messages of one SASL exchange: each ``yield`` sends a token and
    receives the server's reply."""
    if security.sasl_mechanism == "PLAIN":
        yield plain_client_message(security.username, security.password)
        return
    client = ScramClient(ScramMechanism.from_name(security.sasl_mechanism or ""),
                         security.username, security.password)
    try:
        client.verify((yield client.final((yield client.first()))))
    except ScramError as e:
        raise AuthenticationFailed(str(e)) from e


def _handshake_error(mechanism: str, handshake: Any) -> AuthenticationFailed | None:
    if handshake.error_code == ErrorCode.none:
        return None
    return AuthenticationFailed(f"SASL mechanism {mechanism} refused "
                                f"({ErrorCode(handshake.error_code).name}); the node offers "
                                f"{list(handshake.mechanisms)}")


def _reply(answer: Any) -> bytes:
    if answer.error_code != ErrorCode.none:
        raise AuthenticationFailed(answer.error_message or ErrorCode(answer.error_code).name)
    return bytes(answer.auth_bytes)


async def authenticate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       security: ClientSecurity, client_id: str) -> None:
    """SaslHandshake v1, then SaslAuthenticate until the mechanism is done; raises
    ``AuthenticationFailed`` with the server's message."""
    mechanism = security.sasl_mechanism
    assert mechanism is not None
    correlation = 0

    async def call(api_key: int, version: int, body: dict[str, Any]) -> Any:
        nonlocal correlation
        correlation += 1
        writer.write(encode_request(api_key, version, correlation, client_id,
                                    build(request_schema(api_key, version), body)))
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        return decode_response(api_key, version, await reader.readexactly(size))[1]

    refused = _handshake_error(mechanism, await call(ApiKey.SASL_HANDSHAKE, 1,
                                                     {"mechanism": mechanism}))
    if refused is not None:
        raise refused
    steps = _exchange(security)
    token = next(steps)
    while True:
        reply = _reply(await call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}))
        try:
            token = steps.send(reply)
        except StopIteration:
            return


def authenticate_blocking(call: Callable[[int, int, dict[str, Any]], Any],
                          security: ClientSecurity) -> None:
    """``authenticate`` over a blocking ``call(api_key, version, body)``."""
    mechanism = security.sasl_mechanism
    assert mechanism is not None
    refused = _handshake_error(mechanism, call(ApiKey.SASL_HANDSHAKE, 1,
                                               {"mechanism": mechanism}))
    if refused is not None:
        raise refused
    steps = _exchange(security)
    token = next(steps)
    while True:
        reply = _reply(call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}))
        try:
            token = steps.send(reply)
        except StopIteration:
            return


_CLIENT_DEFAULTS = {"ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
                    "ssl.endpoint.identification.algorithm": "https",
                    "ssl.keystore.type": "JKS", "ssl.truststore.type": "JKS"}
_LIST_KEYS = frozenset({"ssl.enabled.protocols", "ssl.cipher.suites"})


def properties_security(props: Mapping[str, str]) -> ClientSecurity | None:
    """What a tool's client properties (Kafka's ``--command-config`` file, Java client
    names) ask for: TLS from ``ssl.*`` (PEM or PKCS12 stores; librdkafka's
    ``ssl.ca.location`` also read as a PEM truststore), SASL PLAIN or SCRAM with the
    ``sasl.jaas.config`` login (or librdkafka's ``sasl.username``/``sasl.password``).
    None for PLAINTEXT."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"Invalid value {protocol} for configuration security.protocol")
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        view = dict(props)
        if "ssl.ca.location" in view and "ssl.truststore.location" not in view:
            view.update({"ssl.truststore.location": view["ssl.ca.location"],
                         "ssl.truststore.type": "PEM"})

        def value(key: str) -> object:
            found = view.get(key, _CLIENT_DEFAULTS.get(key))
            if key in _LIST_KEYS and isinstance(found, str):
                return [part.strip() for part in found.split(",") if part.strip()]
            return found
        context = ssl_client_context(value, "the client properties")
    if protocol == "SSL":
        return ClientSecurity(context)
    mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
    credentials: tuple[str, str] | None = None
    jaas = props.get("sasl.jaas.config")
    if jaas:
        try:
            credentials = client_credentials(parse_jaas_config(jaas))
        except JaasError as e:
            raise ConfigError(f"sasl.jaas.config: {e}") from e
    elif "sasl.username" in props:
        credentials = (props["sasl.username"], props.get("sasl.password", ""))
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") or credentials is None:
        raise ConfigError(f"security.protocol={protocol} needs sasl.mechanism PLAIN, "
                          "SCRAM-SHA-256 or SCRAM-SHA-512 and a sasl.jaas.config with "
                          "username and password")
    return ClientSecurity(context, mechanism, *credentials)


def librdkafka_properties(props: Mapping[str, str]) -> dict[str, str]:
    """Kafka's Java client properties as librdkafka (confluent-kafka) names them, for the
    tools built on it: the JAAS login becomes sasl.username/password, PEM stores become
    ssl.ca.location / ssl.certificate.location + ssl.key.location, a PKCS12 keystore stays
    one; Java-only keys are dropped. librdkafka's own names pass through."""
    out: dict[str, str] = {}
    java_only = {"sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type",
                 "ssl.truststore.password", "ssl.truststore.certificates",
                 "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key",
                 "ssl.enabled.protocols", "ssl.protocol", "ssl.keymanager.algorithm",
                 "ssl.trustmanager.algorithm", "ssl.secure.random.implementation"}
    for key, value in props.items():
        if key not in java_only and key != "ssl.keystore.location":
            out[key] = value
    jaas = props.get("sasl.jaas.config")
    if jaas and "sasl.username" not in props:
        try:
            credentials = client_credentials(parse_jaas_config(jaas))
        except JaasError as e:
            raise ConfigError(f"sasl.jaas.config: {e}") from e
        if credentials is not None:
            out["sasl.username"], out["sasl.password"] = credentials
    truststore = props.get("ssl.truststore.location")
    if truststore:
        if props.get("ssl.truststore.type", "JKS").upper() != "PEM":
            raise ConfigError("ssl.truststore.type must be PEM for Ottla's tools "
                              "(librdkafka reads no JKS or PKCS12 truststore)")
        out["ssl.ca.location"] = truststore
    if props.get("ssl.truststore.certificates"):
        out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
    keystore = props.get("ssl.keystore.location")
    if keystore:
        kind = props.get("ssl.keystore.type", "JKS").upper()
        if kind == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = keystore
        elif kind == "PKCS12":
            out["ssl.keystore.location"] = keystore
        else:
            raise ConfigError(f"ssl.keystore.type {kind} is not supported: use PEM or "
                              "PKCS12")
    if props.get("ssl.keystore.certificate.chain"):
        out["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
    if props.get("ssl.keystore.key"):
        out["ssl.key.pem"] = props["ssl.keystore.key"]
    if out.get("ssl.endpoint.identification.algorithm", "https") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out
