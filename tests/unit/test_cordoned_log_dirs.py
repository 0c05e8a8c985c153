"""Cordoned log dirs (KIP-1066) as Kafka 4.4 has them: ``cordoned.log.dirs`` and its
checks (the broker's ``KafkaConfig.validateCordonedLogDirs``, the controller's
ConfigurationControlManager), the heartbeat that reports them and the
BrokerRegistrationChangeRecord the controller writes, placement that leaves out a broker
whose every dir is cordoned (``usableBrokers``, ``validateManualPartitionAssignment``), and
the broker's choice of dir for a new replica (LogManager.nextLogDirs)."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from ottla.common.config import ConfigError
from ottla.common.features import METADATA_VERSION
from ottla.common.server_config import KafkaConfig
from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import request_schema, response_schema
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.server.broker_lifecycle import BrokerLifecycle, BrokerState
from ottla.server.cordoned_log_dirs import CordonedLogDirs
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from tests.unit.test_metadata_versions import written_version

BROKER = ConfigResourceType.BROKER
OP_SET = 0


def dirs_of(broker_id: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=(broker_id << 8) + 1 << 64), uuid.UUID(int=(broker_id << 8) + 2 << 64)]


def apply(c: QuorumController, records: list[Any]) -> None:
    for rec in records:
        c.replay(r.decode(r.encode(rec)))


def cluster(brokers: int = 3, level: int | None = None) -> QuorumController:
    """A controller at Kafka 4.4's metadata.version (or ``level``) with ``brokers``
    unfenced brokers of two log dirs each, registered as a 4.4 broker registers."""
    c = QuorumController(1, rng=random.Random(7))
    apply(c, c.features.bootstrap_records())
    if level is not None:
        apply(c, [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level)])
    for b in range(1, brokers + 1):
        apply(c, c.cluster.register_broker(b, uuid.uuid4(), [("PLAINTEXT", "h", 9092 + b, 0)],
                                           None, 10 + b, unfence=False,
                                           log_dirs=dirs_of(b)).records)
        heartbeat(c, b, [])
    return c


def heartbeat(c: QuorumController, broker_id: int, cordoned: list[uuid.UUID] | None
              ) -> list[Any]:
    result = c.cluster.broker_heartbeat(broker_id, 10 + broker_id, 10**9, False, False, 0,
                                        (), cordoned)
    apply(c, result.records)
    return result.records


def create(c: QuorumController, topic: NewTopic) -> Any:
    result = c.replication.create_topics([topic])
    apply(c, result.records)
    return result.response[0]


# --- the controller ----------------------------------------------------------------------

def test_a_heartbeat_cordoning_dirs_is_recorded_as_a_registration_change_v3() -> None:
    c = cluster()
    records = heartbeat(c, 2, [dirs_of(2)[0]])
    (change,) = [x for x in records if isinstance(x, r.BrokerRegistrationChangeRecord)]
    assert change.cordoned_log_dirs == (dirs_of(2)[0],) and written_version(change) == 3
    assert c.image.brokers[2].cordoned_directories == (dirs_of(2)[0],)
    assert c.image.brokers[2].has_uncordoned_dirs  # one of its two dirs is still open
    assert heartbeat(c, 2, [dirs_of(2)[0]]) == []  # no change, no record
    heartbeat(c, 2, dirs_of(2))
    assert not c.image.brokers[2].has_uncordoned_dirs
    heartbeat(c, 2, [])  # uncordoned again
    assert c.image.brokers[2].cordoned_directories == ()
    assert c.image.brokers[2].has_uncordoned_dirs


def test_new_partitions_are_not_placed_on_a_broker_whose_every_dir_is_cordoned() -> None:
    c = cluster()
    heartbeat(c, 3, dirs_of(3))
    result = create(c, NewTopic("t", 12, 2))
    assert result.error == ErrorCode.none
    replicas = {b for p in c.image.topics_by_name["t"].partitions.values() for b in p.replicas}
    assert replicas == {1, 2}
    more = c.replication.create_partitions([("t", 24, None)])
    apply(c, more.records)
    replicas = {b for p in c.image.topics_by_name["t"].partitions.values() for b in p.replicas}
    assert len(c.image.topics_by_name["t"].partitions) == 24 and replicas == {1, 2}


def test_a_broker_with_one_dir_of_two_cordoned_still_takes_new_partitions() -> None:
    c = cluster()
    heartbeat(c, 3, [dirs_of(3)[1]])
    create(c, NewTopic("t", 12, 3))
    assert all(3 in p.replicas for p in c.image.topics_by_name["t"].partitions.values())


def test_too_few_usable_brokers_is_kafkas_invalid_replication_factor() -> None:
    c = cluster()
    heartbeat(c, 3, dirs_of(3))
    result = create(c, NewTopic("t", 1, 3))
    assert result.error == ErrorCode.invalid_replication_factor
    assert result.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 2 broker(s) are registered or some brokers have "
        "all their log directories cordoned.")
    for b in (1, 2):
        heartbeat(c, b, dirs_of(b))
    result = create(c, NewTopic("u", 1, 1))
    assert (result.error, result.message) == (
        ErrorCode.invalid_replication_factor,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or "
        "have all their log directories cordoned.")


def test_a_manual_assignment_to_a_fully_cordoned_broker_is_refused() -> None:
    c = cluster()
    heartbeat(c, 3, dirs_of(3))
    refused = ("The manual partition assignment includes broker 3, but all its log "
               "directories are cordoned.")
    result = create(c, NewTopic("t", -1, -1, assignments={0: [1, 3]}))
    assert (result.error, result.message) == (ErrorCode.invalid_replica_assignment, refused)
    assert create(c, NewTopic("u", -1, -1, assignments={0: [1, 2]})).error == ErrorCode.none
    more = c.replication.create_partitions([("u", 2, [[3, 1]])])
    assert more.response == [("u", ErrorCode.invalid_replica_assignment, refused)]
    moved = c.replication.alter_partition_reassignments([("u", 0, [2, 3])])
    assert moved.response[("u", 0)] == (ErrorCode.invalid_replica_assignment, refused)


# --- the config ----------------------------------------------------------------------------

def node_config(**overrides: str) -> KafkaConfig:
    return KafkaConfig({"process.roles": "broker,controller", "node.id": "1",
                        "controller.quorum.voters": "1@localhost:9093",
                        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                        "controller.listener.names": "CONTROLLER",
                        "listener.security.protocol.map":
                            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        "log.dirs": "/d/a,/d/b", **overrides})


def test_cordoned_log_dirs_must_be_log_dirs_or_a_lone_star() -> None:
    assert node_config()["cordoned.log.dirs"] == []
    assert node_config(**{"cordoned.log.dirs": "/d/b"})["cordoned.log.dirs"] == ["/d/b"]
    assert node_config(**{"cordoned.log.dirs": "*"})["cordoned.log.dirs"] == ["*"]
    with pytest.raises(ConfigError, match=r"^requirement failed: All entries in "
                       r"cordoned.log.dirs must be present in log.dirs or log.dir. Missing "
                       r"entries : /d/c,/d/e$"):
        node_config(**{"cordoned.log.dirs": "/d/a,/d/c,/d/e"})
    with pytest.raises(ConfigError, match=r"^requirement failed: When cordoned.log.dirs is "
                       r"set to \*, it must not contain other values$"):
        node_config(**{"cordoned.log.dirs": "*,/d/a"})
    with pytest.raises(ConfigError, match=r"^Configuration 'cordoned\.log\.dirs' values must "
                       r"not be duplicated\.$"):
        node_config(**{"cordoned.log.dirs": "/d/a,/d/a"})
    # A controller has no log dirs to cordon: Kafka checks a broker's only.
    controller = node_config(**{"process.roles": "controller", "listeners":
                                "CONTROLLER://:9093", "cordoned.log.dirs": "/elsewhere"})
    assert controller["cordoned.log.dirs"] == ["/elsewhere"]


def alter(c: QuorumController, value: str | None, forwarded: bool) -> tuple[ErrorCode, Any]:
    result = c.configuration.incremental_alter_configs(
        [(BROKER, "1", [("cordoned.log.dirs", OP_SET if value is not None else 1, value)])],
        forwarded=forwarded)
    apply(c, result.records)
    (_, _, code, message), = result.response
    return code, message


def test_the_controller_refuses_cordoned_log_dirs_below_4_3_iv0() -> None:
    c = cluster(1, level=29)  # 4.2-IV1
    assert alter(c, "/d/a", forwarded=True) == (
        ErrorCode.invalid_config, "The cordoned.log.dirs configuration value cannot be set "
        "because it requires metadata.version >= 4.3-IV0")


def test_sent_to_the_controller_directly_a_value_may_only_shrink() -> None:
    """Only a broker knows its log dirs: a request it forwards was checked there; one a
    client sends a controller (--bootstrap-controller) may only uncordon."""
    c = cluster(1)
    subset = (ErrorCode.invalid_config, "When updating cordoned.log.dirs via controllers,  "
              "the new value must be a subset of the current configuration value.")
    assert alter(c, "/d/a", forwarded=False) == subset
    assert alter(c, "/d/a, /d/b", forwarded=True) == (ErrorCode.none, None)
    assert alter(c, "/d/a,/d/c", forwarded=False) == subset
    assert alter(c, "/d/b", forwarded=False) == (ErrorCode.none, None)
    assert c.image.broker_configs(1)["cordoned.log.dirs"] == "/d/b"
    assert alter(c, "", forwarded=False) == (ErrorCode.none, None)
    assert alter(c, None, forwarded=False) == (ErrorCode.none, None)
    assert "cordoned.log.dirs" not in c.image.broker_configs(1)


def test_cordoned_log_dirs_is_per_broker_only() -> None:
    c = cluster(1)
    result = c.configuration.incremental_alter_configs(
        [(BROKER, "", [("cordoned.log.dirs", OP_SET, "/d/a")])])
    (_, _, code, message), = result.response
    assert (code, message) == (ErrorCode.invalid_request, "Cannot update these configs at "
                               "default cluster level, broker id must be specified: "
                               "[cordoned.log.dirs]")


# --- the broker -----------------------------------------------------------------------------

def test_a_new_log_goes_to_a_dir_that_is_not_cordoned(tmp_path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    manager = LogManager([a, b], now_ms=1000)
    manager.cordoned_dirs = frozenset({a})
    made = [manager.load_log(("t", p), LogConfig.resolve(), uuid.UUID(int=9), 1000)
            for p in range(4)]
    assert {os.path.dirname(lg.dir) for lg in made} == {b}
    manager.cordoned_dirs = frozenset({a, b})  # all cordoned: the first dir, as Kafka
    assert os.path.dirname(manager.load_log(("u", 0), LogConfig.resolve(), uuid.UUID(int=10),
                                            1000).dir) == a
    with pytest.raises(KafkaError) as refused:
        manager.check_log_dir(b)  # AlterReplicaLogDirs into a cordoned dir
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.invalid_replica_assignment, f"Log directory {b} is cordoned")


class HeartbeatController:
    """Answers BrokerHeartbeat through the real schemas with a real QuorumController."""

    def __init__(self, c: QuorumController) -> None:
        self.c = c
        self.sent: list[tuple[int, Any]] = []

    async def call(self, api_key: int, version: int, body: dict[str, Any],
                   timeout: float = 30.0) -> Any:
        req = build(request_schema(api_key, version), body)
        self.sent.append((version, req.cordoned_log_dirs if version >= 2 else None))
        result = self.c.cluster.broker_heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
            req.want_shut_down, 0, list(req.offline_log_dirs),
            None if version < 2 or req.cordoned_log_dirs is None
            else list(req.cordoned_log_dirs))
        apply(self.c, result.records)
        return build(response_schema(api_key, version), {
            "throttle_time": 0, "error_code": 0, "is_caught_up": result.response.is_caught_up,
            "is_fenced": result.response.is_fenced,
            "should_shut_down": result.response.should_shut_down})


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(poll(), timeout)


async def test_heartbeats_report_the_cordoned_dirs_once_caught_up() -> None:
    """BrokerHeartbeat v2: CordonedLogDirs null while the broker is STARTING, the dirs
    after; a change is sent at once, not a heartbeat interval later."""
    c = QuorumController(1, rng=random.Random(7))
    apply(c, c.features.bootstrap_records())
    apply(c, c.cluster.register_broker(1, uuid.uuid4(), [("PLAINTEXT", "h", 9092, 0)], None,
                                       11, unfence=False, log_dirs=dirs_of(1)).records)
    controller = HeartbeatController(c)
    cordoned = [dirs_of(1)[1]]
    lifecycle = BrokerLifecycle(
        broker=SimpleNamespace(node_id=1, cluster_id="c", broker_epoch=11),
        channel=controller, applied_offset=lambda: 10**9, endpoints=[], rack=None,
        heartbeat_interval_ms=60_000, session_timeout_ms=9000, directory_ids=dirs_of(1),
        metadata_level=lambda: c.image.features[METADATA_VERSION],
        cordoned_dirs=lambda: list(cordoned))
    lifecycle.epoch = 11
    lifecycle.start()
    await eventually(lambda: lifecycle.state == BrokerState.RUNNING)
    await eventually(lambda: len(controller.sent) >= 2)
    assert controller.sent[0] == (2, None)  # STARTING
    await eventually(lambda: c.image.brokers[1].cordoned_directories == (dirs_of(1)[1],))
    cordoned.append(dirs_of(1)[0])
    lifecycle.propagate_directory_cordoned()
    await eventually(lambda: set(c.image.brokers[1].cordoned_directories or ()) ==
                     set(dirs_of(1)), timeout=2.0)  # not 60 s later
    assert not c.image.brokers[1].has_uncordoned_dirs
    await lifecycle.stop()


def test_the_broker_follows_its_dynamic_cordoned_log_dirs(tmp_path) -> None:
    """CordonedLogDirs: server.properties' value first; a committed per-broker value
    replaces it (``*`` for every dir) and the lifecycle is told; deleted, the static one
    is back; a proposed value naming no log dir is refused with Kafka's message."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    config = node_config(**{"log.dirs": f"{a},{b}", "cordoned.log.dirs": a})
    image = MetadataImage()
    manager = LogManager(config.log_dirs, now_ms=1000)
    cordon = CordonedLogDirs(config, lambda: image, manager)
    told: list[frozenset[str]] = []
    cordon.on_change = lambda: told.append(manager.cordoned_dirs)
    assert manager.cordoned_dirs == {a}

    def commit(value: str | None) -> None:
        image.replay(r.ConfigRecord(resource_type=BROKER, resource_name="1",
                                    name="cordoned.log.dirs", value=value))
        cordon.update()
    commit("*")
    commit("*")  # the same again: nothing to tell
    commit(None)
    assert told == [{a, b}, {a}]
    with pytest.raises(ConfigError, match=r"^requirement failed: All entries in "
                       r"cordoned\.log\.dirs must be present in log\.dirs or log\.dir\. "
                       r"Missing entries : /elsewhere$"):
        cordon.validate({"cordoned.log.dirs": "/elsewhere"})
    cordon.validate({"cordoned.log.dirs": b})
    cordon.validate({"num.io.threads": "4"})  # not about cordoned dirs
