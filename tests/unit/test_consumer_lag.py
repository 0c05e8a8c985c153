"""Consumer lag under kafka_exporter's names (``ottla.server.metrics.consumer_lag``): the
arithmetic on plain data, then the collector on a broker whose group and share
coordinators are real shards over partitions it leads, with other brokers' high
watermarks asked before a scrape (and left out when they do not answer)."""

from __future__ import annotations

from typing import Any

from ottla.common.topics import OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC
from ottla.coordinator.share.state import SharePartitionKey
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.server.metrics.consumer_lag import (
    CommittedOffset,
    ConsumerLagCollector,
    lag_families,
)
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixture
    NOW_MS,
    OTHER,
    ask,
    batch,
    broker,
    create_topic,
    produce_ok,
    register_broker,
)
from tests.unit.test_metrics import scrape, value


class Families:
    """A collector of fixed families (what ``lag_families`` made)."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> Any:
        return iter(self.families)


def test_lag_is_the_end_less_the_committed_offset_summed_per_topic() -> None:
    samples = scrape(Families(lag_families(
        {"readers": 2, "idle": 0},
        [CommittedOffset("readers", "orders", 0, 4), CommittedOffset("readers", "orders", 1, 10),
         CommittedOffset("readers", "audit", 0, 3)],
        {("orders", 0): 10, ("orders", 1): 10})))  # audit's end is not known
    labels = {"consumergroup": "readers", "topic": "orders"}
    assert value(samples, "kafka_consumergroup_current_offset", **labels, partition="0") == 4
    assert value(samples, "kafka_consumergroup_lag", **labels, partition="0") == 6
    assert value(samples, "kafka_consumergroup_lag", **labels, partition="1") == 0
    assert value(samples, "kafka_consumergroup_lag_sum", **labels) == 6
    assert value(samples, "kafka_consumergroup_current_offset_sum", **labels) == 14
    audit = {"consumergroup": "readers", "topic": "audit"}
    assert value(samples, "kafka_consumergroup_current_offset", **audit, partition="0") == 3
    assert ("kafka_consumergroup_lag", tuple(sorted({**audit, "partition": "0"}.items()))) \
        not in samples
    assert ("kafka_consumergroup_lag_sum", tuple(sorted(audit.items()))) not in samples
    assert value(samples, "kafka_consumergroup_members", consumergroup="readers") == 2
    assert value(samples, "kafka_consumergroup_members", consumergroup="idle") == 0


def test_a_share_groups_lag_leaves_out_what_it_already_delivered() -> None:
    """KIP-1226, as ``kafka-share-groups --describe`` shows it: end - start - delivered;
    a state whose delivered count is not known yet has no lag."""
    assert CommittedOffset("g", "t", 0, 10, delivered=3).lag(20) == 7
    assert CommittedOffset("g", "t", 0, 10, delivered=-1).lag(20) is None
    assert CommittedOffset("g", "t", 0, 30).lag(20) == -10  # as kafka_exporter: unclamped


def commit(group: str, topic: str, offsets: dict[int, int]) -> dict[str, Any]:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": None}
                for p, o in offsets.items()]}]}


async def loaded(broker: Any) -> None:  # noqa: F811
    """The group and share coordinators' partitions led here, loaded."""
    create_topic(broker, OFFSETS_TOPIC, configs={"cleanup.policy": "compact"})
    create_topic(broker, SHARE_GROUP_STATE_TOPIC)
    broker.group_coordinator.on_metadata(NOW_MS)
    broker.share_coordinator.on_metadata(NOW_MS)


