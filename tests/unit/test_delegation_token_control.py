"""The controller's delegation tokens (Kafka's DelegationTokenControlManager) and their
records in the metadata image.

Expectations are Kafka's: the record layout of DelegationTokenRecord.json (api key 10)
and RemoveDelegationTokenRecord.json (26), the HMAC as ``DelegationTokenManager.createHmac``
computes it (HmacSHA512 of the token id keyed with the secret, checked here with
hashlib), the defaults of DelegationTokenManagerConfigs, and the error codes and order of
checks of DelegationTokenControlManager and DelegationTokenRequestsTest.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import re
from typing import Any

import pytest

from ottla.common.principal import Principal
from ottla.controller.delegation_token_control import CreatedToken, TokenExpiry
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.security.delegation_token import describable, hmac_password
from ottla.timeline import SnapshotRegistry

SECRET = "testKey"
ALICE, BOB, CAROL = Principal("User", "alice"), Principal("User", "bob"), \
    Principal("User", "carol")
DAY = 24 * 60 * 60 * 1000
WEEK = 7 * DAY
NOW = 1_700_000_000_000


def controller(secret: str | None = SECRET, **kwargs: Any) -> QuorumController:
    return QuorumController(1, rng=random.Random(7), registry=SnapshotRegistry(),
                            delegation_token_secret_key=secret, **kwargs)


def apply(c: QuorumController, result: Any) -> Any:
    for record in result.records:
        c.replay(record)
    return result.response


def create(c: QuorumController, requester: Principal = ALICE, owner: Principal | None = None,
           renewers: tuple[Principal, ...] = (), max_lifetime_ms: int = -1,
           now: int = NOW) -> CreatedToken:
    return apply(c, c.delegation_tokens.create_token(requester, owner, list(renewers),
                                                     max_lifetime_ms, now))


def test_records_have_kafkas_layout() -> None:
    record = r.DelegationTokenRecord(owner="User:a", requester="User:b", renewers=("User:c",),
                                     issue_timestamp=1, max_timestamp=2,
                                     expiration_timestamp=3, token_id="t")
    # frame 1, api key 10, version 0, compact strings and array, int64s, no tagged fields
    assert r.encode(record) == bytes.fromhex(
        "010a00" "07557365723a61" "07557365723a62" "02" "07557365723a63"
        "0000000000000001" "0000000000000002" "0000000000000003" "0274" "00")
    assert r.decode(r.encode(record)) == record
    removal = r.RemoveDelegationTokenRecord(token_id="t")
    assert r.encode(removal) == bytes.fromhex("011a00" "0274" "00")


def test_create_issues_a_token_with_kafkas_defaults_and_hmac() -> None:
    c = controller()
    created = create(c, renewers=(BOB,))
    assert created.error == ErrorCode.none
    assert (created.owner, created.requester) == (ALICE, ALICE)
    assert created.issue_timestamp == NOW
    assert created.expiry_timestamp == NOW + DAY
    assert created.max_timestamp == NOW + WEEK
    assert len(created.token_id) == 22 and not created.token_id.startswith("-")
    assert created.hmac == hmac.new(SECRET.encode(), created.token_id.encode(),
                                    hashlib.sha512).digest()
    token = c.image.delegation_tokens[created.token_id]
    assert token.owner == ALICE and token.renewers == (BOB,)
    assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == \
        (NOW, NOW + DAY, NOW + WEEK)


def test_create_for_another_owner_and_a_shorter_lifetime() -> None:
    c = controller()
    created = create(c, requester=ALICE, owner=CAROL, max_lifetime_ms=60_000)
    assert (created.owner, created.requester) == (CAROL, ALICE)
    assert created.max_timestamp == NOW + 60_000
    assert created.expiry_timestamp == NOW + 60_000  # never past the maximum lifetime
    longer = create(c, max_lifetime_ms=30 * DAY)  # capped by the configured maximum
    assert longer.max_timestamp == NOW + WEEK


def test_configured_lifetimes() -> None:
    c = controller(delegation_token_max_lifetime_ms=10_000,
                   delegation_token_expiry_time_ms=4_000)
    created = create(c)
    assert (created.expiry_timestamp, created.max_timestamp) == (NOW + 4_000, NOW + 10_000)


@pytest.mark.parametrize("secret", [None, ""])
def test_tokens_disabled_without_a_secret_key(secret: str | None) -> None:
    c = controller(secret)
    created = create(c)
    assert created.error == ErrorCode.delegation_token_auth_disabled
    assert created.token_id == "" and created.hmac == b"" and created.issue_timestamp == 0
    assert not c.image.delegation_tokens
    for call in (c.delegation_tokens.renew_token, c.delegation_tokens.expire_token):
        result = call(ALICE, b"x", -1, NOW)
        assert result.records == []
        assert result.response == TokenExpiry(ErrorCode.delegation_token_auth_disabled)


def test_renewers_must_be_users() -> None:
    c = controller()
    created = create(c, renewers=(BOB, Principal("Group", "renewer4")))
    assert created.error == ErrorCode.invalid_principal_type
    assert not c.image.delegation_tokens


def test_renew_extends_the_expiry_up_to_the_maximum_lifetime() -> None:
    c = controller(delegation_token_max_lifetime_ms=3 * DAY)
    created = create(c, renewers=(BOB,))
    later = NOW + DAY // 2
    renewed = apply(c, c.delegation_tokens.renew_token(ALICE, created.hmac, -1, later))
    assert renewed == TokenExpiry(ErrorCode.none, later + DAY)
    assert c.image.delegation_tokens[created.token_id].expiry_timestamp == later + DAY
    # a renewer may renew; a shorter period is taken
    short = apply(c, c.delegation_tokens.renew_token(BOB, created.hmac, 1000, later))
    assert short == TokenExpiry(ErrorCode.none, later + 1000)
    # a longer one is capped by delegation.token.expiry.time.ms, then the max lifetime
    capped = apply(c, c.delegation_tokens.renew_token(ALICE, created.hmac, 5 * DAY,
                                                      later + 500))
    assert capped.expiry_timestamp == later + 500 + DAY
    apply(c, c.delegation_tokens.renew_token(ALICE, created.hmac, -1, NOW + 3 * DAY // 2))
    last = apply(c, c.delegation_tokens.renew_token(ALICE, created.hmac, -1,
                                                    NOW + 12 * DAY // 5))
    assert last == TokenExpiry(ErrorCode.none, NOW + 3 * DAY)  # the maximum lifetime


def test_renew_errors() -> None:
    c = controller()
    created = create(c, renewers=(BOB,))
    tokens = c.delegation_tokens
    assert tokens.renew_token(ALICE, b"not a token", -1, NOW).response == \
        TokenExpiry(ErrorCode.delegation_token_not_found)
    mismatch = tokens.renew_token(CAROL, created.hmac, -1, NOW)
    assert mismatch.records == [] and \
        mismatch.response == TokenExpiry(ErrorCode.delegation_token_owner_mismatch)
    # expiry is checked before ownership when renewing
    assert tokens.renew_token(CAROL, created.hmac, -1, NOW + DAY + 1).response == \
        TokenExpiry(ErrorCode.delegation_token_expired)


def test_expire_with_a_period_shortens_and_a_negative_one_removes() -> None:
    c = controller()
    created = create(c, renewers=(BOB,))
    tokens = c.delegation_tokens
    shortened = apply(c, tokens.expire_token(BOB, created.hmac, 5000, NOW + 10))
    assert shortened == TokenExpiry(ErrorCode.none, NOW + 5010)
    assert c.image.delegation_tokens[created.token_id].expiry_timestamp == NOW + 5010
    # ownership first: a stranger learns nothing of the expiry
    assert tokens.expire_token(CAROL, created.hmac, -1, NOW + 6000).response == \
        TokenExpiry(ErrorCode.delegation_token_owner_mismatch)
    # an expired token cannot be given a new expiry, but it can still be removed
    assert tokens.expire_token(ALICE, created.hmac, 1000, NOW + 6000).response == \
        TokenExpiry(ErrorCode.delegation_token_expired)
    result = tokens.expire_token(ALICE, created.hmac, -1, NOW + 6000)
    assert result.records == [r.RemoveDelegationTokenRecord(token_id=created.token_id)]
    assert apply(c, result) == TokenExpiry(ErrorCode.none, NOW + 6000)
    assert created.token_id not in c.image.delegation_tokens
    assert tokens.expire_token(ALICE, created.hmac, -1, NOW).response == \
        TokenExpiry(ErrorCode.delegation_token_not_found)
    assert tokens.renew_token(ALICE, created.hmac, -1, NOW).response == \
        TokenExpiry(ErrorCode.delegation_token_not_found)


def test_sweep_removes_tokens_past_expiry_or_max_lifetime() -> None:
    c = controller()
    short = create(c, max_lifetime_ms=1000)
    day = create(c)
    tokens = c.delegation_tokens
    assert tokens.sweep_expired_tokens(NOW + 1000).records == []  # not yet: strictly past
    swept = tokens.sweep_expired_tokens(NOW + 1001)
    assert swept.records == [r.RemoveDelegationTokenRecord(token_id=short.token_id)]
    apply(c, swept)
    assert list(c.image.delegation_tokens) == [day.token_id]
    apply(c, tokens.sweep_expired_tokens(NOW + DAY + 1))
    assert not c.image.delegation_tokens
    assert controller(None).delegation_tokens.sweep_expired_tokens(NOW).records == []


def test_tokens_replay_into_snapshots_and_deltas() -> None:
    c = controller()
    created = create(c, owner=CAROL, renewers=(BOB,))
    again = MetadataImage()
    delta = MetadataDelta()
    for record in c.image.to_records():
        delta.note(record, again)
        again.replay(record)
    assert again.delegation_tokens == dict(c.image.delegation_tokens)
    assert again.digest() == c.image.digest()
    assert delta.delegation_tokens == {created.token_id} and delta.changed


def test_describable_follows_kafkas_filter_token() -> None:
    c = controller()
    created = create(c, requester=ALICE, owner=CAROL, renewers=(BOB,))
    token = c.image.delegation_tokens[created.token_id]

    def no(_: object) -> bool:
        return False

    assert describable(CAROL, None, token, no, no)  # the owner
    assert describable(BOB, None, token, no, no)  # a renewer
    assert not describable(ALICE, None, token, no, no)  # the requester is neither
    assert describable(ALICE, None, token, lambda t: t == created.token_id, no)
    assert describable(ALICE, None, token, no, lambda p: p == CAROL)
    assert not describable(CAROL, [Principal("User", "unknown")], token, no, no)
    assert describable(ALICE, [BOB], token, no, lambda p: True)
    assert not describable(CAROL, [], token, no, no)


def test_hmac_password_is_base64() -> None:
    assert hmac_password(b"\x00\xff") == "AP8="


# --- the controller listener's handlers (Kafka's ControllerApis) -------------------------


def token_env(secret: str | None = SECRET) -> Any:
    from tests.unit.test_controller_apis import make_env
    env = make_env()
    env.controller.delegation_tokens.secret_key = secret
    env.services.config.values["delegation.token.secret.key"] = secret
    return env


async def token_ask(env: Any, api_key: int, version: int, body: dict[str, Any],
                    principal: Principal = ALICE, protocol: str = "SASL_PLAINTEXT",
                    forwarded: bool = False, raw: bool = False) -> Any:
    """The answer as a client reads it; ``raw``: as the handler gave it, once encoded
    (kio's reader refuses the -1 timestamps Kafka sends with these errors)."""
    from ottla.protocol.api import request_schema
    from ottla.protocol.messages import build
    from tests.unit.test_controller_apis import answer, as_read, context
    ctx = context(env, api_key, version)
    ctx.principal, ctx.security_protocol, ctx.forwarded = principal, protocol, forwarded
    req = build(request_schema(api_key, version), body)
    response = await answer(env, ctx, req)
    if raw:
        env.dispatcher.encode(ctx.header, response)
        return response
    return as_read(env, ctx, response)


def ms_of(value: Any) -> int:
    from ottla.protocol.messages import ms
    return ms(value)


CREATE = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
          "max_lifetime": -1}


