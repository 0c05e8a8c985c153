"""SASL/OAUTHBEARER as Kafka's OAuthBearerSaslServer with its two validators: signed JWTs
against a JWKS (expected audience and issuer, exp and iat required, never alg none) and
the unsecured development mode (alg none, a sub claim, an expiry)."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from ottla.protocol.errors import ErrorCode
from ottla.security.errors import SaslAuthenticationFailed
from ottla.security.oauthbearer import (
    InvalidToken,
    OAuthBearerServer,
    client_first_message,
    jwt_validator,
    unsecured_validator,
)
from ottla.security.sasl import Mechanism, SaslAuthenticator

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


def now_ms() -> int:
    return NOW_MS


KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks(*keys: tuple[str, rsa.RSAPrivateKey]) -> jwt.PyJWKSet:
    entries = []
    for kid, key in keys:
        entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        entries.append({**entry, "kid": kid, "alg": "RS256", "use": "sig"})
    return jwt.PyJWKSet.from_dict({"keys": entries})


def signed(claims: dict, key: rsa.RSAPrivateKey = KEY, kid: str = "k1") -> str:
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def unsigned(claims: dict) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part(claims)}."


GOOD = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 600, "aud": "ottla",
        "iss": "https://issuer.test", "scope": "kafka"}


def validator(**kwargs):
    return jwt_validator(lambda: jwks(("k1", KEY)), now_ms, audience=["ottla"],
                         issuer="https://issuer.test", **kwargs)


def test_a_token_signed_by_a_key_of_the_jwks_names_the_principal() -> None:
    validated = validator()(signed(GOOD))
    assert (validated.principal, validated.expires_ms, validated.scope) == \
        ("alice", (NOW_S + 600) * 1000, ("kafka",))


@pytest.mark.parametrize("token,why", [
    (signed(GOOD, OTHER), "signature"),
    (signed(GOOD, kid="unknown"), "kid"),
    (signed({**GOOD, "exp": NOW_S - 60}), "expired"),
    (signed({k: v for k, v in GOOD.items() if k != "exp"}), "exp"),
    (signed({k: v for k, v in GOOD.items() if k != "iat"}), "iat"),
    (signed({**GOOD, "aud": "someone-else"}), "audience"),
    (signed({**GOOD, "iss": "https://evil.test"}), "issuer"),
    (signed({k: v for k, v in GOOD.items() if k != "sub"}), "sub"),
    (unsigned(GOOD), "not signed"),
    ("not.a-token", "3 parts"),
    ("bm90.anNvbg.x", "decoded"),
])
def test_a_token_that_should_not_pass_does_not(token, why) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator()(token)


def test_clock_skew_is_allowed_as_configured() -> None:
    late = signed({**GOOD, "exp": NOW_S - 10})
    assert validator(skew_ms=30_000)(late).principal == "alice"
    with pytest.raises(InvalidToken):
        validator(skew_ms=0)(late)


def test_the_unsecured_validator_takes_unsigned_tokens_only() -> None:
    validate = unsecured_validator(now_ms)
    assert validate(unsigned({"sub": "bob", "exp": NOW_S + 60})).principal == "bob"
    with pytest.raises(InvalidToken, match="alg none"):
        validate(signed(GOOD))
    with pytest.raises(InvalidToken, match="expired"):
        validate(unsigned({"sub": "bob", "exp": NOW_S - 1}))
    scoped = unsecured_validator(now_ms, required_scope=["admin"])
    with pytest.raises(InvalidToken, match="scope"):
        scoped(unsigned({"sub": "bob", "exp": NOW_S + 60, "scope": "read"}))


def test_the_exchange_as_kafkas_server() -> None:
    server = OAuthBearerServer(validator())
    assert server.respond(client_first_message(signed(GOOD))) == b""
    assert server.complete and server.authorization_id == "alice"
    # A refused token gets RFC 7628's error challenge; the client's kvsep ends it.
    refused = OAuthBearerServer(validator())
    challenge = refused.respond(client_first_message(signed(GOOD, OTHER)))
    assert json.loads(challenge) == {"status": "invalid_token"}
    with pytest.raises(SaslAuthenticationFailed):
        refused.respond(b"\x01")
    with pytest.raises(SaslAuthenticationFailed, match="different from the token"):
        OAuthBearerServer(validator()).respond(client_first_message(signed(GOOD), "mallory"))
    for bad in (b"n,,auth=Bearer x", b"y,,\x01auth=Bearer x\x01\x01", b"n,,\x01\x01"):
        with pytest.raises(SaslAuthenticationFailed):
            OAuthBearerServer(validator()).respond(bad)


def test_with_reauth_the_token_expiry_bounds_the_session() -> None:
    auth = SaslAuthenticator({"OAUTHBEARER": Mechanism(lambda: OAuthBearerServer(
        validator()))}, reauth_ms=3_600_000)
    auth.handshake("OAUTHBEARER", 1)
    answer = auth.authenticate(client_first_message(signed(GOOD)), NOW_MS)
    assert answer.body["error_code"] == ErrorCode.none
    assert answer.body["session_lifetime_ms"] == 600_000  # the token's 10 minutes
    assert auth.expired(NOW_MS + 600_001)


def test_the_session_runs_on_the_session_clock_whatever_the_wall_clock_does() -> None:
    """The token's remaining life (its expiry less the wall clock) is counted on the
    session clock the connection gives (monotonic, Kafka's nanoTime): a later step of the
    broker's wall clock neither ends the session early nor prolongs it."""
    auth = SaslAuthenticator({"OAUTHBEARER": Mechanism(lambda: OAuthBearerServer(
        validator()))}, reauth_ms=3_600_000)
    auth.handshake("OAUTHBEARER", 1)
    answer = auth.authenticate(client_first_message(signed(GOOD)), NOW_MS, session_ms=5_000)
    assert answer.body["session_lifetime_ms"] == 600_000
    assert not auth.expired(605_000) and auth.expired(605_001)


def test_a_real_clock_token_round_trip() -> None:
    """The validator against the wall clock, as the node runs it."""
    now = int(time.time())
    validate = jwt_validator(lambda: jwks(("k1", KEY)), lambda: int(time.time() * 1000))
    assert validate(signed({"sub": "carol", "iat": now, "exp": now + 60})).principal == \
        "carol"
