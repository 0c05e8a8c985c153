"""The controller listener's request handlers (``server.controller_apis``) and the
ApiVersions handler factory (``server.api_versions``).

Every request goes through the table ``server.apis.controller_dispatcher`` builds, to a
real ``QuorumController`` and ``MetadataImage`` behind a stand-in controller channel, and
its response is encoded and decoded again as the client would read it. Covered: broker
registration, heartbeats and producer id blocks; controller registration (KIP-919);
CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders (with AlterPartition); AlterConfigs,
IncrementalAlterConfigs and UpdateFeatures; DescribeCluster and DescribeQuorum; the KRaft
RPCs handed to the Raft driver; the Envelope; ApiVersions.
"""

from __future__ import annotations

import dataclasses
import inspect
import random
import uuid
from typing import Any

import pytest

from ottla.broker.handlers.configs import DYNAMIC_TOPIC_CONFIG
from ottla.broker.handlers.metadata import BROKERS, CONTROLLERS
from ottla.common.features import METADATA_VERSION, SHARE_VERSION, SUPPORTED_FEATURES
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.common.topics import METADATA_TOPIC
from ottla.common.uuids import kafka_uuid_text
from ottla.controller.configuration_control import OP_DELETE, OP_SET
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import NotControllerError
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import RequestHeader, decode_response, encode_request
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.protocol.requests import ApiSpec, ApiTable, RequestContext
from ottla.raft.description import QuorumDescription, ReplicaDescription
from ottla.raft.quorum import RaftConfig, VoterChangeResult
from ottla.raft.voter_set import ReplicaKey, VoterNode
from ottla.server.api_versions import api_versions
from ottla.server.apis import controller_dispatcher
from ottla.server.controller_apis import ControllerServices, quorum
from ottla.server.request_dispatcher import RequestDispatcher
from tests.kafka_versions import (
    CONTROLLER_APIS,
    NARROWER_CONTROLLER,
    NARROWER_FEATURES,
    range_differences,
)
from tests.kafka_versions import SUPPORTED_FEATURES as KAFKA_FEATURES

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
VOTERS = "1@127.0.0.1:9093,2@127.0.0.2:9093,3@127.0.0.3:9093"
LOW_MV, HIGH_MV = SUPPORTED_FEATURES[METADATA_VERSION]
TOPIC = int(ConfigResourceType.TOPIC)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class StandInChannel:
    """Stands in for the ``ControllerChannel``: the real one needs a Raft driver (a
    metadata log, elections) to commit records and sockets to forward. This one runs each
    operation on a real ``QuorumController``, replays its records at once (each through
    its wire encoding, at the next offset) and answers; ``forward`` records its calls."""

    def __init__(self, controller: QuorumController, quorum: QuorumDescription) -> None:
        self.controller = controller
        self.quorum = quorum
        self.is_active = True
        self.offset = 0
        self.forwarded: list[tuple[RequestContext, Any]] = []
        self.forward_answer: dict[str, Any] = {"forwarded": True}

    def append(self, records: list[Any]) -> None:
        for record in records:
            self.controller.replay(r.decode(r.encode(record)), self.offset)
            self.offset += 1

    async def submit(self, op: Any) -> Any:
        if not self.is_active:
            raise NotControllerError()
        result = op(self.controller)
        self.append(result.records)
        return result.response

    def next_offset(self) -> int:
        return self.offset

    def describe_quorum(self) -> QuorumDescription:
        return self.quorum

    async def forward(self, ctx: RequestContext, req: Any) -> Any:
        self.forwarded.append((ctx, req))
        return self.forward_answer


class StandInRaft:
    """Stands in for the ``RaftDriver`` (which needs a log directory and peers): records
    the KRaft RPCs handed to it."""

    cluster_id = CLUSTER_ID
    listener = "CONTROLLER"
    epoch = 1
    leader_id = 1
    kraft_version = 0  # a static quorum
    config = RaftConfig()

    def __init__(self) -> None:
        self.is_leader = True
        self.received: list[tuple[int, Any]] = []
        self.changes: list[tuple[str, Any]] = []

    async def inbound(self, api_key: int, request: Any) -> dict[str, Any]:
        self.received.append((api_key, request))
        return {"from_raft": api_key}

    def address(self, node: int) -> tuple[str, int] | None:
        return ("127.0.0.1", 9093) if node == 1 else None

    # A static quorum: the replica refuses voter changes (see test_raft_voter_changes).
    async def add_voter(self, voter: VoterNode, timeout_s: float,
                        ack_when_committed: bool = True) -> VoterChangeResult:
        self.changes.append(("add", voter))
        return VoterChangeResult(0, ErrorCode.unsupported_version)

    async def remove_voter(self, key: ReplicaKey, timeout_s: float) -> VoterChangeResult:
        self.changes.append(("remove", key))
        return VoterChangeResult(0, ErrorCode.unsupported_version)

    async def update_voter(self, voter: VoterNode) -> VoterChangeResult:
        self.changes.append(("update", voter))
        return VoterChangeResult(0, ErrorCode.unsupported_version)


@dataclasses.dataclass
class Env:
    services: ControllerServices
    dispatcher: RequestDispatcher[ControllerServices]
    controller: QuorumController
    channel: StandInChannel
    raft: StandInRaft
    clock: Clock

    @property
    def image(self) -> Any:
        return self.services.image


DIRECTORIES = {v: uuid.UUID(int=v << 64 | 7) for v in (1, 2, 3)}


def describe(config: KafkaConfig) -> QuorumDescription:
    """What the leader of a three-voter quorum with one observer might report."""
    name = config.controller_listener_names[0]
    voters = config.quorum_voters
    return QuorumDescription(
        leader_id=1, leader_epoch=4, high_watermark=120,
        voters=[ReplicaDescription(v, kafka_uuid_text(DIRECTORIES[v]), 120 - v, 1000 + v,
                                   900 + v) for v in sorted(voters)],
        observers=[ReplicaDescription(101, None, 90)],
        endpoints={v: [(name, host, port)] for v, (host, port) in voters.items()})


def make_env(metadata_version: int | None = None) -> Env:
    config = KafkaConfig(dict(dev_defaults(), **{"controller.quorum.voters": VOTERS}))
    controller = QuorumController(config.node_id, rng=random.Random(7))
    channel = StandInChannel(controller, describe(config))
    if metadata_version is None:
        channel.append(controller.features.bootstrap_records())
    else:
        channel.append([r.FeatureLevelRecord(name=METADATA_VERSION,
                                             feature_level=metadata_version)])
    raft = StandInRaft()
    clock = Clock()
    services = ControllerServices(
        node_id=config.node_id, cluster_id=CLUSTER_ID, config=config,
        image=controller.image, channel=channel, raft=raft,  # type: ignore[arg-type]
        clock=clock)
    dispatcher = controller_dispatcher(services, clock)
    return Env(services, dispatcher, controller, channel, raft, clock)


@pytest.fixture
def env() -> Env:
    return make_env()


def context(env: Env, api_key: int, version: int, correlation_id: int = 7) -> RequestContext:
    header = RequestHeader(api_key, version, correlation_id, "test-client", 0)
    return RequestContext(header, "CONTROLLER", "controller", "127.0.0.1", 1,
                          clock=env.clock)