async def test_create_renew_expire_describe_through_the_controller_listener() -> None:
    env = token_env()
    env.clock.now = NOW / 1000
    created = await token_ask(env, 38, 3, {**CREATE, "renewers": [
        {"principal_type": "User", "principal_name": "bob"}]})
    assert created.error_code == ErrorCode.none
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert created.token_requester_principal_name == "alice"
    assert ms_of(created.issue_timestamp) == NOW
    assert ms_of(created.expiry_timestamp) == NOW + DAY
    assert ms_of(created.max_timestamp) == NOW + WEEK
    assert created.hmac == hmac.new(SECRET.encode(), created.token_id.encode(),
                                    hashlib.sha512).digest()
    described = await token_ask(env, 41, 3, {"owners": None}, principal=BOB)
    assert described.error_code == ErrorCode.none
    [token] = described.tokens
    assert (token.token_id, token.hmac, token.principal_name) == \
        (created.token_id, created.hmac, "alice")
    assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]
    # carol neither owns nor renews it, and there is no authorizer to ask: shown to
    # everyone only because every check passes without one
    assert (await token_ask(env, 41, 3, {"owners": []})).tokens == ()
    renewed = await token_ask(env, 39, 2, {"hmac": created.hmac, "renew_period": 1000},
                              principal=BOB)
    assert (renewed.error_code, ms_of(renewed.expiry_timestamp)) == \
        (ErrorCode.none, NOW + 1000)
    mismatch = await token_ask(env, 40, 2, {"hmac": created.hmac,
                                            "expiry_time_period": -1}, principal=CAROL)
    assert mismatch.error_code == ErrorCode.delegation_token_owner_mismatch
    expired = await token_ask(env, 40, 2, {"hmac": created.hmac, "expiry_time_period": -1})
    assert (expired.error_code, ms_of(expired.expiry_timestamp)) == (ErrorCode.none, NOW)
    assert not env.image.delegation_tokens
    gone = await token_ask(env, 39, 2, {"hmac": created.hmac, "renew_period": -1})
    assert gone.error_code == ErrorCode.delegation_token_not_found