async def test_the_collector_reads_the_shards_and_the_partitions_led_here(broker  # noqa: F811
                                                                        ) -> None:
    await loaded(broker)
    topic_id = create_topic(broker, "orders", partitions=2)
    for _ in range(3):
        await produce_ok(broker, "orders", 0, batch(b"a", b"b"))  # 6 records on partition 0
    await produce_ok(broker, "orders", 1, batch(b"c"))
    committed = await ask(broker, ApiKey.OFFSET_COMMIT, 9, commit("readers", "orders",
                                                                  {0: 2, 1: 1}))
    assert {p.error_code for p in committed.topics[0].partitions} == {ErrorCode.none}
    await broker.share_coordinator.initialize_state(
        SharePartitionKey("workers", topic_id, 0), 0, 1)
    await broker.share_coordinator.write_state(
        SharePartitionKey("workers", topic_id, 0), 0, 0, 1, 2, [])

    collector = ConsumerLagCollector(broker)
    await collector.prepare()  # nothing led elsewhere: nothing asked
    samples = scrape(collector)
    readers = {"consumergroup": "readers", "topic": "orders"}
    assert value(samples, "kafka_consumergroup_current_offset", **readers, partition="0") == 2
    assert value(samples, "kafka_consumergroup_lag", **readers, partition="0") == 4
    assert value(samples, "kafka_consumergroup_lag", **readers, partition="1") == 0
    assert value(samples, "kafka_consumergroup_lag_sum", **readers) == 4
    assert value(samples, "kafka_consumergroup_members", consumergroup="readers") == 0
    workers = {"consumergroup": "workers", "topic": "orders", "partition": "0"}
    assert value(samples, "kafka_consumergroup_current_offset", **workers) == 1
    assert value(samples, "kafka_consumergroup_lag", **workers) == 3  # 6 - 1 - 2 delivered
    assert value(samples, "kafka_topic_partition_current_offset", topic="orders",
                 partition="0") == 6
    assert value(samples, "kafka_topic_partition_oldest_offset", topic="orders",
                 partition="0") == 0
    assert value(samples, "kafka_topic_partition_current_offset", topic=OFFSETS_TOPIC,
                 partition="0") >= 1


async def test_partitions_led_elsewhere_take_their_leaders_high_watermark(
        broker, monkeypatch) -> None:  # noqa: F811
    await loaded(broker)
    register_broker(broker.image, OTHER, 9094)
    create_topic(broker, "remote", partitions=2, leader=OTHER)
    await ask(broker, ApiKey.OFFSET_COMMIT, 9, commit("readers", "remote", {0: 5, 1: 5}))
    asked: list[tuple[int, list[tuple[str, int]]]] = []

    async def latest_offsets(peers: Any, node_id: int, partitions: list[tuple[str, int]],
                             timeout: float = 30.0) -> dict[tuple[str, int], Any]:
        asked.append((node_id, partitions))
        return {("remote", 0): 12, ("remote", 1): KafkaError(ErrorCode.not_leader_or_follower)}

    from ottla.server.metrics import consumer_lag
    monkeypatch.setattr(consumer_lag, "latest_offsets", latest_offsets)
    collector = ConsumerLagCollector(broker)
    await collector.prepare()
    assert asked == [(OTHER, [("remote", 0), ("remote", 1)])]
    samples = scrape(collector)
    labels = {"consumergroup": "readers", "topic": "remote"}
    assert value(samples, "kafka_consumergroup_lag", **labels, partition="0") == 7
    assert ("kafka_consumergroup_lag", tuple(sorted({**labels, "partition": "1"}.items()))) \
        not in samples  # its leader could not say
    assert value(samples, "kafka_consumergroup_current_offset", **labels, partition="1") == 5
    assert not any(name == "kafka_topic_partition_current_offset" and ("topic", "remote")
                   in labels_ for name, labels_ in samples)  # led elsewhere


async def test_a_leader_that_does_not_answer_costs_the_scrape_at_most_the_timeout(
        broker, monkeypatch) -> None:  # noqa: F811
    import asyncio
    import time

    from ottla.server.metrics import consumer_lag

    await loaded(broker)
    register_broker(broker.image, OTHER, 9094)
    create_topic(broker, "remote", leader=OTHER)
    await ask(broker, ApiKey.OFFSET_COMMIT, 9, commit("readers", "remote", {0: 5}))

    async def never(*args: Any, **kwargs: Any) -> dict[tuple[str, int], Any]:
        await asyncio.sleep(60)
        return {}

    monkeypatch.setattr(consumer_lag, "latest_offsets", never)
    monkeypatch.setattr(consumer_lag, "REMOTE_TIMEOUT_S", 0.1)
    collector = ConsumerLagCollector(broker)
    started = time.monotonic()
    await collector.prepare()
    assert time.monotonic() - started < 2
    samples = scrape(collector)
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup="readers",
                 topic="remote", partition="0") == 5
    assert not any(name == "kafka_consumergroup_lag" for name, _ in samples)
