"""Feature flags (KIP-584) this software supports, and their levels."""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 33  # 4.4-IV2, Kafka 4.4's LATEST_PRODUCTION
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
"""KIP-966: at level 1 the controller keeps Eligible Leader Replicas and elects from them,
and a leader's high watermark waits for min.insync.replicas in-sync replicas."""
TRANSACTION_VERSION = "transaction.version"
"""KIP-890: at level 1 ``__transaction_state`` values are written in their flexible
version 1; at level 2 clients may use transactions v2 (a partition joins a transaction
with its first Produce v12, the group's offsets partition with TxnOffsetCommit v5, and
every EndTxn v5 bumps the producer epoch)."""
IBP_4_0_IV2 = 24
"""The metadata.version from which a cluster starts at transaction.version 2, as Kafka's
``TransactionVersion.TV_2`` bootstraps."""
IBP_4_1_IV0 = 26
"""The first level that bootstraps eligible.leader.replicas.version 1 (``ELRV_1``)."""
IBP_4_1_IV1 = 27
"""From here the replica fetcher sends Fetch v18 (Kafka's ``fetchRequestVersion``)."""
IBP_4_2_IV0 = 28
"""The first level that bootstraps share.version 1 (``ShareVersion.SV_1``)."""
IBP_4_2_IV1 = 29
"""From here the replica fetcher sends ListOffsets v11 (``listOffsetRequestVersion``);
Kafka also bootstraps streams.version 1 here, a feature Ottla does not have."""
IBP_4_3_IV0 = 30
"""KIP-1066 (``isCordonedLogDirsSupported``): RegisterBrokerRecord v4 and
BrokerRegistrationChangeRecord v3 carry a broker's cordoned log dirs."""
IBP_4_4_IV0 = 31
"""The first level that bootstraps share.version 2 (``ShareVersion.SV_2``)."""
IBP_4_4_IV1 = 32
"""``isCidrAclSupported``: an ACL's host may be a CIDR block (``10.0.0.0/8``)."""
IBP_4_4_IV2 = 33
"""``isControllerUnregistrationSupported``: UnregisterController writes an
UnregisterControllerRecord (KIP-1220)."""
IBP_3_5_IV2 = 11
"""The metadata.version from which SCRAM credentials are metadata records (KIP-554 in
KRaft, Kafka's ``isScramSupported``)."""
IBP_3_6_IV2 = 14
"""The metadata.version from which delegation tokens are metadata records (KIP-900,
Kafka's ``isDelegationTokenSupported``)."""
IBP_3_7_IV0 = 15
"""The metadata.version from which controllers register (KIP-919, Kafka's
``isControllerRegistrationSupported``)."""
IBP_3_7_IV2 = 17
"""The metadata.version from which replicas' log dirs are tracked (KIP-858, Kafka's
``isDirectoryAssignmentSupported``)."""
SHARE_VERSION = "share.version"
"""KIP-932 (Kafka's ShareVersion): at level 0 share groups are off and their APIs answer
UNSUPPORTED_VERSION; level 1 (SV_1) serves share groups; level 2 (SV_2, KIP-1191) adds the
dead-letter queue of a group with ``errors.deadletterqueue.topic.name``."""
SV_1, SV_2 = 1, 2
GROUP_VERSION = "group.version"
"""KIP-848 (Kafka's GroupVersion): at level 0 ConsumerGroupHeartbeat and
ConsumerGroupDescribe answer UNSUPPORTED_VERSION (they stay advertised in ApiVersions, as
Kafka's); level 1 (GV_1) serves consumer groups. Kafka's GV_1 has no dependencies."""
GV_1 = 1
IBP_4_0_IV0 = 22
"""The first level that bootstraps group.version 1 (``GroupVersion.GV_1``)."""
KRAFT_VERSION = "kraft.version"
"""KIP-853: the metadata quorum's version, kept by KRaft itself (a KRaftVersionRecord in
the metadata log, never a FeatureLevelRecord): 0 for a static quorum
(``controller.quorum.voters``), 1 once the voters are log state."""
SUPPORTED_FEATURES = {METADATA_VERSION: (7, METADATA_VERSION_LEVEL),
                      KRAFT_VERSION: (0, 1),
                      ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1),
                      TRANSACTION_VERSION: (0, 2),
                      SHARE_VERSION: (0, SV_2),
                      GROUP_VERSION: (0, GV_1)}
"""Feature levels this software can run at (3.3-IV3 to 4.4-IV2 for metadata.version).
Kafka's streams.version is not here: a node supports it at level 0 only (no streams
groups), and Kafka's own BrokerFeatures and QuorumFeatures leave out a feature whose
highest level is 0."""


IBP_4_0_IV1 = 23
METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})
"""The metadata.version levels (of those supported) that changed the metadata records
(Kafka's ``MetadataVersion.didMetadataChange``): a downgrade across one may lose
metadata."""
DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {
    (ELIGIBLE_LEADER_REPLICAS_VERSION, 1): {METADATA_VERSION: IBP_4_0_IV1},
}
"""What a feature level needs of the others (Kafka 4.4's ``FeatureVersion.dependencies``;
the other features' levels need none)."""


