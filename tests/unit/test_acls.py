"""Kafka ACLs as KRaft metadata and the StandardAuthorizer model: the two metadata records,
the image and its snapshots and deltas, the controller's CreateAcls and DeleteAcls (Kafka's
AclControlManager behind AclApis), DescribeAcls, the authorizer's decisions and
``ottla acls`` (kafka-acls.sh).

The expectations are Kafka's (apache/kafka, 4.x): the layouts of
``metadata/src/main/resources/common/metadata/{,Remove}AccessControlEntryRecord.json``;
the codes of ``clients/.../common/acl`` and ``common/resource``; the messages of
``AclControlManager`` and ``AclApis``; ``ResourcePatternFilterTest`` and
``AclControlManagerTest``; the authorization cases of ``StandardAuthorizerTest``
(metadata/src/test/java/org/apache/kafka/metadata/authorizer), ``AuthorizerTest`` and
``BaseAuthorizerTest`` (core/src/test/scala/unit/kafka/security/authorizer), each case
naming its test; and kafka-acls' checks and output lines (``AclCommand.java`` and
``AclCommandTest``). Where no Kafka test covers a rule, the case says which part of
Kafka's source it follows.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from typing import Any

import pytest

from ottla.broker.handlers import broker_apis
from ottla.broker.handlers.acls import describe_acls, handle_describe_acls
from ottla.broker.handlers.forwarding import FORWARDED
from ottla.cli import acls as acls_cli
from ottla.cli.main import build_parser
from ottla.cli.main import main as ottla_main
from ottla.common.principal import Principal
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.common.uuids import parse_kafka_uuid
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import encode_body
from ottla.protocol.error_response import error_response
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from ottla.protocol.requests import CloseConnection
from ottla.security.acl import (
    ANY_BINDING,
    ANY_ENTRY,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_filter,
    validate_new_acl,
)
from ottla.security.authorizer import (
    STANDARD_AUTHORIZER,
    StandardAuthorizer,
    configured_default,
    configured_super_users,
    java_host_address,
)
from ottla.server.controller_apis import controller_apis
from ottla.timeline import SnapshotRegistry
from tests.kafka_versions import BROKER_APIS, CONTROLLER_APIS
from tests.unit.test_controller_apis import VOTERS, Env, ask, make_env

Op, Perm = AclOperation, AclPermissionType
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN, TOKEN, USER = (ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                    ResourceType.USER)
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def acl(resource_type: ResourceType, name: str, pattern: PatternType, principal: str,
        host: str, operation: AclOperation, permission: AclPermissionType) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


# --- the wire numbers --------------------------------------------------------------------


def test_the_enums_have_kafkas_codes() -> None:
    assert {m.name: m.value for m in ResourceType} == {
        "UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6, "USER": 7}
    assert {m.name: m.value for m in PatternType} == {
        "UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {m.name: m.value for m in AclOperation} == {
        "UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6,
        "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10,
        "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13,
        "DESCRIBE_TOKENS": 14, "TWO_PHASE_COMMIT": 15}
    assert {m.name: m.value for m in AclPermissionType} == {
        "UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
    # fromCode: a code Kafka does not know is UNKNOWN.
    assert AclOperation.from_code(99) == AclOperation.UNKNOWN
    assert ResourceType.from_code(-1) == ResourceType.UNKNOWN


def test_names_as_kafkas_security_utils_reads_them() -> None:
    """SecurityUtils.operation: Pascal case, or the same upper-cased; UNKNOWN else."""
    assert AclOperation.from_name("IdempotentWrite") == AclOperation.IDEMPOTENT_WRITE
    assert AclOperation.from_name("idempotentwrite") == AclOperation.IDEMPOTENT_WRITE
    assert AclOperation.from_name("read") == AclOperation.READ
    assert AclOperation.from_name("IDEMPOTENT_WRITE") == AclOperation.UNKNOWN
    assert AclOperation.from_name("Fly") == AclOperation.UNKNOWN
    assert AclOperation.TWO_PHASE_COMMIT.pascal_name == "TwoPhaseCommit"


def test_strings_are_kafkas_to_string() -> None:
    binding = acl(TOPIC, "t", LITERAL, "User:alice", "*", Op.WRITE, ALLOW)
    assert str(binding.pattern) == \
        "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(binding.entry) == \
        "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
    assert str(binding) == ("(pattern=ResourcePattern(resourceType=TOPIC, name=t, "
                            "patternType=LITERAL), entry=(principal=User:alice, host=*, "
                            "operation=WRITE, permissionType=ALLOW))")
    assert str(ResourcePatternFilter(ResourceType.ANY, None, PatternType.MATCH)) == \
        "ResourcePattern(resourceType=ANY, name=<any>, patternType=MATCH)"
    assert str(ANY_ENTRY) == "(principal=<any>, host=<any>, operation=ANY, permissionType=ANY)"


# --- records -----------------------------------------------------------------------------

ACL_ID = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")


def test_access_control_entry_record_is_type_18_v0_in_kafkas_layout() -> None:
    record = r.AccessControlEntryRecord(
        id=ACL_ID, resource_type=2, resource_name="foo", pattern_type=3,
        principal="User:alice", host="*", operation=4, permission_type=3)
    # frame 0, apiKey 18, version 0; then, flexible: uuid Id, int8 ResourceType, compact
    # string ResourceName, int8 PatternType, compact strings Principal and Host, int8
    # Operation and PermissionType, no tagged fields.
    expected = (bytes([1, 18, 0]) + ACL_ID.bytes + bytes([2]) + bytes([4]) + b"foo"
                + bytes([3]) + bytes([11]) + b"User:alice" + bytes([2]) + b"*"
                + bytes([4, 3]) + bytes([0]))
    assert r.encode(record) == expected
    assert r.decode(expected) == record


def test_remove_access_control_entry_record_is_type_19_v0_in_kafkas_layout() -> None:
    record = r.RemoveAccessControlEntryRecord(id=ACL_ID)
    expected = bytes([1, 19, 0]) + ACL_ID.bytes + bytes([0])
    assert r.encode(record) == expected
    assert r.decode(expected) == record


# StandardAclWithIdTest.TEST_ACLS (ids and ACLs of StandardAclTest.TEST_ACLS).
TEST_ACLS = [
    (parse_kafka_uuid("QZDDv-R7SyaPgetDPGd0Mw"),
     acl(CLUSTER, "kafka-cluster", LITERAL, "User:*", "*", Op.ALTER, ALLOW)),
    (parse_kafka_uuid("SdDjEdlbRmy2__WFKe3RMg"),
     acl(TOPIC, "foo_", PREFIXED, "User:*", "*", Op.READ, ALLOW)),
    (parse_kafka_uuid("wQzt5gkSTwuQNXZF5gIw7A"),
     acl(GROUP, "mygroup", LITERAL, "User:foo", "*", Op.READ, DENY)),
    (parse_kafka_uuid("ab_5xjJXSbS1o5jGfhgQXg"),
     acl(GROUP, "mygroup", PREFIXED, "User:foo", "*", Op.READ, DENY)),
]


def entry_record(acl_id: uuid.UUID, binding: AclBinding) -> r.AccessControlEntryRecord:
    return r.AccessControlEntryRecord(
        id=acl_id, resource_type=binding.resource_type, resource_name=binding.resource_name,
        pattern_type=binding.pattern_type, principal=binding.principal, host=binding.host,
        operation=binding.operation, permission_type=binding.permission_type)


# --- validation and filters --------------------------------------------------------------


def test_validate_new_acl_as_acl_control_manager() -> None:
    """AclControlManagerTest.testValidateNewAcl, and validateNewAcl's name check."""
    ok = acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALTER, ALLOW)
    assert validate_new_acl(ok) is None
    cases = [
        (dict(pattern_type=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (dict(pattern_type=PatternType.MATCH), "Invalid patternType MATCH"),
        (dict(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (dict(resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (dict(operation=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (dict(operation=Op.ANY), "Invalid operation ANY"),
        (dict(permission_type=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (dict(permission_type=Perm.ANY), "Invalid permissionType ANY"),
        (dict(resource_name=""), "Resource name should not be empty"),
    ]
    fields = ("resource_type", "resource_name", "pattern_type", "principal", "host",
              "operation", "permission_type")
    for change, message in cases:
        values = {f: getattr(ok, f) for f in fields}
        values.update(change)
        assert validate_new_acl(AclBinding(**values)) == message


def test_validate_filter_as_acl_control_manager() -> None:
    """AclControlManagerTest.testValidateFilter."""
    assert validate_filter(AclBindingFilter.of(
        ResourcePatternFilter(ResourceType.ANY, "*", PatternType.ANY),
        AccessControlEntryFilter("User:*", "*", Op.ANY, Perm.ANY))) is None
    assert validate_filter(AclBindingFilter.of(
        ResourcePatternFilter(ResourceType.ANY, "*", PatternType.UNKNOWN),
        AccessControlEntryFilter("User:*", "*", Op.ANY, Perm.ANY))) == "Unknown patternFilter."
    assert validate_filter(AclBindingFilter.of(
        ResourcePatternFilter(ResourceType.ANY, "*", PatternType.ANY),
        AccessControlEntryFilter("User:*", "*", Op.ANY, Perm.UNKNOWN))) == \
        "Unknown entryFilter."


# ResourcePatternFilterTest, case by case: (filter, pattern, matches).
PATTERN_FILTER_CASES = [
    ("shouldNotMatchIfDifferentResourceType", (TOPIC, "Name", LITERAL),
     (GROUP, "Name", LITERAL), False),
    ("shouldNotMatchIfDifferentName", (TOPIC, "Different", PREFIXED),
     (TOPIC, "Name", PREFIXED), False),
    ("shouldNotMatchIfDifferentNameCase", (TOPIC, "NAME", LITERAL),
     (TOPIC, "Name", LITERAL), False),
    ("shouldNotMatchIfDifferentPatternType", (TOPIC, "Name", LITERAL),
     (TOPIC, "Name", PREFIXED), False),
    ("shouldMatchWhereResourceTypeIsAny", (ResourceType.ANY, "Name", PREFIXED),
     (TOPIC, "Name", PREFIXED), True),
    ("shouldMatchWhereResourceNameIsAny", (TOPIC, None, PREFIXED),
     (TOPIC, "Name", PREFIXED), True),
    ("shouldMatchWherePatternTypeIsAny", (TOPIC, None, PatternType.ANY),
     (TOPIC, "Name", PREFIXED), True),
    ("shouldMatchWherePatternTypeIsMatch", (TOPIC, None, PatternType.MATCH),
     (TOPIC, "Name", PREFIXED), True),
    ("shouldMatchLiteralIfExactMatch", (TOPIC, "Name", LITERAL),
     (TOPIC, "Name", LITERAL), True),
    ("shouldMatchLiteralIfNameMatchesAndFilterIsOnPatternTypeAny",
     (TOPIC, "Name", PatternType.ANY), (TOPIC, "Name", LITERAL), True),
    ("shouldMatchLiteralIfNameMatchesAndFilterIsOnPatternTypeMatch",
     (TOPIC, "Name", PatternType.MATCH), (TOPIC, "Name", LITERAL), True),
    ("shouldNotMatchLiteralIfNamePrefixed", (TOPIC, "Name-something", PatternType.MATCH),
     (TOPIC, "Name", LITERAL), False),
    ("shouldMatchLiteralWildcardIfExactMatch", (TOPIC, "*", LITERAL),
     (TOPIC, "*", LITERAL), True),
    ("shouldNotMatchLiteralWildcardAgainstOtherName", (TOPIC, "Name", LITERAL),
     (TOPIC, "*", LITERAL), False),
    ("shouldNotMatchLiteralWildcardTheWayAround", (TOPIC, "*", LITERAL),
     (TOPIC, "Name", LITERAL), False),
    ("shouldNotMatchLiteralWildcardIfFilterHasPatternTypeOfAny",
     (TOPIC, "Name", PatternType.ANY), (TOPIC, "*", LITERAL), False),
    ("shouldMatchLiteralWildcardIfFilterHasPatternTypeOfMatch",
     (TOPIC, "Name", PatternType.MATCH), (TOPIC, "*", LITERAL), True),
    ("shouldMatchPrefixedIfExactMatch", (TOPIC, "Name", PREFIXED),
     (TOPIC, "Name", PREFIXED), True),
    ("shouldNotMatchIfBothPrefixedAndFilterIsPrefixOfResource", (TOPIC, "Name", PREFIXED),
     (TOPIC, "Name-something", PREFIXED), False),
    ("shouldNotMatchIfBothPrefixedAndResourceIsPrefixOfFilter",
     (TOPIC, "Name-something", PREFIXED), (TOPIC, "Name", PREFIXED), False),
    ("shouldNotMatchPrefixedIfNamePrefixedAnyFilterTypeIsAny",
     (TOPIC, "Name-something", PatternType.ANY), (TOPIC, "Name", PREFIXED), False),
    ("shouldMatchPrefixedIfNamePrefixedAnyFilterTypeIsMatch",
     (TOPIC, "Name-something", PatternType.MATCH), (TOPIC, "Name", PREFIXED), True),
]


@pytest.mark.parametrize("case", PATTERN_FILTER_CASES, ids=[c[0] for c in PATTERN_FILTER_CASES])
def test_resource_pattern_filters_match_as_kafkas(case: tuple[Any, ...]) -> None:
    _, pattern_filter, pattern, matches = case
    assert ResourcePatternFilter(*pattern_filter).matches(ResourcePattern(*pattern)) is matches


def test_unknown_filters_as_kafkas() -> None:
    """ResourcePatternFilterTest.shouldBeUnknownIfResourceTypeUnknown and
    shouldBeUnknownIfPatternTypeUnknown."""
    assert ResourcePatternFilter(ResourceType.UNKNOWN, None, LITERAL).is_unknown
    assert ResourcePatternFilter(GROUP, None, PatternType.UNKNOWN).is_unknown


def test_entry_filters_match_as_kafkas() -> None:
    """AccessControlEntryFilter.matches: null principal or host and ANY match anything."""
    entry = AccessControlEntry("User:alice", "10.0.0.1", Op.READ, ALLOW)
    assert ANY_ENTRY.matches(entry)
    assert AccessControlEntryFilter("User:alice", None, Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, "*", Op.ANY, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, Op.WRITE, Perm.ANY).matches(entry)
    assert not AccessControlEntryFilter(None, None, Op.ANY, DENY).matches(entry)
    # A binding's own filter matches it and nothing else (matchesAtMostOne).
    binding = AclBinding.of(ResourcePattern(TOPIC, "t", LITERAL), entry)
    assert binding.to_filter().matches(binding) and binding.to_filter().matches_at_most_one()
    assert ANY_BINDING.find_indefinite_field() == "Resource type is ANY."


# --- the image ---------------------------------------------------------------------------


def test_the_image_replays_acls_and_lists_them_by_filter() -> None:
    image = MetadataImage()
    for acl_id, binding in TEST_ACLS:
        image.replay(entry_record(acl_id, binding))
    assert {a.id: a for a in image.acl_bindings()} == {i: b for i, b in TEST_ACLS}
    assert all(a.id == i for i, a in image.acls.items())
    groups = image.acl_bindings(AclBindingFilter(GROUP))
    assert [(a.resource_name, a.pattern_type) for a in groups] == [
        ("mygroup", LITERAL), ("mygroup", PREFIXED)]
    assert image.acl_id(TEST_ACLS[1][1]) == TEST_ACLS[1][0]
    image.replay(r.RemoveAccessControlEntryRecord(id=TEST_ACLS[1][0]))
    assert image.acl_id(TEST_ACLS[1][1]) is None
    assert TEST_ACLS[1][0] not in image.acls
    image.replay(r.RemoveAccessControlEntryRecord(id=TEST_ACLS[1][0]))  # no error


def test_a_snapshot_carries_the_acls() -> None:
    image = MetadataImage()
    for acl_id, binding in TEST_ACLS:
        image.replay(entry_record(acl_id, binding))
    image.replay(r.RemoveAccessControlEntryRecord(id=TEST_ACLS[2][0]))
    snapshot = image.to_records()
    written = [x for x in snapshot if isinstance(x, r.AccessControlEntryRecord)]
    assert sorted(written, key=lambda x: x.id.int) == written  # by id: a fixed order
    assert {x.id for x in written} == {TEST_ACLS[i][0] for i in (0, 1, 3)}
    copy = MetadataImage()
    loader = MetadataLoader(copy)
    loader.load_snapshot(decode_snapshot(encode_snapshot(snapshot, 1, batch_size=2)).records,
                         100)
    assert copy.digest() == image.digest()
    assert copy.acl_bindings() == image.acl_bindings()
    assert loader.take_delta().full


def test_the_delta_notes_each_acl_added_or_removed() -> None:
    """Kafka's AclsDelta: the ACL under each id, empty (None) for one removed."""
    image = MetadataImage()
    loader = MetadataLoader(image)
    (a_id, a), (b_id, b) = TEST_ACLS[:2]
    loader.apply(entry_record(a_id, a), 0)
    loader.take_delta()
    loader.apply(entry_record(b_id, b), 1)
    loader.apply(r.RemoveAccessControlEntryRecord(id=a_id), 2)
    delta = loader.take_delta()
    assert delta.acl_changes == {b_id: b, a_id: None} and delta.changed
    assert delta.acl_changes[b_id].id == b_id  # type: ignore[union-attr]


def test_a_timeline_image_reverts_uncommitted_acls() -> None:
    registry = SnapshotRegistry()
    image = MetadataImage(registry)
    (a_id, a), (b_id, b) = TEST_ACLS[:2]
    image.replay(entry_record(a_id, a))
    registry.get_or_create_snapshot(1)
    image.replay(r.RemoveAccessControlEntryRecord(id=a_id))
    image.replay(entry_record(b_id, b))
    registry.revert_to_snapshot(1)
    assert list(image.acls) == [a_id]
    assert image.acl_id(a) == a_id and image.acl_id(b) is None


# --- the controller: CreateAcls and DeleteAcls --------------------------------------------


def controller() -> QuorumController:
    import random

    return QuorumController(1, rng=random.Random(5))


def run(c: QuorumController, result: Any) -> Any:
    for record in result.records:
        c.replay(r.decode(r.encode(record)))
    return result.response


def test_create_and_delete_as_acl_control_manager_test() -> None:
    """AclControlManagerTest.testCreateAclDeleteAcl."""
    c = controller()
    to_create = [b for _, b in TEST_ACLS[:3]]
    to_create.append(acl(TOPIC, "*", PatternType.UNKNOWN, "User:*", "*", Op.ALTER, ALLOW))
    result = c.acls.create_acls(to_create)
    assert result.response == [(ErrorCode.none, None)] * 3 + [
        (ErrorCode.invalid_request, "Invalid patternType UNKNOWN")]
    assert [type(x) for x in result.records] == [r.AccessControlEntryRecord] * 3
    run(c, result)
    assert len(c.image.acls) == 3
    deleted = c.acls.delete_acls([
        AclBindingFilter.of(ResourcePatternFilter(ResourceType.ANY, None, LITERAL)),
        AclBindingFilter.of(ResourcePatternFilter(ResourceType.UNKNOWN, None, LITERAL))])
    (first_code, first_message, first), (second_code, second_message, second) = \
        deleted.response
    assert (first_code, first_message) == (ErrorCode.none, None)
    assert set(first) == {TEST_ACLS[0][1], TEST_ACLS[2][1]}
    assert (second_code, second_message, second) == (
        ErrorCode.invalid_request, "Unknown patternFilter.", [])
    run(c, deleted)
    assert [a for a in c.image.acls.values()] == [TEST_ACLS[1][1]]


def test_deleting_one_acl_by_two_filters_removes_it_once() -> None:
    """AclControlManagerTest.testDeleteDedupe: one record, two filter results."""
    c = controller()
    binding = acl(TOPIC, "topic-1", LITERAL, "User:user", "10.0.0.1", Op.ALL, ALLOW)
    run(c, c.acls.create_acls([binding]))
    (acl_id,) = c.image.acls
    result = c.acls.delete_acls([binding.to_filter(), ANY_BINDING])
    assert result.records == [r.RemoveAccessControlEntryRecord(id=acl_id)]
    assert [matched for _, _, matched in result.response] == [[binding], [binding]]
    assert result.response[0][2][0].id == acl_id


def test_an_existing_acl_or_one_named_twice_is_stored_once() -> None:
    """AclControlManager.createAcls: existingAcls.add is false for an ACL stored (or just
    created), which succeeds without a record."""
    c = controller()
    binding = TEST_ACLS[1][1]
    result = c.acls.create_acls([binding, binding])
    assert len(result.records) == 1 and result.response == [(ErrorCode.none, None)] * 2
    run(c, result)
    again = c.acls.create_acls([binding])
    assert (again.records, again.response) == ([], [(ErrorCode.none, None)])


def test_aclapis_checks_come_first() -> None:
    """AclApis.handleCreateAcls (KRaft runs it on the controller): the CLUSTER name, then
    an empty name, before validateNewAcl."""
    c = controller()
    result = c.acls.create_acls([
        acl(CLUSTER, "my-cluster", LITERAL, "User:*", "*", Op.ALTER, ALLOW),
        acl(TOPIC, "", LITERAL, "User:*", "*", Op.ANY, ALLOW),
        acl(ResourceType.UNKNOWN, "x", LITERAL, "User:*", "*", Op.READ, ALLOW)])
    assert result.records == []
    assert result.response == [
        (ErrorCode.invalid_request,
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN")]


def test_acl_ids_are_random_and_new() -> None:
    c = controller()
    run(c, c.acls.create_acls([b for _, b in TEST_ACLS]))
    ids = list(c.image.acls)
    assert len(set(ids)) == 4 and all(i.version == 4 for i in ids)


def test_acls_filter_deletion_as_authorizer_test() -> None:
    """AuthorizerTest.testAclsFilter: describe by filters, then delete with four filters;
    an ACL two filters match is in both results."""
    c = controller()
    resource1 = ResourcePattern(TOPIC, "foo-3c8f", LITERAL)
    resource2 = ResourcePattern(TOPIC, "bar-9a1e", LITERAL)
    prefixed = ResourcePattern(TOPIC, "bar-", PREFIXED)
    acl1 = AclBinding.of(resource1, AccessControlEntry("User:alice", "*", Op.READ, ALLOW))
    acl2 = AclBinding.of(resource1, AccessControlEntry("User:alice", "192.168.0.1", Op.WRITE,
                                                       ALLOW))
    acl3 = AclBinding.of(resource2, AccessControlEntry("User:alice", "*", Op.DESCRIBE, ALLOW))
    acl4 = AclBinding.of(prefixed, AccessControlEntry("User:*", "*", Op.READ, ALLOW))
    run(c, c.acls.create_acls([acl1, acl2, acl3, acl4]))
    assert set(c.image.acl_bindings(ANY_BINDING)) == {acl1, acl2, acl3, acl4}
    assert set(c.image.acl_bindings(AclBindingFilter.of(resource1.to_filter()))) == {acl1, acl2}
    assert set(c.image.acl_bindings(AclBindingFilter.of(prefixed.to_filter()))) == {acl4}
    matching = AclBindingFilter.of(ResourcePatternFilter(ResourceType.ANY, resource2.name,
                                                         PatternType.MATCH))
    assert set(c.image.acl_bindings(matching)) == {acl3, acl4}
    result = c.acls.delete_acls([
        matching, acl1.to_filter(), AclBindingFilter.of(resource2.to_filter()),
        AclBindingFilter.of(ResourcePatternFilter(TOPIC, "baz", PatternType.ANY))])
    assert [(code, set(found)) for code, _, found in result.response] == [
        (ErrorCode.none, {acl3, acl4}), (ErrorCode.none, {acl1}), (ErrorCode.none, {acl3}),
        (ErrorCode.none, set())]
    run(c, result)
    assert c.image.acl_bindings() == [acl2]


# --- the wire ----------------------------------------------------------------------------


def acl_env() -> Env:
    """The controller listener of a node whose authorizer.class.name is Kafka's
    StandardAuthorizer."""
    env = make_env()
    env.services.config = KafkaConfig(dict(dev_defaults(), **{
        "controller.quorum.voters": VOTERS, "authorizer.class.name": STANDARD_AUTHORIZER}))
    return env


def creation(resource_type: int, name: str, pattern: int, principal: str, host: str,
             operation: int, permission: int) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name,
            "resource_pattern_type": pattern, "principal": principal, "host": host,
            "operation": operation, "permission_type": permission}


def describe_body(resource_type: int = 1, name: str | None = None, pattern: int = 1,
                  principal: str | None = None, host: str | None = None,
                  operation: int = 1, permission: int = 1) -> dict[str, Any]:
    return {"resource_type_filter": resource_type, "resource_name_filter": name,
            "pattern_type_filter": pattern, "principal_filter": principal,
            "host_filter": host, "operation": operation, "permission_type": permission}


def delete_body(*filters: dict[str, Any]) -> dict[str, Any]:
    return {"filters": list(filters)}


def test_both_listeners_serve_the_acl_apis_at_kafka_44s_versions() -> None:
    broker = {s.api_key: (s.min_version, s.max_version) for s in broker_apis()}
    controller_side = {s.api_key: (s.min_version, s.max_version) for s in controller_apis()}
    for key in (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS):
        assert broker[key] == BROKER_APIS[key] == (1, 3)
        assert controller_side[key] == CONTROLLER_APIS[key] == (1, 3)
    # Brokers forward the changes (KafkaApis.maybeForwardToController) and describe
    # from their own image.
    assert {(ApiKey.CREATE_ACLS, 1, 3), (ApiKey.DELETE_ACLS, 1, 3)} <= set(FORWARDED)
    assert ApiKey.DESCRIBE_ACLS not in {k for k, _, _ in FORWARDED}


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_describe_delete_over_the_wire(version: int) -> None:
    env = acl_env()
    created = await ask(env, ApiKey.CREATE_ACLS, version, {"creations": [
        creation(2, "orders", 3, "User:alice", "*", 4, 3),
        creation(2, "orders", 3, "User:alice", "*", 8, 3),
        creation(3, "app-", 4, "User:*", "10.0.0.1", 3, 2),
        creation(4, "kafka-cluster", 3, "User:admin", "*", 2, 3)]})
    assert [(x.error_code, x.error_message) for x in created.results] == [
        (ErrorCode.none, None)] * 4
    described = await ask(env, ApiKey.DESCRIBE_ACLS, version, describe_body())
    assert described.error_code == ErrorCode.none and described.error_message is None
    resources = {(x.resource_type, x.resource_name, x.pattern_type):
                 [(a.principal, a.host, a.operation, a.permission_type) for a in x.acls]
                 for x in described.resources}
    assert resources == {
        (2, "orders", 3): [("User:alice", "*", 4, 3), ("User:alice", "*", 8, 3)],
        (3, "app-", 4): [("User:*", "10.0.0.1", 3, 2)],
        (4, "kafka-cluster", 3): [("User:admin", "*", 2, 3)]}
    # MATCH on a group name finds the prefixed ACL that applies to it.
    matched = await ask(env, ApiKey.DESCRIBE_ACLS, version,
                        describe_body(resource_type=3, name="app-1", pattern=2))
    assert [(x.resource_name, x.pattern_type) for x in matched.resources] == [("app-", 4)]
    deleted = await ask(env, ApiKey.DELETE_ACLS, version, delete_body(
        describe_body(resource_type=2, name="orders", pattern=3, operation=4),
        describe_body(resource_type=0)))
    first, second = deleted.filter_results
    assert (first.error_code, [(m.resource_name, m.operation, m.error_code)
                               for m in first.matching_acls]) == (
        ErrorCode.none, [("orders", 4, ErrorCode.none)])
    assert (second.error_code, second.error_message, second.matching_acls) == (
        ErrorCode.invalid_request, "Unknown patternFilter.", ())
    assert len(env.image.acls) == 3


async def test_without_an_authorizer_the_acl_apis_are_security_disabled() -> None:
    """AclApis with no authorizer: DescribeAcls's top-level error, CreateAcls's and
    DeleteAcls's getErrorResponse, with Kafka's two messages."""
    env = make_env()
    described = await ask(env, ApiKey.DESCRIBE_ACLS, 3, describe_body())
    assert (described.error_code, described.error_message, described.resources) == (
        ErrorCode.security_disabled, "No Authorizer is configured on the broker", ())
    created = await ask(env, ApiKey.CREATE_ACLS, 3, {"creations": [
        creation(2, "t", 3, "User:a", "*", 3, 3)] * 2})
    assert [(x.error_code, x.error_message) for x in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")] * 2
    deleted = await ask(env, ApiKey.DELETE_ACLS, 3, delete_body(describe_body()))
    assert [(x.error_code, x.error_message) for x in deleted.filter_results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")]
    assert env.image.acls == {}


async def test_a_creation_that_is_no_acl_binding_fails_the_request() -> None:
    """CreateAclsRequest.aclBinding throws IllegalArgumentException for the ANY resource
    type, a MATCH or ANY pattern type, the ANY operation or permission type: every
    creation gets UNKNOWN_SERVER_ERROR, without a message (ApiError.fromThrowable)."""
    env = acl_env()
    for bad in (creation(1, "t", 3, "User:a", "*", 3, 3), creation(2, "t", 2, "User:a", "*", 3, 3),
                creation(2, "t", 3, "User:a", "*", 1, 3), creation(2, "t", 3, "User:a", "*", 3, 1)):
        created = await ask(env, ApiKey.CREATE_ACLS, 3, {"creations": [
            creation(2, "ok", 3, "User:a", "*", 3, 3), bad]})
        assert [(x.error_code, x.error_message) for x in created.results] == [
            (ErrorCode.unknown_server_error, None)] * 2
    assert env.image.acls == {}


async def test_unknown_codes_are_refused_per_creation() -> None:
    """A code Kafka does not know reads as UNKNOWN and validateNewAcl refuses it."""
    env = acl_env()
    created = await ask(env, ApiKey.CREATE_ACLS, 3, {"creations": [
        creation(2, "t", 3, "User:a", "*", 99, 3), creation(2, "t", 3, "User:a", "*", 3, 9),
        creation(2, "t", 3, "User:a", "*", 3, 3)]})
    assert [(x.error_code, x.error_message) for x in created.results] == [
        (ErrorCode.invalid_request, "Invalid operation UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid permissionType UNKNOWN"),
        (ErrorCode.none, None)]


def test_describe_acls_with_unknown_elements_closes_the_connection() -> None:
    """DescribeAclsRequest.normalizeAndValidate throws on the UNKNOWN code: Kafka's
    request parsing fails and its SocketServer closes the connection."""
    env = acl_env()
    request = build(request_schema(ApiKey.DESCRIBE_ACLS, 3), describe_body(operation=0))
    with pytest.raises(CloseConnection):
        handle_describe_acls(env.services, None, request)  # type: ignore[arg-type]


def test_describe_from_a_brokers_image_groups_by_resource() -> None:
    image = MetadataImage()
    for acl_id, binding in TEST_ACLS:
        image.replay(entry_record(acl_id, binding))
    response = describe_acls(image, AclBindingFilter(
        ResourceType.ANY, "mygroup", PatternType.MATCH))
    assert response["resources"] == [
        {"resource_type": GROUP, "resource_name": "mygroup", "pattern_type": LITERAL,
         "acls": [{"principal": "User:foo", "host": "*", "operation": Op.READ,
                   "permission_type": DENY}]},
        {"resource_type": GROUP, "resource_name": "mygroup", "pattern_type": PREFIXED,
         "acls": [{"principal": "User:foo", "host": "*", "operation": Op.READ,
                   "permission_type": DENY}]}]


def test_error_responses_are_kafkas_get_error_response() -> None:
    """CreateAclsRequest.getErrorResponse: one result per creation; DeleteAclsRequest's:
    one filter result per filter, no ACLs; DescribeAclsRequest's: the top-level error."""
    create_request = build(request_schema(ApiKey.CREATE_ACLS, 3), {"creations": [
        creation(2, "t", 3, "User:a", "*", 3, 3)] * 2})
    response = error_response(create_request, ErrorCode.not_controller, "moved")
    encode_body(build(response_schema(ApiKey.CREATE_ACLS, 3), response))
    assert [(x["error_code"], x["error_message"]) for x in response["results"]] == [
        (ErrorCode.not_controller, "moved")] * 2
    delete_request = build(request_schema(ApiKey.DELETE_ACLS, 3), delete_body(describe_body()))
    response = error_response(delete_request, ErrorCode.not_controller)
    encode_body(build(response_schema(ApiKey.DELETE_ACLS, 3), response))
    assert [(x["error_code"], x["matching_acls"]) for x in response["filter_results"]] == [
        (ErrorCode.not_controller, [])]


# --- the authorizer ----------------------------------------------------------------------

SUPER = ("User:superman",)
"""StandardAuthorizerTest.createAndInitializeStandardAuthorizer's super user."""


def user(name: str) -> Principal:
    return Principal("User", name)


def authorizer(acls: list[AclBinding], super_users: tuple[str, ...] = SUPER,
               allow_everyone: bool = False) -> StandardAuthorizer:
    a = StandardAuthorizer(super_users, allow_everyone)
    for i, binding in enumerate(acls):
        a.add_acl(uuid.UUID(int=i + 1), binding)
    return a


def foo_acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
    """StandardAuthorizerTest.newFooAcl."""
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, permission)


def bar_acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
    """StandardAuthorizerTest.newBarAcl."""
    return acl(GROUP, "bar", LITERAL, "User:*", "*", op, permission)


def many_acls() -> list[AclBinding]:
    """StandardAuthorizerTest.addManyAcls."""
    return [acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
            acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
            acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
            acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
            acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
            acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
            acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
            acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
            acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY)]


H1, H2, LOCAL = "192.168.1.1", "192.168.1.2", "10.20.30.40"
"""Two hosts of Kafka's tests, and one standing for ``InetAddress.getLocalHost()``."""
ANY_HOST = "127.0.0.1"
RESOURCE = "foo-4e3c1f0a"
"""AuthorizerTest's ``resource``: a TOPIC ``foo-<uuid>``, LITERAL."""
AUTHZ_SUPER = ("User:superuser1", "User:superuser2")
"""BaseAuthorizerTest.superUsers, "User:superuser1; User:superuser2"."""

# (source, ACLs, [(principal, host, operation, resource type, name, allowed)], options)
AUTHORIZE_CASES: list[tuple[str, list[AclBinding], list[tuple[Any, ...]], dict[str, Any]]] = [
    ("StandardAuthorizerTest.testSimpleAuthorizations",
     [foo_acl(Op.READ, ALLOW), foo_acl(Op.WRITE, ALLOW), bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
      bar_acl(Op.ALTER_CONFIGS, ALLOW)],
     [("bob", ANY_HOST, Op.READ, TOPIC, "foo_", True),
      ("fred", ANY_HOST, Op.ALTER_CONFIGS, GROUP, "bar", True)], {}),
    ("StandardAuthorizerTest.testDenyPrecedenceWithOperationAll",
     [acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
      acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
      acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
      acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW)],
     [("alice", ANY_HOST, Op.WRITE, TOPIC, "foo", False),
      ("alice", ANY_HOST, Op.READ, TOPIC, "foo", False),
      ("alice", ANY_HOST, Op.DESCRIBE, TOPIC, "foo", False),
      ("alice", ANY_HOST, Op.READ, TOPIC, "foobar", True),
      ("bob", ANY_HOST, Op.DESCRIBE, TOPIC, "foo", False),
      ("bob", ANY_HOST, Op.READ, TOPIC, "foo", False),
      ("bob", ANY_HOST, Op.WRITE, TOPIC, "foo", False),
      ("bob", ANY_HOST, Op.DESCRIBE, TOPIC, "foobaz", True),
      ("bob", ANY_HOST, Op.READ, TOPIC, "foobaz", False)], {}),
    ("StandardAuthorizerTest.testTopicAclWithOperationAll",
     [acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
      acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
      acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW)],
     [("alice", ANY_HOST, Op.WRITE, TOPIC, "foo", True),
      ("alice", ANY_HOST, Op.DESCRIBE_CONFIGS, TOPIC, "bar", True),
      ("alice", ANY_HOST, Op.DESCRIBE, TOPIC, "baz", False),
      ("bob", ANY_HOST, Op.WRITE, TOPIC, "foo", True),
      ("bob", ANY_HOST, Op.READ, TOPIC, "bar", False),
      ("bob", ANY_HOST, Op.DESCRIBE, TOPIC, "baz", True),
      ("malory", ANY_HOST, Op.DESCRIBE, TOPIC, "foo", True),
      ("malory", ANY_HOST, Op.WRITE, TOPIC, "bar", False),
      ("malory", ANY_HOST, Op.READ, TOPIC, "baz", False)], {}),
    ("StandardAuthorizerTest.testHostAddressAclValidation",
     [acl(TOPIC, "foo", LITERAL, "User:alice", H1, Op.READ, DENY),
      acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
      acl(TOPIC, "bar", LITERAL, "User:bob", H2, Op.READ, ALLOW),
      acl(TOPIC, "bar", LITERAL, "User:*", LOCAL, Op.DESCRIBE, ALLOW)],
     [(who, host, op, TOPIC, name, allowed)
      for (who, host), results in (
          (("alice", LOCAL), (True, False, True)), (("alice", H1), (False, False, False)),
          (("alice", H2), (True, False, False)), (("bob", LOCAL), (False, False, True)),
          (("bob", H1), (False, False, False)), (("bob", H2), (False, True, True)))
      for (op, name), allowed in zip(((Op.READ, "foo"), (Op.READ, "bar"),
                                      (Op.DESCRIBE, "bar")), results, strict=True)], {}),
    ("StandardAuthorizerTest.testAuthorizationWithManyAcls", many_acls(),
     [("bob", ANY_HOST, Op.READ, TOPIC, "green1", True),
      ("bob", ANY_HOST, Op.WRITE, GROUP, "wheel", False),
      ("bob", ANY_HOST, Op.READ, TOPIC, "alpha", False),
      ("bob", ANY_HOST, Op.WRITE, GROUP, "arbitrary", True),
      ("bob", ANY_HOST, Op.READ, TOPIC, "ala", False)], {}),
    ("StandardAuthorizerTest.testPrefixAcls",
     [acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
      acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
      acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW)],
     [("bob", ANY_HOST, Op.WRITE, TOPIC, "foobarr", True),
      ("bob", ANY_HOST, Op.READ, TOPIC, "goobar", False),
      ("bob", ANY_HOST, Op.READ, TOPIC, "fooa", True),
      ("alice", ANY_HOST, Op.DESCRIBE, TOPIC, "fooa", True),
      ("alice", ANY_HOST, Op.WRITE, TOPIC, "bar", False),
      ("alice", ANY_HOST, Op.READ, TOPIC, "baz", False)], {}),
    ("StandardAuthorizerTest.testAllowEveryoneIfNoAclFoundConfigEnabled",
     [acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW)],
     [("Bob", ANY_HOST, Op.READ, TOPIC, "topic1", False),
      ("Bob", ANY_HOST, Op.READ, TOPIC, "topic2", True)],
     {"super_users": ("User:alice", "User:chris"), "allow_everyone": True}),
    ("StandardAuthorizerTest.testAllowEveryoneIfNoAclFoundConfigDisabled",
     [acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW)],
     [("Bob", ANY_HOST, Op.READ, TOPIC, "topic1", False),
      ("Bob", ANY_HOST, Op.READ, TOPIC, "topic2", False)],
     {"super_users": ("User:alice", "User:chris")}),
    ("StandardAuthorizerTest.testFindResultPrincipalMatching",
     [foo_acl(Op.READ, ALLOW), bar_acl(Op.READ, DENY),
      acl(GROUP, "bar", LITERAL, "User:alice", "*", Op.READ, ALLOW)],
     [("bob", ANY_HOST, Op.READ, TOPIC, "foo_bar", True),
      ("alice", ANY_HOST, Op.READ, TOPIC, "foo_bar", False),
      ("alice", ANY_HOST, Op.READ, GROUP, "bar", False)], {}),
    ("AuthorizerTest.testTopicAcl",
     [acl(TOPIC, RESOURCE, LITERAL, "User:alice", H1, Op.READ, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", H2, Op.READ, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", H1, Op.READ, DENY),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", H1, Op.WRITE, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", "*", Op.DESCRIBE, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:rob", "*", Op.READ, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:batman", "*", Op.WRITE, ALLOW)],
     [("alice", H2, Op.READ, TOPIC, RESOURCE, True),
      ("alice", H1, Op.READ, TOPIC, RESOURCE, False),
      ("alice", H1, Op.WRITE, TOPIC, RESOURCE, True),
      ("alice", H2, Op.WRITE, TOPIC, RESOURCE, False),
      ("alice", H1, Op.DESCRIBE, TOPIC, RESOURCE, True),
      ("alice", H2, Op.DESCRIBE, TOPIC, RESOURCE, True),
      ("alice", H1, Op.ALTER, TOPIC, RESOURCE, False),
      ("alice", H2, Op.ALTER, TOPIC, RESOURCE, False),
      ("rob", H1, Op.DESCRIBE, TOPIC, RESOURCE, True),
      ("batman", H1, Op.DESCRIBE, TOPIC, RESOURCE, True),
      ("rob", H1, Op.READ, TOPIC, RESOURCE, True),
      ("batman", H1, Op.WRITE, TOPIC, RESOURCE, True)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testDenyTakesPrecedence",
     [acl(TOPIC, RESOURCE, LITERAL, "User:*", "*", Op.ALL, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", "192.168.2.1", Op.ALL, DENY)],
     [("alice", "192.168.2.1", Op.READ, TOPIC, RESOURCE, False)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testAllowAllAccess",
     [acl(TOPIC, RESOURCE, LITERAL, "User:*", "*", Op.ALL, ALLOW)],
     [("random", "192.0.4.4", Op.READ, TOPIC, RESOURCE, True)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testSuperUserHasAccess",
     [acl(TOPIC, RESOURCE, LITERAL, "User:*", "*", Op.ALL, DENY)],
     [("superuser1", "192.0.4.4", Op.READ, TOPIC, RESOURCE, True),
      ("superuser2", "192.0.4.4", Op.READ, TOPIC, RESOURCE, True)],
     {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testWildCardAcls (allow on *, deny WRITE on *)",
     [acl(TOPIC, "*", LITERAL, "User:alice", "192.168.3.1", Op.READ, ALLOW),
      acl(TOPIC, RESOURCE, LITERAL, "User:alice", "192.168.3.1", Op.WRITE, ALLOW),
      acl(TOPIC, "*", LITERAL, "User:alice", "192.168.3.1", Op.WRITE, DENY)],
     [("alice", "192.168.3.1", Op.READ, TOPIC, RESOURCE, True),
      ("alice", "192.168.3.1", Op.WRITE, TOPIC, RESOURCE, False)],
     {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testNoAclFound", [],
     [("alice", "192.168.0.1", Op.READ, TOPIC, RESOURCE, False)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testNoAclFoundOverride", [],
     [("alice", "192.168.0.1", Op.READ, TOPIC, RESOURCE, True)],
     {"super_users": AUTHZ_SUPER, "allow_everyone": True}),
    ("AuthorizerTest.testAccessAllowedIfAllowAclExistsOnWildcardResource",
     [acl(TOPIC, "*", LITERAL, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", "192.168.0.1", Op.READ, TOPIC, RESOURCE, True)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testAccessAllowedIfAllowAclExistsOnPrefixedResource",
     [acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", "192.168.0.1", Op.READ, TOPIC, RESOURCE, True)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testAuthorizeWithPrefixedResource",
     [*[acl(TOPIC, name, pattern, "User:alice", "*", Op.READ, DENY) for name, pattern in (
         ("a_other", LITERAL), ("a_other", PREFIXED), ("foo-9d1c", PREFIXED),
         ("foo-77aa", PREFIXED), ("foo-4e3c1f0a-zzz", PREFIXED), ("fooo-12ab", PREFIXED),
         ("fo-34cd", PREFIXED), ("fop-56ef", PREFIXED), ("fon-78ab", PREFIXED),
         ("fon-", PREFIXED), ("z_other", PREFIXED), ("z_other", LITERAL))],
      acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", "192.168.0.1", Op.READ, TOPIC, RESOURCE, True)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testSingleCharacterResourceAcls",
     [acl(TOPIC, "f", LITERAL, "User:alice", "*", Op.READ, ALLOW),
      acl(TOPIC, "_", PREFIXED, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", "192.168.0.1", Op.READ, TOPIC, "f", True),
      ("alice", "192.168.0.1", Op.READ, TOPIC, "foo", False),
      ("alice", "192.168.0.1", Op.READ, TOPIC, "_foo", True),
      ("alice", "192.168.0.1", Op.READ, TOPIC, "_", True),
      ("alice", "192.168.0.1", Op.READ, TOPIC, "foo_", False)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testAuthorizeWithEmptyResourceName (no ACL)", [],
     [("alice", "192.168.0.1", Op.READ, GROUP, "", False)], {"super_users": AUTHZ_SUPER}),
    ("AuthorizerTest.testAuthorizeWithEmptyResourceName (allow on *)",
     [acl(GROUP, "*", LITERAL, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", "192.168.0.1", Op.READ, GROUP, "", True)], {"super_users": AUTHZ_SUPER}),
    ("StandardAuthorizerData.checkSection: a LITERAL * is skipped for a name that begins "
     "with * (the scan's 'literal ACL whose name is a prefix' case)",
     [acl(GROUP, "*", LITERAL, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", ANY_HOST, Op.READ, GROUP, "*", True),
      ("alice", ANY_HOST, Op.READ, GROUP, "x*", True),
      ("alice", ANY_HOST, Op.READ, GROUP, "*x", False)], {}),
    ("StandardAuthorizerData: allow.everyone applies only when no ACL of any principal, "
     "host or operation applies to the resource",
     [acl(TOPIC, "t", LITERAL, "User:bob", "10.0.0.9", Op.WRITE, DENY)],
     [("alice", ANY_HOST, Op.READ, TOPIC, "t", False),
      ("alice", ANY_HOST, Op.READ, TOPIC, "u", True),
      ("alice", ANY_HOST, Op.READ, GROUP, "t", True)], {"allow_everyone": True}),
    ("StandardAuthorizerData: a resource type's ACLs do not apply to another",
     [acl(GROUP, "t", LITERAL, "User:alice", "*", Op.READ, ALLOW)],
     [("alice", ANY_HOST, Op.READ, TOPIC, "t", False)], {}),
    ("StandardAuthorizerData.findResult: User:* matches whoever asks",
     [acl(TOPIC, "t", LITERAL, "User:*", "*", Op.READ, ALLOW)],
     [("alice", ANY_HOST, Op.READ, TOPIC, "t", True)], {}),
]


@pytest.mark.parametrize("case", AUTHORIZE_CASES, ids=[c[0] for c in AUTHORIZE_CASES])
def test_authorize_as_kafkas_tests(case: tuple[Any, ...]) -> None:
    _, acls, checks, options = case
    a = authorizer(acls, **options)
    results = [(who, host, op, rt, name, a.authorize(user(who), host, op, rt, name))
               for who, host, op, rt, name, _ in checks]
    assert results == checks


def test_principals_match_by_type_and_name_and_user_star_matches_all() -> None:
    """StandardAuthorizerData.matchingPrincipals is {the session's principal, User:*} and
    findResult looks the ACL's parsed principal up in it: Group:alice is not User:alice,
    but User:* matches a principal of any type."""
    a = authorizer([acl(TOPIC, "t", LITERAL, "User:alice", "*", Op.READ, ALLOW),
                    acl(TOPIC, "t", LITERAL, "User:*", "*", Op.WRITE, ALLOW),
                    acl(TOPIC, "t", LITERAL, "User:a:b", "*", Op.DELETE, ALLOW)])
    assert not a.authorize(Principal("Group", "alice"), ANY_HOST, Op.READ, TOPIC, "t")
    assert a.authorize(Principal("Group", "alice"), ANY_HOST, Op.WRITE, TOPIC, "t")
    assert a.authorize(Principal("User", "a:b"), ANY_HOST, Op.DELETE, TOPIC, "t")


def test_implied_operations_as_find_result_implication() -> None:
    """StandardAuthorizerTest.testFindResultImplication. findResult's "no match" (null)
    shows here as a second, matching ALLOW DESCRIBE that decides instead."""
    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer([foo_acl(op, ALLOW)]).authorize(
            user("bob"), ANY_HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    assert not authorizer([foo_acl(Op.CREATE, ALLOW)]).authorize(
        user("bob"), ANY_HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # DENY implies nothing
        assert authorizer([foo_acl(op, DENY), foo_acl(Op.DESCRIBE, ALLOW)]).authorize(
            user("bob"), ANY_HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    assert not authorizer([foo_acl(Op.DESCRIBE, DENY), foo_acl(Op.READ, ALLOW)]).authorize(
        user("bob"), ANY_HOST, Op.DESCRIBE, TOPIC, "foo_bar")
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert authorizer([foo_acl(op, ALLOW)]).authorize(
            user("bob"), ANY_HOST, Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar")
    assert authorizer([foo_acl(Op.ALTER_CONFIGS, DENY),
                       foo_acl(Op.DESCRIBE_CONFIGS, ALLOW)]).authorize(
        user("bob"), ANY_HOST, Op.DESCRIBE_CONFIGS, TOPIC, "foo_bar")
    assert not authorizer([foo_acl(Op.ALTER_CONFIGS, DENY),
                           foo_acl(Op.ALL, ALLOW)]).authorize(
        user("bob"), ANY_HOST, Op.ALTER_CONFIGS, TOPIC, "foo_bar")


VALID_OPS = [op for op in AclOperation if op not in (Op.ANY, Op.UNKNOWN)]
"""AuthorizerTest.validOp."""


@pytest.mark.parametrize("parent,implied", [
    (Op.ALL, set(VALID_OPS)), (Op.READ, {Op.DESCRIBE}), (Op.WRITE, {Op.DESCRIBE}),
    (Op.DELETE, {Op.DESCRIBE}), (Op.ALTER, {Op.DESCRIBE}),
    (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}), (Op.DESCRIBE, set()),
    (Op.CREATE, set())])
def test_implications_of_allow(parent: AclOperation, implied: set[AclOperation]) -> None:
    """AuthorizerTest.testAclInheritance (testImplicationsOfAllow) on the cluster; Kafka's
    list for ALL includes TWO_PHASE_COMMIT since KIP-939."""
    a = authorizer([acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", parent, ALLOW)])
    for op in VALID_OPS:
        allowed = a.authorize(user("alice"), "192.168.3.1", op, CLUSTER, "kafka-cluster")
        assert allowed == (op in implied or op == parent), op


@pytest.mark.parametrize("parent,implied", [
    (Op.ALL, set(VALID_OPS)), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()),
    (Op.READ, set())])
def test_implications_of_deny(parent: AclOperation, implied: set[AclOperation]) -> None:
    """AuthorizerTest.testAclInheritance (testImplicationsOfDeny): a DENY next to an
    ALLOW ALL."""
    a = authorizer([acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", parent, DENY),
                    acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", "*", Op.ALL, ALLOW)])
    for op in VALID_OPS:
        allowed = a.authorize(user("alice"), "192.168.3.1", op, CLUSTER, "kafka-cluster")
        assert allowed == (op not in implied and op != parent), op


def test_super_users_and_default_from_config() -> None:
    """StandardAuthorizerTest.testGetConfiguredSuperUsers, testGetDefaultResult,
    testConfigure; AuthorizerTest.testAclConfigWithWhitespace."""
    assert configured_super_users({}) == frozenset()
    assert configured_super_users({"super.users": " "}) == frozenset()
    assert configured_super_users({"super.users": "User:bob;User:alice "}) == \
        {"User:bob", "User:alice"}
    assert configured_super_users({"super.users": ";  User:bob  ;  User:alice "}) == \
        {"User:bob", "User:alice"}
    with pytest.raises(ValueError) as e:
        configured_super_users({"super.users": "bob;:alice"})
    assert str(e.value) == "expected a string in format principalType:principalName but got bob"
    assert configured_default({}) is False
    assert configured_default({"allow.everyone.if.no.acl.found": "true"}) is True
    assert configured_default({"allow.everyone.if.no.acl.found": "false"}) is False
    assert configured_default({"allow.everyone.if.no.acl.found": " true "}) is True
    a = StandardAuthorizer.from_config({"super.users": "User:alice;User:chris",
                                        "allow.everyone.if.no.acl.found": "true"})
    assert a.super_users == {"User:alice", "User:chris"} and a.allow_everyone_if_no_acl_found
    # The node's own properties: both keys are the authorizer's, not unknown broker keys.
    config = KafkaConfig(dict(dev_defaults(), **{"super.users": "User:admin"}))
    assert "super.users" not in config.unknown
    assert StandardAuthorizer.from_config(config.originals).super_users == {"User:admin"}


def test_list_and_remove_as_standard_authorizer_test() -> None:
    """StandardAuthorizerTest.testListAcls."""
    a = authorizer([])
    foo = [(uuid.UUID(int=1), foo_acl(Op.READ, ALLOW)),
           (uuid.UUID(int=2), foo_acl(Op.WRITE, ALLOW))]
    bar = [(uuid.UUID(int=3), bar_acl(Op.DESCRIBE_CONFIGS, DENY)),
           (uuid.UUID(int=4), bar_acl(Op.ALTER_CONFIGS, DENY))]
    for acl_id, binding in foo + bar:
        a.add_acl(acl_id, binding)
    assert a.acls(ANY_BINDING) == [b for _, b in foo + bar]
    a.remove_acl(foo[1][0])
    assert a.acls(ANY_BINDING) == [foo[0][1], bar[0][1], bar[1][1]]
    assert a.acls(AclBindingFilter(TOPIC, None, PatternType.ANY)) == [foo[0][1]]
    assert a.acl_count == 3


def test_the_authorizer_follows_the_image_through_deltas_and_snapshots() -> None:
    """Kafka's AclPublisher: a snapshot loads the image's ACLs, a delta applies its
    changes; the decisions are the same either way."""
    image = MetadataImage()
    loader = MetadataLoader(image)
    a = StandardAuthorizer()
    offset = 0
    for i, binding in enumerate(many_acls()):
        loader.apply(entry_record(uuid.UUID(int=i + 1), binding), offset)
        offset += 1
    loader.apply(r.RemoveAccessControlEntryRecord(id=uuid.UUID(int=7)), offset)  # alp DENY
    a.apply_changes(loader.take_delta().acl_changes)
    rebuilt = StandardAuthorizer()
    rebuilt.load(image.acls)
    for who, op, rt, name in (("bob", Op.READ, TOPIC, "alpha"), ("bob", Op.READ, TOPIC, "ala"),
                              ("bob", Op.WRITE, GROUP, "wheel"), ("eve", Op.READ, TOPIC, "beta1")):
        assert a.authorize(user(who), ANY_HOST, op, rt, name) == \
            rebuilt.authorize(user(who), ANY_HOST, op, rt, name)
    assert a.authorize(user("bob"), ANY_HOST, Op.READ, TOPIC, "alpha")  # the DENY is gone
    assert sorted(map(str, a.acls(ANY_BINDING))) == sorted(map(str, rebuilt.acls(ANY_BINDING)))


def test_prefixes_are_looked_up_by_length_not_scanned() -> None:
    """A check looks up the name's prefixes of the lengths present (and the literal name
    and ``*``), so many ACLs on other names cost nothing."""
    acls = [acl(TOPIC, f"team-{i}-", PREFIXED, "User:*", "*", Op.READ, ALLOW)
            for i in range(2000)]
    acls += [acl(TOPIC, f"topic-{i}", LITERAL, "User:*", "*", Op.WRITE, ALLOW)
             for i in range(2000)]
    a = authorizer(acls)
    assert a.authorize(user("x"), ANY_HOST, Op.READ, TOPIC, "team-1234-orders")
    assert a.authorize(user("x"), ANY_HOST, Op.WRITE, TOPIC, "topic-77")
    assert not a.authorize(user("x"), ANY_HOST, Op.WRITE, TOPIC, "team-1234-orders")
    index = a._by_type[TOPIC]
    assert index.prefix_lengths == (7, 8, 9, 10)
    assert len(index.applying_to("team-1234-orders")) == 1
    for i in range(9):  # team-0- .. team-8-: one of length 7 is left
        a.remove_acl(uuid.UUID(int=i + 1))
    assert index.prefix_lengths == (7, 8, 9, 10)
    a.remove_acl(uuid.UUID(int=10))  # team-9-
    assert index.prefix_lengths == (8, 9, 10)
    assert not a.authorize(user("x"), ANY_HOST, Op.READ, TOPIC, "team-9-x")


# authorizeByResourceType (BaseAuthorizerTest), as sequences of additions and removals.

class Acls:
    """An authorizer with AuthorizerTest's helpers: add and remove by content."""

    def __init__(self, super_users: tuple[str, ...] = AUTHZ_SUPER,
                 allow_everyone: bool = False) -> None:
        self.authorizer = StandardAuthorizer(super_users, allow_everyone)
        self.ids: dict[AclBinding, uuid.UUID] = {}

    def add(self, resource: ResourcePattern, *entries: AccessControlEntry) -> None:
        for entry in entries:
            binding = AclBinding.of(resource, entry)
            if binding not in self.ids:
                self.ids[binding] = uuid.UUID(int=len(self.ids) + 1)
                self.authorizer.add_acl(self.ids[binding], binding)

    def remove(self, resource: ResourcePattern, *entries: AccessControlEntry) -> None:
        for entry in entries:
            self.authorizer.remove_acl(self.ids.pop(AclBinding.of(resource, entry)))

    def any(self, who: str, host: str, op: AclOperation, rt: ResourceType) -> bool:
        return self.authorizer.authorize_by_resource_type(user(who), host, op, rt)


def ace(who: str, host: str, op: AclOperation, permission: AclPermissionType
        ) -> AccessControlEntry:
    return AccessControlEntry(who, host, op, permission)


def test_by_resource_type_multiple_add_and_remove() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeMultipleAddAndRemove (one round)."""
    a = Acls()
    resource1 = ResourcePattern(TOPIC, "sb1-6f2d", LITERAL)
    deny_read, allow_read = (ace("User:user1", H1, Op.READ, DENY),
                             ace("User:user1", H1, Op.READ, ALLOW))
    for _ in range(2):
        assert not a.any("user1", H1, Op.READ, TOPIC)
        a.add(resource1, allow_read)
        assert a.any("user1", H1, Op.READ, TOPIC)
        for _ in range(2):
            a.add(resource1, deny_read)
            assert not a.any("user1", H1, Op.READ, TOPIC)
            a.remove(resource1, deny_read)
            a.add(resource1, allow_read)
            assert a.any("user1", H1, Op.READ, TOPIC)
        a.remove(resource1, allow_read)
        assert not a.any("user1", H1, Op.READ, TOPIC)


def test_by_resource_type_unrelated_deny_does_not_dominate_allow() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeIsolationUnrelatedDenyWontDominateAllow."""
    a = Acls()
    r1, r2 = ResourcePattern(TOPIC, "sb1-a", LITERAL), ResourcePattern(TOPIC, "sb2-b", LITERAL)
    r3 = ResourcePattern(GROUP, "s", PREFIXED)
    a.add(r1, ace("User:user1", H1, Op.READ, DENY), ace("User:user2", H1, Op.READ, DENY),
          ace("User:user1", H2, Op.WRITE, DENY), ace("User:user2", H2, Op.READ, DENY),
          ace("User:user1", H2, Op.READ, ALLOW))
    a.add(r2, ace("User:user1", H2, Op.READ, DENY))
    a.add(r3, ace("User:user1", H2, Op.READ, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)
    assert not a.any("user1", H1, Op.READ, GROUP)
    assert not a.any("user1", H1, Op.READ, TXN)
    assert not a.any("user1", H1, Op.READ, CLUSTER)
    assert a.any("user1", H2, Op.READ, TOPIC)


def test_by_resource_type_deny_takes_precedence() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeDenyTakesPrecedence."""
    a = Acls()
    r1 = ResourcePattern(TOPIC, "sb1-c", LITERAL)
    a.add(r1, ace("User:user1", H1, Op.WRITE, ALLOW))
    assert a.any("user1", H1, Op.WRITE, TOPIC)
    a.add(r1, ace("User:user1", H1, Op.WRITE, DENY))
    assert not a.any("user1", H1, Op.WRITE, TOPIC)


def test_by_resource_type_prefixed_deny_dominates() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypePrefixedResourceDenyDominate."""
    a = Acls()
    allow, deny = ace("User:user1", H1, Op.READ, ALLOW), ace("User:user1", H1, Op.READ, DENY)
    a.add(ResourcePattern(GROUP, "abcde", PREFIXED), allow)
    assert a.any("user1", H1, Op.READ, GROUP)
    a.add(ResourcePattern(GROUP, "abcd", PREFIXED), deny)
    assert not a.any("user1", H1, Op.READ, GROUP)
    a.add(ResourcePattern(GROUP, "abc", PREFIXED), allow)
    assert a.any("user1", H1, Op.READ, GROUP)
    a.add(ResourcePattern(GROUP, "a", PREFIXED), deny)
    assert not a.any("user1", H1, Op.READ, GROUP)
    a.add(ResourcePattern(GROUP, "ab", PREFIXED), allow)
    assert not a.any("user1", H1, Op.READ, GROUP)


def test_by_resource_type_wildcard_deny_dominates() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeWildcardResourceDenyDominate."""
    a = Acls()
    allow, deny = ace("User:user1", H1, Op.WRITE, ALLOW), ace("User:user1", H1, Op.WRITE, DENY)
    wildcard = ResourcePattern(GROUP, "*", LITERAL)
    a.add(ResourcePattern(GROUP, "hello", PREFIXED), allow)
    assert a.any("user1", H1, Op.WRITE, GROUP)
    a.add(wildcard, deny)
    assert not a.any("user1", H1, Op.WRITE, GROUP)
    a.add(wildcard, allow)
    assert not a.any("user1", H1, Op.WRITE, GROUP)
    a.add(ResourcePattern(GROUP, "aloha", LITERAL), allow)
    assert not a.any("user1", H1, Op.WRITE, GROUP)


def test_by_resource_type_with_all_operation_ace() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllOperationAce."""
    a = Acls()
    r1 = ResourcePattern(TOPIC, "sb1-d", LITERAL)
    assert not a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:user1", H1, Op.WRITE, DENY), ace("User:user1", H1, Op.ALL, ALLOW))
    assert a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:user1", H1, Op.ALL, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)


def test_by_resource_type_with_all_host_ace() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllHostAce."""
    a = Acls()
    r1, r2 = ResourcePattern(TOPIC, "sb1-e", LITERAL), ResourcePattern(TOPIC, "sb2-e", LITERAL)
    assert not a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:user1", H1, Op.READ, ALLOW))
    assert a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:user1", "*", Op.READ, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)
    a.add(r2, ace("User:user1", H1, Op.READ, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)
    assert not a.any("user1", H2, Op.READ, TOPIC)
    a.add(r2, ace("User:user1", "*", Op.READ, ALLOW))
    assert a.any("user1", H2, Op.READ, TOPIC)
    a.add(r2, ace("User:user1", "*", Op.READ, DENY))
    assert not a.any("user1", H2, Op.READ, TOPIC)


def test_by_resource_type_with_all_principal_ace() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllPrincipalAce."""
    a = Acls()
    r1, r2 = ResourcePattern(TOPIC, "sb1-f", LITERAL), ResourcePattern(TOPIC, "sb2-f", LITERAL)
    assert not a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:user1", H1, Op.READ, ALLOW))
    assert a.any("user1", H1, Op.READ, TOPIC)
    a.add(r1, ace("User:*", H1, Op.READ, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)
    a.add(r2, ace("User:user1", H1, Op.READ, DENY))
    assert not a.any("user1", H1, Op.READ, TOPIC)
    assert not a.any("user2", H1, Op.READ, TOPIC)
    a.add(r2, ace("User:*", H1, Op.READ, ALLOW))
    assert a.any("user2", H1, Op.READ, TOPIC)
    a.add(r2, ace("User:*", H1, Op.READ, DENY))
    assert not a.any("user2", H1, Op.READ, TOPIC)


def test_by_resource_type_super_user_has_access() -> None:
    """BaseAuthorizerTest.testAuthorizeByResourceTypeSuperUserHasAccess."""
    a = Acls()
    deny_all = ace("User:*", "*", Op.ALL, DENY)
    for rt in (TOPIC, CLUSTER, GROUP, TXN):
        a.add(ResourcePattern(rt, "*", LITERAL), deny_all)
        assert a.any("superuser1", "192.0.4.4", Op.READ, rt)


def test_by_resource_type_no_acl_found_override() -> None:
    """AuthorizerTest.testAuthorizeByResourceTypeNoAclFoundOverride."""
    a = Acls(allow_everyone=True)
    assert a.any("alice", "192.168.0.1", Op.READ, TOPIC)
    assert a.any("alice", "192.168.0.1", Op.WRITE, TOPIC)


def test_by_resource_type_refuses_filters_as_kafka() -> None:
    """SecurityUtils.authorizeByResourceTypeCheckArgs."""
    a = Acls().authorizer
    for op, rt, message in (
            (Op.READ, ResourceType.ANY,
             "Must specify a non-filter resource type for authorizeByResourceType"),
            (Op.READ, ResourceType.UNKNOWN, "Unknown resource type"),
            (Op.ANY, TOPIC, "Must specify a non-filter operation type for authorizeByResourceType"),
            (Op.UNKNOWN, TOPIC, "Unknown operation type")):
        with pytest.raises(ValueError) as e:
            a.authorize_by_resource_type(user("alice"), ANY_HOST, op, rt)
        assert str(e.value) == message


def test_by_resource_type_does_not_imply_operations() -> None:
    """Authorizer.authorizeByResourceType matches the operation itself or ALL only: an
    ALLOW READ does not give DESCRIBE there (authorize's implication is not applied)."""
    a = Acls(super_users=())
    a.add(ResourcePattern(TOPIC, "t", LITERAL), ace("User:alice", "*", Op.READ, ALLOW))
    assert a.any("alice", ANY_HOST, Op.READ, TOPIC)
    assert not a.any("alice", ANY_HOST, Op.DESCRIBE, TOPIC)


def test_java_host_address() -> None:
    """InetAddress.getHostAddress: what ACL hosts are compared with."""
    assert java_host_address("192.168.1.1") == "192.168.1.1"
    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert java_host_address("2001:db8::ff00:42:8329") == "2001:db8:0:0:0:ff00:42:8329"
    assert java_host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert java_host_address("not-an-ip") == "not-an-ip"


# --- ottla acls (kafka-acls.sh) ------------------------------------------------------------


class WireClient:
    """Stands in for the CLI's BlockingClient: each request goes through the controller
    listener's table (encoded and decoded as on the wire)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.sent: list[tuple[int, dict[str, Any]]] = []

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.sent.append((api_key, body))
        return asyncio.run(ask(self.env, api_key, version, body))


def cli(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", "--bootstrap-server", "x:9092", *argv])


RESOURCE_T = "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"


def test_add_prints_as_kafka_acls_and_creates(capsys: Any) -> None:
    client = WireClient(acl_env())
    args = cli("--add", "--allow-principal", "User:alice", "--operation", "Write",
               "--operation", "Read", "--topic", "t")
    acls_cli.add_acls(client, args)  # type: ignore[arg-type]
    assert capsys.readouterr().out == (
        f"Adding ACLs for resource `{RESOURCE_T}`: \n"
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    assert {(a.operation, a.permission_type) for a in client.env.image.acl_bindings()} == {
        (Op.WRITE, ALLOW), (Op.READ, ALLOW)}
    # Again, with one more: the ACLs the cluster has are reported (KAFKA-15983).
    acls_cli.add_acls(client, cli(  # type: ignore[arg-type]
        "--add", "--allow-principal", "User:alice", "--operation", "Write",
        "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--topic", "t"))
    assert capsys.readouterr().out == (
        f"Acl (pattern={RESOURCE_T}, entry=(principal=User:alice, host=*, operation=WRITE, "
        "permissionType=ALLOW)) already exists.\n"
        f"Adding ACLs for resource `{RESOURCE_T}`: \n"
        " \t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY)\n\n")


def test_list_prints_current_acls_as_kafka_acls(capsys: Any) -> None:
    client = WireClient(acl_env())
    acls_cli.add_acls(client, cli(  # type: ignore[arg-type]
        "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
        "--operation", "Describe", "--topic", "t", "--group", "g",
        "--resource-pattern-type", "Literal"))
    capsys.readouterr()
    acls_cli.list_acls(client, cli("--list", "--topic", "t"))  # type: ignore[arg-type]
    assert capsys.readouterr().out == (
        f"Current ACLs for resource `{RESOURCE_T}`:\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n")
    acls_cli.list_acls(client, cli("--list", "--principal", "User:bob"))  # type: ignore[arg-type]
    assert capsys.readouterr().out == (
        "ACLs for principal `User:bob`\n"
        f"Current ACLs for resource `{RESOURCE_T}`:\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
        "patternType=LITERAL)`:\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n")
    # --resource-pattern-type match: every ACL that applies to the name.
    acls_cli.add_acls(client, cli(  # type: ignore[arg-type]
        "--add", "--allow-principal", "User:carol", "--topic", "t",
        "--resource-pattern-type", "prefixed"))
    capsys.readouterr()
    acls_cli.list_acls(client, cli("--list", "--topic", "tea",  # type: ignore[arg-type]
                                   "--resource-pattern-type", "match"))
    assert capsys.readouterr().out == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=PREFIXED)`:\n"
        "\t(principal=User:carol, host=*, operation=ALL, permissionType=ALLOW)\n\n")


def test_remove_asks_unless_forced(capsys: Any) -> None:
    client = WireClient(acl_env())
    add = ("--allow-principal", "User:alice", "--operation", "Read", "--topic", "t")
    acls_cli.add_acls(client, cli("--add", *add))  # type: ignore[arg-type]
    capsys.readouterr()
    acls_cli.remove_acls(client, cli("--remove", *add),  # type: ignore[arg-type]
                         read_line=lambda: "n\n")
    assert capsys.readouterr().out == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        f" from resource filter `{RESOURCE_T}`? (y/n)\n")
    assert len(client.env.image.acls) == 1
    acls_cli.remove_acls(client, cli("--remove", *add),  # type: ignore[arg-type]
                         read_line=lambda: "Y\n")
    assert client.env.image.acls == {}
    acls_cli.add_acls(client, cli("--add", *add))  # type: ignore[arg-type]
    capsys.readouterr()
    # Without principals: every ACL of the resource, after its own question.
    acls_cli.remove_acls(client, cli("--remove", "--topic", "t"),  # type: ignore[arg-type]
                         read_line=lambda: "y")
    assert capsys.readouterr().out == (
        f"Are you sure you want to delete all ACLs for resource filter `{RESOURCE_T}`? (y/n)\n")
    assert client.env.image.acls == {}
    acls_cli.add_acls(client, cli("--add", *add))  # type: ignore[arg-type]
    capsys.readouterr()
    acls_cli.remove_acls(client, cli("--remove", "--force", "--topic", "t"))  # type: ignore[arg-type]
    assert capsys.readouterr().out == "" and client.env.image.acls == {}


def entries_of(args: argparse.Namespace) -> dict[str, set[tuple[str, str, str]]]:
    return {f"{f.resource_type}:{f.name}": {(a.principal, str(a.operation), str(a.permission_type))
                                            for a in acls}
            for f, acls in acls_cli.filter_to_entries(args).items()}


def test_producer_and_consumer_expand_as_kafka_acls() -> None:
    """AclCommandTest's producerResourceToAcls and CONSUMER_RESOURCE_TO_ACLS."""
    base = ("--allow-principal", "User:test1", "--topic", "test-1", "--group", "testGroup-1",
            "--transactional-id", "t0")
    allow = "ALLOW"
    assert entries_of(cli("--add", "--producer", *base)) == {
        "TOPIC:test-1": {("User:test1", op, allow) for op in ("WRITE", "DESCRIBE", "CREATE")},
        "TRANSACTIONAL_ID:t0": {("User:test1", op, allow) for op in ("WRITE", "DESCRIBE")}}
    assert entries_of(cli("--add", "--producer", "--idempotent", *base))[
        "CLUSTER:kafka-cluster"] == {("User:test1", "IDEMPOTENT_WRITE", allow)}
    consumer = ("--allow-principal", "User:test1", "--topic", "test-1", "--group", "testGroup-1")
    assert entries_of(cli("--add", "--consumer", *consumer)) == {
        "TOPIC:test-1": {("User:test1", op, allow) for op in ("READ", "DESCRIBE")},
        "GROUP:testGroup-1": {("User:test1", "READ", allow)}}
    both = entries_of(cli("--add", "--producer", "--consumer", *base))
    assert both["TOPIC:test-1"] == {("User:test1", op, allow)
                                    for op in ("WRITE", "DESCRIBE", "CREATE", "READ")}
    assert both["GROUP:testGroup-1"] == {("User:test1", "READ", allow)}


def test_hosts_default_to_the_wildcard_per_principal_kind() -> None:
    """AclCommand.getHosts: --allow-host (or * with --allow-principal); the same for deny."""
    got = acls_cli.filter_to_entries(cli("--add", "--allow-principal", "User:a",
                                         "--deny-principal", "User:b", "--allow-host", "h1",
                                         "--allow-host", "h2", "--cluster"))
    ((resource, entries),) = got.items()
    assert resource == acls_cli.CLUSTER_FILTER
    assert [(e.principal, e.host, str(e.permission_type)) for e in entries] == [
        ("User:a", "h1", "ALLOW"), ("User:a", "h2", "ALLOW"), ("User:b", "*", "DENY")]


@pytest.mark.parametrize("argv,message", [
    (["acls", "--bootstrap-server", "localhost:9092", "--bootstrap-controller", "localhost:9093"],
     "Only one of --bootstrap-server or --bootstrap-controller must be specified"),
    (["acls"], "One of --bootstrap-server or --bootstrap-controller must be specified"),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--list"],
     "Command must include exactly one action: --list, --add, --remove. "),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--principal", "User:CN=client"],
     "The --principal option is only available if --list is set"),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--producer"],
     "With --producer you must specify a --topic"),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--idempotent"],
     "The --idempotent option is only available if --producer is set"),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--consumer"],
     "With --consumer you must specify a --topic and a --group and no --cluster or "
     "--transactional-id option should be specified."),
    (["acls", "--bootstrap-server", "localhost:9092", "--list", "--producer"],
     'Option "[list]" can\'t be used with option "[producer]"'),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--producer", "--operation",
      "Read"], 'Option "[producer]" can\'t be used with option "[operation]"'),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--consumer", "--operation",
      "Read", "--topic", "test-topic", "--group", "test-group"],
     'Option "[consumer]" can\'t be used with option "[operation]"'),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--allow-principal", "User:a"],
     "You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
     "or --delegation-token <Delegation Token ID>"),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--topic", "t"],
     "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--allow-principal", "User:a",
      "--topic", "t", "--resource-pattern-type", "match"],
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["acls", "--bootstrap-server", "localhost:9092", "--add", "--allow-principal", "User:a",
      "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations [ALL, READ, DELETE, DESCRIBE, "
     "DESCRIBE_CONFIGS, ALTER_CONFIGS]"),
])
def test_usage_errors_as_acl_command_test(argv: list[str], message: str, capsys: Any) -> None:
    """AclCommandTest's assertInitializeInvalidOptionsExitCodeAndMsg cases (and
    AclCommand's other printUsageAndExit messages): exit 1, the message on stderr."""
    assert ottla_main(argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == message


def test_command_errors_as_acl_command(capsys: Any) -> None:
    """What AclCommand.main prints for an exception: ``Error while executing ACL
    command: ...`` on stdout, exit 1 (before any connection here)."""
    assert ottla_main(["acls", "--bootstrap-server", "localhost:1", "--add",
                       "--allow-principal", "bob", "--topic", "t"]) == 1
    assert capsys.readouterr().out == ("Error while executing ACL command: expected a string "
                                       "in format principalType:principalName but got bob\n")
    assert ottla_main(["acls", "--bootstrap-server", "localhost:1", "--list",
                       "--topic", "t", "--resource-pattern-type", "fancy"]) == 1
    assert capsys.readouterr().out == ("Error while executing ACL command: Cannot parse "
                                       "argument 'fancy' of option resource-pattern-type\n")


def test_the_clusters_refusal_is_reported(capsys: Any) -> None:
    client = WireClient(make_env())  # no authorizer.class.name
    with pytest.raises(acls_cli.CommandError) as e:
        acls_cli.list_acls(client, cli("--list"))  # type: ignore[arg-type]
    assert str(e.value) == ("org.apache.kafka.common.errors.SecurityDisabledException: "
                            "No Authorizer is configured on the broker")
