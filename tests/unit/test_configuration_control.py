"""Dynamic topic and broker configs (ConfigurationControlManager)."""

from __future__ import annotations

from ottla.common.topics import NewTopic
from ottla.controller.configuration_control import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a")]).records)
    t = ConfigResourceType.TOPIC
    ops = [("retention.ms", OP_SET, "5000"), ("cleanup.policy", OP_APPEND, "compact")]
    apply(c, c.configuration.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"retention.ms": "5000",
                                          "cleanup.policy": "delete,compact"}
    ops = [("retention.ms", OP_DELETE, None), ("cleanup.policy", OP_SUBTRACT, "delete")]
    apply(c, c.configuration.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"cleanup.policy": "compact"}
    bad = c.configuration.incremental_alter_configs([(t, "a", [("segment.bytes", OP_SET, "x")]),
                                       (t, "missing", [("retention.ms", OP_SET, "1")])])
    assert [code for _, _, code, _ in bad.response] == [
        ErrorCode.invalid_config, ErrorCode.unknown_topic_or_partition]


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a", configs={"retention.ms": "1"})]).records)
    apply(c, c.configuration.alter_configs(
        [(ConfigResourceType.TOPIC, "a", {"segment.ms": "99999"})])
          .records)
    assert c.image.topic_configs("a") == {"segment.ms": "99999"}