async def answer(env: Env, ctx: RequestContext, req: Any) -> Any:
    """The handler's answer, through the controller listener's table."""
    spec = env.dispatcher.table.get(ctx.header.api_key)
    assert spec is not None and spec.min_version <= ctx.api_version <= spec.max_version
    response = env.dispatcher.call(spec, ctx, req)
    if inspect.isawaitable(response):
        response = await response
    return response


def as_read(env: Env, ctx: RequestContext, response: Any) -> Any:
    """The response as the client reads it: encoded into the response schema of the
    request's version and decoded again."""
    prefix, chunks, _size = env.dispatcher.encode(ctx.header, response)
    frame = prefix[4:] + b"".join(bytes(c) for c in chunks)
    correlation_id, body = decode_response(ctx.header.api_key, ctx.api_version, frame)
    assert correlation_id == ctx.header.correlation_id
    return body


async def ask(env: Env, api_key: int, version: int, body: dict[str, Any]) -> Any:
    ctx = context(env, api_key, version)
    req = build(request_schema(api_key, version), body)
    return as_read(env, ctx, await answer(env, ctx, req))


# --- brokers ---------------------------------------------------------------------------


async def register(env: Env, broker_id: int, cluster_id: str = CLUSTER_ID) -> Any:
    return await ask(env, ApiKey.BROKER_REGISTRATION, 4, {
        "broker_id": broker_id, "cluster_id": cluster_id, "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + broker_id,
                       "security_protocol": 0}],
        "features": [{"name": METADATA_VERSION, "min_supported_version": LOW_MV,
                      "max_supported_version": HIGH_MV}],
        "rack": None, "log_dirs": [uuid.uuid4()]})


async def heartbeat(env: Env, broker_id: int, epoch: int, metadata_offset: int,
                    want_fence: bool = False) -> Any:
    return await ask(env, ApiKey.BROKER_HEARTBEAT, 1, {
        "broker_id": broker_id, "broker_epoch": epoch,
        "current_metadata_offset": metadata_offset, "want_fence": want_fence,
        "want_shut_down": False})


async def live_broker(env: Env, broker_id: int) -> int:
    """Register a broker and unfence it with a caught-up heartbeat; its epoch."""
    epoch = (await register(env, broker_id)).broker_epoch
    assert not (await heartbeat(env, broker_id, epoch, env.image.offset)).is_fenced
    return epoch


async def test_broker_registration_answers_the_offset_of_its_record_as_epoch(env: Env
                                                                             ) -> None:
    first = await register(env, 1)
    assert first.error_code == ErrorCode.none
    registered = env.image.brokers[1]
    assert first.broker_epoch == registered.epoch == env.image.offset
    assert registered.fenced  # until its heartbeats say it has caught up
    assert registered.endpoints["PLAINTEXT"].port == 9091
    second = await register(env, 2)
    assert second.broker_epoch == env.image.brokers[2].epoch > first.broker_epoch


async def test_broker_registration_for_another_cluster_is_refused(env: Env) -> None:
    response = await register(env, 1, cluster_id="another-cluster-id")
    assert response.error_code == ErrorCode.inconsistent_cluster_id
    assert response.broker_epoch == -1
    assert 1 not in env.image.brokers


async def test_heartbeats_unfence_a_broker_once_it_has_caught_up(env: Env) -> None:
    epoch = (await register(env, 1)).broker_epoch
    behind = await heartbeat(env, 1, epoch, epoch - 1)
    assert behind.error_code == ErrorCode.none
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert env.image.brokers[1].fenced
    caught_up = await heartbeat(env, 1, epoch, epoch)
    assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
    assert not env.image.brokers[1].fenced
    stale = await heartbeat(env, 1, epoch + 1, epoch)
    assert stale.error_code == ErrorCode.stale_broker_epoch


async def test_heartbeat_of_an_unregistered_broker_is_an_error(env: Env) -> None:
    response = await heartbeat(env, 9, 3, 10)
    assert response.error_code == ErrorCode.stale_broker_epoch  # as Kafka, before registering
    assert response.is_fenced and not response.is_caught_up
    assert 9 not in env.image.brokers


async def test_allocate_producer_ids_gives_blocks_that_do_not_overlap(env: Env) -> None:
    epochs = {b: await live_broker(env, b) for b in (1, 2)}
    blocks = []
    for broker in (1, 2, 1):
        response = await ask(env, ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                             {"broker_id": broker, "broker_epoch": epochs[broker]})
        assert response.error_code == ErrorCode.none and response.producer_id_len > 0
        blocks.append(range(response.producer_id_start,
                            response.producer_id_start + response.producer_id_len))
    ids = [pid for block in blocks for pid in block]
    assert len(set(ids)) == len(ids)
    stale = await ask(env, ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                      {"broker_id": 1, "broker_epoch": epochs[1] + 100})
    assert stale.error_code == ErrorCode.stale_broker_epoch
    assert stale.producer_id_start == -1


