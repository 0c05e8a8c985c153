"""What Apache Kafka 4.4 advertises in ApiVersions, written down from Kafka's sources, for
tests to hold Ottla's answer against. (An expectation built from Ottla's own tables could
not fail: this one is Kafka's, and every place Ottla serves less is listed with its reason.)

Sources: apache/kafka's 4.4 branch at 87943b2ff874f7186a7a091f7fad13d1ca62fc42
(2026-08-21, 4.4.0-SNAPSHOT); trunk at 0656d96675 ("Bump trunk to 4.5.0-SNAPSHOT") has the
same request files and feature enums.

- API ranges: ``clients/src/main/resources/common/message/<Name>Request.json``, its
  ``validVersions`` on each listener its ``listeners`` name. A version marked
  ``latestVersionUnstable`` is not advertised (InitProducerId 6); Produce is advertised from
  0 on the broker listener (``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``,
  KAFKA-18659).
- Supported features: ``server/src/main/java/org/apache/kafka/server/BrokerFeatures.java``
  ``defaultSupportedFeatures``: metadata.version from ``MetadataVersion.MINIMUM_VERSION`` to
  ``LATEST_PRODUCTION``; every production feature of ``server-common/.../Feature.java`` from
  its first level to its ``LATEST_PRODUCTION`` (``KRaftVersion``, ``TransactionVersion``,
  ``GroupVersion``, ``EligibleLeaderReplicasVersion``, ``ShareVersion``,
  ``StreamsVersion``).
- Default levels of a cluster formatted at a metadata.version: ``Feature.defaultVersion``,
  the highest level whose bootstrap metadata.version is at or below it.
"""

from __future__ import annotations

BROKER_APIS: dict[int, tuple[int, int]] = {
    0: (0, 13),  # Produce (validVersions 3-13; advertised from 0, KAFKA-18659)
    1: (4, 18),  # Fetch
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 5),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId (validVersions 0-6, 6 latestVersionUnstable)
    23: (2, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn
    27: (1, 2),  # WriteTxnMarkers
    28: (0, 6),  # TxnOffsetCommit
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (1, 2),  # AlterReplicaLogDirs
    35: (1, 5),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    38: (1, 3),  # CreateDelegationToken
    39: (1, 2),  # RenewDelegationToken
    40: (1, 2),  # ExpireDelegationToken
    41: (1, 3),  # DescribeDelegationToken
    42: (0, 3),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 1),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    55: (0, 2),  # DescribeQuorum
    57: (0, 2),  # UpdateFeatures
    60: (0, 2),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    64: (0, 0),  # UnregisterBroker
    65: (0, 0),  # DescribeTransactions
    66: (0, 2),  # ListTransactions
    68: (0, 1),  # ConsumerGroupHeartbeat
    69: (0, 1),  # ConsumerGroupDescribe
    71: (0, 0),  # GetTelemetrySubscriptions
    72: (0, 0),  # PushTelemetry
    74: (0, 1),  # ListConfigResources
    75: (0, 0),  # DescribeTopicPartitions
    76: (1, 1),  # ShareGroupHeartbeat
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch
    79: (1, 2),  # ShareAcknowledge
    80: (0, 1),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
    83: (0, 0),  # InitializeShareGroupState
    84: (0, 0),  # ReadShareGroupState
    85: (0, 1),  # WriteShareGroupState
    86: (0, 0),  # DeleteShareGroupState
    87: (0, 1),  # ReadShareGroupStateSummary
    88: (0, 1),  # StreamsGroupHeartbeat
    89: (0, 1),  # StreamsGroupDescribe
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
    93: (0, 0),  # StreamsGroupTopologyDescriptionUpdate
    94: (0, 0),  # UnregisterController
}
"""Kafka 4.4's broker listener: every API whose request file lists ``broker``."""

