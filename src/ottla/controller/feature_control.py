"""Finalized feature levels (KIP-584), metadata.version among them (Kafka's
FeatureControlManager)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    SUPPORTED_FEATURES,
    default_feature_levels,
)
from ottla.controller.results import ControllerResult
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode


class FeatureControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def bootstrap_records(self) -> list[Any]:
        """The records a freshly formatted cluster starts its log with (when no bootstrap
        snapshot says otherwise)."""
        levels = default_feature_levels(METADATA_VERSION_LEVEL)
        return [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL)
                ] + [r.FeatureLevelRecord(name=n, feature_level=v)
                     for n, v in sorted(levels.items())]

    def update_features(self, updates: Sequence[tuple[str, int, int]],
                        validate_only: bool = False) -> ControllerResult:
        """UpdateFeatures: (feature, max level, upgrade type 1 upgrade / 2 safe / 3 unsafe
        downgrade). All or nothing; response: {feature: (error, message)}."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        records: list[Any] = []
        for name, level, upgrade_type in updates:
            supported = SUPPORTED_FEATURES.get(name)
            current = self.image.features.get(name, 0)
            problem = None
            if supported is None:
                problem = f"The controller does not support the feature {name}"
            elif level != 0 and not supported[0] <= level <= supported[1]:
                problem = (f"{name} level {level} is outside the supported range "
                           f"{supported[0]}-{supported[1]}")
            elif level < current and upgrade_type == 1:
                problem = (f"Cannot downgrade {name} from {current} to {level} without "
                           "setting the upgrade type to safe or unsafe downgrade")
            elif name == METADATA_VERSION and level < current:
                problem = "Downgrading metadata.version is not supported"
            if problem is not None:
                results[name] = (ErrorCode.invalid_update_version, problem)
            else:
                results[name] = (ErrorCode.none, None)
                if level != current:
                    records.append(r.FeatureLevelRecord(name=name, feature_level=level))
        if validate_only or any(err != ErrorCode.none for err, _ in results.values()):
            records = []
        return ControllerResult(records, results)
