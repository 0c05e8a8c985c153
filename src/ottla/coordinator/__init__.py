"""Coordinators: state machines over a partition of an internal topic (seed 000)."""