async def test_log_dirs_registered_assigned_and_reported_offline(env: Env) -> None:
    """KIP-858 over the controller listener: BrokerRegistration's log dirs are recorded,
    AssignReplicasToDirs places replicas, a BrokerHeartbeat v1 naming an offline dir
    moves the leaderships of the replicas in it."""
    dirs = {b: [uuid.UUID(int=b << 64 | 0xA), uuid.UUID(int=b << 64 | 0xB)] for b in (1, 2)}
    epochs = {}
    for broker in (1, 2):
        registered = await ask(env, ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": broker, "cluster_id": CLUSTER_ID, "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + broker,
                           "security_protocol": 0}],
            "features": [], "rack": None, "log_dirs": dirs[broker]})
        epochs[broker] = registered.broker_epoch
        assert not (await heartbeat(env, broker, epochs[broker], env.image.offset)).is_fenced
    assert env.image.brokers[1].directories == tuple(sorted(dirs[1]))
    taken = await ask(env, ApiKey.BROKER_REGISTRATION, 4, {
        "broker_id": 3, "cluster_id": CLUSTER_ID, "incarnation_id": uuid.uuid4(),
        "listeners": [], "features": [], "rack": None, "log_dirs": [dirs[1][0]]})
    assert taken.error_code == ErrorCode.invalid_registration
    created = await ask(env, ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": "t", "num_partitions": -1, "replication_factor": -1, "configs": [],
        "assignments": [{"partition_index": 0, "broker_ids": [1, 2]},
                        {"partition_index": 1, "broker_ids": [1, 2]}]}],
        "timeout": 1000, "validate_only": False})
    topic_id = created.topics[0].topic_id

    def assignment(epoch: int, placed: dict[uuid.UUID, list[int]]) -> dict[str, Any]:
        return {"broker_id": 1, "broker_epoch": epoch, "directories": [
            {"id_": d, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": p} for p in ps]}]} for d, ps in placed.items()]}
    stale = await ask(env, ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0,
                      assignment(epochs[1] - 1, {dirs[1][0]: [0]}))
    assert stale.error_code == ErrorCode.stale_broker_epoch and stale.directories == ()
    placed = await ask(env, ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0,
                       assignment(epochs[1], {dirs[1][0]: [0], dirs[1][1]: [1, 5]}))
    assert placed.error_code == ErrorCode.none
    assert {(d.id_, p.partition_index): p.error_code for d in placed.directories
            for t in d.topics for p in t.partitions} == {
        (dirs[1][0], 0): ErrorCode.none, (dirs[1][1], 1): ErrorCode.none,
        (dirs[1][1], 5): ErrorCode.unknown_topic_or_partition}
    partitions = env.image.topics_by_id[topic_id].partitions
    assert [partitions[p].directory(1) for p in (0, 1)] == dirs[1]

    reply = await ask(env, ApiKey.BROKER_HEARTBEAT, 1, {
        "broker_id": 1, "broker_epoch": epochs[1], "current_metadata_offset": env.image.offset,
        "want_fence": False, "want_shut_down": False, "offline_log_dirs": [dirs[1][0]]})
    assert reply.error_code == ErrorCode.none and not reply.is_fenced
    assert (partitions[0].leader, partitions[0].isr) == (2, [2])  # its dir is offline
    assert (partitions[1].leader, partitions[1].isr) == (1, [1, 2])  # its dir is not
    assert env.image.brokers[1].directories == (dirs[1][1],)


# --- topics ----------------------------------------------------------------------------


def new_topic(name: str, partitions: int = 1, replication: int = 1,
              configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": replication,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


async def create(env: Env, *topics: dict[str, Any], validate_only: bool = False) -> Any:
    return await ask(env, ApiKey.CREATE_TOPICS, 7, {
        "topics": list(topics), "timeout": 1000, "validate_only": validate_only})


def config_values(configs: Any) -> dict[str, tuple[str | None, int]]:
    return {c.name: (c.value, c.config_source) for c in configs}


async def test_create_topics_creates_them_in_the_image(env: Env) -> None:
    await live_broker(env, 1)
    await live_broker(env, 2)
    response = await create(env, new_topic("orders", 3, 2, {"retention.ms": "1000"}),
                            new_topic("events"))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("orders", ErrorCode.none), ("events", ErrorCode.none)]
    for t in response.topics:
        created = env.image.topics_by_name[t.name]
        assert t.topic_id == created.topic_id
        assert t.num_partitions == len(created.partitions)
        assert t.replication_factor == len(created.partitions[0].replicas)
    orders = env.image.topics_by_name["orders"]
    assert sorted(orders.partitions) == [0, 1, 2]
    assert all(sorted(p.replicas) == [1, 2] for p in orders.partitions.values())
    assert env.image.topic_configs("orders") == {"retention.ms": "1000"}
    assert config_values(response.topics[0].configs)["retention.ms"] == (
        "1000", DYNAMIC_TOPIC_CONFIG)


async def test_create_topics_validate_only_reports_configs_and_creates_nothing(env: Env
                                                                               ) -> None:
    await live_broker(env, 1)
    offset = env.image.offset
    response = await create(env, new_topic("orders", 4, 1, {"cleanup.policy": "compact"}),
                            validate_only=True)
    (topic,) = response.topics
    assert (topic.name, topic.error_code, topic.num_partitions) == (
        "orders", ErrorCode.none, 4)
    configs = config_values(topic.configs)
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"][1] != DYNAMIC_TOPIC_CONFIG  # not overridden
    assert "orders" not in env.image.topics_by_name
    assert env.image.offset == offset  # no record written


async def test_creating_an_existing_topic_is_topic_already_exists(env: Env) -> None:
    await live_broker(env, 1)
    first = await create(env, new_topic("orders"))
    topic_id = env.image.topics_by_name["orders"].topic_id
    again = await create(env, new_topic("orders", 5), new_topic("fresh"))
    assert [(t.name, t.error_code) for t in again.topics] == [
        ("orders", ErrorCode.topic_already_exists), ("fresh", ErrorCode.none)]
    assert again.topics[0].error_message
    assert first.topics[0].topic_id == env.image.topics_by_name["orders"].topic_id == topic_id
    assert len(env.image.topics_by_name["orders"].partitions) == 1


async def test_create_topics_of_2_31_partitions_is_a_policy_violation(env: Env) -> None:
    await live_broker(env, 1)
    ctx = context(env, ApiKey.CREATE_TOPICS, 7)
    req = build(request_schema(ApiKey.CREATE_TOPICS, 7), {
        "topics": [new_topic("ok"), new_topic("huge", 2**31 - 1)], "timeout": 1000,
        "validate_only": False})
    with pytest.raises(KafkaError) as refused:
        await answer(env, ctx, req)
    assert refused.value.code == ErrorCode.policy_violation
    response = as_read(env, ctx, env.dispatcher.failure(ctx.header, req, refused.value))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("ok", ErrorCode.policy_violation), ("huge", ErrorCode.policy_violation)]
    assert env.image.topics_by_name == {}  # not even the small one


async def test_delete_topics_by_name_and_by_id(env: Env) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a"), new_topic("b"), new_topic("c"))
    b_id = env.image.topics_by_name["b"].topic_id
    response = await ask(env, ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": "a", "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": b_id},
        {"name": "nope", "topic_id": uuid.UUID(int=0)}]})
    assert [(t.name, t.error_code) for t in response.responses] == [
        ("a", ErrorCode.none), ("b", ErrorCode.none),
        ("nope", ErrorCode.unknown_topic_or_partition)]
    assert response.responses[1].topic_id == b_id
    assert sorted(env.image.topics_by_name) == ["c"]
    assert b_id not in env.image.topics_by_id


async def test_delete_topics_v5_by_names(env: Env) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a"), new_topic("b"))
    response = await ask(env, ApiKey.DELETE_TOPICS, 5,
                         {"timeout": 1000, "topic_names": ["b"]})
    assert [(t.name, t.error_code) for t in response.responses] == [("b", ErrorCode.none)]
    assert sorted(env.image.topics_by_name) == ["a"]


async def test_an_empty_topic_name_is_a_name_not_a_missing_one(env: Env) -> None:
    """Kafka's ControllerApis tells "no name" by null only: an empty name (the only kind a
    v0-5 request can carry) is looked up like any other and is unknown."""
    await live_broker(env, 1)
    await create(env, new_topic("b"))
    old = await ask(env, ApiKey.DELETE_TOPICS, 3, {"timeout": 1000, "topic_names": ["", "b"]})
    assert [(t.name, t.error_code) for t in old.responses] == [
        ("", ErrorCode.unknown_topic_or_partition), ("b", ErrorCode.none)]
    new = await ask(env, ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": "", "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": uuid.UUID(int=0)}]})
    assert [(t.name, t.error_code) for t in new.responses] == [
        ("", ErrorCode.unknown_topic_or_partition), (None, ErrorCode.invalid_request)]


async def test_unregister_broker_forgets_it_and_moves_its_partitions(env: Env) -> None:
    """kafka-cluster unregister (Kafka's ``unregisterBroker``): the broker leaves the ISR
    and leadership of every partition, then its registration goes; an id that is not
    registered is BROKER_ID_NOT_REGISTERED, with Kafka 4.4's message."""
    for broker in (1, 2):
        await live_broker(env, broker)
    created = await ask(env, ApiKey.CREATE_TOPICS, 7, {"timeout": 1000, "topics": [{
        "name": "t", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [2, 1]}], "configs": []}]})
    assert created.topics[0].error_code == ErrorCode.none
    answer = await ask(env, ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 2})
    assert (answer.error_code, answer.error_message) == (ErrorCode.none, None)
    assert sorted(env.image.brokers) == [1]
    part = env.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr) == (1, [1])
    unknown = await ask(env, ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 2})
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.broker_id_not_registered, "Broker ID 2 is not currently registered")


