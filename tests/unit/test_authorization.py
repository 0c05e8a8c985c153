"""Authorization of requests against the ACLs, as Kafka's KafkaApis and ControllerApis
authorize them (``tests/authorization_table.py`` is the specification).

The node's authorizer follows the image's ACLs (``MetadataPublisher``); requests a broker
forwards carry the client's principal in their Envelope, which the controller authorizes
the inner request with.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from kio.serial import entity_writer
from kio.serial.errors import OutOfBoundValue

from ottla.broker.handlers import broker_apis, forwarding
from ottla.common.principal import (
    Principal,
    PrincipalDeserializationError,
    deserialize_principal,
    serialize_principal,
)
from ottla.metadata import records as r
from ottla.metadata.bootstrap import encode_snapshot
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import RequestHeader, encode_request
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch
from ottla.protocol.requests import RequestContext
from ottla.raft.messages import Committed, Entry, Snapshot
from ottla.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ottla.security.authorizer import StandardAuthorizer
from ottla.security.delegation_token import token_hmac
from ottla.server.metadata_publisher import MetadataPublisher
from tests import authorization_table as table
from tests.unit import test_broker_handlers as broker_tests
from tests.unit import test_controller_apis as controller_tests

ALICE = Principal("User", "alice")
HOST = "10.0.0.9"


def acl_record(acl_id: uuid.UUID, resource_type: ResourceType, name: str,
               operation: AclOperation, principal: str = "User:alice",
               pattern: PatternType = PatternType.LITERAL,
               permission: AclPermissionType = AclPermissionType.ALLOW
               ) -> r.AccessControlEntryRecord:
    return r.AccessControlEntryRecord(
        id=acl_id, resource_type=resource_type, resource_name=name, pattern_type=pattern,
        principal=principal, host="*", operation=operation, permission_type=permission)


# --- the principal in an Envelope ----------------------------------------------------------

def test_a_principal_is_serialized_as_kafkas_default_principal_data() -> None:
    out = io.BytesIO()
    entity_writer(DefaultPrincipalData)(out, DefaultPrincipalData(
        type_="User", name="CN=alice,O=acme", token_authenticated=False))
    assert serialize_principal(Principal("User", "CN=alice,O=acme")) == \
        b"\x00\x00" + out.getvalue()  # Kafka's version prefix, then the message
    assert deserialize_principal(b"\x00\x00" + out.getvalue()) == \
        Principal("User", "CN=alice,O=acme")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01\x05User\x06alice\x00\x00",
                                  b"\x00\x00\x05User", b"\x00\x00\x00\x06alice\x00\x00",
                                  b"\x00\x00\x05Us\xffr\x06alice\x00\x00"])
def test_bytes_that_are_no_principal_are_refused(data: bytes) -> None:
    with pytest.raises(PrincipalDeserializationError):
        deserialize_principal(data)


# --- the authorizer follows the image ------------------------------------------------------

class NoRaft:
    leader_id: int | None = None
    high_watermark = 0

    def create_snapshot(self, end_offset: int, data: Any) -> bool:
        return False


def test_until_it_has_caught_up_the_authorizer_allows_only_super_users() -> None:
    """Kafka's StandardAuthorizer before completeInitialLoad: the ACLs may not all be in,
    so nobody but a super user passes, even where no ACL is found and everyone would."""
    image = MetadataImage()
    authorizer = StandardAuthorizer(["User:admin"], allow_everyone_if_no_acl_found=True,
                                    loaded=False)
    raft = NoRaft()
    publisher = MetadataPublisher(image, raft, authorizer=authorizer)  # type: ignore[arg-type]
    anything = (HOST, AclOperation.WRITE, ResourceType.TOPIC, "orders")
    assert not authorizer.authorize(ALICE, *anything)
    assert authorizer.authorize(Principal("User", "admin"), *anything)
    publisher.on_committed(Committed(0, [Entry(1, [acl_record(
        uuid.UUID(int=1), ResourceType.TOPIC, "payments", AclOperation.READ)])]))
    assert not authorizer.loaded  # no leader known: its high watermark may be further on
    raft.leader_id, raft.high_watermark = 1, 2
    publisher.on_committed(Committed(1, [Entry(1, [r.NoOpRecord()])]))
    assert authorizer.loaded
    assert authorizer.authorize(ALICE, *anything)  # no ACL on it: everyone
    assert not authorizer.authorize(ALICE, HOST, AclOperation.WRITE, ResourceType.TOPIC,
                                    "payments")


def test_the_authorizer_follows_the_acls_committed_and_reloads_after_a_snapshot() -> None:
    image = MetadataImage()
    authorizer = StandardAuthorizer()
    publisher = MetadataPublisher(image, NoRaft(), authorizer=authorizer)  # type: ignore[arg-type]
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    publisher.on_committed(Committed(0, [Entry(1, [
        acl_record(first, ResourceType.TOPIC, "orders", AclOperation.READ),
        acl_record(second, ResourceType.GROUP, "billing", AclOperation.READ)], 2)]))
    assert authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.TOPIC, "orders")
    assert authorizer.acl_count == 2
    publisher.on_committed(Committed(2, [Entry(1, [
        r.RemoveAccessControlEntryRecord(id=first)])]))
    assert not authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.TOPIC,
                                    "orders")
    assert authorizer.acl_count == 1
    # A snapshot replaces everything: the authorizer loads the image's ACLs again.
    third = uuid.UUID(int=3)
    snapshot = encode_snapshot([acl_record(third, ResourceType.TOPIC, "pay",
                                           AclOperation.WRITE, pattern=PatternType.PREFIXED)],
                               0)
    publisher.on_committed(Committed(10, [], Snapshot(10, 1, snapshot)))
    assert authorizer.acl_count == 1
    assert authorizer.authorize(ALICE, HOST, AclOperation.WRITE, ResourceType.TOPIC,
                                "payments")
    assert not authorizer.authorize(ALICE, HOST, AclOperation.READ, ResourceType.GROUP,
                                    "billing")


# --- the table, API by API --------------------------------------------------------------------
#
# Each case is one request to the handler of one API on one listener, sent as alice from
# 10.0.0.9. ``checks`` are the table's checks this request meets (indexes into the
# handling's checks; None: all of them). The case is sent once with the ACLs of the first
# k of them for every k (the first grant of each: alice, any host, LITERAL): with k < all,
# Kafka's error of check k must be in the response (where the check has one); with all of
# them, no authorization error may be.

AUTH_ERRORS = frozenset({ErrorCode.topic_authorization_failed,
                         ErrorCode.group_authorization_failed,
                         ErrorCode.cluster_authorization_failed,
                         ErrorCode.transactional_id_authorization_failed,
                         ErrorCode.delegation_token_authorization_failed})
TOPIC_NAME, GROUP_NAME, TXN_ID = "orders", "billing", "tx-1"
TOKEN_ID = "token-of-the-tests"
NAMES = {table.Res.TOPIC: TOPIC_NAME, table.Res.GROUP: GROUP_NAME,
         table.Res.TRANSACTIONAL_ID: TXN_ID, table.Res.CLUSTER: CLUSTER_NAME,
         table.Res.USER: "User:bob", table.Res.DELEGATION_TOKEN: TOKEN_ID}


@dataclass
class Case:
    key: int
    listener: table.Listener
    version: int
    body: dict[str, Any] | Callable[[Any], Any]
    """The request, or what makes it from the environment (evaluated for each sending,
    awaited if need be)."""
    checks: tuple[int, ...] | None = None
    setup: Callable[[Any], Awaitable[None]] | None = None
    codes: Callable[[Any], set[int]] | None = None
    """The error codes of the response that count (all of them by default). For a
    ``FILTERED`` check, which has no error, they must report what it left out with an
    authorization error: with fewer ACLs than the check asks for, one must be there."""
    like: table.Listener | None = None
    """Check as Kafka does on this listener instead (an API Kafka does not serve here)."""
    grants: tuple[int, ...] | None = None
    """Which grant of each applicable check the ACLs give (the first by default)."""
    security_protocol: str | None = None
    """The security protocol of the connection the request comes on (None: the
    RequestContext's default, PLAINTEXT; the token APIs refuse it before any check)."""

    def context_options(self) -> dict[str, Any]:
        return {} if self.security_protocol is None else \
            {"security_protocol": self.security_protocol}

    @property
    def id(self) -> str:
        return f"{table.BY_KEY[self.key].name}-v{self.version}-{self.listener}"

    def applicable(self) -> list[table.Check]:
        handling = table.BY_KEY[self.key].on(self.like or self.listener)
        assert handling is not None
        checks = handling.checks
        return list(checks) if self.checks is None else [checks[i] for i in self.checks]


def acls_for(checks: list[table.Check], grants: tuple[int, ...] | None = None
             ) -> StandardAuthorizer:
    authorizer = StandardAuthorizer()
    for i, check in enumerate(checks):
        grant = check.any_of[grants[i] if grants is not None else 0]
        authorizer.add_acl(uuid.UUID(int=i + 1), AclBinding(
            ResourceType(int(grant.resource)), NAMES[grant.resource], PatternType.LITERAL,
            str(ALICE), "*", AclOperation(int(grant.op)), AclPermissionType.ALLOW))
    return authorizer


def error_codes(value: Any) -> set[int]:
    """Every ``*error_code`` field of a decoded response, however deep."""
    found: set[int] = set()
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name.endswith("error_code"):
                found.add(item)
            else:
                found |= error_codes(item)
    elif isinstance(value, tuple):
        for item in value:
            found |= error_codes(item)
    return found


async def run_case(case: Case, env: Any, send: Callable[..., Awaitable[Any]]) -> None:
    checks = case.applicable()
    if case.setup is not None:
        await case.setup(env)
    for k in range(len(checks) + 1):
        body: Any = case.body(env) if callable(case.body) else case.body
        if inspect.isawaitable(body):
            body = await body
        response = await send(env, case, body, acls_for(checks[:k], case.grants))
        codes = case.codes(response) if case.codes is not None else error_codes(response)
        if k < len(checks):
            if checks[k].error is not None:
                assert int(checks[k].error) in codes, \
                    f"{case.id}: with the ACLs of {k} check(s), {checks[k].error.name} " \
                    f"expected in {sorted(codes)}"
            elif checks[k].failure is table.Failure.FILTERED and case.codes is not None:
                assert codes & AUTH_ERRORS, \
                    f"{case.id}: with the ACLs of {k} check(s), nothing filtered out"
        else:
            assert not codes & AUTH_ERRORS, \
                f"{case.id}: refused with every ACL the table asks for: {sorted(codes)}"


# --- the controller listener ------------------------------------------------------------------

C = table.Listener.CONTROLLER
RAFT = controller_tests.RAFT_REQUESTS
CLUSTER_ID = controller_tests.CLUSTER_ID


async def send_to_controller(env: Any, case: Case, body: dict[str, Any],
                             authorizer: StandardAuthorizer) -> Any:
    header = RequestHeader(case.key, case.version, 7, "authorization-tests", 0)
    ctx = RequestContext(header, "CONTROLLER", "controller", HOST, 50000, principal=ALICE,
                         clock=env.clock, authorizer=authorizer, **case.context_options())
    req = build(request_schema(case.key, case.version), body)
    spec = env.dispatcher.table.get(case.key)
    assert spec is not None and spec.min_version <= case.version <= spec.max_version
    try:
        response = env.dispatcher.call(spec, ctx, req)
        if inspect.isawaitable(response):
            response = await response
    except KafkaError as e:
        response = env.dispatcher.failure(header, req, e)
    if isinstance(response, dict) and "from_raft" in response:
        return None  # handed to the Raft driver: not refused
    return read_or_built(lambda: controller_tests.as_read(env, ctx, response), case, response)


def read_or_built(read: Callable[[], Any], case: Case, response: Any) -> Any:
    """The response as the client reads it; if kio's reader refuses the -1 timestamps
    Kafka answers the delegation token APIs' errors with (``ErrorTimestamp``), as built
    (it was encoded before being read)."""
    try:
        return read()
    except OutOfBoundValue:
        if isinstance(response, dict):
            return build(response_schema(case.key, case.version), response)
        return response


async def a_live_broker(env: Any) -> None:
    await controller_tests.live_broker(env, 1)


async def a_topic(env: Any) -> None:
    await controller_tests.live_broker(env, 1)
    created = await controller_tests.create(env, controller_tests.new_topic(TOPIC_NAME))
    assert created.topics[0].error_code == ErrorCode.none


def resource(resource_type: ConfigResourceType, name: str, *configs: tuple[str, str]
             ) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "value": v} for k, v in configs]}


