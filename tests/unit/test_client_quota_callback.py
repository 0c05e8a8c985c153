"""``client.quota.callback.class`` (Kafka's ClientQuotaCallback, KIP-257) in the quota
managers: the callback's tags and limits replace the built-in lookup, it is told of the
metadata log's quotas (as Kafka's ``ClientQuotaEntity``) and of the cluster, and a
changed answer re-bounds the clients already measured, as Kafka's
``updateQuotaMetricConfigs`` does. Loading refuses what is no Python callback with
Kafka's config error."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest

from ottla.broker.quota.client_quota_callback import (
    ClientQuotaEntity,
    ClientQuotaType,
    Cluster,
    ConfigEntity,
    ConfigEntityType,
    load_callback,
)
from ottla.broker.quota.client_quota_manager import ABSENT, DEFAULT
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.common.config import ConfigError
from ottla.common.principal import Principal
from ottla.metadata.image import MetadataImage, PartitionRegistration, TopicImage


class Recording:
    """Answers from a table, and keeps every call."""

    def __init__(self) -> None:
        self.limits: dict[str, float] = {"team": 1000.0}
        self.reset = False
        self.calls: list[tuple[object, ...]] = []

    def quota_metric_tags(self, quota_type: ClientQuotaType, principal: Principal,
                          client_id: str) -> dict[str, str]:
        self.calls.append(("tags", quota_type, principal, client_id))
        return {"user": principal.name, "client-id": client_id.split("-")[0]}

    def quota_limit(self, quota_type: ClientQuotaType, metric_tags: Mapping[str, str]
                    ) -> float | None:
        return self.limits.get(metric_tags.get("client-id", ""))

    def update_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity,
                     new_value: float) -> None:
        self.calls.append(("update", quota_type, entity, new_value))

    def remove_quota(self, quota_type: ClientQuotaType, entity: ClientQuotaEntity) -> None:
        self.calls.append(("remove", quota_type, entity))

    def quota_reset_required(self, quota_type: ClientQuotaType) -> bool:
        reset, self.reset = self.reset, False
        return reset

    def update_cluster_metadata(self, cluster: Cluster) -> bool:
        self.calls.append(("cluster", cluster))
        self.limits["team"] = 1000.0 * sum(len(p) for p in cluster.topics.values())
        return True

    def close(self) -> None:
        self.calls.append(("close",))


def test_the_callbacks_tags_and_limits_decide_and_every_request_is_measured() -> None:
    callback = Recording()
    quotas = ClientQuotaManagers()
    quotas.use_callback(callback)  # no quota in the metadata log: measured all the same
    produce = quotas.produce
    assert produce.enabled
    assert produce.record("alice", "team-1", 5000, 0) == 0  # 5000 B over 10 s: 500/s
    # team-2 shares team's rate: 25000 B over 10 s, 2500/s over 1000/s, throttled for
    # (2500 - 1000) / 1000 * 10 s (QuotaUtils.throttleTime).
    assert produce.record("alice", "team-2", 20_000, 0) == 15_000
    assert produce.sensors.keys() == {("alice", "team")}
    assert ("tags", ClientQuotaType.PRODUCE, Principal("User", "alice"), "team-2") in \
        callback.calls
    assert produce.record("bob", "solo", 10**9, 0) == 0  # no limit for solo


def test_the_metadata_logs_quotas_reach_the_callback_as_kafkas_entities() -> None:
    callback = Recording()
    quotas = ClientQuotaManagers()
    quotas.use_callback(callback)
    quotas.produce.update_quota(("alice", DEFAULT), 10.0)
    quotas.produce.update_quota((ABSENT, "app"), 20.0)
    quotas.produce.update_quota(("alice", DEFAULT), None)
    assert [c for c in callback.calls if c[0] != "tags"] == [
        ("update", ClientQuotaType.PRODUCE, ClientQuotaEntity((
            ConfigEntity("alice", ConfigEntityType.USER),
            ConfigEntity("<default>", ConfigEntityType.DEFAULT_CLIENT_ID))), 10.0),
        ("update", ClientQuotaType.PRODUCE, ClientQuotaEntity((
            ConfigEntity("app", ConfigEntityType.CLIENT_ID),)), 20.0),
        ("remove", ClientQuotaType.PRODUCE, ClientQuotaEntity((
            ConfigEntity("alice", ConfigEntityType.USER),
            ConfigEntity("<default>", ConfigEntityType.DEFAULT_CLIENT_ID)))),
    ]


def test_a_new_answer_rebounds_the_clients_already_measured() -> None:
    callback = Recording()
    quotas = ClientQuotaManagers()
    quotas.use_callback(callback)
    quotas.produce.record("alice", "team-1", 1, 0)
    assert quotas.produce.sensors["alice", "team"].bound == 1000.0
    image = MetadataImage()
    image.topics_by_name["t"] = TopicImage("t", uuid.uuid4(), {
        i: PartitionRegistration([1], [1], 1, 0, 0) for i in range(3)})
    quotas.update_cluster_metadata(image, "cluster")
    cluster = callback.calls[-1][1]
    assert isinstance(cluster, Cluster) and cluster.cluster_id == "cluster"
    assert [p.partition for p in cluster.partitions_for_topic("t")] == [0, 1, 2]
    assert quotas.produce.sensors["alice", "team"].bound == 3000.0
    callback.limits["team"] = 7.0
    callback.reset = True  # asked at the next recording
    quotas.produce.record("alice", "team-1", 1, 1)
    assert quotas.produce.sensors["alice", "team"].bound == 7.0


def test_a_callback_may_measure_clients_under_tags_of_its_own() -> None:
    """Kafka's ClientQuotaCallback.quotaMetricTags may return any map: the clients given
    the same map share a rate, ``quota_limit`` is asked with that map, and the quota
    metrics carry its tags (``client-id`` as the quota rules' ``clientId``; an empty value
    left out, as Kafka's JmxReporter leaves it out of the bean)."""
    from tests.unit.test_quota_metrics import THROTTLE, key, scrape

    asked: list[dict[str, str]] = []
    callback = Recording()

    def tags(quota_type, principal, client_id):
        return {"tenant": client_id.split("-")[0], "client-id": client_id, "zone": ""}

    def limit(quota_type, metric_tags):
        asked.append(dict(metric_tags))
        return 1000.0 if metric_tags.get("tenant") == "acme" else None

    callback.quota_metric_tags = tags  # type: ignore[method-assign]
    callback.quota_limit = limit  # type: ignore[method-assign]
    quotas = ClientQuotaManagers()
    quotas.use_callback(callback)
    assert quotas.produce.record("alice", "acme-1", 5000, 0) == 0
    assert quotas.produce.record("bob", "acme-1", 20_000, 0) == 15_000  # the same map
    assert quotas.produce.record("carol", "other-1", 10**9, 0) == 0
    assert len(quotas.produce.sensors) == 2
    assert {"tenant": "acme", "client-id": "acme-1", "zone": ""} in asked
    samples = scrape(quotas, 0)
    acme = key(THROTTLE, resource="Produce", tenant="acme", clientId="acme-1")
    assert samples[acme] == 15_000
    assert key("kafka_server_quota_byte_rate", resource="Produce", tenant="other",
               clientId="other-1") in samples


def test_loading_makes_and_configures_the_class_and_refuses_anything_else() -> None:
    assert load_callback({}) is None
    loaded = load_callback({"client.quota.callback.class":
                            "tests.quota_callbacks.TopicPrefixQuota",
                            "quota.callback.prefix": "t.",
                            "quota.callback.bytes.per.partition": "5"})
    assert loaded is not None and loaded.prefix == "t."  # type: ignore[attr-defined]
    java = "io.strimzi.kafka.quotas.StaticQuotaCallback"
    with pytest.raises(ConfigError) as raised:
        load_callback({"client.quota.callback.class": java})
    assert str(raised.value).startswith(
        f"Invalid value {java} for configuration client.quota.callback.class: Class {java} "
        f"could not be found.")
    with pytest.raises(ConfigError, match="is not a ClientQuotaCallback: it has no "
                                          "quota_metric_tags"):
        load_callback({"client.quota.callback.class": "collections.OrderedDict"})
