"""Finalized feature levels (FeatureControlManager)."""

from __future__ import annotations

from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller

UPGRADE, SAFE_DOWNGRADE = 1, 2


def test_a_new_cluster_starts_at_the_latest_metadata_version() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert c.image.features[METADATA_VERSION] == METADATA_VERSION_LEVEL


def test_updates_are_all_or_nothing_and_downgrades_need_saying_so() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    result = c.features.update_features([(METADATA_VERSION, 7, UPGRADE)])
    assert result.records == []
    assert result.response[METADATA_VERSION][0] == ErrorCode.invalid_update_version
    result = c.features.update_features([(METADATA_VERSION, METADATA_VERSION_LEVEL, UPGRADE),
                                         ("no.such.feature", 1, UPGRADE)])
    assert result.records == []  # one refused update refuses them all
    assert result.response["no.such.feature"][0] == ErrorCode.invalid_update_version
    result = c.features.update_features([(METADATA_VERSION, 7, SAFE_DOWNGRADE)])
    assert result.response[METADATA_VERSION][0] == ErrorCode.invalid_update_version
    assert "not supported" in result.response[METADATA_VERSION][1]
