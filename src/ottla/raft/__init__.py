"""The metadata quorum (KRaft)."""
