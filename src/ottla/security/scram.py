"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them (KIP-84).

A user's credential is what the metadata log keeps (UserScramCredentialRecord): the salt,
the iteration count and the two keys derived from the password, never the password. The
server side of an exchange is ``ScramServer``, a state machine fed the client's messages;
``ScramClient`` is the other side, for inter-broker connections and tests.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from ottla.common.principal import Principal
from ottla.security.errors import SaslAuthenticationFailed

MIN_ITERATIONS = 4096
"""Kafka refuses fewer (ScramMechanism.minIterations)."""
MAX_ITERATIONS = 16384
"""Kafka refuses more in AlterUserScramCredentials (ScramMechanism.maxIterations)."""
DEFAULT_ITERATIONS = 4096
"""What kafka-configs and kafka-storage use when ``iterations`` is not given."""


class ScramMechanism(enum.IntEnum):
    """The mechanism's number in the wire protocol and the metadata records."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name (``SCRAM-SHA-256``)."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {ScramMechanism.SCRAM_SHA_256: "sha256",
                ScramMechanism.SCRAM_SHA_512: "sha512"}[self]

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """``SCRAM-SHA-256`` or ``SCRAM_SHA_256``; UNKNOWN for anything else."""
        try:
            found = cls[name.upper().replace("-", "_")]
        except KeyError:
            return cls.UNKNOWN
        return found


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes,
                    iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _hash(mechanism, client_key),
                           _hmac(mechanism, salted, b"Server Key"), iterations)


def credential_from_password(mechanism: ScramMechanism, password: str,
                             salt: bytes | None = None,
                             iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """The credential a password gives (a random 32-byte salt unless one is given, as
    Kafka's ScramFormatter)."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt,
                                                             iterations), salt, iterations)


class ScramError(SaslAuthenticationFailed):
    """The exchange failed: the client gets SASL_AUTHENTICATION_FAILED."""


def _attributes(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or (len(key) != 1 and key != "tokenauth"):
            raise ScramError(f"Invalid SCRAM message: {message!r}")
        found[key] = value
    return found


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username in SCRAM client first message")
    return name.replace("=2C", ",").replace("=3D", "=")


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as e:
        raise ScramError("Invalid base64 in SCRAM message") from e


CredentialLookup = Callable[[str, bool], ScramCredential | None]
"""(user name, whether it is a delegation token id) -> the credential, or None."""


@dataclass(frozen=True, slots=True)
class TokenOwner:
    """Whom a delegation token authenticates (its owner) and until when."""

    owner: Principal
    expiry_ms: int


TokenOwnerLookup = Callable[[str], TokenOwner | None]
"""A token id -> its owner and expiry, or None for no such token."""


class ScramServer:
    """One SCRAM exchange on the server: ``respond`` takes each client message and
    returns the server's; ``complete`` once the client proved it knows the password.

    With Kafka's extension ``tokenauth=true`` the user name is a delegation token's id
    and the password its HMAC (KIP-48): the exchange then authenticates the token's
    owner (``principal``), flagged token-authenticated, and the session ends no later
    than the token expires (``credential_expires_ms``)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup,
                 nonce: Callable[[], str] | None = None,
                 token_owner: TokenOwnerLookup | None = None) -> None:
        self.scram = mechanism
        self.mechanism = mechanism.mechanism_name
        self.lookup = lookup
        self.token_owner = token_owner
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self.username: str | None = None
        self.token_auth = False
        self.principal: Principal | None = None
        """Who authenticated (None until then)."""
        self.credential_expires_ms: int | None = None
        self.complete = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_sent = ""
        self._step = 0

    @property
    def authorization_id(self) -> str:
        return self.username or ""

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScramError("SCRAM messages are UTF-8") from e
        if self._step == 0:
            self._step = 1
            return self._first(text).encode()
        if self._step == 1:
            self._step = 2
            return self._final(text).encode()
        raise ScramError("SCRAM exchange already complete")

    def _first(self, text: str) -> str:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding: "y" or "p" refused)
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag != "n":
            raise ScramError("Invalid SCRAM client first message")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramError("Invalid SCRAM client first message")
        self.username = _unescape(attributes["n"])
        if authzid and _unescape(authzid.removeprefix("a=")) != self.username:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        self.token_auth = attributes.get("tokenauth", "false").lower() == "true"
        self._credential = self.lookup(self.username, self.token_auth)
        if self.token_auth:
            token = self.token_owner(self.username) if self.token_owner else None
            if token is None:
                raise ScramError("Token Authentication failed: Invalid tokenId")
            self.principal = Principal("User", token.owner.name, token_authenticated=True)
            self.credential_expires_ms = token.expiry_ms
        else:
            self.principal = Principal("User", self.username)
        if self._credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._client_first_bare = bare
        self._nonce_sent = attributes["r"] + self._nonce()
        self._server_first = (f"r={self._nonce_sent},s={_b64(self._credential.salt)},"
                              f"i={self._credential.iterations}")
        self._gs2 = text[:len(text) - len(bare)]
        return self._server_first

    def _final(self, text: str) -> str:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce_sent:
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        if _unb64(attributes.get("c", "")) != self._gs2.encode():
            raise ScramError("Invalid SCRAM client final message: channel binding")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = _hmac(self.scram, credential.stored_key, auth_message.encode())
        client_proof = _unb64(proof)
        if len(client_proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        if not hmac.compare_digest(_hash(self.scram, client_key), credential.stored_key):
            raise ScramError("Invalid client credentials")
        self.complete = True
        server_signature = _hmac(self.scram, credential.server_key, auth_message.encode())
        return f"v={_b64(server_signature)}"


class ScramClient:
    """The client side of an exchange: ``first()``, then ``final(server_first)``, then
    ``verify(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str,
                 token_auth: bool = False, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.token_auth = token_auth
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={_escape(username)},r={self._nonce}" + \
            (",tokenauth=true" if token_auth else "")
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attributes = _attributes(server_first.decode())
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce):
            raise ScramError("Invalid server nonce")
        salt, iterations = _unb64(attributes["s"]), int(attributes["i"])
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._bare},{server_first.decode()},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _hash(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(
            self.mechanism, _hmac(self.mechanism, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise ScramError(f"SCRAM server error: {attributes['e']}")
        if not hmac.compare_digest(_unb64(attributes.get("v", "")), self._server_signature):
            raise ScramError("Invalid server signature")