async def test_unregister_controller_is_refused_as_kafka_refuses_it_below_4_4_iv2() -> None:
    """KIP-1220 as Kafka 4.4's QuorumController answers it: the active controller (node 1
    here) cannot unregister itself; any other id is refused below metadata.version
    4.4-IV2, the first with the UnregisterControllerRecord, before its registration is
    looked at."""
    env = make_env(metadata_version=32)  # 4.4-IV1
    await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 9093, 0)])
    own = await ask(env, ApiKey.UNREGISTER_CONTROLLER, 0, {"controller_id": 1})
    assert (own.error_code, own.error_message) == (
        ErrorCode.invalid_request, "Controller cannot unregister itself while it is active.")
    for controller_id in (2, 3):
        other = await ask(env, ApiKey.UNREGISTER_CONTROLLER, 0, {"controller_id": controller_id})
        assert (other.error_code, other.error_message) == (
            ErrorCode.unsupported_version,
            "The current MetadataVersion is too old to support controller unregistration.")
    assert sorted(env.image.controllers) == [2]


async def test_unregister_controller_forgets_its_registration_from_4_4_iv2(env: Env) -> None:
    """From 4.4-IV2 (a new cluster's level) a registered controller's registration goes with
    an UnregisterControllerRecord, so DescribeCluster no longer lists it; an id with no
    registration is CONTROLLER_ID_NOT_REGISTERED (137) in Kafka's words."""
    await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 9093, 0)])
    assert sorted(env.image.controllers) == [2]
    gone = await ask(env, ApiKey.UNREGISTER_CONTROLLER, 0, {"controller_id": 2})
    assert (gone.error_code, gone.error_message) == (ErrorCode.none, None)
    assert not env.image.controllers
    assert [c.node_id for c in (await describe_controllers(env)).brokers] == []
    again = await ask(env, ApiKey.UNREGISTER_CONTROLLER, 0, {"controller_id": 2})
    assert (again.error_code, again.error_message) == (
        137, "Controller ID 2 is not currently registered.")


async def test_create_partitions_adds_partitions(env: Env) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a", 1), new_topic("b", 2))

    async def grow(validate_only: bool, *counts: tuple[str, int]) -> list[tuple[str, Any]]:
        response = await ask(env, ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": n, "count": c, "assignments": None} for n, c in counts],
            "timeout": 1000, "validate_only": validate_only})
        return [(t.name, t.error_code) for t in response.results]

    assert await grow(True, ("a", 4)) == [("a", ErrorCode.none)]
    assert len(env.image.topics_by_name["a"].partitions) == 1  # validated only
    assert await grow(False, ("a", 3), ("b", 1), ("zz", 2)) == [
        ("a", ErrorCode.none), ("b", ErrorCode.invalid_partitions),
        ("zz", ErrorCode.unknown_topic_or_partition)]
    assert sorted(env.image.topics_by_name["a"].partitions) == [0, 1, 2]
    assert len(env.image.topics_by_name["b"].partitions) == 2


async def test_elect_leaders_gives_leadership_back_to_the_preferred_replica(env: Env
                                                                            ) -> None:
    epochs = {b: await live_broker(env, b) for b in (1, 2)}
    created = await ask(env, ApiKey.CREATE_TOPICS, 7, {"timeout": 1000, "topics": [{
        "name": "t", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}], "configs": []}]})
    assert created.topics[0].error_code == ErrorCode.none
    topic = env.image.topics_by_name["t"]
    assert topic.partitions[0].leader == 1
    # Broker 1 is fenced (leadership moves to 2, the ISR shrinks), then comes back.
    assert (await heartbeat(env, 1, epochs[1], env.image.offset, want_fence=True)).is_fenced
    assert not (await heartbeat(env, 1, epochs[1], env.image.offset)).is_fenced
    part = topic.partitions[0]
    assert (part.leader, part.isr, env.image.brokers[1].fenced) == (2, [2], False)
    # The leader takes broker 1 back into the ISR.
    altered = await ask(env, ApiKey.ALTER_PARTITION, 3, {
        "broker_id": 2, "broker_epoch": epochs[2], "topics": [{
            "topic_id": topic.topic_id, "partitions": [{
                "partition_index": 0, "leader_epoch": part.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": 2, "broker_epoch": epochs[2]},
                                        {"broker_id": 1, "broker_epoch": epochs[1]}],
                "leader_recovery_state": 0, "partition_epoch": part.partition_epoch}]}]})
    assert altered.error_code == ErrorCode.none
    assert altered.topics[0].partitions[0].error_code == ErrorCode.none
    assert list(altered.topics[0].partitions[0].isr) == topic.partitions[0].isr == [2, 1]

    async def elect(*partitions: tuple[str, int]) -> dict[tuple[str, int], Any]:
        response = await ask(env, ApiKey.ELECT_LEADERS, 2, {
            "election_type": 0, "timeout": 1000,
            "topic_partitions": [{"topic": t, "partitions": [p]} for t, p in partitions]})
        assert response.error_code == ErrorCode.none
        return {(t.topic, p.partition_id): p.error_code
                for t in response.replica_election_results for p in t.partition_result}

    assert await elect(("t", 0), ("nope", 0)) == {
        ("t", 0): ErrorCode.none, ("nope", 0): ErrorCode.unknown_topic_or_partition}
    assert topic.partitions[0].leader == 1
    assert await elect(("t", 0)) == {("t", 0): ErrorCode.election_not_needed}


# --- configs and features --------------------------------------------------------------