CONTROLLER_APIS: dict[int, tuple[int, int]] = {
    1: (4, 18),  # Fetch
    17: (0, 1),  # SaslHandshake
    18: (0, 5),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    38: (1, 3),  # CreateDelegationToken
    39: (1, 2),  # RenewDelegationToken
    40: (1, 2),  # ExpireDelegationToken
    41: (1, 3),  # DescribeDelegationToken
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 1),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    52: (0, 2),  # Vote
    53: (0, 1),  # BeginQuorumEpoch
    54: (0, 1),  # EndQuorumEpoch
    55: (0, 2),  # DescribeQuorum
    56: (2, 3),  # AlterPartition
    57: (0, 2),  # UpdateFeatures
    58: (0, 0),  # Envelope
    59: (0, 1),  # FetchSnapshot
    60: (0, 2),  # DescribeCluster
    62: (0, 4),  # BrokerRegistration
    63: (0, 2),  # BrokerHeartbeat
    64: (0, 0),  # UnregisterBroker
    67: (0, 0),  # AllocateProducerIds
    70: (0, 0),  # ControllerRegistration
    73: (0, 0),  # AssignReplicasToDirs
    80: (0, 1),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
    82: (0, 0),  # UpdateRaftVoter
    94: (0, 0),  # UnregisterController
}
"""Kafka 4.4's controller listener: every API whose request file lists ``controller``."""

METADATA_VERSION_LEVELS = {"3.3-IV3": 7, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV2": 24,
                           "4.0-IV3": 25, "4.1-IV0": 26, "4.2-IV0": 28, "4.2-IV1": 29,
                           "4.3-IV0": 30, "4.4-IV0": 31, "4.4-IV1": 32, "4.4-IV2": 33}
"""Feature levels of the ``MetadataVersion`` constants used here (``IBP_4_4_IV2(33, ...)``)."""

SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    # MINIMUM_VERSION 3.3-IV3 to 4.4-IV2, the newest 4.4 level (trunk's LATEST_PRODUCTION
    # since 0656d96675; the 4.4 branch at 87943b2f still named 4.3-IV0 although the
    # levels its KIP-1191 share.version 2 needs are 4.4's).
    "metadata.version": (7, 33),
    "kraft.version": (0, 1),  # KRAFT_VERSION_1 (KIP-853 dynamic quorums)
    "transaction.version": (0, 2),  # TV_2 (KIP-890 part 2)
    "group.version": (0, 1),  # GV_1 (KIP-848)
    "eligible.leader.replicas.version": (0, 1),  # ELRV_1 (KIP-966)
    "share.version": (0, 2),  # SV_2 (KIP-1191, share groups' dead-letter queue)
    "streams.version": (0, 1),  # SV_1 (KIP-1071 streams groups)
}
"""What a Kafka 4.4 node lists in ApiVersions' ``supported_features``."""

BOOTSTRAP_LEVELS: dict[str, dict[int, int]] = {
    "transaction.version": {1: 24, 2: 24},  # TV_1, TV_2 at IBP_4_0_IV2
    "group.version": {1: 22},  # GV_1 at IBP_4_0_IV0
    "eligible.leader.replicas.version": {1: 26},  # ELRV_1 at IBP_4_1_IV0
    "share.version": {1: 28, 2: 31},  # SV_1 at IBP_4_2_IV0, SV_2 at IBP_4_4_IV0
    "streams.version": {1: 29},  # SV_1 at IBP_4_2_IV1
}
"""Each level of a feature set from metadata.version, with the metadata.version level it
bootstraps at (the second argument of each enum constant). kraft.version is left out: it
follows from how the quorum is configured (static voters: 0), not from metadata.version."""


def default_levels(metadata_version: int) -> dict[str, int]:
    """The features besides metadata.version a Kafka 4.4 cluster formatted at
    ``metadata_version`` finalizes, as ``Feature.defaultVersion`` picks them; a level of 0
    is not finalized, so it is not listed."""
    levels = {}
    for name, bootstraps in BOOTSTRAP_LEVELS.items():
        level = max((lv for lv, mv in bootstraps.items() if mv <= metadata_version),
                    default=0)
        if level:
            levels[name] = level
    return levels


