"""The scenarios, one module per family; importing this package registers them all, in
the order of ``FAMILIES`` (the order a report and the docs' table follow)."""

from tests.oracle.model import SCENARIOS
from tests.oracle.scenarios import (
    api_versions,
    commits,
    configs,
    features,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    produce,
    share,
    topics,
    transactions,
    voters,
)

__all__ = ["FAMILIES", "api_versions", "commits", "configs", "features", "fetch", "groups",
           "log_dirs", "metadata", "offsets", "produce", "share", "topics", "transactions",
           "voters"]

FAMILIES = ("ApiVersions", "Metadata", "DescribeConfigs", "CreateTopics", "CreatePartitions",
            "DeleteTopics", "Produce", "ListOffsets", "Log dirs", "Fetch", "Classic group",
            "Consumer group (KIP-848)", "Share group", "Transactions", "Offsets", "Features",
            "KRaft voters")

_ordered = sorted(SCENARIOS.values(), key=lambda s: FAMILIES.index(s.family))
SCENARIOS.clear()
SCENARIOS.update((s.name, s) for s in _ordered)
