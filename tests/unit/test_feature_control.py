"""Finalized feature levels (FeatureControlManager)."""

from __future__ import annotations

import uuid

import pytest

from ottla.cli.storage import feature_levels
from ottla.common.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    GROUP_VERSION,
    IBP_3_7_IV0,
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    SHARE_VERSION,
    SUPPORTED_FEATURES,
    TRANSACTION_VERSION,
)
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import read_bootstrap, write_bootstrap
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def test_a_new_cluster_starts_at_the_latest_metadata_version() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert c.image.features[METADATA_VERSION] == METADATA_VERSION_LEVEL
    assert c.image.features[TRANSACTION_VERSION] == 2  # as Kafka 4.0 formats
    assert c.image.features[SHARE_VERSION] == 2  # as Kafka 4.4 formats (4.4-IV0 and up)


def test_format_starts_features_at_the_release_defaults_or_as_told(tmp_path) -> None:
    levels = feature_levels([], METADATA_VERSION_LEVEL)
    assert levels == {TRANSACTION_VERSION: 2, ELIGIBLE_LEADER_REPLICAS_VERSION: 1,
                      SHARE_VERSION: 2, GROUP_VERSION: 1}
    # 3.9: no consumer groups, transactions v2 or share groups
    assert feature_levels([], 21) == {}
    assert feature_levels([], 22) == {GROUP_VERSION: 1}  # 4.0-IV0: GV_1
    assert feature_levels(["transaction.version=1", "share.version=0", "group.version=0"],
                          METADATA_VERSION_LEVEL) == {
        TRANSACTION_VERSION: 1, ELIGIBLE_LEADER_REPLICAS_VERSION: 1, SHARE_VERSION: 0,
        GROUP_VERSION: 0}
    # GV_1 needs no metadata.version: Kafka's formats 3.9 with it when told.
    assert feature_levels(["group.version=1"], 21) == {GROUP_VERSION: 1}
    for bad, words in [("transaction.version=7", "outside the supported range"),
                       ("share.nope=1", "unknown feature"), ("transaction.version", "NAME=LEVEL"),
                       ("metadata.version=20", "--release-version")]:
        with pytest.raises(ValueError, match=words):
            feature_levels([bad], METADATA_VERSION_LEVEL)
    write_bootstrap(str(tmp_path), METADATA_VERSION_LEVEL, [], 0, {TRANSACTION_VERSION: 1})
    written = {r.name: r.feature_level for r in read_bootstrap(str(tmp_path)).records}
    assert written == {METADATA_VERSION: METADATA_VERSION_LEVEL, TRANSACTION_VERSION: 1}


def test_updates_are_all_or_nothing_and_downgrades_need_saying_so() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    apply(c, [r.FeatureLevelRecord(name=SHARE_VERSION, feature_level=1)])  # upgradable to 2
    result = c.features.update_features([(METADATA_VERSION, 7, UPGRADE)])
    assert result.records == []
    assert result.response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 7 for feature metadata.version. Can't downgrade the version "
        "of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    result = c.features.update_features([(METADATA_VERSION, METADATA_VERSION_LEVEL, UPGRADE),
                                         ("no.such.feature", 1, UPGRADE)])
    assert result.records == []  # one refused update refuses them all
    assert result.response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 1 for feature no.such.feature. Local controller 1 does not "
        "support this feature.")
    result = c.features.update_features([(METADATA_VERSION, 7, SAFE_DOWNGRADE)])
    assert result.response == (
        ErrorCode.invalid_update_version,
        f"Unsupported metadata.version downgrade from {METADATA_VERSION_LEVEL} to 7. "
        "Refusing to perform the requested downgrade because it might delete metadata "
        "information.")
    result = c.features.update_features([(METADATA_VERSION, 7, UNSAFE_DOWNGRADE)])
    assert result.response[1] == (
        f"Unsupported metadata.version downgrade from {METADATA_VERSION_LEVEL} to 7. "
        "Unsafe metadata downgrade is not supported in this version.")
    result = c.features.update_features([(SHARE_VERSION, 2, SAFE_DOWNGRADE)])
    assert result.response[1] == (
        "Invalid update version 2 for feature share.version. Can't downgrade to a newer "
        "version.")
    result = c.features.update_features([(SHARE_VERSION, 1, 4)])
    assert result.response[1] == (
        "Invalid update version 1 for feature share.version. The controller does not "
        "support the given upgrade type.")
    result = c.features.update_features([(SHARE_VERSION, -1, UPGRADE)])
    assert result.response[1] == (
        "Invalid update version -1 for feature share.version. A feature version cannot be "
        "less than 0.")
    result = c.features.update_features([(SHARE_VERSION, 3, UPGRADE)])
    assert result.response[1] == (
        "Invalid update version 3 for feature share.version. Local controller 1 only "
        "supports versions 0-2")


