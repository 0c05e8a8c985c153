"""Feature flags (KIP-584) this software supports, and their levels."""

from __future__ import annotations

METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 25  # 4.0-IV3
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
"""KIP-966: at level 1 the controller keeps Eligible Leader Replicas and elects from them,
and a leader's high watermark waits for min.insync.replicas in-sync replicas."""
SUPPORTED_FEATURES = {METADATA_VERSION: (7, METADATA_VERSION_LEVEL),
                      ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1)}
"""Feature levels this software can run at (3.3-IV3 to 4.0-IV3 for metadata.version)."""