@pytest.mark.parametrize(("principal", "protocol", "forwarded", "allowed"), [
    (ALICE, "PLAINTEXT", False, False),
    (Principal(), "SSL", False, False),  # SSL without a client certificate
    (ALICE, "SSL", False, True),
    (ALICE, "SASL_PLAINTEXT", False, True),
    (Principal("User", "alice", token_authenticated=True), "SASL_PLAINTEXT", False, False),
    (Principal("User", "alice", token_authenticated=True), "PLAINTEXT", True, False),
    (ALICE, "PLAINTEXT", True, True),  # forwarded: the broker's hop does not count
])
async def test_who_may_ask_for_tokens(principal: Principal, protocol: str, forwarded: bool,
                                      allowed: bool) -> None:
    env = token_env()
    created = await token_ask(env, 38, 3, CREATE, principal, protocol, forwarded, raw=True)
    if not allowed:
        assert created["error_code"] == ErrorCode.delegation_token_request_not_allowed
        assert created["issue_timestamp"] == created["expiry_timestamp"] == \
            created["max_timestamp"] == -1
        assert created["token_id"] == "" and created["hmac"] == b""
    else:
        assert created["error_code"] == ErrorCode.none
    for key, field in ((39, "renew_period"), (40, "expiry_time_period")):
        answer = await token_ask(env, key, 2, {"hmac": b"x", field: -1}, principal, protocol,
                                 forwarded, raw=True)
        assert answer["error_code"] == (ErrorCode.delegation_token_not_found if allowed
                                        else ErrorCode.delegation_token_request_not_allowed)
        if not allowed:
            assert answer["expiry_timestamp"] == -1
    described = await token_ask(env, 41, 3, {"owners": None}, principal, protocol,
                                forwarded)
    assert described.error_code == (ErrorCode.none if allowed
                                    else ErrorCode.delegation_token_request_not_allowed)