def incremental(resource_type: ConfigResourceType, name: str, *configs: tuple[str, str]
                ) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs]}


ACL_CREATION = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                "principal": "User:bob", "host": "*", "operation": 3, "permission_type": 3}
ACL_FILTER = {"resource_type_filter": 1, "resource_name_filter": None,
              "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
              "operation": 1, "permission_type": 1}
RETENTION = ("retention.ms", "1000")
QUOTA_ENTRY = {"entity": [{"entity_type": "user", "entity_name": "bob"}],
               "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}


def envelope_body(env: Any) -> dict[str, Any]:
    return {"request_data": controller_tests.create_request(
        controller_tests.new_topic(TOPIC_NAME)),
        "request_principal": serialize_principal(ALICE),
        "client_host_address": bytes([10, 0, 0, 9])}


# Delegation tokens: asked for over SASL_PLAINTEXT (PLAINTEXT is refused before any check,
# DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), with tokens enabled (delegation.token.secret.key)
# and TOKEN_ID in the image: owned by bob, renewable by alice (Renew, Expire: ownership,
# not ACLs, decides) or not (Describe: shown to alice only with DESCRIBE on it or
# DESCRIBE_TOKENS on bob), or owned by alice.

TOKEN_SECRET = "authorization-tests-secret"
TOKENS_ON = "SASL_PLAINTEXT"
DAY_MS = 24 * 60 * 60 * 1000
TOKEN_NOW_MS = 1_700_000_000_000
"""The clock of both environments (``controller_tests.Clock``, ``broker_tests.NOW_MS``)."""
TOKEN_HMAC = token_hmac(TOKEN_ID, TOKEN_SECRET)


def token_record(owner: str, *renewers: str) -> r.DelegationTokenRecord:
    return r.DelegationTokenRecord(
        owner=owner, requester=owner, renewers=renewers, issue_timestamp=TOKEN_NOW_MS,
        max_timestamp=TOKEN_NOW_MS + 7 * DAY_MS,
        expiration_timestamp=TOKEN_NOW_MS + DAY_MS, token_id=TOKEN_ID)


def controller_token(owner: str | None, *renewers: str
                     ) -> Callable[[Any], Awaitable[None]]:
    """A setup: tokens enabled on the controller (as ``test_delegation_token_control``'s
    environment enables them), and TOKEN_ID owned by ``owner`` (None: no token)."""
    async def setup(env: Any) -> None:
        env.controller.delegation_tokens.secret_key = TOKEN_SECRET
        env.services.config.values["delegation.token.secret.key"] = TOKEN_SECRET
        if owner is not None:
            env.channel.append([token_record(owner, *renewers)])
    return setup


def token_shown(response: Any) -> set[int]:
    """DescribeDelegationToken's codes: TOKEN_ID filtered out reads as
    DELEGATION_TOKEN_AUTHORIZATION_FAILED (Kafka sets no error: the token is not there)."""
    hidden = TOKEN_ID not in [t.token_id for t in response.tokens]
    return error_codes(response) | (
        {ErrorCode.delegation_token_authorization_failed} if hidden else set())


def create_token_for(owner: str | None) -> dict[str, Any]:
    return {"owner_principal_type": None if owner is None else "User",
            "owner_principal_name": owner, "renewers": [
                {"principal_type": "User", "principal_name": "carol"}],
            "max_lifetime": -1}


RENEW_TOKEN = {"hmac": TOKEN_HMAC, "renew_period": DAY_MS}
EXPIRE_TOKEN = {"hmac": TOKEN_HMAC, "expiry_time_period": DAY_MS}


CONTROLLER_CASES = [
    Case(ApiKey.FETCH, C, 17, RAFT[ApiKey.FETCH][1]),
    Case(ApiKey.VOTE, C, 2, RAFT[ApiKey.VOTE][1]),
    Case(ApiKey.BEGIN_QUORUM_EPOCH, C, 1, RAFT[ApiKey.BEGIN_QUORUM_EPOCH][1]),
    Case(ApiKey.END_QUORUM_EPOCH, C, 1, RAFT[ApiKey.END_QUORUM_EPOCH][1]),
    Case(ApiKey.FETCH_SNAPSHOT, C, 1, RAFT[ApiKey.FETCH_SNAPSHOT][1]),
    Case(ApiKey.CREATE_TOPICS, C, 7, {"topics": [controller_tests.new_topic(TOPIC_NAME)],
                                      "timeout": 1000, "validate_only": True},
         setup=a_live_broker),
    Case(ApiKey.CREATE_TOPICS, C, 7, {"topics": [controller_tests.new_topic(TOPIC_NAME)],
                                      "timeout": 1000, "validate_only": True},
         setup=a_live_broker, grants=(1, 0)),
    Case(ApiKey.CREATE_TOPICS, C, 2, {"topics": [controller_tests.new_topic(TOPIC_NAME)],
                                      "timeout": 1000, "validate_only": False},
         checks=(0,), setup=a_live_broker),
    Case(ApiKey.DELETE_TOPICS, C, 6, {"topics": [{"name": TOPIC_NAME, "topic_id": None}],
                                      "timeout": 1000}, setup=a_topic, grants=(1, 1)),
    Case(ApiKey.DELETE_TOPICS, C, 6, lambda env: {"topics": [
        {"name": None, "topic_id": env.image.topics_by_name[TOPIC_NAME].topic_id}],
        "timeout": 1000}, setup=a_topic, grants=(1, 1)),
    Case(ApiKey.DELETE_TOPICS, C, 4, {"topic_names": [TOPIC_NAME], "timeout": 1000},
         setup=a_topic, grants=(1, 1)),
    Case(ApiKey.DESCRIBE_ACLS, C, 3, ACL_FILTER),
    Case(ApiKey.CREATE_ACLS, C, 3, {"creations": [ACL_CREATION]}),
    Case(ApiKey.DELETE_ACLS, C, 3, {"filters": [ACL_FILTER]}),
    *(Case(ApiKey.DESCRIBE_CONFIGS, C, 4, {
        "include_synonyms": False, "include_documentation": False,
        "resources": [{"resource_type": kind, "resource_name": name,
                       "configuration_keys": None}]}, checks=(check,), setup=setup)
      for kind, name, check, setup in (
          (ConfigResourceType.BROKER, "1", 0, None),
          (ConfigResourceType.TOPIC, TOPIC_NAME, 1, a_topic),
          (ConfigResourceType.GROUP, GROUP_NAME, 2, None))),
    Case(ApiKey.ALTER_CONFIGS, C, 2, {"resources": [resource(
        ConfigResourceType.TOPIC, TOPIC_NAME, RETENTION)], "validate_only": False},
        checks=(1,), setup=a_topic),
    Case(ApiKey.ALTER_CONFIGS, C, 2, {"resources": [resource(
        ConfigResourceType.BROKER, "", ("log.cleaner.threads", "2"))], "validate_only": False},
        checks=(0,)),
    Case(ApiKey.ALTER_CONFIGS, C, 2, {"resources": [resource(
        ConfigResourceType.GROUP, GROUP_NAME, ("consumer.session.timeout.ms", "45000"))],
        "validate_only": False}, checks=(2,)),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, C, 1, {"resources": [incremental(
        ConfigResourceType.BROKER_LOGGER, "1", ("kafka", "DEBUG"))], "validate_only": False},
        checks=(0,)),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, C, 1, {"resources": [incremental(
        ConfigResourceType.BROKER, "", ("log.cleaner.threads", "2"))], "validate_only": False},
        checks=(1,)),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, C, 1, {"resources": [incremental(
        ConfigResourceType.TOPIC, TOPIC_NAME, RETENTION)], "validate_only": False},
        checks=(2,), setup=a_topic),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, C, 1, {"resources": [incremental(
        ConfigResourceType.GROUP, GROUP_NAME, ("consumer.session.timeout.ms", "45000"))],
        "validate_only": False}, checks=(3,)),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, C, 1, {"resources": [incremental(
        ConfigResourceType.CLIENT_METRICS, "producers", ("interval.ms", "1000"))],
        "validate_only": False}, checks=(1,)),
    Case(ApiKey.CREATE_PARTITIONS, C, 3, {"topics": [
        {"name": TOPIC_NAME, "count": 2, "assignments": None}], "timeout": 1000,
        "validate_only": False}, setup=a_topic),
    Case(ApiKey.ELECT_LEADERS, C, 2, {"election_type": 0, "topic_partitions": [
        {"topic": TOPIC_NAME, "partitions": [0]}], "timeout": 1000}, setup=a_topic),
    Case(ApiKey.ALTER_PARTITION_REASSIGNMENTS, C, 0, {"timeout": 1000, "topics": [
        {"name": TOPIC_NAME, "partitions": [{"partition_index": 0, "replicas": None}]}]},
        setup=a_topic),
    Case(ApiKey.LIST_PARTITION_REASSIGNMENTS, C, 0, {"timeout": 1000, "topics": [
        {"name": TOPIC_NAME, "partition_indexes": [0]}]}),
    Case(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, C, 0, {"users": [{"name": "bob"}]},
         like=table.Listener.BROKER),
    Case(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, C, 0, {"deletions": [
        {"name": "bob", "mechanism": 1}], "upsertions": []}),
    Case(ApiKey.ALTER_CLIENT_QUOTAS, C, 1, {"entries": [QUOTA_ENTRY], "validate_only": False}),
    Case(ApiKey.DESCRIBE_QUORUM, C, 2, controller_tests.DESCRIBE_METADATA),
    Case(ApiKey.ADD_RAFT_VOTER, C, 1, {
        "cluster_id": CLUSTER_ID, "timeout": 1000, "voter_id": 7,
        "voter_directory_id": uuid.UUID(int=7), "ack_when_committed": True,
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9999}]}),
    Case(ApiKey.REMOVE_RAFT_VOTER, C, 0, {
        "cluster_id": CLUSTER_ID, "voter_id": 7, "voter_directory_id": uuid.UUID(int=7)}),
    Case(ApiKey.UPDATE_RAFT_VOTER, C, 0, {
        "cluster_id": CLUSTER_ID, "current_leader_epoch": 0, "voter_id": 7,
        "voter_directory_id": uuid.UUID(int=7),
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9999}],
        "k_raft_version_feature": {"min_supported_version": 0,
                                   "max_supported_version": 1}}),
    Case(ApiKey.ALTER_PARTITION, C, 3, {"broker_id": 1, "broker_epoch": 1, "topics": []}),
    Case(ApiKey.UPDATE_FEATURES, C, 1, {"timeout": 1000, "feature_updates": [],
                                        "validate_only": True}),
    Case(ApiKey.ENVELOPE, C, 0, envelope_body, setup=a_live_broker),
    Case(ApiKey.DESCRIBE_CLUSTER, C, 1, {"include_cluster_authorized_operations": True,
                                         "endpoint_type": 2}),
    Case(ApiKey.BROKER_REGISTRATION, C, 4, lambda env: {
        "broker_id": 1, "cluster_id": CLUSTER_ID, "incarnation_id": uuid.UUID(int=5),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9091,
                       "security_protocol": 0}], "features": [], "rack": None,
        "log_dirs": [uuid.UUID(int=6)]}),
    Case(ApiKey.CONTROLLER_REGISTRATION, C, 0, {
        "controller_id": 2, "incarnation_id": uuid.UUID(int=5), "zk_migration_ready": False,
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9093,
                       "security_protocol": 0}], "features": []}),
    Case(ApiKey.BROKER_HEARTBEAT, C, 1, {
        "broker_id": 1, "broker_epoch": 1, "current_metadata_offset": 0, "want_fence": False,
        "want_shut_down": False}),
    Case(ApiKey.ALLOCATE_PRODUCER_IDS, C, 0, {"broker_id": 1, "broker_epoch": 1}),
    Case(ApiKey.UNREGISTER_BROKER, C, 0, {"broker_id": 1}, setup=a_live_broker),
    Case(ApiKey.UNREGISTER_CONTROLLER, C, 0, {"controller_id": 2}),
    Case(ApiKey.ASSIGN_REPLICAS_TO_DIRS, C, 0, {"broker_id": 1, "broker_epoch": 1,
                                                "directories": []}),
    Case(ApiKey.CREATE_DELEGATION_TOKEN, C, 3, create_token_for("bob"),
         setup=controller_token(None), security_protocol=TOKENS_ON),
    Case(ApiKey.CREATE_DELEGATION_TOKEN, C, 3, create_token_for(None), checks=(),
         setup=controller_token(None), security_protocol=TOKENS_ON),
    Case(ApiKey.CREATE_DELEGATION_TOKEN, C, 3, create_token_for("alice"), checks=(),
         setup=controller_token(None), security_protocol=TOKENS_ON),
    Case(ApiKey.RENEW_DELEGATION_TOKEN, C, 2, RENEW_TOKEN,
         setup=controller_token("User:bob", "User:alice"), security_protocol=TOKENS_ON),
    Case(ApiKey.EXPIRE_DELEGATION_TOKEN, C, 2, EXPIRE_TOKEN,
         setup=controller_token("User:alice"), security_protocol=TOKENS_ON),
    Case(ApiKey.EXPIRE_DELEGATION_TOKEN, C, 2, EXPIRE_TOKEN,
         setup=controller_token("User:bob", "User:alice"), security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, C, 3, {"owners": None}, like=table.Listener.BROKER,
         setup=controller_token("User:bob"), codes=token_shown, security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, C, 3, {"owners": None}, like=table.Listener.BROKER,
         setup=controller_token("User:bob"), codes=token_shown, grants=(1,),
         security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, C, 3, {"owners": [
        {"principal_type": "User", "principal_name": "bob"}]}, like=table.Listener.BROKER,
         setup=controller_token("User:bob"), codes=token_shown, security_protocol=TOKENS_ON),
]


