"""Feature flags (KIP-584) this software supports, and their levels."""

from __future__ import annotations

METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 25  # 4.0-IV3
SUPPORTED_FEATURES = {METADATA_VERSION: (7, METADATA_VERSION_LEVEL)}
"""Feature levels this software can run at (3.3-IV3 to 4.0-IV3 for metadata.version)."""
