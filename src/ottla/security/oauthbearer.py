"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer, sans I/O.

The client's one message carries a bearer token (``n,,\\x01auth=Bearer <jwt>\\x01\\x01``).
A valid token makes its subject the principal; an invalid one gets RFC 7628's error
challenge (``{"status":"invalid_token"}``), which the client acknowledges with a single
``\\x01`` before the exchange fails, as in Kafka. Two validators, as Kafka's two callback
handlers: ``unsecured_validator`` (OAuthBearerUnsecuredValidatorCallbackHandler, Kafka's
default, for development: unsigned ``alg: none`` tokens) and ``jwt_validator``
(OAuthBearerValidatorCallbackHandler: signed tokens checked against the keys of a JWKS,
with the expected audience and issuer). A token's expiry bounds the session when
``connections.max.reauth.ms`` is on (KIP-368).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jwt

from ottla.security.errors import SaslAuthenticationFailed

_AUTH = re.compile(r"^auth=Bearer +([-_.a-zA-Z0-9]+=*)$")
KVSEP = "\x01"


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal: str
    expires_ms: int
    scope: tuple[str, ...] = ()


class InvalidToken(Exception):
    """Why a token was refused (for the log; the client sees SASL_AUTHENTICATION_FAILED)."""


TokenValidator = Callable[[str], ValidatedToken]


def _claims_unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("the token is not a JWS compact serialization (3 parts)")
    try:
        header, claims = (json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
                          for p in parts[:2])
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidToken(f"the token cannot be decoded: {e}") from e
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("the token's header and claims must be JSON objects")
    return header, claims


def _scope(claims: dict[str, Any], name: str) -> tuple[str, ...]:
    value = claims.get(name)
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


def _times(claims: dict[str, Any], now_ms: int, skew_ms: int, require_iat: bool) -> int:
    exp = claims.get("exp")
    if not isinstance(exp, int | float):
        raise InvalidToken("the token has no exp claim")
    if exp * 1000 + skew_ms <= now_ms:
        raise InvalidToken("the token has expired")
    iat = claims.get("iat")
    if iat is None:
        if require_iat:
            raise InvalidToken("the token has no iat claim")
    elif not isinstance(iat, int | float) or iat * 1000 - skew_ms > now_ms:
        raise InvalidToken("the token's iat is in the future")
    return int(exp * 1000)


def unsecured_validator(now_ms: Callable[[], int], principal_claim: str = "sub",
                        scope_claim: str = "scope", required_scope: Sequence[str] = (),
                        skew_ms: int = 0) -> TokenValidator:
    """Kafka's unsecured validator: ``alg: none``, no signature, a principal claim and an
    expiry in the future (``unsecuredValidator*`` JAAS options)."""
    def validate(token: str) -> ValidatedToken:
        header, claims = _claims_unverified(token)
        if header.get("alg") != "none":
            raise InvalidToken("an unsecured token must have alg none")
        principal = claims.get(principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"the token has no {principal_claim} claim")
        expires = _times(claims, now_ms(), skew_ms, require_iat=False)
        scope = _scope(claims, scope_claim)
        missing = [s for s in required_scope if s not in scope]
        if missing:
            raise InvalidToken(f"the token's scope lacks {missing}")
        return ValidatedToken(principal, expires, scope)
    return validate


def jwt_validator(keys: Callable[[], jwt.PyJWKSet], now_ms: Callable[[], int],
                  audience: Sequence[str] = (), issuer: str | None = None,
                  sub_claim: str = "sub", scope_claim: str = "scope",
                  skew_ms: int = 30_000) -> TokenValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: a signature by a key of the JWKS
    (chosen by ``kid``; never ``alg: none``), ``exp`` and ``iat`` required, the audience
    one of ``audience`` and the issuer ``issuer`` where configured, and a subject."""
    def validate(token: str) -> ValidatedToken:
        header, _ = _claims_unverified(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise InvalidToken("the token is not signed")
        key_set = keys()
        kid = header.get("kid")
        candidates = [k for k in key_set.keys if kid is None or k.key_id == kid]
        if not candidates:
            raise InvalidToken(f"no key of the JWKS has kid {kid!r}")
        claims: dict[str, Any] | None = None
        for key in candidates:
            try:
                claims = jwt.decode(token, key=key.key, algorithms=[algorithm],
                                    options={"verify_exp": False, "verify_iat": False,
                                             "verify_nbf": False, "verify_aud": False,
                                             "verify_iss": False})
                break
            except jwt.PyJWTError as e:
                error = e
        if claims is None:
            raise InvalidToken(f"the token's signature does not verify: {error}")
        expires = _times(claims, now_ms(), skew_ms, require_iat=True)
        if audience:
            found = claims.get("aud")
            given = [found] if isinstance(found, str) else list(found or [])
            if not set(given) & set(audience):
                raise InvalidToken(f"the token's audience {given} is not {list(audience)}")
        if issuer is not None and claims.get("iss") != issuer:
            raise InvalidToken(f"the token's issuer {claims.get('iss')!r} is not {issuer!r}")
        principal = claims.get(sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"the token has no {sub_claim} claim")
        return ValidatedToken(principal, expires, _scope(claims, scope_claim))
    return validate


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, validate: TokenValidator) -> None:
        self.validate = validate
        self.complete = False
        self.authorization_id = ""
        self.credential_expires_ms: int | None = None
        self.failure: str | None = None
        """Why the token was refused, once the error challenge was sent."""

    def respond(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("OAUTHBEARER exchange already complete")
        if self.failure is not None:
            # The client's answer to the error challenge (a lone kvsep): the end.
            raise SaslAuthenticationFailed(f"Authentication failed: {self.failure}")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client response") from e
        authzid, token = _parse(text)
        try:
            validated = self.validate(token)
        except InvalidToken as e:
            self.failure = str(e)
            return json.dumps({"status": "invalid_token"}, separators=(",", ":")).encode()
        if authzid and authzid != validated.principal:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({validated.principal})")
        self.authorization_id = validated.principal
        self.credential_expires_ms = validated.expires_ms
        self.complete = True
        return b""


def _parse(text: str) -> tuple[str, str]:
    """(authzid, token) of a client's initial response:
    ``gs2-header kvsep *(key=value kvsep) kvsep``."""
    header, sep, rest = text.partition(KVSEP)
    if not sep or (not rest.endswith(KVSEP + KVSEP) and rest != KVSEP):
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
    flag, comma, authz = header.partition(",")
    if flag != "n" or not comma or not authz.endswith(","):
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
    authz = authz[:-1]
    authzid = authz[2:] if authz.startswith("a=") else ""
    token = None
    for pair in rest[:-2].split(KVSEP):
        match = _AUTH.match(pair)
        if match:
            token = match.group(1)
    if token is None:
        raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: no "
                                       "bearer token")
    return authzid, token


def client_first_message(token: str, authzid: str = "") -> bytes:
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}{KVSEP}auth=Bearer {token}{KVSEP}{KVSEP}".encode()