def register_broker(c: QuorumController, broker_id: int,
                    features: dict[str, tuple[int, int]], fenced: bool = False) -> None:
    apply(c, c.cluster.register_broker(
        broker_id, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + broker_id, 0)], None, broker_id,
        unfence=not fenced,
        features=[(n, low, high) for n, (low, high) in features.items()]).records)


def register_controller(c: QuorumController, controller_id: int,
                        features: dict[str, tuple[int, int]]) -> None:
    apply(c, c.cluster.register_controller(
        controller_id, uuid.uuid4(), [("CONTROLLER", "h", 9100 + controller_id, 0)],
        [(n, low, high) for n, (low, high) in features.items()]).records)


def share_version_2(c: QuorumController) -> tuple[ErrorCode, str | None]:
    """UpdateFeatures' answer to an upgrade of share.version to 2."""
    return c.features.update_features([(SHARE_VERSION, 2, UPGRADE)]).response


OLDER = dict(SUPPORTED_FEATURES, **{SHARE_VERSION: (0, 1)})
"""What a node of an older release supports: share.version up to 1."""


def test_a_level_every_registered_broker_and_controller_must_support() -> None:
    c = QuorumController(1, quorum_node_ids=[1, 2, 3])
    apply(c, c.features.bootstrap_records())
    apply(c, [r.FeatureLevelRecord(name=SHARE_VERSION, feature_level=1)])  # upgradable to 2
    register_controller(c, 2, SUPPORTED_FEATURES)
    register_controller(c, 3, SUPPORTED_FEATURES)
    register_broker(c, 4, SUPPORTED_FEATURES)
    register_broker(c, 5, OLDER, fenced=True)  # a fenced broker counts too
    assert c.image.brokers[5].fenced
    result = c.features.update_features([(SHARE_VERSION, 2, UPGRADE)])
    assert result.records == []
    assert result.response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 2 for feature share.version. Broker 5 only supports "
        "versions 0-1")
    register_broker(c, 5, SUPPORTED_FEATURES)  # upgraded and re-registered
    register_controller(c, 3, OLDER)
    assert share_version_2(c)[1] == ("Invalid update version 2 for feature share.version. "
                                     "Controller 3 only supports versions 0-1")
    register_controller(c, 3, {METADATA_VERSION: SUPPORTED_FEATURES[METADATA_VERSION]})
    assert share_version_2(c)[1] == ("Invalid update version 2 for feature share.version. "
                                     "Controller 3 does not support this feature.")
    # Level 0 (turning a feature off) is what every node supports, named or not.
    off = c.features.update_features([(SHARE_VERSION, 0, SAFE_DOWNGRADE)])
    assert off.response == (ErrorCode.none, None)
    register_controller(c, 3, SUPPORTED_FEATURES)
    result = c.features.update_features([(SHARE_VERSION, 2, UPGRADE)])
    assert result.response == (ErrorCode.none, None)
    assert [(rec.name, rec.feature_level) for rec in result.records] == [(SHARE_VERSION, 2)]


def test_every_controller_of_a_static_quorum_must_have_registered() -> None:
    c = QuorumController(1, quorum_node_ids=[1, 2, 3])
    apply(c, c.features.bootstrap_records())
    register_controller(c, 3, SUPPORTED_FEATURES)
    assert share_version_2(c) == (
        ErrorCode.invalid_update_version,
        "Invalid update version 2 for feature share.version. controller 2 has not "
        "registered, and may not support this feature")
    # A dynamic quorum names no controllers to wait for: the registered ones are checked.
    c = QuorumController(1)
    apply(c, c.features.bootstrap_records())
    assert share_version_2(c) == (ErrorCode.none, None)


def test_before_controller_registrations_only_brokers_are_checked() -> None:
    c = QuorumController(1, quorum_node_ids=[1, 2])
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=IBP_3_7_IV0 - 1)])
    register_broker(c, 4, OLDER)
    assert share_version_2(c)[1] == ("Invalid update version 2 for feature share.version. "
                                     "Broker 4 only supports versions 0-1")
    register_broker(c, 4, SUPPORTED_FEATURES)
    assert share_version_2(c) == (ErrorCode.none, None)


