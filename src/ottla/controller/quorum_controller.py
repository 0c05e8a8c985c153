"""The QuorumController: validates admin operations and turns them into metadata records.

Sans-I/O, as seed 003 describes the controller: each operation reads the current state,
returns ``ControllerResult(records, response)`` and changes nothing itself; the driver
appends the records to the metadata log, replays them through ``replay`` (the one path
that changes state, also used to load the log on start) and releases the response once
they are committed. Randomness (topic ids, ACL ids, placement) comes from an injected
generator.

The work is done by control managers, as Kafka's controller is organised, and an
operation is a call on one of them (``controller.replication.create_topics(...)``): the
cluster (brokers), replication (topics, partitions, leaders and ISRs), configuration,
features, producer ids, SCRAM credentials, ACLs, client quotas and delegation tokens.
They decide from one ``MetadataImage``, which is the state every record replays into
(and, on the active controller, keeps its history on the timeline so that renouncing
reverts it); unlike Kafka's managers they keep no state of their own in the log, only the
cluster's soft broker sessions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from ottla.controller.acl_control import AclControlManager
from ottla.controller.client_quota_control import ClientQuotaControlManager
from ottla.controller.cluster_control import ClusterControlManager
from ottla.controller.configuration_control import ConfigurationControlManager
from ottla.controller.delegation_token_control import (
    DEFAULT_EXPIRY_TIME_MS,
    DEFAULT_MAX_LIFETIME_MS,
    DelegationTokenControlManager,
)
from ottla.controller.feature_control import FeatureControlManager
from ottla.controller.producer_id_control import ProducerIdControlManager
from ottla.controller.replication_control import ReplicationControlManager
from ottla.controller.scram_control import ScramControlManager
from ottla.metadata.image import MetadataImage
from ottla.timeline import SnapshotRegistry


class QuorumController:
    def __init__(self, node_id: int, *, default_num_partitions: int = 1,
                 default_replication_factor: int = 1, delete_topic_enable: bool = True,
                 unclean_leader_election_enable: bool = False,
                 default_min_insync_replicas: int = 1,
                 rng: random.Random | None = None,
                 registry: SnapshotRegistry | None = None,
                 broker_config: Callable[[str], Any] | None = None,
                 delegation_token_secret_key: str | None = None,
                 delegation_token_max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS,
                 delegation_token_expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS,
                 quorum_node_ids: Sequence[int] = ()) -> None:
        """``quorum_node_ids``: the controllers of ``controller.quorum.voters`` (none for
        a dynamic quorum), which must all register before a feature level changes."""
        self.node_id = node_id
        self.registry = registry
        """The timeline the image's maps keep their history on (None: plain dicts)."""
        self.image = MetadataImage(registry)
        rng = rng or random.Random()
        self.replication = ReplicationControlManager(
            self.image, rng, default_num_partitions=default_num_partitions,
            default_replication_factor=default_replication_factor,
            delete_topic_enable=delete_topic_enable,
            unclean_leader_election_enable=unclean_leader_election_enable,
            default_min_insync_replicas=default_min_insync_replicas)
        self.cluster = ClusterControlManager(self.image, self.replication)
        self.configuration = ConfigurationControlManager(self.image, broker_config,
                                                         quorum_node_ids)
        self.features = FeatureControlManager(self.image, node_id, quorum_node_ids)
        self.producer_ids = ProducerIdControlManager(self.image)
        self.scram = ScramControlManager(self.image)
        self.acls = AclControlManager(self.image, rng)
        self.client_quotas = ClientQuotaControlManager(self.image)
        self.delegation_tokens = DelegationTokenControlManager(
            self.image, rng, delegation_token_secret_key,
            delegation_token_max_lifetime_ms, delegation_token_expiry_time_ms)

    def replay(self, record: Any, offset: int | None = None) -> None:
        self.image.replay(record, offset)
