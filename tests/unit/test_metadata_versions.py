"""metadata.version 4.1-IV0 to 4.4-IV2 as Kafka 4.4 defines them: the levels, the
features a cluster formatted at each starts with, and what each gates that Ottla
implements (record versions written, the replica fetcher's request versions, CIDR ACL
hosts, controller unregistration). Expectations are Kafka's (tests/kafka_versions.py and
the 4.4.0 jars' ``MetadataVersion``), not Ottla's tables."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from ottla.common.features import (
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    default_feature_levels,
    replica_fetch_version,
    replica_list_offsets_version,
)
from ottla.common.principal import Principal
from ottla.controller.acl_control import check_creation
from ottla.controller.activation import elr_safety_records
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import LATEST_PRODUCTION, METADATA_VERSIONS, metadata_version
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.protocol.varint import read_unsigned_varint
from ottla.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ottla.security.authorizer import StandardAuthorizer
from tests.kafka_versions import METADATA_VERSION_LEVELS, default_levels
from tests.kafka_versions import SUPPORTED_FEATURES as KAFKA_FEATURES

NOT_OTTLAS = ("streams.version",)
"""Kafka 4.4's features Ottla does not have (docs/compatibility.md, Features)."""


def written_version(record: Any) -> int:
    """The version a record is framed with (frame version, api key, version, data)."""
    value = r.encode(record)
    _, pos = read_unsigned_varint(value, 0)
    _, pos = read_unsigned_varint(value, pos)
    return read_unsigned_varint(value, pos)[0]


def test_the_levels_and_the_newest_are_kafka_44s() -> None:
    for name, level in METADATA_VERSION_LEVELS.items():
        assert METADATA_VERSIONS[name] == level
    assert SUPPORTED_FEATURES[METADATA_VERSION] == KAFKA_FEATURES[METADATA_VERSION]
    assert LATEST_PRODUCTION == "4.4-IV2" and metadata_version(None) == ("4.4-IV2", 33)
    assert metadata_version("4.4") == ("4.4-IV2", 33)
    assert metadata_version("4.2") == ("4.2-IV1", 29)


@pytest.mark.parametrize("level", range(7, 34))
def test_a_cluster_formatted_at_a_level_starts_with_kafkas_default_features(
        level: int) -> None:
    expected = {n: v for n, v in default_levels(level).items() if n not in NOT_OTTLAS}
    assert default_feature_levels(level) == expected


def test_the_replica_fetcher_sends_the_versions_kafka_sends_at_a_level() -> None:
    """MetadataVersion.fetchRequestVersion and listOffsetRequestVersion (from 3.9-IV0)."""
    assert [replica_fetch_version(v) for v in (21, 25, 26, 27, 33)] == [17, 17, 17, 18, 18]
    assert [replica_list_offsets_version(v) for v in (9, 21, 25, 28, 29, 33)] == \
        [8, 9, 10, 10, 11, 11]


def register(level: int, **fields: Any) -> Any:
    return r.RegisterBrokerRecord.at(level)(broker_id=1, incarnation_id=uuid.UUID(int=5),
                                           broker_epoch=9, **fields)


def test_register_broker_record_is_v3_below_4_3_iv0_and_v4_from_it() -> None:
    """registerBrokerRecordVersion; v4's CordonedLogDirs is null at registration, so the
    two differ in their version only, and either reads back as a RegisterBrokerRecord."""
    old, new = register(29), register(30)
    assert (written_version(old), written_version(new)) == (3, 4)
    assert r.encode(old)[3:] == r.encode(new)[3:]
    assert type(r.decode(r.encode(old))) is r.RegisterBrokerRecord
    assert r.decode(r.encode(old)) == r.decode(r.encode(new))
    cordoned = register(33, cordoned_log_dirs=(uuid.UUID(int=3),))
    assert r.decode(r.encode(cordoned)).cordoned_log_dirs == (uuid.UUID(int=3),)


def test_broker_registration_change_record_versions_are_kafkas() -> None:
    """ClusterControlManager and ReplicationControlManager write fencing in v0, a
    controlled shutdown in v1, log dirs in v2 and cordoned log dirs in v3."""
    change = {"broker_id": 1, "broker_epoch": 9}
    assert [written_version(r.BrokerRegistrationChangeRecord(**change, **f)) for f in (
        {"fenced": 1}, {"fenced": -1}, {"in_controlled_shutdown": 1},
        {"log_dirs": (uuid.UUID(int=2),)}, {"cordoned_log_dirs": ()})] == [0, 0, 1, 2, 3]


def test_a_snapshot_writes_registrations_in_its_levels_version() -> None:
    for level, version in ((25, 3), (29, 3), (30, 4), (33, 4)):
        image = MetadataImage()
        image.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level))
        image.replay(register(level))
        (registration,) = [x for x in image.to_records()
                           if isinstance(x, r.RegisterBrokerRecord)]
        assert written_version(registration) == version


