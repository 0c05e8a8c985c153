"""Client quota callbacks (``client.quota.callback.class``, KIP-257) that test nodes load
by name, as a user's own plugin module would be loaded: ``tests.quota_callbacks.X``.

``TopicPrefixQuota`` is KIP-257's motivating kind of callback, a quota that follows the
cluster's metadata: the producers of a tenant (client ids starting with the tenant's
prefix, measured together under a ``tenant`` tag of the callback's own) may produce
``quota.callback.bytes.per.partition`` bytes per second for each partition of the
tenant's topics (those whose name starts with the same prefix), as the cluster's metadata
counts them; other clients have no quota.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ottla.broker.quota.client_quota_callback import (
    ClientQuotaEntity,
    ClientQuotaType,
    Cluster,
)
from ottla.common.principal import Principal

PREFIX = "quota.callback.prefix"
BYTES_PER_PARTITION = "quota.callback.bytes.per.partition"


class TopicPrefixQuota:
    def __init__(self) -> None:
        self.prefix = ""
        self.bytes_per_partition = 0.0
        self.partitions = 0
        self.quotas: dict[tuple[ClientQuotaType, ClientQuotaEntity], float] = {}
        """What the metadata log's quotas told it (kept, not used)."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.prefix = str(configs[PREFIX])
        self.bytes_per_partition = float(configs[BYTES_PER_PARTITION])

    def quota_metric_tags(self, quota_type: ClientQuotaType, principal: Principal,
                          client_id: str) -> dict[str, str]:
        if client_id.startswith(self.prefix):
            return {"tenant": self.prefix}  # the tenant's producers share one rate
        return {"client-id": client_id}

    def quota_limit(self, quota_type: ClientQuotaType, metric_tags: Mapping[str, str]
                    ) -> float | None:
        if quota_type is not ClientQuotaType.PRODUCE or \
                metric_tags.get("tenant") != self.prefix or not self.partitions:
            return None
        return self.bytes_per_partition * self.partitions

    def update_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity,
                     new_value: float) -> None:
        self.quotas[quota_type, entity] = new_value

    def remove_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity) -> None:
        self.quotas.pop((quota_type, entity), None)

    def quota_reset_required(self, quota_type: ClientQuotaType) -> bool:
        return False

    def update_cluster_metadata(self, cluster: Cluster) -> bool:
        partitions = sum(len(p) for topic, p in cluster.topics.items()
                         if topic.startswith(self.prefix))
        changed = partitions != self.partitions
        self.partitions = partitions
        return changed

    def close(self) -> None:
        pass