@pytest.mark.parametrize("case", CONTROLLER_CASES, ids=lambda c: c.id)
async def test_controller_apis_authorize_as_kafka(case: Case) -> None:
    await run_case(case, controller_tests.make_env(), send_to_controller)


def authorizer_with(*acls: tuple[ResourceType, str, AclOperation], principal: str = "User:alice",
                    pattern: PatternType = PatternType.LITERAL,
                    permission: AclPermissionType = AclPermissionType.ALLOW,
                    into: StandardAuthorizer | None = None) -> StandardAuthorizer:
    authorizer = into if into is not None else StandardAuthorizer()
    for resource_type, name, operation in acls:
        authorizer.add_acl(uuid.uuid4(), AclBinding(resource_type, name, pattern, principal,
                                                    "*", operation, permission))
    return authorizer


async def controller_ask(env: Any, api_key: int, version: int, body: dict[str, Any],
                         authorizer: StandardAuthorizer,
                         principal: Principal = ALICE) -> Any:
    case = Case(api_key, C, version, body)
    header = RequestHeader(api_key, version, 7, "authorization-tests", 0)
    ctx = RequestContext(header, "CONTROLLER", "controller", HOST, 50000,
                         principal=principal, clock=env.clock, authorizer=authorizer)
    req = build(request_schema(api_key, version), body)
    spec = env.dispatcher.table.get(case.key)
    response = env.dispatcher.call(spec, ctx, req)
    if inspect.isawaitable(response):
        response = await response
    return controller_tests.as_read(env, ctx, response)


async def test_create_topics_with_create_on_the_cluster_and_configs_only_if_describable(
        ) -> None:
    env = controller_tests.make_env()
    await a_live_broker(env)
    authorizer = authorizer_with((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE),
                                 (ResourceType.TOPIC, "seen", AclOperation.ALTER_CONFIGS))
    response = await controller_ask(env, ApiKey.CREATE_TOPICS, 7, {"topics": [
        controller_tests.new_topic("seen"), controller_tests.new_topic("unseen")],
        "timeout": 1000, "validate_only": False}, authorizer)
    seen, unseen = response.topics
    assert (seen.error_code, seen.topic_config_error_code, seen.num_partitions) == \
        (ErrorCode.none, ErrorCode.none, 1)  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert seen.configs
    assert (unseen.error_code, unseen.topic_config_error_code, unseen.num_partitions,
            unseen.replication_factor, unseen.configs) == \
        (ErrorCode.none, ErrorCode.topic_authorization_failed, -1, -1, ())
    assert {"seen", "unseen"} <= set(env.image.topics_by_name)  # both created


