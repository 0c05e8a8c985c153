"""The server side of SASL on a Kafka connection (Kafka's SaslServerAuthenticator), sans
I/O: the network layer hands it the requests of a connection that has not authenticated
yet and sends what it answers.

A SASL connection first may ask ApiVersions, then names its mechanism with SaslHandshake
and exchanges the mechanism's messages: in SaslAuthenticate requests after a v1
handshake (KIP-152), or as bare size-prefixed frames after a v0 one, as clients before
Kafka 1.0 do. Any other request before the exchange completes, a mechanism the listener
does not enable, or a failed exchange ends the connection (after the error response where
Kafka sends one). With ``connections.max.reauth.ms`` the session has a lifetime (KIP-368):
the client authenticates again on the same connection before it ends, as the same
principal, or the connection is closed at its next request.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ottla.common.principal import Principal
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.security.errors import SaslAuthenticationFailed


class SaslServer(Protocol):
    """One mechanism's server side of one exchange."""

    mechanism: str
    complete: bool

    def respond(self, message: bytes) -> bytes: ...

    @property
    def authorization_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Mechanism:
    """An enabled mechanism: how to start an exchange, and whose principal it gives."""

    new_server: Callable[[], SaslServer]
    principal_of: Callable[[SaslServer], Principal] = \
        lambda server: Principal("User", server.authorization_id)


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    """ApiVersions or SaslHandshake next."""
    AUTHENTICATE = "authenticate"
    """SaslAuthenticate requests next (after a v1 handshake)."""
    RAW_AUTHENTICATE = "raw"
    """Bare tokens next (after a v0 handshake)."""
    COMPLETE = "complete"
    FAILED = "failed"


BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                   ApiKey.SASL_AUTHENTICATE})


@dataclass(slots=True)
class SaslAnswer:
    """What to send for one step, and whether to close the connection once it is sent."""

    body: dict[str, object]
    close: bool = False