async def test_alter_configs_replaces_a_topics_configs_and_rejects_unknown_keys(env: Env
                                                                                ) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a", configs={"retention.ms": "1000"}))

    async def alter(name: str, configs: dict[str, str], validate_only: bool = False
                    ) -> list[tuple[str, Any]]:
        response = await ask(env, ApiKey.ALTER_CONFIGS, 2, {
            "validate_only": validate_only, "resources": [{
                "resource_type": TOPIC, "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
        return [(res.resource_name, res.error_code) for res in response.responses]

    assert await alter("a", {"segment.ms": "99999"}, validate_only=True) == [
        ("a", ErrorCode.none)]
    assert env.image.topic_configs("a") == {"retention.ms": "1000"}
    assert await alter("a", {"segment.ms": "99999"}) == [("a", ErrorCode.none)]
    assert env.image.topic_configs("a") == {"segment.ms": "99999"}  # the whole set
    assert await alter("a", {"no.such.config": "1"}) == [("a", ErrorCode.invalid_config)]
    assert await alter("a", {"segment.ms": "soon"}) == [("a", ErrorCode.invalid_config)]
    assert await alter("zz", {"segment.ms": "1"}) == [
        ("zz", ErrorCode.unknown_topic_or_partition)]
    assert env.image.topic_configs("a") == {"segment.ms": "99999"}


async def test_incremental_alter_configs_changes_topic_configs(env: Env) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a", configs={"retention.ms": "1000"}))

    async def alter(*ops: tuple[str, int, str | None]) -> Any:
        response = await ask(env, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "validate_only": False, "resources": [{
                "resource_type": TOPIC, "resource_name": "a",
                "configs": [{"name": k, "config_operation": op, "value": v}
                            for k, op, v in ops]}]})
        (result,) = response.responses
        assert result.resource_name == "a"
        return result.error_code

    assert await alter(("segment.ms", OP_SET, "5000")) == ErrorCode.none
    assert env.image.topic_configs("a") == {"retention.ms": "1000", "segment.ms": "5000"}
    assert await alter(("retention.ms", OP_DELETE, None)) == ErrorCode.none
    assert env.image.topic_configs("a") == {"segment.ms": "5000"}
    # One bad key fails the resource: the good one is not applied either.
    assert await alter(("retention.ms", OP_SET, "7"), ("no.such.config", OP_SET, "1")) \
        == ErrorCode.invalid_config
    assert env.image.topic_configs("a") == {"segment.ms": "5000"}


async def update_features(env: Env, version: int, *updates: dict[str, Any],
                          validate_only: bool = False) -> Any:
    body: dict[str, Any] = {"timeout": 1000, "feature_updates": list(updates)}
    if version >= 1:
        body["validate_only"] = validate_only
    return await ask(env, ApiKey.UPDATE_FEATURES, version, body)


def outcome(response: Any) -> tuple[Any, Any, dict[str, tuple[Any, Any]]]:
    """The top-level error and message, and each feature's."""
    return (response.error_code, response.error_message,
            {res.feature: (res.error_code, res.error_message) for res in response.results})


FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "
"""Kafka's QuorumController.updateFeatures: a refusal is the top-level error, no results."""


async def test_update_features_finalizes_levels_all_or_nothing() -> None:
    env = make_env(metadata_version=LOW_MV)
    upgrade = {"feature": METADATA_VERSION, "max_version_level": HIGH_MV, "upgrade_type": 1}
    unknown = {"feature": "no.such.feature", "max_version_level": 1, "upgrade_type": 1}
    assert outcome(await update_features(env, 1, upgrade, unknown)) == (
        ErrorCode.invalid_update_version,
        FAILED_FOR_ALL + "Invalid update version 1 for feature no.such.feature. Local "
        "controller 1 does not support this feature.", {})
    assert env.image.features[METADATA_VERSION] == LOW_MV  # nothing applied
    # Success lists each feature with Errors.NONE's message, its name.
    done = (ErrorCode.none, None, {METADATA_VERSION: (ErrorCode.none, "NONE")})
    assert outcome(await update_features(env, 1, upgrade, validate_only=True)) == done
    assert env.image.features[METADATA_VERSION] == LOW_MV
    assert outcome(await update_features(env, 1, upgrade)) == done
    assert env.image.features[METADATA_VERSION] == HIGH_MV
    too_high = dict(upgrade, max_version_level=HIGH_MV + 1)
    assert outcome(await update_features(env, 1, too_high)) == (
        ErrorCode.invalid_update_version,
        FAILED_FOR_ALL + f"Invalid update version {HIGH_MV + 1} for feature "
        f"metadata.version. Local controller 1 only supports versions {LOW_MV}-{HIGH_MV}",
        {})
    assert env.image.features[METADATA_VERSION] == HIGH_MV


async def test_update_features_v0_allow_downgrade_asks_for_a_safe_downgrade(env: Env
                                                                             ) -> None:
    def downgrade(allow: bool) -> dict[str, Any]:
        return {"feature": METADATA_VERSION, "max_version_level": LOW_MV,
                "allow_downgrade": allow}

    # Without allow_downgrade it is an upgrade, which cannot lower a level; with it, a
    # safe downgrade, which gets as far as the check that metadata.version never goes
    # down. Both are refused, for those different reasons.
    plain = await update_features(env, 0, downgrade(False))
    allowed = await update_features(env, 0, downgrade(True))
    assert plain.error_code == allowed.error_code == ErrorCode.invalid_update_version
    assert plain.error_message == FAILED_FOR_ALL + (
        f"Invalid update version {LOW_MV} for feature metadata.version. Can't downgrade the "
        "version of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    assert allowed.error_message == FAILED_FOR_ALL + (
        f"Unsupported metadata.version downgrade from {HIGH_MV} to {LOW_MV}. Refusing to "
        "perform the requested downgrade because it might delete metadata information.")
    assert env.image.features[METADATA_VERSION] == HIGH_MV


async def test_update_features_waits_for_every_registered_broker_to_support_the_level(
        env: Env) -> None:
    """A broker's BrokerRegistration says what it supports; a level one of them cannot
    run at is refused with Kafka's message until it re-registers supporting it."""
    async def register(share_versions: tuple[int, int]) -> None:
        registered = await ask(env, ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": 7, "cluster_id": CLUSTER_ID, "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9097,
                           "security_protocol": 0}],
            "features": [{"name": SHARE_VERSION, "min_supported_version": share_versions[0],
                          "max_supported_version": share_versions[1]}],
            "rack": None, "log_dirs": [uuid.UUID(int=7 << 64 | 0xA)]})
        assert registered.error_code == ErrorCode.none

    await register((0, 1))
    upgrade = {"feature": SHARE_VERSION, "max_version_level": 2, "upgrade_type": 1}
    assert outcome(await update_features(env, 1, upgrade)) == (
        ErrorCode.invalid_update_version,
        FAILED_FOR_ALL + "Invalid update version 2 for feature share.version. Broker 7 "
        "only supports versions 0-1", {})
    await register((0, 2))
    assert outcome(await update_features(env, 1, upgrade)) == (
        ErrorCode.none, None, {SHARE_VERSION: (ErrorCode.none, "NONE")})
    assert env.image.features[SHARE_VERSION] == 2


# --- the quorum ------------------------------------------------------------------------


async def register_controller(env: Env, controller_id: int, incarnation: uuid.UUID,
                              listeners: list[tuple[str, str, int, int]]) -> Any:
    return await ask(env, ApiKey.CONTROLLER_REGISTRATION, 0, {
        "controller_id": controller_id, "incarnation_id": incarnation,
        "zk_migration_ready": True,
        "listeners": [{"name": n, "host": h, "port": p, "security_protocol": s}
                      for n, h, p, s in listeners],
        "features": [{"name": METADATA_VERSION, "min_supported_version": LOW_MV,
                      "max_supported_version": HIGH_MV}]})


async def describe_controllers(env: Env) -> Any:
    return await ask(env, ApiKey.DESCRIBE_CLUSTER, 2, {
        "include_cluster_authorized_operations": False, "endpoint_type": CONTROLLERS,
        "include_fenced_brokers": False})