async def test_create_topics_refuses_the_topics_without_create_and_creates_the_rest() -> None:
    env = controller_tests.make_env()
    await a_live_broker(env)
    authorizer = authorizer_with((ResourceType.TOPIC, "app-", AclOperation.CREATE),
                                 pattern=PatternType.PREFIXED)
    response = await controller_ask(env, ApiKey.CREATE_TOPICS, 7, {"topics": [
        controller_tests.new_topic("app-1"), controller_tests.new_topic("other")],
        "timeout": 1000, "validate_only": False}, authorizer)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("app-1", ErrorCode.none, None),
        ("other", ErrorCode.topic_authorization_failed, "Authorization failed.")]
    assert "other" not in env.image.topics_by_name


async def test_delete_topics_tells_nothing_of_a_topic_that_may_not_be_described() -> None:
    env = controller_tests.make_env()
    await a_topic(env)
    topic_id = env.image.topics_by_name[TOPIC_NAME].topic_id
    nobody = StandardAuthorizer()
    by_id = await controller_ask(env, ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": None, "topic_id": topic_id}], "timeout": 1000}, nobody)
    assert [(t.name, t.topic_id, t.error_code) for t in by_id.responses] == [
        (None, topic_id, ErrorCode.topic_authorization_failed)]
    # A name that does not exist looks like one that may not be described.
    missing = await controller_ask(env, ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": "missing", "topic_id": None}], "timeout": 1000}, nobody)
    assert missing.responses[0].error_code == ErrorCode.topic_authorization_failed
    describer = authorizer_with((ResourceType.TOPIC, "*", AclOperation.DESCRIBE))
    described = await controller_ask(env, ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": None, "topic_id": topic_id}, {"name": "missing", "topic_id": None}],
        "timeout": 1000}, describer)
    assert [(t.name, t.error_code) for t in described.responses] == [
        (TOPIC_NAME, ErrorCode.topic_authorization_failed),
        ("missing", ErrorCode.unknown_topic_or_partition)]
    admin = authorizer_with((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DELETE))
    deleted = await controller_ask(env, ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": TOPIC_NAME, "topic_id": None}], "timeout": 1000}, admin)
    assert deleted.responses[0].error_code == ErrorCode.none
    assert TOPIC_NAME not in env.image.topics_by_name


def envelope_of(inner: bytes, principal: bytes | None = serialize_principal(ALICE),
                address: bytes = bytes([10, 0, 0, 9])) -> dict[str, Any]:
    return {"request_data": inner, "request_principal": principal,
            "client_host_address": address}


async def test_the_envelope_needs_cluster_action_and_runs_as_the_client_it_carries() -> None:
    env = controller_tests.make_env()
    await a_live_broker(env)
    broker = Principal("User", "broker")
    authorizer = authorizer_with((ResourceType.CLUSTER, CLUSTER_NAME,
                                  AclOperation.CLUSTER_ACTION), principal="User:broker")
    create = controller_tests.create_request(controller_tests.new_topic(TOPIC_NAME))
    # Alice may not send an Envelope herself.
    refused = await controller_ask(env, ApiKey.ENVELOPE, 0, envelope_of(create), authorizer)
    assert (refused.error_code, refused.response_data) == \
        (ErrorCode.cluster_authorization_failed, None)
    # Through the broker, the request runs as alice: no CREATE, not created.
    forwarded = await controller_ask(env, ApiKey.ENVELOPE, 0, envelope_of(create),
                                     authorizer, principal=broker)
    assert forwarded.error_code == ErrorCode.none
    _, inner = controller_tests.decode_response(ApiKey.CREATE_TOPICS, 7,
                                                forwarded.response_data)
    assert inner.topics[0].error_code == ErrorCode.topic_authorization_failed
    # ... from her address: an ACL for another host does not apply.
    authorizer.add_acl(uuid.uuid4(), AclBinding(
        ResourceType.TOPIC, TOPIC_NAME, PatternType.LITERAL, "User:alice", "10.0.0.10",
        AclOperation.CREATE, AclPermissionType.ALLOW))
    elsewhere = await controller_ask(env, ApiKey.ENVELOPE, 0, envelope_of(create),
                                     authorizer, principal=broker)
    _, inner = controller_tests.decode_response(ApiKey.CREATE_TOPICS, 7,
                                                elsewhere.response_data)
    assert inner.topics[0].error_code == ErrorCode.topic_authorization_failed
    here = await controller_ask(env, ApiKey.ENVELOPE, 0, envelope_of(
        create, address=bytes([10, 0, 0, 10])), authorizer, principal=broker)
    _, inner = controller_tests.decode_response(ApiKey.CREATE_TOPICS, 7, here.response_data)
    assert inner.topics[0].error_code == ErrorCode.none
    assert TOPIC_NAME in env.image.topics_by_name


@pytest.mark.parametrize(("envelope", "error"), [
    (envelope_of(b"", principal=b"\x00\x07junk"), ErrorCode.principal_deserialization_failure),
    (envelope_of(b"", address=b"\x01\x02\x03"), ErrorCode.invalid_request),
    (envelope_of(encode_request(ApiKey.DESCRIBE_CLUSTER, 0, 1, "c", build(
        request_schema(ApiKey.DESCRIBE_CLUSTER, 0),
        {"include_cluster_authorized_operations": False}))[4:]), ErrorCode.invalid_request),
], ids=["principal", "address", "not-forwardable"])
async def test_an_envelope_kafka_would_not_run_is_refused(envelope: dict[str, Any],
                                                          error: ErrorCode) -> None:
    env = controller_tests.make_env()
    response = await controller_ask(env, ApiKey.ENVELOPE, 0, envelope, StandardAuthorizer(
        super_users=["User:alice"]))
    assert (response.error_code, response.response_data) == (error, None)


# --- the broker listener ----------------------------------------------------------------------

B = table.Listener.BROKER
broker_node = broker_tests.broker
"""The fixture: a real Broker over a temporary directory (``test_broker_handlers``)."""
BROKER_SPECS = {int(spec.api_key): spec for spec in broker_apis()}


async def send_to_broker(broker: Any, case: Case, body: dict[str, Any],
                         authorizer: StandardAuthorizer) -> Any:
    """The handler's answer as a client reads it (a raised KafkaError answered as the
    request dispatcher answers it)."""
    header = RequestHeader(case.key, case.version, 17, "authorization-tests", 0)
    ctx = RequestContext(header, broker_tests.LISTENER, "broker", HOST, 50000,
                         principal=ALICE, clock=broker_tests.clock, authorizer=authorizer,
                         **case.context_options())
    spec = BROKER_SPECS[case.key]
    assert spec.min_version <= case.version <= spec.max_version
    req = build(request_schema(case.key, case.version), body)
    try:
        response = spec.handler(broker, ctx, req)
        if inspect.isawaitable(response):
            response = await response
    except KafkaError as e:
        response = error_response(req, e.code, e.message)
    return read_or_built(lambda: broker_tests.decoded(case.key, case.version, response),
                         case, response)


async def orders(broker: Any) -> None:
    broker_tests.create_topic(broker, TOPIC_NAME)
    await broker_tests.produce_ok(broker, TOPIC_NAME, 0, broker_tests.batch(b"a", b"b"))


async def creatable(broker: Any) -> None:
    """The controller creates what the broker asks it to (auto-creation)."""
    broker_tests.controller_of(broker).answers[ApiKey.CREATE_TOPICS] = {
        "throttle_time": 0, "topics": [
            {"name": TOPIC_NAME, "error_code": ErrorCode.none, "error_message": None,
             "topic_id": None, "num_partitions": 1, "replication_factor": 1,
             "configs": None}]}


def topic_id_of(broker: Any, name: str = TOPIC_NAME) -> uuid.UUID:
    return broker.image.topics_by_name[name].topic_id


TXN_BATCH = build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
                        transactional=True)
METADATA_V12 = {"topics": [{"name": TOPIC_NAME, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": True}

BROKER_CASES = [
    Case(ApiKey.PRODUCE, B, 9, broker_tests.produce_body(
        TOPIC_NAME, (0, broker_tests.batch(b"x"))), checks=(1,), setup=orders),
    Case(ApiKey.PRODUCE, B, 13, lambda b: {
        "transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
            {"topic_id": topic_id_of(b), "partition_data": [
                {"index": 0, "records": broker_tests.batch(b"x")}]}]},
         checks=(1,), setup=orders),
    Case(ApiKey.PRODUCE, B, 9, broker_tests.produce_body(
        TOPIC_NAME, (0, TXN_BATCH), transactional_id=TXN_ID), setup=orders),
    Case(ApiKey.FETCH, B, 12, broker_tests.fetch_body(TOPIC_NAME, (0, 0, 1 << 20)),
         checks=(1,), setup=orders),
    Case(ApiKey.FETCH, B, 17, lambda b: {
        **broker_tests.fetch_body(TOPIC_NAME, (0, 0, 1 << 20)), "topics": [
            {"topic_id": topic_id_of(b), "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
         checks=(1,), setup=orders),
    Case(ApiKey.FETCH, B, 17, lambda b: broker_tests.replica_fetch_body(
        topic_id_of(b), (0, 0, 0, -1)), checks=(0,), setup=orders),
    Case(ApiKey.LIST_OFFSETS, B, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC_NAME, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
         setup=orders),
    Case(ApiKey.METADATA, B, 12, METADATA_V12, checks=(0,), setup=orders),
    Case(ApiKey.METADATA, B, 12, lambda b: {**METADATA_V12, "topics": [
        {"name": None, "topic_id": topic_id_of(b)}]}, checks=(0,), setup=orders),
    Case(ApiKey.METADATA, B, 12, {**METADATA_V12, "allow_auto_topic_creation": True},
         checks=(0, 2), setup=creatable),
    Case(ApiKey.METADATA, B, 12, {**METADATA_V12, "allow_auto_topic_creation": True},
         checks=(0, 2), grants=(0, 1), setup=creatable),
    Case(ApiKey.DELETE_RECORDS, B, 2, {"topics": [{"name": TOPIC_NAME, "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 1000}, setup=orders),
    Case(ApiKey.OFFSET_FOR_LEADER_EPOCH, B, 4, {"replica_id": -1, "topics": [
        {"topic": TOPIC_NAME, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
         setup=orders),
    Case(ApiKey.OFFSET_FOR_LEADER_EPOCH, B, 4, {"replica_id": -1, "topics": [
        {"topic": TOPIC_NAME, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
         setup=orders, grants=(1,)),
    Case(ApiKey.DESCRIBE_LOG_DIRS, B, 4, {"topics": None}),
    Case(ApiKey.ALTER_REPLICA_LOG_DIRS, B, 2, {"dirs": [{"path": "/not/a/log/dir", "topics": [
        {"name": TOPIC_NAME, "partitions": [0, 1]}]}]}),
    Case(ApiKey.DESCRIBE_CLUSTER, B, 1, {"include_cluster_authorized_operations": True,
                                         "endpoint_type": 1}),
    Case(ApiKey.DESCRIBE_TOPIC_PARTITIONS, B, 0, {
        "topics": [{"name": TOPIC_NAME}], "response_partition_limit": 100, "cursor": None},
         checks=(0,), setup=orders),
]


async def everything(broker: Any) -> None:
    """A topic with records, the group and transaction coordinators loaded, share
    groups over an in-memory share coordinator, a controller that hands out producer ids
    and creates topics."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from ottla.common.topics import OFFSETS_TOPIC
    from tests.share_state import ShardPersister

    await orders(broker)
    await creatable(broker)
    broker_tests.create_topic(broker, OFFSETS_TOPIC, configs={"cleanup.policy": "compact"})
    broker.group_coordinator.on_metadata(broker_tests.NOW_MS)
    broker_tests.transaction_coordinator(broker).on_metadata(broker_tests.NOW_MS)
    broker_tests.controller_of(broker).answers[ApiKey.ALLOCATE_PRODUCER_IDS] = \
        broker_tests.allocation(7000)
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name=GROUP_NAME,
                                       name="share.auto.offset.reset", value="earliest"))


SUPER = StandardAuthorizer(super_users=["User:alice"])
_members = iter(range(1 << 30))


def a_member() -> str:
    return f"member-{next(_members)}"


def share_fetch(broker: Any, member: str | None = None, epoch: int = 0,
                acks: tuple[tuple[int, int, list[int]], ...] = ()) -> dict[str, Any]:
    return {**broker_tests.share_fetch_body(topic_id_of(broker), member or a_member(), epoch,
                                            acks), "group_id": GROUP_NAME}


async def a_share_session(broker: Any) -> dict[str, Any]:
    """A ShareAcknowledge of the records a new member's session holds."""
    member = a_member()
    opened = await send_to_broker(broker, Case(ApiKey.SHARE_FETCH, B, 1, {}),
                                  share_fetch(broker, member), SUPER)
    assert opened.error_code == ErrorCode.none
    return {**broker_tests.share_ack_body(topic_id_of(broker), member, 1, 0, 1, 1),
            "group_id": GROUP_NAME}


async def a_share_group(broker: Any) -> None:
    """``everything``, and an empty share group with offsets on the topic."""
    await everything(broker)
    altered = await send_to_broker(broker, Case(ApiKey.ALTER_SHARE_GROUP_OFFSETS, B, 0, {}), {
        "group_id": GROUP_NAME, "topics": [{"topic_name": TOPIC_NAME, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]}, SUPER)
    assert altered.error_code == ErrorCode.none


async def a_group_with_offsets(broker: Any) -> None:
    """``everything``, and an empty group with a committed offset: OffsetDelete of a
    group that does not exist is GROUP_ID_NOT_FOUND before any topic is answered."""
    await everything(broker)
    committed = await send_to_broker(broker, Case(ApiKey.OFFSET_COMMIT, B, 9, {}), commit(),
                                     SUPER)
    assert error_codes(committed) == {ErrorCode.none}


def commit(group_id: str = GROUP_NAME) -> dict[str, Any]:
    return {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC_NAME, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]}


def txn_commit(version_fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"transactional_id": TXN_ID, "group_id": GROUP_NAME, "producer_id": 7000,
            "producer_epoch": 0, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC_NAME, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}], **(version_fields or {})}


JOIN = {"group_id": GROUP_NAME, "session_timeout": 10000, "rebalance_timeout": 10000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None}
HEARTBEAT_848 = {"group_id": GROUP_NAME, "member_id": "m-848", "member_epoch": 0,
                 "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
                 "subscribed_topic_names": [TOPIC_NAME], "subscribed_topic_regex": None,
                 "server_assignor": None, "topic_partitions": []}
SHARE_HEARTBEAT = {"group_id": GROUP_NAME, "member_id": "m-1", "member_epoch": 0,
                   "rack_id": None, "subscribed_topic_names": [TOPIC_NAME]}
CONFIGS = {"include_synonyms": False, "include_documentation": False}


def described_configs(resource_type: ConfigResourceType, name: str) -> dict[str, Any]:
    return {**CONFIGS, "resources": [{"resource_type": resource_type, "resource_name": name,
                                      "configuration_keys": None}]}


async def forwards_configs(broker: Any) -> None:
    broker_tests.controller_of(broker).forward_answer = {"throttle_time": 0, "responses": [
        {"error_code": ErrorCode.none, "error_message": None, "resource_type": 4,
         "resource_name": ""}]}


def state_request(broker: Any, **partition: Any) -> dict[str, Any]:
    return {"group_id": GROUP_NAME, "topics": [{"topic_id": topic_id_of(broker),
                                                "partitions": [{"partition": 0, **partition}]}]}


BROKER_CASES += [
    Case(ApiKey.OFFSET_COMMIT, B, 9, commit(), setup=everything),
    Case(ApiKey.OFFSET_FETCH, B, 9, {"groups": [{"group_id": GROUP_NAME, "topics": [
        {"name": TOPIC_NAME, "partition_indexes": [0]}]}], "require_stable": False},
         checks=(0, 1), setup=everything),
    Case(ApiKey.OFFSET_FETCH, B, 7, {"group_id": GROUP_NAME, "topics": [
        {"name": TOPIC_NAME, "partition_indexes": [0]}], "require_stable": False},
         checks=(0, 1), setup=everything),
    Case(ApiKey.OFFSET_FETCH, B, 1, {"group_id": GROUP_NAME, "topics": [
        {"name": TOPIC_NAME, "partition_indexes": [0]}]}, checks=(0, 1), setup=everything),
    Case(ApiKey.OFFSET_FETCH, B, 9, {"groups": [{"group_id": GROUP_NAME, "topics": None}],
                                     "require_stable": False},
         checks=(0, 2), setup=everything),
    Case(ApiKey.FIND_COORDINATOR, B, 4, {"key_type": 0, "coordinator_keys": [GROUP_NAME]},
         checks=(0,), setup=everything),
    Case(ApiKey.FIND_COORDINATOR, B, 2, {"key_type": 0, "key": GROUP_NAME},
         checks=(0,), setup=everything),
    Case(ApiKey.FIND_COORDINATOR, B, 4, {"key_type": 1, "coordinator_keys": [TXN_ID]},
         checks=(1,), setup=everything),
    Case(ApiKey.FIND_COORDINATOR, B, 6, lambda b: {"key_type": 2, "coordinator_keys": [
        f"{GROUP_NAME}:{topic_id_of(b)}:0"]}, checks=(2,), setup=everything),
    Case(ApiKey.JOIN_GROUP, B, 9, JOIN, setup=everything),
    Case(ApiKey.JOIN_GROUP, B, 5, {k: v for k, v in JOIN.items() if k != "reason"},
         setup=everything),
    Case(ApiKey.HEARTBEAT, B, 4, {"group_id": GROUP_NAME, "generation_id": 1,
                                  "member_id": "m", "group_instance_id": None},
         setup=everything),
    Case(ApiKey.LEAVE_GROUP, B, 5, {"group_id": GROUP_NAME, "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]}, setup=everything),
    Case(ApiKey.SYNC_GROUP, B, 5, {"group_id": GROUP_NAME, "generation_id": 1,
                                   "member_id": "m", "group_instance_id": None,
                                   "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": []}, setup=everything),
    Case(ApiKey.DESCRIBE_GROUPS, B, 5, {"groups": [GROUP_NAME],
                                        "include_authorized_operations": True},
         setup=everything),
    Case(ApiKey.LIST_GROUPS, B, 5, {"states_filter": [], "types_filter": []},
         setup=everything),
    Case(ApiKey.DELETE_GROUPS, B, 2, {"groups_names": [GROUP_NAME]}, setup=everything),
    Case(ApiKey.OFFSET_DELETE, B, 0, {"group_id": GROUP_NAME, "topics": [
        {"name": TOPIC_NAME, "partitions": [{"partition_index": 0}]}]},
         setup=a_group_with_offsets),
    Case(ApiKey.INIT_PRODUCER_ID, B, 5, broker_tests.init_producer_id_body(TXN_ID),
         checks=(0,), setup=everything),
    Case(ApiKey.INIT_PRODUCER_ID, B, 5, broker_tests.init_producer_id_body(None),
         checks=(2,), setup=everything),
    Case(ApiKey.INIT_PRODUCER_ID, B, 5, broker_tests.init_producer_id_body(None),
         checks=(2,), grants=(1,), setup=everything),
    Case(ApiKey.ADD_PARTITIONS_TO_TXN, B, 3, {
        "v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": 7000,
        "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [
            {"name": TOPIC_NAME, "partitions": [0]}]}, checks=(1, 2), setup=everything),
    Case(ApiKey.ADD_PARTITIONS_TO_TXN, B, 5, {"transactions": [{
        "transactional_id": TXN_ID, "producer_id": 7000, "producer_epoch": 0,
        "verify_only": True, "topics": [{"name": TOPIC_NAME, "partitions": [0]}]}]},
         checks=(0,), setup=everything),
    Case(ApiKey.ADD_OFFSETS_TO_TXN, B, 4, {"transactional_id": TXN_ID, "producer_id": 7000,
                                           "producer_epoch": 0, "group_id": GROUP_NAME},
         setup=everything),
    Case(ApiKey.END_TXN, B, 5, {"transactional_id": TXN_ID, "producer_id": 7000,
                                "producer_epoch": 0, "committed": True}, setup=everything),
    Case(ApiKey.WRITE_TXN_MARKERS, B, 1, {"markers": [{
        "producer_id": 7000, "producer_epoch": 0, "transaction_result": True, "topics": [
            {"name": TOPIC_NAME, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
         setup=everything),
    Case(ApiKey.WRITE_TXN_MARKERS, B, 1, {"markers": [{
        "producer_id": 7000, "producer_epoch": 0, "transaction_result": True, "topics": [
            {"name": TOPIC_NAME, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
         grants=(1,), setup=everything),
    Case(ApiKey.TXN_OFFSET_COMMIT, B, 3, txn_commit(), setup=everything),
    Case(ApiKey.TXN_OFFSET_COMMIT, B, 0, {k: v for k, v in txn_commit().items()
                                          if k in ("transactional_id", "group_id",
                                                   "producer_id", "producer_epoch",
                                                   "topics")}, setup=everything),
    Case(ApiKey.DESCRIBE_ACLS, B, 3, ACL_FILTER),
    Case(ApiKey.DESCRIBE_CONFIGS, B, 4, described_configs(ConfigResourceType.BROKER, "1"),
         checks=(0,)),
    Case(ApiKey.DESCRIBE_CONFIGS, B, 4, described_configs(ConfigResourceType.TOPIC,
                                                          TOPIC_NAME),
         checks=(1,), setup=orders),
    Case(ApiKey.DESCRIBE_CONFIGS, B, 4, described_configs(ConfigResourceType.GROUP,
                                                          GROUP_NAME), checks=(2,)),
    Case(ApiKey.ALTER_CONFIGS, B, 2, {"resources": [resource(
        ConfigResourceType.BROKER, "", ("log.cleaner.threads", "2"))],
        "validate_only": False}, setup=forwards_configs),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, B, 1, {"resources": [incremental(
        ConfigResourceType.BROKER_LOGGER, "1", ("kafka", "DEBUG"))], "validate_only": False},
         checks=(0,)),
    Case(ApiKey.INCREMENTAL_ALTER_CONFIGS, B, 1, {"resources": [incremental(
        ConfigResourceType.BROKER, "", ("log.cleaner.threads", "2"))], "validate_only": False},
         checks=(1,), setup=forwards_configs),
    Case(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, B, 0, {"users": [{"name": "bob"}]}),
    Case(ApiKey.DESCRIBE_CLIENT_QUOTAS, B, 1, {"components": [
        {"entity_type": "user", "match_type": 2, "match": None}], "strict": False}),
    Case(ApiKey.DESCRIBE_PRODUCERS, B, 0, {"topics": [{"name": TOPIC_NAME,
                                                       "partition_indexes": [0]}]},
         setup=orders),
    Case(ApiKey.DESCRIBE_TRANSACTIONS, B, 0, {"transactional_ids": [TXN_ID]},
         checks=(0,), setup=everything),
    Case(ApiKey.LIST_TRANSACTIONS, B, 1, {"state_filters": [], "producer_id_filters": [],
                                          "duration_filter": -1}, setup=everything),
    Case(ApiKey.CONSUMER_GROUP_HEARTBEAT, B, 1, HEARTBEAT_848, checks=(0, 1),
         setup=everything),
    Case(ApiKey.CONSUMER_GROUP_DESCRIBE, B, 1, {"group_ids": [GROUP_NAME],
                                                "include_authorized_operations": True},
         checks=(0,), setup=everything),
    Case(ApiKey.SHARE_GROUP_HEARTBEAT, B, 1, SHARE_HEARTBEAT, setup=everything),
    Case(ApiKey.SHARE_GROUP_DESCRIBE, B, 1, {"group_ids": [GROUP_NAME],
                                             "include_authorized_operations": True},
         checks=(0,), setup=everything),
    Case(ApiKey.SHARE_FETCH, B, 1, share_fetch, setup=everything),
    Case(ApiKey.SHARE_ACKNOWLEDGE, B, 1, a_share_session, setup=everything),
    Case(ApiKey.INITIALIZE_SHARE_GROUP_STATE, B, 0, lambda b: state_request(
        b, state_epoch=0, start_offset=0), setup=everything),
    Case(ApiKey.READ_SHARE_GROUP_STATE, B, 0, lambda b: state_request(b, leader_epoch=0),
         setup=everything),
    Case(ApiKey.WRITE_SHARE_GROUP_STATE, B, 1, lambda b: state_request(
        b, state_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=0,
        state_batches=[]), setup=everything),
    Case(ApiKey.DELETE_SHARE_GROUP_STATE, B, 0, state_request, setup=everything),
    Case(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, B, 1,
         lambda b: state_request(b, leader_epoch=0), setup=everything),
    Case(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, B, 1, {"groups": [
        {"group_id": GROUP_NAME, "topics": [{"topic_name": TOPIC_NAME, "partitions": [0]}]}]},
         checks=(0, 1), setup=everything),
    Case(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, B, 1, {"groups": [
        {"group_id": GROUP_NAME, "topics": None}]}, checks=(0, 2), setup=everything),
    Case(ApiKey.ALTER_SHARE_GROUP_OFFSETS, B, 0, {"group_id": GROUP_NAME, "topics": [
        {"topic_name": TOPIC_NAME, "partitions": [{"partition_index": 0,
                                                   "start_offset": 0}]}]},
         setup=everything),
    Case(ApiKey.DELETE_SHARE_GROUP_OFFSETS, B, 0, {"group_id": GROUP_NAME, "topics": [
        {"topic_name": TOPIC_NAME}]}, setup=a_share_group),
    Case(ApiKey.DESCRIBE_CONFIGS, B, 4, described_configs(ConfigResourceType.CLIENT_METRICS,
                                                          "producers"), checks=(0,)),
    Case(ApiKey.LIST_CONFIG_RESOURCES, B, 0, {}),
    Case(ApiKey.LIST_CONFIG_RESOURCES, B, 1, {"resource_types": []}),
    Case(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, B, 0, {"client_instance_id": None}),
    Case(ApiKey.PUSH_TELEMETRY, B, 0, {
        "client_instance_id": uuid.UUID(int=77), "subscription_id": 0, "terminating": False,
        "compression_type": 0, "metrics": b""}),
]


def broker_token(owner: str | None, *renewers: str, forwarded: dict[str, Any] | None = None
                 ) -> Callable[[Any], Awaitable[None]]:
    """A setup: tokens enabled on the broker, TOKEN_ID owned by ``owner`` in its image
    (None: no token), and the controller's answer to what the broker forwards."""
    async def setup(broker: Any) -> None:
        broker.config.values["delegation.token.secret.key"] = TOKEN_SECRET
        if owner is not None:
            broker.image.replay(token_record(owner, *renewers))
        broker_tests.controller_of(broker).forward_answer = forwarded
    return setup


TOKEN_CREATED = {"throttle_time": 0, "error_code": ErrorCode.none, "principal_type": "User",
                 "principal_name": "bob", "token_requester_principal_type": "User",
                 "token_requester_principal_name": "alice",
                 "issue_timestamp": TOKEN_NOW_MS, "expiry_timestamp": TOKEN_NOW_MS + DAY_MS,
                 "max_timestamp": TOKEN_NOW_MS + 7 * DAY_MS, "token_id": TOKEN_ID,
                 "hmac": TOKEN_HMAC}
TOKEN_EXPIRY = {"throttle_time": 0, "error_code": ErrorCode.none,
                "expiry_timestamp": TOKEN_NOW_MS + DAY_MS}

BROKER_CASES += [
    Case(ApiKey.CREATE_DELEGATION_TOKEN, B, 3, create_token_for("bob"),
         setup=broker_token(None, forwarded=TOKEN_CREATED), security_protocol=TOKENS_ON),
    Case(ApiKey.CREATE_DELEGATION_TOKEN, B, 3, create_token_for(None), checks=(),
         setup=broker_token(None, forwarded=TOKEN_CREATED), security_protocol=TOKENS_ON),
    Case(ApiKey.RENEW_DELEGATION_TOKEN, B, 2, RENEW_TOKEN,
         setup=broker_token("User:bob", "User:alice", forwarded=TOKEN_EXPIRY),
         security_protocol=TOKENS_ON),
    Case(ApiKey.EXPIRE_DELEGATION_TOKEN, B, 2, EXPIRE_TOKEN,
         setup=broker_token("User:alice", forwarded=TOKEN_EXPIRY),
         security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, B, 3, {"owners": None},
         setup=broker_token("User:bob"), codes=token_shown, security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, B, 3, {"owners": None},
         setup=broker_token("User:bob"), codes=token_shown, grants=(1,),
         security_protocol=TOKENS_ON),
    Case(ApiKey.DESCRIBE_DELEGATION_TOKEN, B, 2, {"owners": [
        {"principal_type": "User", "principal_name": "bob"}]},
         setup=broker_token("User:bob"), codes=token_shown, security_protocol=TOKENS_ON),
]


@pytest.mark.parametrize("case", BROKER_CASES, ids=lambda c: c.id)
async def test_broker_apis_authorize_as_kafka(case: Case, broker_node: Any) -> None:
    await run_case(case, broker_node, send_to_broker)


# --- every API Ottla serves is covered ------------------------------------------------------

NO_CHECKS = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


def test_every_api_ottla_serves_is_covered_on_each_listener() -> None:
    from ottla.server.controller_apis import controller_apis

    cases = {(int(c.key), c.listener) for c in CONTROLLER_CASES + BROKER_CASES}
    forwarded = {int(key) for key, _, _ in forwarding.FORWARDED}
    served = {B: {int(spec.api_key) for spec in broker_apis()},
              C: {int(spec.api_key) for spec in controller_apis()}}
    missing = {str(listener): sorted(table.BY_KEY[key].name for key in keys
                                     if key not in NO_CHECKS and (key, listener) not in cases
                                     and not (listener is B and key in forwarded))
               for listener, keys in served.items()}
    assert missing == {"broker": [], "controller": []}


@pytest.mark.parametrize("api_key", [key for key, _, _ in forwarding.FORWARDED],
                         ids=lambda k: ApiKey(k).name)
async def test_a_forwarded_request_goes_to_the_controller_as_the_client(
        broker_node: Any, api_key: int) -> None:
    """Kafka's broker checks nothing before forwarding these: the controller does, as the
    client (whose principal and address the Envelope carries)."""
    assert table.BY_KEY[api_key].on(B).mode is table.Mode.FORWARDED
    assert not table.BY_KEY[api_key].on(B).checks
    high = next(hi for key, _, hi in forwarding.FORWARDED if key == api_key)
    controller = broker_tests.controller_of(broker_node)
    controller.forward_answer = {"forwarded": True}
    header = RequestHeader(api_key, high, 17, "authorization-tests", 0)
    ctx = RequestContext(header, broker_tests.LISTENER, "broker", HOST, 50000,
                         principal=ALICE, clock=broker_tests.clock,
                         authorizer=StandardAuthorizer())
    request = object()
    answer = await BROKER_SPECS[api_key].handler(broker_node, ctx, request)
    assert answer == {"forwarded": True}
    ((forwarded_ctx, forwarded),) = controller.forwarded
    assert forwarded is request and forwarded_ctx.principal == ALICE


# --- focused: what principals with typical ACLs can do ---------------------------------------

async def broker_ask(broker: Any, api_key: int, version: int, body: dict[str, Any],
                     authorizer: StandardAuthorizer | None,
                     principal: Principal = ALICE) -> Any:
    header = RequestHeader(api_key, version, 17, "authorization-tests", 0)
    ctx = RequestContext(header, broker_tests.LISTENER, "broker", HOST, 50000,
                         principal=principal, clock=broker_tests.clock, authorizer=authorizer)
    req = build(request_schema(api_key, version), body)
    try:
        response = BROKER_SPECS[api_key].handler(broker, ctx, req)
        if inspect.isawaitable(response):
            response = await response
    except KafkaError as e:
        response = error_response(req, e.code, e.message)
    return broker_tests.decoded(api_key, version, response)


def metadata_of(*names: str, ops: bool = False) -> dict[str, Any]:
    return {"topics": None if not names else [{"name": n, "topic_id": None} for n in names],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": ops}


def produced(response: Any) -> dict[str, int]:
    return {t.name: p.error_code for t in response.responses for p in t.partition_responses}


def bits(*operations: AclOperation) -> int:
    return sum(1 << int(op) for op in operations)


async def test_a_producer_with_prefixed_acls_produces_there_and_nowhere_else(broker_node: Any
                                                                             ) -> None:
    """``kafka-acls --add --allow-principal User:alice --producer --topic orders-
    --resource-pattern-type prefixed``: WRITE, DESCRIBE and CREATE on the topics whose
    names begin with ``orders-``."""
    b = broker_node
    for name in ("orders-eu", "payments"):
        broker_tests.create_topic(b, name)
    broker_tests.controller_of(b).answers[ApiKey.ALLOCATE_PRODUCER_IDS] = \
        broker_tests.allocation(7000)
    producer = authorizer_with(*((ResourceType.TOPIC, "orders-", op) for op in (
        AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)),
        pattern=PatternType.PREFIXED)
    described = await broker_ask(b, ApiKey.METADATA, 12, metadata_of("orders-eu", "payments"),
                                 producer)
    assert [(t.name, t.error_code, len(t.partitions)) for t in described.topics] == [
        ("orders-eu", ErrorCode.none, 1), ("payments", ErrorCode.topic_authorization_failed, 0)]
    # An idempotent producer without IDEMPOTENT_WRITE: WRITE on some topic is enough.
    ids = await broker_ask(b, ApiKey.INIT_PRODUCER_ID, 5,
                           broker_tests.init_producer_id_body(None), producer)
    assert (ids.error_code, ids.producer_id) == (ErrorCode.none, 7000)
    response = await broker_ask(b, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": broker_tests.batch(b"x")}]}
            for name in ("orders-eu", "payments")]}, producer)
    assert produced(response) == {"orders-eu": ErrorCode.none,
                                  "payments": ErrorCode.topic_authorization_failed}
    assert broker_tests.log_end(b, "orders-eu") == 1
    assert broker_tests.log_end(b, "payments") == 0
    # Producing is not consuming.
    fetched = await broker_ask(b, ApiKey.FETCH, 12, broker_tests.fetch_body(
        "orders-eu", (0, 0, 1 << 20)), producer)
    assert fetched.responses[0].partitions[0].error_code == \
        ErrorCode.topic_authorization_failed
    # Nor may anyone else write there.
    bob = await broker_ask(b, ApiKey.PRODUCE, 9, broker_tests.produce_body(
        "orders-eu", (0, broker_tests.batch(b"y"))), producer, Principal("User", "bob"))
    assert produced(bob) == {"orders-eu": ErrorCode.topic_authorization_failed}
    refused = await broker_ask(b, ApiKey.INIT_PRODUCER_ID, 5,
                               broker_tests.init_producer_id_body(None), producer,
                               Principal("User", "bob"))
    assert refused.error_code == ErrorCode.cluster_authorization_failed


async def test_a_transactional_producer_needs_write_on_its_transactional_id(broker_node: Any
                                                                            ) -> None:
    b = broker_node
    await orders(b)
    writer = authorizer_with((ResourceType.TOPIC, TOPIC_NAME, AclOperation.WRITE))
    body = broker_tests.produce_body(TOPIC_NAME, (0, TXN_BATCH), transactional_id=TXN_ID)
    response = await broker_ask(b, ApiKey.PRODUCE, 9, body, writer)
    (partition,) = [p for t in response.responses for p in t.partition_responses]
    assert (partition.error_code, partition.error_message) == (
        ErrorCode.transactional_id_authorization_failed, "Transactional Id authorization failed.")
    # Only transactional batches need it: the same id with plain batches is not checked.
    plain = broker_tests.produce_body(TOPIC_NAME, (0, broker_tests.batch(b"p")),
                                      transactional_id=TXN_ID)
    assert produced(await broker_ask(b, ApiKey.PRODUCE, 9, plain, writer)) == {
        TOPIC_NAME: ErrorCode.none}


async def test_deny_wins_over_allow(broker_node: Any) -> None:
    b = broker_node
    for name in (TOPIC_NAME, "other"):
        broker_tests.create_topic(b, name)
    authorizer = authorizer_with((ResourceType.TOPIC, "*", AclOperation.ALL),
                                 principal="User:*")
    authorizer_with((ResourceType.TOPIC, TOPIC_NAME, AclOperation.WRITE),
                    permission=AclPermissionType.DENY, into=authorizer)
    response = await broker_ask(b, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout": 30000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": broker_tests.batch(b"x")}]}
            for name in (TOPIC_NAME, "other")]}, authorizer)
    assert produced(response) == {TOPIC_NAME: ErrorCode.topic_authorization_failed,
                                  "other": ErrorCode.none}
    # A DENY of WRITE denies only WRITE: alice still describes and reads the topic.
    described = await broker_ask(b, ApiKey.METADATA, 12, metadata_of(TOPIC_NAME, ops=True),
                                 authorizer)
    (topic,) = described.topics
    assert topic.error_code == ErrorCode.none
    assert topic.topic_authorized_operations == \
        bits(*table.SUPPORTED_OPERATIONS[table.Res.TOPIC]) - bits(AclOperation.WRITE)
    fetched = await broker_ask(b, ApiKey.FETCH, 12, broker_tests.fetch_body(
        TOPIC_NAME, (0, 0, 1 << 20)), authorizer)
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.none
    # Bob is denied nothing.
    bob = await broker_ask(b, ApiKey.PRODUCE, 9, broker_tests.produce_body(
        TOPIC_NAME, (0, broker_tests.batch(b"y"))), authorizer, Principal("User", "bob"))
    assert produced(bob) == {TOPIC_NAME: ErrorCode.none}


async def test_super_users_pass_every_check(broker_node: Any) -> None:
    b = broker_node
    await orders(b)
    authorizer = StandardAuthorizer(super_users=["User:admin"])
    authorizer_with((ResourceType.TOPIC, "*", AclOperation.ALL),
                    permission=AclPermissionType.DENY, principal="User:*", into=authorizer)
    admin = Principal("User", "admin")
    produce = broker_tests.produce_body(TOPIC_NAME, (0, broker_tests.batch(b"x")))
    assert produced(await broker_ask(b, ApiKey.PRODUCE, 9, produce, authorizer, admin)) == \
        {TOPIC_NAME: ErrorCode.none}
    dirs = await broker_ask(b, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, authorizer,
                            admin)
    assert dirs.error_code == ErrorCode.none and dirs.results
    cluster = await broker_ask(b, ApiKey.DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1}, authorizer, admin)
    assert cluster.cluster_authorized_operations == \
        bits(*table.SUPPORTED_OPERATIONS[table.Res.CLUSTER])
    assert produced(await broker_ask(b, ApiKey.PRODUCE, 9, produce, authorizer)) == \
        {TOPIC_NAME: ErrorCode.topic_authorization_failed}
    env = controller_tests.make_env()
    await a_live_broker(env)
    created = await controller_ask(env, ApiKey.CREATE_TOPICS, 7, {
        "topics": [controller_tests.new_topic("made")], "timeout": 1000,
        "validate_only": False}, authorizer, admin)
    assert created.topics[0].error_code == ErrorCode.none and created.topics[0].configs


async def test_metadata_shows_only_the_topics_the_principal_may_describe(broker_node: Any
                                                                         ) -> None:
    b = broker_node
    for name in ("app-1", "app-2", "billing", "secret"):
        broker_tests.create_topic(b, name)
    authorizer = authorizer_with((ResourceType.TOPIC, "app-", AclOperation.DESCRIBE),
                                 pattern=PatternType.PREFIXED)
    authorizer_with((ResourceType.TOPIC, "billing", AclOperation.READ), into=authorizer)
    everything_shown = await broker_ask(b, ApiKey.METADATA, 12, metadata_of(ops=True),
                                        authorizer)
    assert [(t.name, t.topic_authorized_operations) for t in everything_shown.topics] == [
        ("app-1", bits(AclOperation.DESCRIBE)), ("app-2", bits(AclOperation.DESCRIBE)),
        ("billing", bits(AclOperation.READ, AclOperation.DESCRIBE))]
    v0 = await broker_ask(b, ApiKey.METADATA, 0, {"topics": []}, authorizer)
    assert [t.name for t in v0.topics] == ["app-1", "app-2", "billing"]
    named = await broker_ask(b, ApiKey.METADATA, 12, metadata_of("secret", "missing",
                                                                 "app-1"), authorizer)
    assert [(t.name, t.error_code, t.topic_id, len(t.partitions)) for t in named.topics] == [
        ("secret", ErrorCode.topic_authorization_failed, None, 0),
        ("missing", ErrorCode.topic_authorization_failed, None, 0),  # alike: nothing told
        ("app-1", ErrorCode.none, topic_id_of(b, "app-1"), 1)]
    # Without an authorizer, everything is shown and every operation reported.
    open_ = await broker_ask(b, ApiKey.METADATA, 12, metadata_of(ops=True), None)
    assert {t.name: t.topic_authorized_operations for t in open_.topics} == dict.fromkeys(
        ("app-1", "app-2", "billing", "secret"), bits(*table.SUPPORTED_OPERATIONS[
            table.Res.TOPIC]))
    paged = await broker_ask(b, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [], "response_partition_limit": 100, "cursor": None}, authorizer)
    assert [t.name for t in paged.topics] == ["app-1", "app-2", "billing"]


async def test_list_groups_shows_the_groups_the_principal_may_describe(broker_node: Any
                                                                       ) -> None:
    b = broker_node
    await everything(b)
    for group_id in ("team-a", "team-b", "other"):
        await broker_ask(b, ApiKey.OFFSET_COMMIT, 9, commit(group_id), SUPER)
    listing = {"states_filter": [], "types_filter": []}
    team = authorizer_with((ResourceType.GROUP, "team-", AclOperation.DESCRIBE),
                           pattern=PatternType.PREFIXED)
    listed = await broker_ask(b, ApiKey.LIST_GROUPS, 5, listing, team)
    assert sorted(g.group_id for g in listed.groups) == ["team-a", "team-b"]
    authorizer_with((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE), into=team)
    listed = await broker_ask(b, ApiKey.LIST_GROUPS, 5, listing, team)
    assert sorted(g.group_id for g in listed.groups) == ["other", "team-a", "team-b"]
    # OffsetFetch of all a group's topics leaves out those it may not describe.
    fetch_all = {"groups": [{"group_id": "team-a", "topics": None}], "require_stable": False}
    assert (await broker_ask(b, ApiKey.OFFSET_FETCH, 9, fetch_all, team)).groups[0].topics == ()
    authorizer_with((ResourceType.TOPIC, TOPIC_NAME, AclOperation.DESCRIBE), into=team)
    (group,) = (await broker_ask(b, ApiKey.OFFSET_FETCH, 9, fetch_all, team)).groups
    assert [t.name for t in group.topics] == [TOPIC_NAME]


async def test_a_consumer_regex_matches_only_the_topics_it_may_describe(broker_node: Any
                                                                        ) -> None:
    b = broker_node
    await everything(b)
    broker_tests.create_topic(b, "orders-secret")
    authorizer = authorizer_with((ResourceType.GROUP, GROUP_NAME, AclOperation.READ),
                                 (ResourceType.TOPIC, TOPIC_NAME, AclOperation.DESCRIBE))
    joined = await broker_ask(b, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        **HEARTBEAT_848, "subscribed_topic_names": None, "subscribed_topic_regex": "orders.*"},
        authorizer)
    assert joined.error_code == ErrorCode.none
    described = await broker_ask(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [GROUP_NAME], "include_authorized_operations": True}, SUPER)
    (member,) = described.groups[0].members
    assert [tp.topic_name for tp in member.target_assignment.topic_partitions] == [TOPIC_NAME]
    # Bob may not describe the group; a principal that may describe it but not the
    # topics assigned in it gets neither.
    refused = await broker_ask(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [GROUP_NAME], "include_authorized_operations": True}, authorizer,
        Principal("User", "bob"))
    assert refused.groups[0].error_code == ErrorCode.group_authorization_failed
    group_only = authorizer_with((ResourceType.GROUP, GROUP_NAME, AclOperation.DESCRIBE))
    hidden = await broker_ask(b, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [GROUP_NAME], "include_authorized_operations": True}, group_only)
    (group,) = hidden.groups
    assert (group.error_code, group.members, group.authorized_operations) == (
        ErrorCode.topic_authorization_failed, (), -(2**31))


# --- turning it on ----------------------------------------------------------------------------

def test_a_node_starts_with_kafkas_standard_authorizer_and_no_other() -> None:
    from ottla.common.config import ConfigError
    from ottla.common.server_config import KafkaConfig, dev_defaults
    from ottla.security.authorizer import STANDARD_AUTHORIZER
    from ottla.server.listener_security import check_security

    def config(**keys: str) -> KafkaConfig:
        return KafkaConfig({**dev_defaults(), **keys})

    check_security(config(**{"authorizer.class.name": STANDARD_AUTHORIZER,
                             "super.users": "User:admin; User:CN=broker"}))
    with pytest.raises(ConfigError, match="only"):
        check_security(config(**{"authorizer.class.name": "kafka.security.authorizer."
                                                          "AclAuthorizer"}))
    with pytest.raises(ConfigError, match=r"super\.users"):
        check_security(config(**{"authorizer.class.name": STANDARD_AUTHORIZER,
                                 "super.users": "admin"}))


def test_a_node_builds_one_authorizer_from_its_config(tmp_path: Any) -> None:
    """The node's StandardAuthorizer (which its listeners' dispatchers and its metadata
    publisher get at start), from its own keys; none without authorizer.class.name."""
    from ottla.common.server_config import KafkaConfig, dev_defaults
    from ottla.security.authorizer import STANDARD_AUTHORIZER
    from ottla.server.node import Node

    node = Node(KafkaConfig({**dev_defaults(), "log.dirs": str(tmp_path),
                             "authorizer.class.name": STANDARD_AUTHORIZER,
                             "super.users": "User:admin",
                             "allow.everyone.if.no.acl.found": "true"}))
    assert node.authorizer is not None
    assert node.authorizer.super_users == {"User:admin"}
    assert node.authorizer.allow_everyone_if_no_acl_found
    assert Node(KafkaConfig({**dev_defaults(), "log.dirs": str(tmp_path)})).authorizer is None