def metadata_changed(source: int, target: int) -> bool:
    """Kafka's ``MetadataVersion.checkIfMetadataChanged``: a level above the lower of the
    two, up to the higher, changed the metadata."""
    low, high = sorted((source, target))
    return any(level in METADATA_CHANGED for level in range(low + 1, high + 1))


def dependency_refusal(name: str, level: int, levels: Mapping[str, int]) -> str | None:
    """Why ``name`` cannot be at ``level`` beside ``levels`` (Kafka's
    ``Feature.validateVersion``, its words), None when it can."""
    for feature, needed in DEPENDENCIES.get((name, level), {}).items():
        if levels.get(feature, 0) < needed:
            return (f"{name} could not be set to {level} because it depends on {feature} "
                    f"level {needed}")
    return None


def default_feature_levels(metadata_level: int) -> dict[str, int]:
    """The features besides metadata.version that a cluster formatted at
    ``metadata_level`` starts with: Kafka's ``Feature.defaultVersion``, each feature's
    highest level whose bootstrap metadata.version is at or below it (a feature at level 0
    is not written). Kafka's streams.version is not among Ottla's features
    (docs/compatibility.md, Features)."""
    levels: dict[str, int] = {}
    if metadata_level >= IBP_4_0_IV0:
        levels[GROUP_VERSION] = GV_1
    if metadata_level >= IBP_4_0_IV2:
        levels[TRANSACTION_VERSION] = 2
    if metadata_level >= IBP_4_1_IV0:
        levels[ELIGIBLE_LEADER_REPLICAS_VERSION] = 1
    if metadata_level >= IBP_4_4_IV0:
        levels[SHARE_VERSION] = SV_2
    elif metadata_level >= IBP_4_2_IV0:
        levels[SHARE_VERSION] = SV_1
    return levels


def directory_assignment_supported(features: Mapping[str, int]) -> bool:
    """Kafka's ``MetadataVersion.isDirectoryAssignmentSupported``: brokers register their
    log dirs, partitions record each replica's dir, heartbeats report offline dirs. An
    image without a metadata.version (before the bootstrap records) counts as the
    newest."""
    return features.get(METADATA_VERSION, METADATA_VERSION_LEVEL) >= IBP_3_7_IV2


def controller_registration_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isControllerRegistrationSupported``: whether a cluster at
    metadata.version ``level`` keeps controller registrations (3.7-IV0 and later)."""
    return level >= IBP_3_7_IV0


def scram_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isScramSupported``: whether a cluster at metadata.version
    ``level`` keeps SCRAM credentials (3.5-IV2 and later)."""
    return level >= IBP_3_5_IV2


def delegation_tokens_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isDelegationTokenSupported``: whether a cluster at
    metadata.version ``level`` keeps delegation tokens (3.6-IV2 and later)."""
    return level >= IBP_3_6_IV2


def share_groups_enabled(features: Mapping[str, int]) -> bool:
    """Kafka's ``isShareGroupProtocolEnabled``: the finalized share.version is 1 or more."""
    return features.get(SHARE_VERSION, 0) >= SV_1


def consumer_groups_enabled(features: Mapping[str, int]) -> bool:
    """Kafka's ``GroupVersion.isConsumerRebalanceProtocolSupported``: the finalized
    group.version is 1 or more."""
    return features.get(GROUP_VERSION, 0) >= GV_1


def share_dlq_enabled(features: Mapping[str, int]) -> bool:
    """Kafka's ``ShareVersion.supportsShareGroupDLQ``: the finalized share.version is 2 or
    more, so a group's dead-letter queue is used."""
    return features.get(SHARE_VERSION, 0) >= SV_2


def cordoned_log_dirs_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isCordonedLogDirsSupported`` (4.3-IV0 and later)."""
    return level >= IBP_4_3_IV0


def cidr_acls_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isCidrAclSupported`` (4.4-IV1 and later)."""
    return level >= IBP_4_4_IV1


def controller_unregistration_supported(level: int) -> bool:
    """Kafka's ``MetadataVersion.isControllerUnregistrationSupported`` (4.4-IV2 and
    later)."""
    return level >= IBP_4_4_IV2


def register_broker_record_version(level: int) -> int:
    """Kafka's ``MetadataVersion.registerBrokerRecordVersion`` from 3.7-IV2 (the oldest
    Ottla writes: older clusters get v3 too, as before)."""
    return 4 if cordoned_log_dirs_supported(level) else 3


def replica_fetch_version(level: int) -> int:
    """Kafka's ``MetadataVersion.fetchRequestVersion`` from 3.9-IV0 on (Ottla's replica
    fetcher never sent older versions)."""
    return 18 if level >= IBP_4_1_IV1 else 17


def replica_list_offsets_version(level: int) -> int:
    """Kafka's ``MetadataVersion.listOffsetRequestVersion``: what the replica fetcher
    asks its leader's log end with."""
    for since, version in ((IBP_4_2_IV1, 11), (25, 10), (21, 9), (9, 8)):
        if level >= since:
            return version
    return 7
