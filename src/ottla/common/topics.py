"""Kafka's internal topics, topic-name rules, and the description of a topic to create."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
"""A partition by topic name and index (Kafka's TopicPartition)."""
TopicIdPartition = tuple[uuid.UUID, int]
"""A partition by topic id and index, as the newer APIs name it (Kafka's
TopicIdPartition without the name)."""

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's ``Uuid.METADATA_TOPIC_ID`` (0, 1): how Fetch v13+ names the metadata log."""
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
"""Topics only the brokers' coordinators write; clients see them flagged internal."""

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a topic, or None if it can: Kafka's message
    (Topic.validate and detectInvalidTopic, the text since Kafka 3.4)."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not _LEGAL_TOPIC.match(name):
        reason = (f"'{name}' contains one or more characters other than ASCII "
                  "alphanumerics, '.', '_' and '-'")
    return None if reason is None else f"Topic name is invalid: {reason}"


@dataclass(slots=True)
class NewTopic:
    """A topic to create, as CreateTopics describes it (-1: the cluster's default)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)