async def test_describe_cluster_lists_the_registered_controllers_at_the_asked_listener(
        env: Env) -> None:
    # Kafka's describeClusterControllers: only registrations, none from the voter set.
    empty = await describe_controllers(env)
    assert empty.error_code == ErrorCode.none and list(empty.brokers) == []
    for c in (3, 1, 2):
        answer = await register_controller(env, c, uuid.UUID(int=c), [
            ("CONTROLLER", f"10.0.0.{c}", 9093, 0), ("OTHER", "elsewhere", 7000 + c, 1)])
        assert (answer.error_code, answer.error_message) == (ErrorCode.none, None)
    # A controller without a listener of the request's name is left out.
    await register_controller(env, 4, uuid.UUID(int=4), [("OTHER", "elsewhere", 7004, 1)])
    response = await describe_controllers(env)
    assert response.error_code == ErrorCode.none
    assert (response.endpoint_type, response.cluster_id) == (CONTROLLERS, CLUSTER_ID)
    assert response.controller_id == env.channel.quorum.leader_id
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in response.brokers] == [
        (c, f"10.0.0.{c}", 9093, None, False) for c in (1, 2, 3)]


async def test_controller_registration_writes_its_record_with_zk_migration_off(env: Env
                                                                              ) -> None:
    await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 9093, 0)])
    registered = env.image.controllers[2]
    assert registered.incarnation_id == uuid.UUID(int=2)
    assert registered.zk_migration_ready is False  # Kafka writes false, whatever asked
    assert registered.features == {METADATA_VERSION: (LOW_MV, HIGH_MV)}
    # A new incarnation (the process restarted) replaces it: Kafka checks no incarnation.
    again = await register_controller(env, 2, uuid.UUID(int=22), [("CONTROLLER", "h2", 9094, 0)])
    assert again.error_code == ErrorCode.none
    assert env.image.controllers[2].incarnation_id == uuid.UUID(int=22)
    assert [(e.host, e.port) for e in env.image.controllers[2].endpoints.values()] == [
        ("h2", 9094)]


async def test_controller_registration_with_an_unknown_security_protocol_fails(env: Env
                                                                              ) -> None:
    # ListenerInfo.fromControllerRegistrationRequest throws a RuntimeException: Kafka's
    # controller answers it as UNKNOWN_SERVER_ERROR, and writes nothing.
    answer = await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 1, 0),
                                                                  ("ODD", "h", 2, 9)])
    assert answer.error_code == ErrorCode.unknown_server_error
    assert "Unknown security protocol 9 in listener ODD" in answer.error_message
    assert 2 not in env.image.controllers


async def test_controller_registration_needs_metadata_version_3_7_iv0() -> None:
    env = make_env(metadata_version=14)  # 3.6-IV2
    answer = await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 1, 0)])
    assert answer.error_code == ErrorCode.unsupported_version
    assert not env.image.controllers
    described = await describe_controllers(env)
    assert described.error_code == ErrorCode.unsupported_version
    env = make_env(metadata_version=15)  # 3.7-IV0
    answer = await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 1, 0)])
    assert answer.error_code == ErrorCode.none


async def test_controller_registration_on_an_inactive_controller_is_not_controller(
        env: Env) -> None:
    env.channel.is_active = False
    answer = await register_controller(env, 2, uuid.UUID(int=2), [("CONTROLLER", "h", 1, 0)])
    assert answer.error_code == ErrorCode.not_controller


async def test_describe_cluster_for_broker_endpoints_is_unsupported(env: Env) -> None:
    await live_broker(env, 1)  # a broker the controller knows of is not listed either
    response = await ask(env, ApiKey.DESCRIBE_CLUSTER, 2, {
        "include_cluster_authorized_operations": False, "endpoint_type": BROKERS,
        "include_fenced_brokers": False})
    assert response.error_code == ErrorCode.unsupported_endpoint_type
    assert response.endpoint_type == BROKERS
    assert list(response.brokers) == []


DESCRIBE_METADATA = {"topics": [{"topic_name": METADATA_TOPIC,
                                 "partitions": [{"partition_index": 0}]}]}


async def test_describe_quorum_is_forwarded_when_this_node_is_not_the_leader(env: Env
                                                                            ) -> None:
    env.raft.is_leader = False
    ctx = context(env, ApiKey.DESCRIBE_QUORUM, 2)
    req = build(request_schema(ApiKey.DESCRIBE_QUORUM, 2), DESCRIBE_METADATA)
    response = await answer(env, ctx, req)
    assert response is env.channel.forward_answer
    assert len(env.channel.forwarded) == 1
    assert env.channel.forwarded[0][0] is ctx and env.channel.forwarded[0][1] is req


async def test_describe_quorum_on_the_leader_answers_from_its_description(env: Env) -> None:
    quorum_state = env.channel.quorum
    response = await ask(env, ApiKey.DESCRIBE_QUORUM, 2, DESCRIBE_METADATA)
    assert env.channel.forwarded == []
    assert response.error_code == ErrorCode.none
    (topic,) = response.topics
    (part,) = topic.partitions
    assert (topic.topic_name, part.partition_index, part.error_code) == (
        METADATA_TOPIC, 0, ErrorCode.none)
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (
        quorum_state.leader_id, quorum_state.leader_epoch, quorum_state.high_watermark)
    assert [(v.replica_id, v.replica_directory_id, v.log_end_offset,
             v.last_fetch_timestamp, v.last_caught_up_timestamp)
            for v in part.current_voters] == [
        (v.replica_id, DIRECTORIES[v.replica_id], v.log_end_offset, v.last_fetch_ms,
         v.last_caught_up_ms) for v in quorum_state.voters]
    assert [(o.replica_id, o.replica_directory_id, o.log_end_offset)
            for o in part.observers] == [(101, None, 90)]  # no directory: the zero uuid
    assert [(n.node_id, [(ln.name, ln.host, ln.port) for ln in n.listeners])
            for n in response.nodes] == sorted(quorum_state.endpoints.items())


async def test_describe_quorum_of_another_partition_is_unknown(env: Env) -> None:
    env.raft.is_leader = False  # answered here all the same: nothing to forward
    response = await ask(env, ApiKey.DESCRIBE_QUORUM, 2, {"topics": [
        {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 1}]}]})
    assert env.channel.forwarded == []
    (topic,) = response.topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (1, ErrorCode.unknown_topic_or_partition)]


RAFT_REQUESTS = {
    ApiKey.VOTE: (2, {"cluster_id": CLUSTER_ID, "voter_id": 1, "topics": []}),
    ApiKey.BEGIN_QUORUM_EPOCH: (1, {"cluster_id": CLUSTER_ID, "voter_id": 1, "topics": [],
                                    "leader_endpoints": []}),
    ApiKey.END_QUORUM_EPOCH: (1, {"cluster_id": CLUSTER_ID, "topics": [],
                                  "leader_endpoints": []}),
    ApiKey.FETCH: (17, {"cluster_id": CLUSTER_ID, "max_wait": 500, "min_bytes": 1,
                        "topics": [], "forgotten_topics_data": []}),
    ApiKey.FETCH_SNAPSHOT: (1, {"cluster_id": CLUSTER_ID, "replica_id": 2, "topics": []}),
}


