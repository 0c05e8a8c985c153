"""Finalized feature levels (FeatureControlManager)."""

from __future__ import annotations

import pytest

from ottla.cli.storage import feature_levels
from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    SHARE_VERSION,
    TRANSACTION_VERSION,
)
from ottla.metadata.bootstrap import read_bootstrap, write_bootstrap
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller

UPGRADE, SAFE_DOWNGRADE = 1, 2


def test_a_new_cluster_starts_at_the_latest_metadata_version() -> None:
    c = controller()
    apply(c, c.features.bootstrap_records())
    assert c.image.features[METADATA_VERSION] == METADATA_VERSION_LEVEL
    assert c.image.features[TRANSACTION_VERSION] == 2  # as Kafka 4.0 formats
    assert c.image.features[SHARE_VERSION] == 1  # Ottla serves share groups by default


def test_format_starts_features_at_the_release_defaults_or_as_told(tmp_path) -> None:
    levels = feature_levels([], METADATA_VERSION_LEVEL)
    assert levels == {TRANSACTION_VERSION: 2, SHARE_VERSION: 1}
    assert feature_levels([], 21) == {}  # 3.9: no transactions v2, no share groups
    assert feature_levels(["transaction.version=1", "share.version=0"],
                          METADATA_VERSION_LEVEL) == {TRANSACTION_VERSION: 1, SHARE_VERSION: 0}
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
