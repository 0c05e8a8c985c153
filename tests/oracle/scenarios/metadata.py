"""Metadata v12/v13 and DescribeTopicPartitions: what clients and kafka-topics --describe
learn of a topic, and of names that are unknown, invalid or asked for by id."""

from __future__ import annotations

from ottla.protocol.api import ApiKey
from tests.oracle.model import Expect, Json, Normalise, scenario
from tests.oracle.scenarios.common import metadata, topic_id, topics_by_name
from tests.oracle.target import Target


@scenario("Metadata", ci=True)
def metadata_topics(t: Target) -> Json:
    """Metadata v12 and v13 for a topic of 3 partitions, an unknown name, an invalid name
    and a name too long; with and without the topic's authorized operations; v12 asking
    by topic id (Kafka refuses ids in Metadata)."""
    name = t.topic("a")
    t.create_topic(name, 3)
    unknown, invalid, too_long = t.topic("nope"), "bad$name", "x" * 250
    result: dict[str, Json] = {}
    for version in (12, 13):
        result[f"v{version}"] = topics_by_name(
            metadata(t, [name, unknown, invalid, too_long], version))
    result["v12_authorized_operations"] = t.request(ApiKey.METADATA, 12, {
        "topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True})
    result["v12_no_topics"] = metadata(t, [], 12)
    result["v12_by_id"] = t.request(ApiKey.METADATA, 12, {
        "topics": [{"name": None, "topic_id": topic_id(t, name)}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return result


@scenario("Metadata", expect=(Expect(
    "first/topics/*", "Ottla's single node answers auto-creation once the topic is "
    "created (its controller is local), so the first answer has the topic; Kafka answers "
    "UNKNOWN_TOPIC_OR_PARTITION while the controller creates it. Clients retry either way, "
    "and both have the topic the next time"),), normalise=(Normalise(
        "first/topics/*/topic_id", lambda v: v is not None, "whether the first answer has "
        "an id: the id itself is compared in the second"),))
def metadata_auto_create(t: Target) -> Json:
    """Metadata v12 with allow_auto_topic_creation for an unknown topic (both default
    auto.create.topics.enable to true): the first answer, and the topic once created."""
    name = t.topic("auto")
    first = topics_by_name(metadata(t, [name], 12, auto_create=True))
    t.wait_for_topic(name, 1)
    return {"first": first, "then": topics_by_name(metadata(t, [name], 12))}


@scenario("Metadata", ci=True)
def describe_topic_partitions(t: Target) -> Json:
    """DescribeTopicPartitions v0 (kafka-topics --describe in 4.x): every field of a
    topic's partitions, a response limit smaller than the topic with its cursor, the
    next page from that cursor, and an unknown topic among known ones."""
    name, other = t.topic("a"), t.topic("b")
    t.create_topic(name, 3)
    t.create_topic(other, 1)
    unknown = t.topic("nope")

    def describe(names: list[str], limit: int, cursor: dict[str, Json] | None) -> Json:
        return t.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": cursor})
    first = describe([name, other, unknown], 2, None)
    assert isinstance(first, dict)
    cursor = first.get("next_cursor")
    return {
        "all": describe([name, other, unknown], 2000, None),
        "first_page": first,
        "next_page": describe([name, other, unknown], 2, cursor) if cursor else None,
        "cursor_past_the_end": describe([name], 10, {"topic_name": name,
                                                     "partition_index": 7}),
        "only_unknown": describe([unknown], 10, None),
        "invalid_name": describe(["bad$name"], 10, None),
    }