def test_every_raft_rpc_of_the_quorum_module_is_covered() -> None:
    served = {spec.api_key for spec in quorum.APIS} - {
        ApiKey.DESCRIBE_QUORUM, ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER,
        ApiKey.UPDATE_RAFT_VOTER}  # the voter changes: tested below
    assert served == set(RAFT_REQUESTS)


@pytest.mark.parametrize("api_key", list(RAFT_REQUESTS), ids=lambda k: ApiKey(k).name)
async def test_raft_rpcs_are_handed_to_the_raft_driver(env: Env, api_key: ApiKey) -> None:
    version, body = RAFT_REQUESTS[api_key]
    ctx = context(env, api_key, version)
    req = build(request_schema(api_key, version), body)
    response = await answer(env, ctx, req)
    assert response == {"from_raft": api_key}
    assert len(env.raft.received) == 1
    assert env.raft.received[0][0] == api_key and env.raft.received[0][1] is req


# --- the envelope ----------------------------------------------------------------------


def inner_request(api_key: int, version: int, body: dict[str, Any],
                  correlation_id: int = 42) -> bytes:
    """A request as a broker puts it in an envelope: header and body, no size."""
    entity = build(request_schema(api_key, version), body)
    return encode_request(api_key, version, correlation_id, "adminclient-1", entity)[4:]


async def envelope(env: Env, data: bytes) -> Any:
    return await ask(env, ApiKey.ENVELOPE, 0, {
        "request_data": data, "request_principal": None,
        "client_host_address": bytes([127, 0, 0, 1])})


def create_request(*topics: dict[str, Any]) -> bytes:
    return inner_request(ApiKey.CREATE_TOPICS, 7, {
        "topics": list(topics), "timeout": 1000, "validate_only": False})


async def test_envelope_runs_the_inner_request_and_returns_its_response(env: Env) -> None:
    await live_broker(env, 1)
    response = await envelope(env, create_request(new_topic("orders", 2)))
    assert response.error_code == ErrorCode.none
    correlation_id, inner = decode_response(ApiKey.CREATE_TOPICS, 7, response.response_data)
    assert correlation_id == 42
    (topic,) = inner.topics
    assert (topic.name, topic.error_code) == ("orders", ErrorCode.none)
    assert topic.topic_id == env.image.topics_by_name["orders"].topic_id
    assert len(env.image.topics_by_name["orders"].partitions) == 2


async def test_envelope_on_an_inactive_controller_is_not_controller(env: Env) -> None:
    await live_broker(env, 1)
    env.channel.is_active = False
    env.raft.is_leader = False
    response = await envelope(env, create_request(new_topic("orders")))
    assert response.error_code == ErrorCode.not_controller
    assert response.response_data is None
    assert "orders" not in env.image.topics_by_name
    # Whatever the inner API: one that needs no controller operation is not run (nor
    # forwarded on) either.
    describe = inner_request(ApiKey.DESCRIBE_QUORUM, 2, DESCRIBE_METADATA)
    response = await envelope(env, describe)
    assert response.error_code == ErrorCode.not_controller
    assert response.response_data is None
    assert env.channel.forwarded == []