class FakeQuorum:
    """The metadata quorum as FeatureControlManager sees it (Kafka's
    KRaftVersionAccessor): records what it was asked."""

    def __init__(self, kraft_version: int,
                 answer: tuple[ErrorCode, str | None] = (ErrorCode.none, None)) -> None:
        self.kraft_version = kraft_version
        self.answer = answer
        self.asked: list[tuple[int, bool]] = []

    def upgrade_kraft_version(self, version: int, validate_only: bool
                              ) -> tuple[ErrorCode, str | None]:
        self.asked.append((version, validate_only))
        return self.answer


def test_kraft_version_is_upgraded_by_the_quorum_never_by_a_feature_record() -> None:
    """Kafka's FeatureControlManager.updateFeature for kraft.version: the level is the
    quorum's; an upgrade is the quorum's to append, followed by a NoOpRecord; a downgrade
    is refused in Kafka's words."""
    c = controller()
    apply(c, c.features.bootstrap_records())
    quorum = c.features.kraft = FakeQuorum(0)
    result = c.features.update_features([("kraft.version", 1, UPGRADE)])
    assert result.response == (ErrorCode.none, None) and quorum.asked == [(1, False)]
    assert [type(rec) for rec in result.records] == [r.NoOpRecord]
    result = c.features.update_features([("kraft.version", 1, UPGRADE)], validate_only=True)
    assert result.records == [] and quorum.asked[-1] == (1, True)
    quorum.answer = (ErrorCode.invalid_update_version, "Invalid upgrade of kraft.version "
                     "to 1 because not all of the voters support it")
    assert c.features.update_features([("kraft.version", 1, UPGRADE)]).response == \
        quorum.answer
    result = c.features.update_features([("kraft.version", 2, UPGRADE)])
    assert result.response[1] == ("Invalid update version 2 for feature kraft.version. "
                                  "Local controller 1 only supports versions 0-1")
    quorum.kraft_version = 1
    asked = len(quorum.asked)
    for upgrade_type, words in [
            (UPGRADE, "Can't downgrade the version of this feature without setting the "
                      "upgrade type to either safe or unsafe downgrade."),
            (SAFE_DOWNGRADE, "Can't downgrade the version of this feature."),
            (UNSAFE_DOWNGRADE, "Can't downgrade the version of this feature.")]:
        result = c.features.update_features([("kraft.version", 0, upgrade_type)])
        assert result.response == (
            ErrorCode.invalid_update_version,
            f"Invalid update version 0 for feature kraft.version. {words}")
    assert len(quorum.asked) == asked
    # A "downgrade" to the level it is at changes nothing.
    assert c.features.update_features([("kraft.version", 1, SAFE_DOWNGRADE)]) \
        .response == (ErrorCode.none, None)
    assert "kraft.version" not in c.image.features


def test_metadata_version_downgrades_only_across_versions_that_changed_no_metadata() -> None:
    """Kafka 4.4's updateMetadataVersion: allowed, safe or unsafe, when no version above
    the target up to the current one changed the metadata (didMetadataChange: 4.0-IV3
    and 4.0-IV2 did not, 4.0-IV1 did), refused otherwise."""
    c = controller()
    apply(c, c.features.bootstrap_records())
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=25)])  # 4.0-IV3
    for target, kind in ((24, SAFE_DOWNGRADE), (23, UNSAFE_DOWNGRADE)):
        result = c.features.update_features([(METADATA_VERSION, target, kind)])
        assert result.response == (ErrorCode.none, None)
        assert result.records == [r.FeatureLevelRecord(name=METADATA_VERSION,
                                                       feature_level=target)]
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=23)])
    for kind, why in ((SAFE_DOWNGRADE, "Refusing to perform the requested downgrade because "
                       "it might delete metadata information."),
                      (UNSAFE_DOWNGRADE, "Unsafe metadata downgrade is not supported in this "
                       "version.")):
        assert c.features.update_features([(METADATA_VERSION, 22, kind)]).response == (
            ErrorCode.invalid_update_version,
            f"Unsupported metadata.version downgrade from 23 to 22. {why}")
    # 3.9-IV0 (21) to 3.7-IV2 (17): 3.7-IV3 to 3.9-IV0 changed nothing, 3.7-IV2 itself
    # did, which the target keeps; one further crosses it.
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=21)])
    assert c.features.update_features([(METADATA_VERSION, 17, SAFE_DOWNGRADE)]).response == \
        (ErrorCode.none, None)
    assert c.features.update_features([(METADATA_VERSION, 16, SAFE_DOWNGRADE)]).response[0] \
        is ErrorCode.invalid_update_version


