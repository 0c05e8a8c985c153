"""SASL/PLAIN (RFC 4616) against the users of a JAAS configuration, as Kafka's
PlainServerCallbackHandler: ``user_<name>="<password>"`` options of PlainLoginModule."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from ottla.security.errors import SaslAuthenticationFailed


class PlainServer:
    """One PLAIN exchange: a single message, ``authzid NUL authcid NUL password``."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id = ""

    def respond(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN exchange already complete")
        parts = message.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError as e:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from e
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or "
                                           "password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def plain_client_message(username: str, password: str) -> bytes:
    return b"\x00" + username.encode() + b"\x00" + password.encode()