async def test_envelope_when_leadership_goes_during_the_request_is_not_controller(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    await live_broker(env, 1)

    async def renounced(op: Any) -> Any:
        raise NotControllerError()

    monkeypatch.setattr(env.channel, "submit", renounced)
    response = await envelope(env, create_request(new_topic("orders")))
    assert response.error_code == ErrorCode.not_controller
    assert response.response_data is None


async def test_envelope_inside_an_envelope_is_invalid_request(env: Env) -> None:
    await live_broker(env, 1)
    nested = inner_request(ApiKey.ENVELOPE, 0, {
        "request_data": create_request(new_topic("orders")), "request_principal": None,
        "client_host_address": bytes([127, 0, 0, 1])})
    response = await envelope(env, nested)
    assert response.error_code == ErrorCode.invalid_request
    assert response.response_data is None
    assert "orders" not in env.image.topics_by_name


@pytest.mark.parametrize("data", [b"", b"\x00\x13", b"\x00\x13\x00\x07" + b"\xff" * 12],
                         ids=["empty", "half-a-header", "garbage-body"])
async def test_envelope_with_garbage_inner_bytes_is_refused(env: Env, data: bytes) -> None:
    response = await envelope(env, data)
    assert response.error_code == ErrorCode.invalid_request
    assert response.response_data is None


async def test_envelope_with_a_version_the_controller_does_not_serve(env: Env) -> None:
    """Kafka answers UNSUPPORTED_VERSION, and the forwarding broker closes its client's
    connection so that the client asks ApiVersions again."""
    await live_broker(env, 1)
    frame = bytearray(create_request(new_topic("orders")))
    frame[2:4] = (99).to_bytes(2, "big")  # CreateTopics v99
    response = await envelope(env, bytes(frame))
    assert response.error_code == ErrorCode.unsupported_version
    assert response.response_data is None


async def test_envelope_answers_an_inner_kafka_error_with_its_error_response(env: Env
                                                                             ) -> None:
    await live_broker(env, 1)
    response = await envelope(env, create_request(new_topic("ok"),
                                                  new_topic("huge", 2**31 - 1)))
    assert response.error_code == ErrorCode.none
    _, inner = decode_response(ApiKey.CREATE_TOPICS, 7, response.response_data)
    assert [(t.name, t.error_code) for t in inner.topics] == [
        ("ok", ErrorCode.policy_violation), ("huge", ErrorCode.policy_violation)]
    assert env.image.topics_by_name == {}


async def test_envelope_answers_an_inner_handler_that_fails(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    await live_broker(env, 1)
    await create(env, new_topic("a"))

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the controller")

    monkeypatch.setattr(env.controller.replication, "delete_topics", broken)
    data = inner_request(ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": "a", "topic_id": uuid.UUID(int=0)}]})
    response = await envelope(env, data)
    assert response.error_code == ErrorCode.none
    _, inner = decode_response(ApiKey.DELETE_TOPICS, 6, response.response_data)
    assert [(t.name, t.error_code) for t in inner.responses] == [
        ("a", ErrorCode.unknown_server_error)]
    assert "a" in env.image.topics_by_name


# --- ApiVersions -----------------------------------------------------------------------


async def test_api_versions_lists_kafka_44s_controller_apis_and_features(env: Env) -> None:
    """The controller listener's ranges and supported features are Kafka 4.4's (written
    down in tests/kafka_versions.py), or narrower where that file says why; the finalized
    features are those of the image the controller runs at."""
    response = await ask(env, ApiKey.API_VERSIONS, 4, {
        "client_software_name": "apache-kafka-java", "client_software_version": "3.9.0"})
    assert response.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert not range_differences(advertised, CONTROLLER_APIS, NARROWER_CONTROLLER)
    assert ApiKey.PRODUCE not in advertised and ApiKey.METADATA not in advertised
    assert response.finalized_features_epoch == env.image.offset
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == sorted(
        env.image.features.items())
    assert (METADATA_VERSION, env.image.features[METADATA_VERSION]) in \
        [(f.name, f.max_version_level) for f in response.finalized_features]
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert not range_differences(supported, KAFKA_FEATURES, NARROWER_FEATURES, every_one=True)
    # Below v4, as Kafka since KAFKA-17492: no range starting at 0, which Java clients
    # before 3.9 cannot read.
    older = await ask(env, ApiKey.API_VERSIONS, 3, {
        "client_software_name": "apache-kafka-java", "client_software_version": "3.8.0"})
    assert {f.name: (f.min_version, f.max_version) for f in older.supported_features} == {
        name: bounds for name, bounds in supported.items() if bounds[0] > 0}


async def test_api_versions_finalizes_the_quorums_kraft_version_from_1(env: Env) -> None:
    """As Kafka's controller (and KRaftMetadataCache.features on a broker): kraft.version
    is the KRaft client's, not the image's, and level 0 is not listed."""
    request = {"client_software_name": "apache-kafka-java", "client_software_version": "4.4.0"}
    static = await ask(env, ApiKey.API_VERSIONS, 4, request)
    assert "kraft.version" not in {f.name for f in static.finalized_features}
    env.raft.kraft_version = 1
    upgraded = await ask(env, ApiKey.API_VERSIONS, 4, request)
    assert ("kraft.version", 1, 1) in [(f.name, f.min_version_level, f.max_version_level)
                                       for f in upgraded.finalized_features]


async def test_api_versions_lists_the_table_it_belongs_to(env: Env) -> None:
    def metadata(services: Any, ctx: Any, req: Any) -> Any:
        raise AssertionError("not called")

    table: ApiTable[Any] = ApiTable("broker", env.services, [
        ApiSpec(ApiKey.METADATA, 4, 9, metadata)])
    spec = api_versions(table)
    table.add(spec)  # type: ignore[arg-type]
    ctx = context(env, ApiKey.API_VERSIONS, 2)
    response = spec.handler(env.services, ctx, build(request_schema(ApiKey.API_VERSIONS, 2),
                                                     {}))
    assert [(k["api_key"], k["min_version"], k["max_version"])
            for k in response["api_keys"]] == [
        (ApiKey.METADATA, 4, 9), (ApiKey.API_VERSIONS, spec.min_version, spec.max_version)]


@pytest.mark.parametrize("name,version,valid", [
    ("apache-kafka-java", "3.9.0", True),
    ("librdkafka", "2.5.0-RC1", True),
    ("bad name", "1.0", False),
    ("-kafka", "1.0", False),
    ("kafka", "1.0.", False),
    ("", "1.0", False),
    ("kafka", "", False),
])
async def test_api_versions_v3_checks_the_client_software(env: Env, name: str, version: str,
                                                          valid: bool) -> None:
    response = await ask(env, ApiKey.API_VERSIONS, 3, {
        "client_software_name": name, "client_software_version": version})
    expected = ErrorCode.none if valid else ErrorCode.invalid_request
    assert response.error_code == expected
    assert bool(response.api_keys) == valid  # as Kafka: an invalid request lists nothing


ADD_VOTER = {"cluster_id": CLUSTER_ID, "timeout": 1000, "voter_id": 4,
             "voter_directory_id": uuid.UUID(int=4 << 64 | 7), "ack_when_committed": True,
             "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9097}]}


async def test_add_raft_voter_hands_the_voter_key_and_endpoints_to_the_quorum(env: Env
                                                                               ) -> None:
    response = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, ADD_VOTER)
    assert response.error_code == ErrorCode.unsupported_version  # the stand-in is static
    ((kind, voter),) = env.raft.changes
    assert kind == "add" and voter.key == ReplicaKey(4, kafka_uuid_text(
        uuid.UUID(int=4 << 64 | 7)))
    assert [(e.listener, e.host, e.port) for e in voter.endpoints] == [
        ("CONTROLLER", "127.0.0.1", 9097)]


async def test_add_raft_voter_refuses_another_cluster_or_no_controller_listener(env: Env
                                                                                ) -> None:
    other = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, "cluster_id": "other"})
    assert other.error_code == ErrorCode.inconsistent_cluster_id
    wrong = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, "listeners": [
        {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092}]})
    assert wrong.error_code == ErrorCode.invalid_request
    assert env.raft.changes == []


async def test_add_raft_voter_refusals_before_the_leader_checks_in_kafkas_words(env: Env
                                                                                ) -> None:
    """KafkaRaftClient.handleAddVoterRequest, in its order: not the leader (the error
    alone), no voter (a negative id or no directory id), no endpoint for the quorum's
    listener (Kafka prints its Endpoints map, names upper-cased)."""
    env.raft.is_leader = False
    follower = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, "voter_id": -1})
    assert (follower.error_code, follower.error_message) == (
        ErrorCode.not_leader_or_follower, None)
    env.raft.is_leader = True
    for invalid in ({"voter_id": -1}, {"voter_directory_id": uuid.UUID(int=0)}):
        answer = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, **invalid,
                                                            "listeners": []})
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.invalid_request, "Add voter request didn't include a valid voter")
    wrong = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, "listeners": [
        {"name": "plaintext", "host": "localhost", "port": 9092}]})
    assert (wrong.error_code, wrong.error_message) == (
        ErrorCode.invalid_request,
        "Add voter request didn't include the endpoint (Endpoints(endpoints={"
        "ListenerName(PLAINTEXT)=localhost/<unresolved>:9092})) for the default listener "
        "ListenerName(CONTROLLER)")
    assert env.raft.changes == []
    lower = await ask(env, ApiKey.ADD_RAFT_VOTER, 1, {**ADD_VOTER, "listeners": [
        {"name": "controller", "host": "127.0.0.1", "port": 9097}]})
    assert lower.error_code == ErrorCode.unsupported_version  # reached the quorum
    ((_, voter),) = env.raft.changes
    assert [e.listener for e in voter.endpoints] == ["CONTROLLER"]


def test_kafka_endpoints_prints_the_listeners_in_hash_map_order() -> None:
    """Kafka's Endpoints is a ``new HashMap<>(2)`` by listener name for two listeners,
    four buckets once both are in: "B" (hash 66) goes to bucket 2 and "E" (69) to 1, so
    Kafka prints E first, whatever the request's order."""
    from ottla.raft.voter_set import Endpoint
    from ottla.server.controller_apis.quorum import kafka_endpoints
    endpoints = (Endpoint("B", "h", 1), Endpoint("E", "h", 2))
    assert kafka_endpoints(endpoints) == (
        "Endpoints(endpoints={ListenerName(E)=h/<unresolved>:2, "
        "ListenerName(B)=h/<unresolved>:1})")
    assert kafka_endpoints(endpoints[::-1]) == kafka_endpoints(endpoints)


async def test_remove_raft_voter_names_the_voter_by_id_and_directory(env: Env) -> None:
    response = await ask(env, ApiKey.REMOVE_RAFT_VOTER, 0, {
        "cluster_id": CLUSTER_ID, "voter_id": 2, "voter_directory_id": uuid.UUID(int=9)})
    assert response.error_code == ErrorCode.unsupported_version
    assert env.raft.changes == [("remove", ReplicaKey(2, kafka_uuid_text(uuid.UUID(int=9))))]