def test_a_feature_level_needs_its_dependencies_in_the_proposed_levels() -> None:
    """Kafka 4.4's Feature.validateVersion against the levels the request would leave:
    eligible.leader.replicas.version 1 needs metadata.version 4.0-IV1 (23)."""
    c = controller()
    apply(c, c.features.bootstrap_records())
    elr = "eligible.leader.replicas.version"
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=22),
              r.FeatureLevelRecord(name=elr, feature_level=0)])
    assert c.features.update_features([(elr, 1, UPGRADE)]).response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 1 for feature eligible.leader.replicas.version. "
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 23")
    both = c.features.update_features([(elr, 1, UPGRADE), (METADATA_VERSION, 23, UPGRADE)])
    assert both.response == (ErrorCode.none, None)
    assert {(rec.name, rec.feature_level) for rec in both.records} == {
        (METADATA_VERSION, 23), (elr, 1)}
    assert c.features.update_features([(elr, 0, SAFE_DOWNGRADE)]).response == \
        (ErrorCode.none, None)


def test_updates_are_met_in_the_order_of_kafkas_hash_map() -> None:
    """Kafka's controller walks the updates in a java.util.HashMap and answers with the
    first refusal: metadata.version's before eligible.leader.replicas.version's, whatever
    the request's order (as a Kafka 4.4 node answers in tests/oracle)."""
    from ottla.controller.feature_control import java_hash_map_order

    names = ["eligible.leader.replicas.version", "metadata.version"]
    assert java_hash_map_order(names) == ["metadata.version",
                                          "eligible.leader.replicas.version"]
    assert java_hash_map_order(names[::-1]) == java_hash_map_order(names)
    c = controller()
    apply(c, c.features.bootstrap_records())
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=25)])  # 4.0-IV3
    refused = c.features.update_features([("eligible.leader.replicas.version", 1, UPGRADE),
                                          (METADATA_VERSION, 22, SAFE_DOWNGRADE)])
    assert refused.response[1] == (
        "Unsupported metadata.version downgrade from 25 to 22. Refusing to perform the "
        "requested downgrade because it might delete metadata information.")


def test_format_refuses_a_feature_without_its_dependencies() -> None:
    """kafka-storage format --feature eligible.leader.replicas.version=1 below
    --release-version 4.0-IV1 fails with Feature.validateVersion's words."""
    with pytest.raises(ValueError) as refused:
        feature_levels(["eligible.leader.replicas.version=1"], 22)
    assert str(refused.value) == (
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 23")
    assert feature_levels(["eligible.leader.replicas.version=1"], 23)[
        "eligible.leader.replicas.version"] == 1


def test_group_version_moves_between_0_and_1_at_any_metadata_version() -> None:
    """Kafka 4.4's GroupVersion: GV_0 and GV_1, GV_1 bootstrapped from 4.0-IV0 (22) and
    with no dependencies, so a 3.3-IV3 cluster may have it; a downgrade to 0 needs saying
    so, and writes level 0, which takes the feature out of the image (not finalized)."""
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert c.image.features[GROUP_VERSION] == 1
    assert SUPPORTED_FEATURES[GROUP_VERSION] == (0, 1)
    assert c.features.update_features([(GROUP_VERSION, 0, UPGRADE)]).response[1] == (
        "Invalid update version 0 for feature group.version. Can't downgrade the version "
        "of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    assert c.features.update_features([(GROUP_VERSION, 2, UPGRADE)]).response[1] == (
        "Invalid update version 2 for feature group.version. Local controller 1 only "
        "supports versions 0-1")
    down = c.features.update_features([(GROUP_VERSION, 0, SAFE_DOWNGRADE)])
    assert down.response == (ErrorCode.none, None)
    assert [(rec.name, rec.feature_level) for rec in down.records] == [(GROUP_VERSION, 0)]
    apply(c, down.records)
    assert GROUP_VERSION not in c.image.features
    apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=7)])  # 3.3-IV3
    up = c.features.update_features([(GROUP_VERSION, 1, UPGRADE)])
    assert up.response == (ErrorCode.none, None)
    apply(c, up.records)
    assert c.image.features[GROUP_VERSION] == 1


def test_streams_version_is_supported_at_level_0_only() -> None:
    """No streams groups (KIP-1071): like a Kafka node whose streams.version's newest level
    is 0, the controller does not list the feature, so a level above 0 is refused in
    QuorumFeatures' words (Kafka 4.4, which has streams groups, accepts it)."""
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert "streams.version" not in SUPPORTED_FEATURES
    assert "streams.version" not in c.image.features
    assert c.features.update_features([("streams.version", 1, UPGRADE)]).response == (
        ErrorCode.invalid_update_version,
        "Invalid update version 1 for feature streams.version. Local controller 1 does not "
        "support this feature.")
    with pytest.raises(ValueError, match="unknown feature"):
        feature_levels(["streams.version=1"], METADATA_VERSION_LEVEL)
