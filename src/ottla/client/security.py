"""How a node's own connections (inter-broker, to the controllers, between controllers)
speak the security protocol of the listener they reach: TLS from the same ``ssl.*`` keys,
then SASL with ``sasl.mechanism.inter.broker.protocol`` (or
``sasl.mechanism.controller.protocol``) and the username and password of that
mechanism's JAAS configuration on the listener, as Kafka's brokers do."""

from __future__ import annotations

import asyncio
import ssl
import struct
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
from ottla.security.tls import client_ssl_context

_SIZE = struct.Struct(">i")


class AuthenticationFailed(ConnectionError):
    """The node at the other end refused this node's credentials."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


def client_security(config: KafkaConfig, listener: str | None, mechanism_key: str
                    ) -> ClientSecurity | None:
    """What connecting to ``listener`` of another node takes; None for PLAINTEXT."""
    if listener is None:
        return None
    protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return None
    context = client_ssl_context(config, listener) if protocol in ("SSL", "SASL_SSL") \
        else None
    if protocol == "SSL":
        return ClientSecurity(context)
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
    return ClientSecurity(context, mechanism, *credentials)


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

    handshake = await call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if handshake.error_code != ErrorCode.none:
        raise AuthenticationFailed(f"SASL mechanism {mechanism} refused "
                                   f"({ErrorCode(handshake.error_code).name}); the node "
                                   f"offers {list(handshake.mechanisms)}")

    async def step(token: bytes) -> bytes:
        answer = await call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if answer.error_code != ErrorCode.none:
            raise AuthenticationFailed(answer.error_message or
                                       ErrorCode(answer.error_code).name)
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await step(plain_client_message(security.username, security.password))
        return
    client = ScramClient(ScramMechanism.from_name(mechanism), security.username,
                         security.password)
    try:
        client.verify(await step(client.final(await step(client.first()))))
    except ScramError as e:
        raise AuthenticationFailed(str(e)) from e
