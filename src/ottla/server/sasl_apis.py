"""SaslHandshake and SaslAuthenticate in every listener's table: ApiVersions advertises
them (clients look for them before SASL), and a connection that is not authenticating
(a PLAINTEXT or SSL listener, or a SASL one after its session began without
``connections.max.reauth.ms``) gets ILLEGAL_SASL_STATE from them, as from Kafka's
KafkaApis. While a SASL connection authenticates, ``network`` hands them to its
``SaslAuthenticator`` instead."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import ApiSpec, RequestContext


def _handshake(services: object, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}


def _authenticate(services: object, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": ErrorCode.illegal_sasl_state,
            "error_message": "SaslAuthenticate request received after successful "
                             "authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}


def sasl_apis() -> list[ApiSpec[object]]:
    return [ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, _handshake),
            ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, _authenticate)]