# --- Where Ottla serves less than Kafka 4.4, and why ---------------------------------------
# Each entry: what Ottla advertises, and the reason. A test fails on any other difference,
# on an entry that is not narrower than Kafka's range, and on an entry for an API Ottla no
# longer advertises. (docs/compatibility.md lists the ranges; where it gives a reason, it
# is named here.)

NARROWER_BROKER: dict[int, tuple[tuple[int, int], str]] = {
    8: ((2, 9), "OffsetCommit v10 names topics by id only (KIP-848 follow-up)"),
    9: ((1, 9), "OffsetFetch v10 names topics by id only (KIP-848 follow-up)"),
    18: ((0, 4), "ApiVersions v5 checks the client's cluster and node ids, "
                 "REBOOTSTRAP_REQUIRED (KIP-1242)"),
    27: ((1, 1), "WriteTxnMarkers v2 carries the transaction.version of each marker "
                 "(KIP-1228)"),
    28: ((0, 5), "TxnOffsetCommit v6 names topics by id only (KIP-1319)"),
    42: ((0, 2), "DeleteGroups v3 adds an error message per group"),
    57: ((0, 1), "UpdateFeatures v2 drops the per-feature results from the response"),
    66: ((0, 1), "ListTransactions v2 filters by a transactional id pattern (KIP-1152)"),
}

NARROWER_CONTROLLER: dict[int, tuple[tuple[int, int], str]] = {
    1: ((13, 18), "Fetch on the controller listener is the metadata log's (KRaft): its "
                  "voters and observers fetch with topic ids, v13 and later "
                  "(docs/compatibility.md lists 13-18, \"the metadata log\")"),
    18: NARROWER_BROKER[18],
    57: NARROWER_BROKER[57],
}

NARROWER_FEATURES: dict[str, tuple[tuple[int, int] | None, str]] = {
    "streams.version": (None, "streams groups (KIP-1071) are not served: Ottla supports "
                              "level 0 only, and a node leaves out a feature whose highest "
                              "level is 0, as Kafka's BrokerFeatures does "
                              "(docs/compatibility.md, Features)"),
}
"""A range Ottla advertises below Kafka 4.4's, or None where it does not list the feature."""

FINALIZED_DIFFERENCES: dict[str, tuple[int | None, str]] = {
    "streams.version": (None, "not a feature of Ottla's (see NARROWER_FEATURES)"),
}
"""Finalized levels of a new cluster that differ from Kafka's default at its
metadata.version (None: not finalized)."""


def range_differences(advertised: dict, kafka: dict, narrower: dict,
                      every_one: bool = False) -> list[str]:
    """Every way ``advertised`` ({key: (min, max)}) differs from ``kafka`` other than as
    ``narrower`` says, as sentences; empty when none. With ``every_one``, what Kafka lists
    and Ottla does not is a difference too, unless ``narrower`` says None for it."""
    problems = []
    for key, got in sorted(advertised.items()):
        if key not in kafka:
            problems.append(f"{key}: Ottla advertises {got}, Kafka 4.4 does not serve it")
        elif key in narrower:
            listed = narrower[key][0]
            low, high = kafka[key]
            if got != listed:
                problems.append(f"{key}: Ottla advertises {got}, the narrower table says "
                                f"{listed} (Kafka 4.4: {kafka[key]})")
            elif got == kafka[key] or not (low <= got[0] and got[1] <= high):
                problems.append(f"{key}: {got} is not narrower than Kafka 4.4's "
                                f"{kafka[key]}")
        elif got != kafka[key]:
            problems.append(f"{key}: Ottla advertises {got}, Kafka 4.4 {kafka[key]}")
    for key, (listed, _) in narrower.items():
        if listed is None and key in advertised:
            problems.append(f"{key}: advertised {advertised[key]}, listed as not advertised")
        elif listed is not None and key not in advertised:
            problems.append(f"{key}: in the narrower table but not advertised")
    if every_one:
        problems += [f"{key}: Kafka 4.4 lists {kafka[key]}, Ottla nothing"
                     for key in kafka if key not in advertised and key not in narrower]
    return problems