async def test_disabled_without_the_secret_key_on_the_wire() -> None:
    env = token_env(None)
    created = await token_ask(env, 38, 3, CREATE)
    assert created.error_code == ErrorCode.delegation_token_auth_disabled
    assert ms_of(created.issue_timestamp) == 0  # the control manager's answer, not -1
    described = await token_ask(env, 41, 3, {"owners": None})
    assert described.error_code == ErrorCode.delegation_token_auth_disabled


async def test_v1_create_has_no_owner_or_requester() -> None:
    env = token_env()
    created = await token_ask(env, 38, 1, {"renewers": [], "max_lifetime": 60_000})
    assert created.error_code == ErrorCode.none and created.principal_name == "alice"
    described = await token_ask(env, 41, 1, {"owners": None})
    assert [t.token_id for t in described.tokens] == [created.token_id]


# --- authenticating with a token: SCRAM with tokenauth=true (KIP-48) ----------------------


def authenticate(image: MetadataImage, username: str, password: str, token_auth: bool,
                 secret: str | None = SECRET, mechanism: str = "SCRAM-SHA-512",
                 now_ms: int = NOW) -> Any:
    """A SASL_PLAINTEXT listener's authenticator over ``image``, fed a SCRAM exchange:
    the authenticator, done or failed."""
    from ottla.common.server_config import KafkaConfig, Listener, dev_defaults
    from ottla.security.scram import ScramClient, ScramMechanism
    from ottla.server.listener_security import listener_security
    props = {**dev_defaults(), "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    if secret is not None:
        props["delegation.token.secret.key"] = secret
    security = listener_security(KafkaConfig(props), Listener(
        "SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT"), lambda: image)
    assert security.new_authenticator is not None
    auth = security.new_authenticator()
    assert auth.handshake(mechanism, 1).body["error_code"] == ErrorCode.none
    client = ScramClient(ScramMechanism.from_name(mechanism), username, password,
                         token_auth=token_auth)
    first = auth.authenticate(client.first(), now_ms)
    if first.close:
        return auth
    final = auth.authenticate(client.final(first.body["auth_bytes"]), now_ms)
    if not final.close:
        client.verify(final.body["auth_bytes"])  # the server knows the credential too
    return auth


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_authenticates_its_owner(mechanism: str) -> None:
    c = controller()
    created = create(c, requester=ALICE, owner=CAROL)
    auth = authenticate(c.image, created.token_id, hmac_password(created.hmac), True,
                        mechanism=mechanism)
    assert auth.authenticated
    assert auth.principal == CAROL and auth.principal.token_authenticated
    assert auth.session_expires_ms == created.expiry_timestamp  # the session ends with it


def test_token_authentication_fails_as_kafkas_does() -> None:
    c = controller()
    created = create(c)
    password = hmac_password(created.hmac)
    assert not authenticate(c.image, created.token_id, "wrong", True).authenticated
    assert not authenticate(c.image, "no-such-token", password, True).authenticated
    # without tokenauth the token id is just an unknown user
    assert not authenticate(c.image, created.token_id, password, False).authenticated
    # a node without the secret key knows no tokens
    assert not authenticate(c.image, created.token_id, password, True,
                            secret=None).authenticated
    apply(c, c.delegation_tokens.expire_token(ALICE, created.hmac, -1, NOW))
    assert not authenticate(c.image, created.token_id, password, True).authenticated


def test_a_session_on_an_expired_token_ends_at_once() -> None:
    c = controller()
    created = create(c, max_lifetime_ms=1000)
    auth = authenticate(c.image, created.token_id, hmac_password(created.hmac), True,
                        now_ms=NOW + 5000)  # expired, not swept yet: Kafka's session is 0
    assert auth.session_expires_ms == NOW + 5000
    assert auth.expired(NOW + 5001)


# --- ottla delegation-tokens -----------------------------------------------------------


class OneAnswer:
    """Stands in for the blocking client: answers the one request it is sent with a
    response frame as a broker encodes it."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.api_key = self.version = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        self.api_key, self.version = api_key, version
        return 7

    def recv_frame(self) -> bytes:
        from ottla.protocol.api import response_schema
        from ottla.protocol.codec import RequestHeader, encode_response
        from ottla.protocol.messages import build
        header = RequestHeader(self.api_key, self.version, 7, "c", 0)
        return encode_response(header, build(response_schema(self.api_key, self.version),
                                             self.response))[4:]


@pytest.mark.parametrize(("argv", "message"), [
    (["--create", "--renew"], "exactly one action"),
    (["--describe", "--bootstrap-server", "b"], '"[command-config]"'),
    (["--create", "--bootstrap-server", "b", "--command-config", "c"],
     '"[max-life-time-period]"'),
    (["--renew", "--bootstrap-server", "b", "--command-config", "c", "--hmac", "x",
      "--renew-time-period", "1", "--owner-principal", "User:a"],
     "can't be used with option \"[owner-principal]\""),
])
def test_the_tools_checks_are_kafkas(argv: list[str], message: str) -> None:
    from ottla.cli import delegation_tokens
    from ottla.cli.main import build_parser
    args = build_parser().parse_args(["delegation-tokens", *argv])
    with pytest.raises(delegation_tokens.UsageError, match=re.escape(message)):
        delegation_tokens.check_args(args)


def test_the_tool_reports_an_error_sent_with_kafkas_error_timestamps() -> None:
    """Brokers send -1 timestamps with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, which kio's
    reader refuses: the tool still names the admin client's exception."""
    from ottla.broker.handlers.delegation_tokens import created_response
    from ottla.cli import delegation_tokens
    from ottla.protocol.api import ApiKey
    client = OneAnswer(created_response(ErrorCode.delegation_token_request_not_allowed,
                                        ALICE, ALICE))
    with pytest.raises(delegation_tokens.TokenError) as raised:
        delegation_tokens._call(client, ApiKey.CREATE_DELEGATION_TOKEN, {})  # type: ignore[arg-type]
    assert str(raised.value).startswith(
        "org.apache.kafka.common.errors.UnsupportedByAuthenticationException: "
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL")