def test_heartbeats_record_cordoned_dirs_from_4_3_iv0_when_they_change() -> None:
    """handleDirectoriesCordoned: from 4.3-IV0 a heartbeat's CordonedLogDirs different
    from the registration's (null at first) is a BrokerRegistrationChangeRecord v3; the
    same again, or a heartbeat without them, writes nothing; below 4.3-IV0, nothing."""
    for level, expected in ((29, 0), (30, 1)):
        c = QuorumController(1, rng=random.Random(1))
        c.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level))
        c.replay(register(level))
        written = []
        for cordoned in ([], [], None):
            result = c.cluster.broker_heartbeat(1, 9, 0, True, False, 0, (), cordoned)
            written += [x for x in result.records
                        if isinstance(x, r.BrokerRegistrationChangeRecord)]
            for record in result.records:
                c.replay(r.decode(r.encode(record)))
        assert len(written) == expected
    assert written[0].cordoned_log_dirs == () and written_version(written[0]) == 3
    assert c.image.brokers[1].cordoned_directories == ()


def test_with_elr_in_the_bootstrap_the_cluster_wide_min_isr_is_written() -> None:
    """ActivationRecordsGenerator.recordsForEmptyLog: eligible.leader.replicas.version 1
    among the bootstrap records adds the controller's min.insync.replicas as a dynamic
    default broker config."""
    def bootstrap(level: int) -> list[Any]:
        return [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level),
                *(r.FeatureLevelRecord(name=n, feature_level=v)
                  for n, v in default_feature_levels(level).items())]
    assert elr_safety_records(bootstrap(25), 2) == []
    assert elr_safety_records(bootstrap(26), 2) == [r.ConfigRecord(
        resource_type=4, resource_name="", name="min.insync.replicas", value="2")]


def cidr_acl(host: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", host,
                      AclOperation.READ, AclPermissionType.ALLOW)


def test_cidr_hosts_need_4_4_iv1_and_valid_blocks() -> None:
    """AclControlManager.validateHostPattern: UNSUPPORTED_VERSION below 4.4-IV1; an
    invalid block INVALID_REQUEST with commons-net's SubnetUtils message."""
    assert check_creation(cidr_acl("10.0.0.0/8"), cidr_supported=False) == (
        ErrorCode.unsupported_version,
        "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    assert check_creation(cidr_acl("10.0.0.0/8"), cidr_supported=True) is None
    assert check_creation(cidr_acl("fd00::/8"), cidr_supported=True) is None
    assert check_creation(cidr_acl("10.0.0.1"), cidr_supported=False) is None
    assert check_creation(cidr_acl("10.0.0.0/33"), cidr_supported=True) == (
        ErrorCode.invalid_request,
        "Invalid CIDR notation '10.0.0.0/33': Value [33] not in range [0,32]")
    assert check_creation(cidr_acl("10.0.0/8"), cidr_supported=True) == (
        ErrorCode.invalid_request, "Invalid CIDR notation '10.0.0/8': Could not parse "
                                   "[10.0.0/8]")
    assert check_creation(cidr_acl(""), cidr_supported=True) == (
        ErrorCode.invalid_request, "Host pattern cannot be null or empty")


def test_the_controller_refuses_a_cidr_host_below_4_4_iv1() -> None:
    for level, code in ((31, ErrorCode.unsupported_version), (32, ErrorCode.none)):
        c = QuorumController(1, rng=random.Random(1))
        c.replay(r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level))
        result = c.acls.create_acls([cidr_acl("192.168.0.0/16")])
        assert result.response[0][0] == code
        assert len(result.records) == (code == ErrorCode.none)


def test_a_cidr_acl_applies_to_every_address_in_its_block() -> None:
    """CidrUtils.isInRange: IPv4 blocks include their network and broadcast addresses
    (setInclusiveHostCount); an address of the other IP version is never in a block."""
    authorizer = StandardAuthorizer()
    authorizer.load({uuid.UUID(int=1): cidr_acl("10.1.0.0/16"),
                     uuid.UUID(int=2): cidr_acl("fd00::/8")})
    alice = Principal("User", "alice")

    def allowed(host: str) -> bool:
        return authorizer.authorize(alice, host, AclOperation.READ, ResourceType.TOPIC, "t")
    assert [allowed(h) for h in ("10.1.2.3", "10.1.0.0", "10.1.255.255", "10.2.0.1",
                                 "fd12:0:0:0:0:0:0:1", "fe80:0:0:0:0:0:0:1")] == [
        True, True, True, False, True, False]


def test_a_downgrade_across_the_4x_levels_that_changed_metadata_is_refused() -> None:
    """Kafka 4.4's didMetadataChange for the levels above 4.0-IV3: 4.3-IV0 (30), 4.4-IV1
    (32) and 4.4-IV2 (33) changed the metadata, the others did not."""
    from ottla.common.features import metadata_changed

    assert not metadata_changed(29, 25)  # 4.2-IV1 back to 4.0-IV3
    assert metadata_changed(30, 29) and metadata_changed(33, 32)
    assert not metadata_changed(31, 30)  # 4.4-IV0 back to 4.3-IV0
    assert metadata_changed(32, 31)
