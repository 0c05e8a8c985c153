"""What the first active controller of an empty metadata log writes besides the
bootstrap records (Kafka's ``ActivationRecordsGenerator.recordsForEmptyLog``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ottla.common.features import ELIGIBLE_LEADER_REPLICAS_VERSION
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType

MIN_INSYNC_REPLICAS = "min.insync.replicas"


def elr_safety_records(bootstrap: Sequence[Any], default_min_isr: int) -> list[Any]:
    """With ELR on from the start (eligible.leader.replicas.version 1 among the bootstrap
    records, as a cluster formatted at 4.1-IV0 or later has), the cluster-wide
    ``min.insync.replicas`` as a dynamic broker default: KIP-966 elects from the ELR only
    with a cluster-level value to keep, so Kafka writes the controller's own value here."""
    elr = max((rec.feature_level for rec in bootstrap
               if isinstance(rec, r.FeatureLevelRecord)
               and rec.name == ELIGIBLE_LEADER_REPLICAS_VERSION), default=0)
    if elr < 1:
        return []
    return [r.ConfigRecord(resource_type=ConfigResourceType.BROKER, resource_name="",
                           name=MIN_INSYNC_REPLICAS, value=str(default_min_isr))]
