"""Finalized feature levels (KIP-584), metadata.version among them (Kafka's
FeatureControlManager).

``kraft.version`` is not a metadata record but KRaft's own state: its level is read from
and upgraded through the metadata quorum (Kafka's KRaftVersionAccessor), and the
operation itself writes only a NoOpRecord, so that it answers once the upgrade, appended
before it, is committed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ottla.common.features import (
    KRAFT_VERSION,
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    SUPPORTED_FEATURES,
    controller_registration_supported,
    default_feature_levels,
    dependency_refusal,
    metadata_changed,
)
from ottla.controller.results import ControllerResult
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
"""UpdateFeatures v1's upgrade types (v0's allow_downgrade is a safe downgrade)."""


def _range_text(low: int, high: int) -> str:
    """A version range as Kafka's ``VersionRange.toString`` writes it."""
    if low == high:
        return str(low)
    return f"{low}+" if high == 0x7FFF else f"{low}-{high}"


def reason_not_supported(level: int, who: str, supported: tuple[int, int]) -> str | None:
    """Why ``who`` cannot run at ``level`` (Kafka's ``QuorumFeatures.reasonNotSupported``),
    None when it can."""
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {_range_text(low, high)}"


def java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """``keys`` (distinct) in the order a ``java.util.HashMap`` filled with them in turn
    iterates: by bucket (the spread String hash masked by the table size), then by
    insertion. Kafka's controller walks UpdateFeatures' updates so, and answers with the
    first refusal it meets."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = 0
        for c in key:  # String.hashCode, in 32 bits (chars as UTF-16 units)
            h = (31 * h + ord(c)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(keys, key=bucket)  # stable: insertion order within a bucket


DISABLED = (0, 0)
"""What a node supports of a feature it did not name: level 0 only."""


class KRaftVersionAccessor(Protocol):
    """The metadata quorum's ``kraft.version``, as the controller reads and upgrades it."""

    @property
    def kraft_version(self) -> int: ...

    def upgrade_kraft_version(self, version: int, validate_only: bool
                              ) -> tuple[ErrorCode, str | None]:
        """Append the upgrade (unless ``validate_only``); the refusal, NONE if none."""
        ...


class StaticKRaftVersion:
    """A quorum that stays at ``kraft.version`` 0 (a controller with no quorum behind
    it, as in unit tests of the control managers)."""

    kraft_version = 0

    def upgrade_kraft_version(self, version: int, validate_only: bool
                              ) -> tuple[ErrorCode, str | None]:
        return ErrorCode.invalid_update_version, (
            f"Invalid upgrade of {KRAFT_VERSION} to {version} because not all of the "
            "voters support it")


class FeatureControlManager:
    def __init__(self, image: MetadataImage, node_id: int = 1,
                 quorum_node_ids: Sequence[int] = ()) -> None:
        """``node_id``: this controller, which checks its own support first;
        ``quorum_node_ids``: the controllers of ``controller.quorum.voters`` (none for a
        dynamic quorum), each of which must have registered before a level changes."""
        self.image = image
        self.node_id = node_id
        self.quorum_node_ids = tuple(quorum_node_ids)
        self.kraft: KRaftVersionAccessor = StaticKRaftVersion()
        """The metadata quorum, which the node plugs in."""

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
        downgrade). All or nothing, as Kafka: the response is one (error, message), the
        first refused update's INVALID_UPDATE_VERSION in Kafka's words."""
        records: list[Any] = []
        # Kafka's proposedUpdatedVersions: what the levels would be, every update made.
        proposed = dict(self.image.features)
        proposed.update((name, level) for name, level, _ in updates)
        by_name = {name: (name, level, kind) for name, level, kind in updates}
        for name, level, upgrade_type in (by_name[n] for n in java_hash_map_order(
                list(by_name))):
            current = self.kraft.kraft_version if name == KRAFT_VERSION \
                else self.image.features.get(name, 0)
            problem = self._refusal(name, level, upgrade_type, current, proposed)
            if problem is not None:
                return ControllerResult([], (ErrorCode.invalid_update_version, problem))
            if name == KRAFT_VERSION:
                if upgrade_type != UPGRADE:
                    continue  # to the level it is at: nothing to do
                error, message = self.kraft.upgrade_kraft_version(level, validate_only)
                if error != ErrorCode.none:
                    return ControllerResult([], (error, message))
                records.append(r.NoOpRecord())
            elif level != current:
                records.append(r.FeatureLevelRecord(name=name, feature_level=level))
        return ControllerResult([] if validate_only else records, (ErrorCode.none, None))

    def _refusal(self, name: str, level: int, upgrade_type: int, current: int,
                 proposed: dict[str, int]) -> str | None:
        """Why ``name`` cannot go from ``current`` to ``level`` (the others going to
        ``proposed``), in Kafka's order and words (``FeatureControlManager.updateFeature``
        and ``updateMetadataVersion``); None when it can."""
        def invalid(reason: str) -> str:
            return f"Invalid update version {level} for feature {name}. {reason}"
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        reason = self.reason_not_supported(name, level)
        if reason is not None:
            return invalid(reason)
        if level < current and upgrade_type == UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the "
                           "upgrade type to either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == KRAFT_VERSION and upgrade_type != UPGRADE and level != current:
            return invalid("Can't downgrade the version of this feature.")
        if name == METADATA_VERSION:
            # A downgrade is allowed (safe or unsafe alike) only across versions that
            # changed no metadata; metadata.version's own dependencies are not checked.
            if level < current and metadata_changed(current, level):
                why = ("Unsafe metadata downgrade is not supported in this version."
                       if upgrade_type == UNSAFE_DOWNGRADE else
                       "Refusing to perform the requested downgrade because it might "
                       "delete metadata information.")
                return (f"Unsupported metadata.version downgrade from {current} to "
                        f"{level}. {why}")
            return None
        if name == KRAFT_VERSION:
            return None
        reason = dependency_refusal(name, level, proposed)
        return None if reason is None else invalid(reason)

    def reason_not_supported(self, name: str, level: int) -> str | None:
        """Whether every node can run ``name`` at ``level`` (Kafka's
        ``FeatureControlManager.reasonNotSupported``): this controller, every registered
        broker (fenced ones too), every other registered controller, and, from
        metadata.version 3.7-IV0, every controller of a static quorum has registered."""
        reason = reason_not_supported(level, f"Local controller {self.node_id}",
                                      SUPPORTED_FEATURES.get(name, DISABLED))
        if reason is not None:
            return reason
        for broker in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            reason = reason_not_supported(level, f"Broker {broker.broker_id}",
                                          broker.features.get(name, DISABLED))
            if reason is not None:
                return reason
        metadata_version = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
        if not controller_registration_supported(metadata_version):
            return None
        for controller in sorted(self.image.controllers.values(),
                                 key=lambda c: c.controller_id):
            if controller.controller_id == self.node_id:
                continue
            reason = reason_not_supported(level, f"Controller {controller.controller_id}",
                                          controller.features.get(name, DISABLED))
            if reason is not None:
                return reason
        for node_id in self.quorum_node_ids:
            if node_id != self.node_id and node_id not in self.image.controllers:
                return (f"controller {node_id} has not registered, and may not support "
                        "this feature")
        return None
