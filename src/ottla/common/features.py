"""Feature flags (KIP-584) this software supports, and their levels."""

from __future__ import annotations

METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 25  # 4.0-IV3
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
SUPPORTED_FEATURES = {METADATA_VERSION: (7, METADATA_VERSION_LEVEL),
                      ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1),
                      TRANSACTION_VERSION: (0, 2)}
"""Feature levels this software can run at (3.3-IV3 to 4.0-IV3 for metadata.version)."""


def default_feature_levels(metadata_level: int) -> dict[str, int]:
    """The features besides metadata.version that a cluster formatted at
    ``metadata_level`` starts with (Kafka's defaults for that release; a feature at
    level 0 is not written)."""
    return {TRANSACTION_VERSION: 2} if metadata_level >= IBP_4_0_IV2 else {}