class SaslAuthenticator:
    def __init__(self, mechanisms: Mapping[str, Mechanism], reauth_ms: int = 0) -> None:
        self.mechanisms = dict(mechanisms)
        self.reauth_ms = reauth_ms
        self.state = SaslState.HANDSHAKE
        self.principal: Principal | None = None
        """Who the connection authenticated as (None until it has)."""
        self.mechanism = ""
        self._lifetime_ms: int | None = None
        self.session_expires_ms: int | None = None
        """When the session ends, on the session clock (the ``session_ms`` callers give:
        a monotonic one, so that a step of the wall clock neither ends every session at
        once nor prolongs any, as Kafka keeps the deadline in nanoTime)."""
        self._server: SaslServer | None = None
        self._reauthenticating = False

    @property
    def authenticated(self) -> bool:
        return self.state == SaslState.COMPLETE and not self._reauthenticating

    def expired(self, session_ms: int) -> bool:
        """A request other than a new handshake after the session's lifetime: Kafka
        closes the connection (KIP-368). ``session_ms``: the session clock's now."""
        return self.session_expires_ms is not None and session_ms > self.session_expires_ms

    def intercepts(self, api_key: int) -> bool:
        """Whether this authenticator answers the request (rather than the API table):
        everything before authentication, and a re-authentication's handshake."""
        if self.state != SaslState.COMPLETE:
            return True
        return self.reauth_ms > 0 and api_key in (ApiKey.SASL_HANDSHAKE,
                                                   ApiKey.SASL_AUTHENTICATE) and (
            api_key == ApiKey.SASL_HANDSHAKE or self._reauthenticating)

    def handshake(self, mechanism: str, version: int) -> SaslAnswer:
        enabled = list(self.mechanisms)
        if self.state == SaslState.COMPLETE:
            if mechanism != self.mechanism:
                # KIP-368: a re-authentication keeps the mechanism.
                self.state = SaslState.FAILED
                return SaslAnswer({"error_code": ErrorCode.unsupported_sasl_mechanism,
                                   "mechanisms": enabled}, close=True)
            self._reauthenticating = True
        elif self.state != SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return SaslAnswer({"error_code": ErrorCode.illegal_sasl_state,
                               "mechanisms": enabled}, close=True)
        found = self.mechanisms.get(mechanism)
        if found is None:
            self.state = SaslState.FAILED
            return SaslAnswer({"error_code": ErrorCode.unsupported_sasl_mechanism,
                               "mechanisms": enabled}, close=True)
        self.mechanism = mechanism
        self._server = found.new_server()
        if not self._reauthenticating:
            self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_AUTHENTICATE
        return SaslAnswer({"error_code": ErrorCode.none, "mechanisms": enabled})

    def authenticate(self, token: bytes, now_ms: int, session_ms: int | None = None
                     ) -> SaslAnswer:
        """One SaslAuthenticate request at wall time ``now_ms`` (credentials expire on
        it) and ``session_ms`` on the session clock (None: ``now_ms``)."""
        if self._server is None or not (self.state == SaslState.AUTHENTICATE
                                        or self._reauthenticating):
            self.state = SaslState.FAILED
            return SaslAnswer(self._authenticate_body(
                ErrorCode.illegal_sasl_state, "Unexpected SaslAuthenticate request"),
                close=True)
        try:
            reply = self._server.respond(token)
        except SaslAuthenticationFailed:
            return self._failed()
        lifetime = 0
        if self._server.complete:
            failure = self._complete(now_ms, now_ms if session_ms is None else session_ms)
            if failure is not None:
                return failure
            lifetime = self._lifetime_ms or 0
        return SaslAnswer(self._authenticate_body(ErrorCode.none, None, reply, lifetime))

    def authenticate_raw(self, token: bytes, now_ms: int, session_ms: int | None = None
                         ) -> bytes | None:
        """One bare token after a v0 handshake: the bare reply, or None to close."""
        assert self._server is not None and self.state == SaslState.RAW_AUTHENTICATE
        try:
            reply = self._server.respond(token)
        except SaslAuthenticationFailed:
            self.state = SaslState.FAILED
            return None
        if self._server.complete and self._complete(
                now_ms, now_ms if session_ms is None else session_ms) is not None:
            return None
        return reply

    def _complete(self, now_ms: int, session_ms: int) -> SaslAnswer | None:
        assert self._server is not None
        server = self._server
        principal = self.mechanisms[self.mechanism].principal_of(server)
        if self._reauthenticating and principal != self.principal:
            self.state = SaslState.FAILED
            return SaslAnswer(self._authenticate_body(
                ErrorCode.sasl_authentication_failed,
                "Cannot change principals during re-authentication from "
                f"{self.principal}: {principal}"), close=True)
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._reauthenticating = False
        self._server = None
        # KIP-368: the lifetime is the shorter of connections.max.reauth.ms and the
        # credential's own (an OAUTHBEARER token's or a delegation token's expiry, on the
        # wall clock), which bounds the session even without re-authentication, as in
        # Kafka; it then runs on the session clock.
        expires = getattr(server, "credential_expires_ms", None)
        self._lifetime_ms = None
        if expires is not None:
            left = max(0, expires - now_ms)
            self._lifetime_ms = min(self.reauth_ms, left) if self.reauth_ms > 0 else left
        elif self.reauth_ms > 0:
            self._lifetime_ms = self.reauth_ms
        self.session_expires_ms = None if self._lifetime_ms is None else \
            session_ms + self._lifetime_ms
        return None

    def _failed(self) -> SaslAnswer:
        what = "re-authentication" if self._reauthenticating else "authentication"
        self.state = SaslState.FAILED
        return SaslAnswer(self._authenticate_body(
            ErrorCode.sasl_authentication_failed,
            f"Authentication failed during {what} due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"), close=True)

    @staticmethod
    def _authenticate_body(error: ErrorCode, message: str | None, auth_bytes: bytes = b"",
                           lifetime_ms: int = 0) -> dict[str, object]:
        return {"error_code": error, "error_message": message, "auth_bytes": auth_bytes,
                "session_lifetime_ms": lifetime_ms}
