"""Log dirs in the metadata (KIP-858, JBOD in KRaft), on the sans-I/O controller: brokers
register their log dirs' ids, partitions record each replica's dir (assigned by the
controller for a broker with one dir, by AssignReplicasToDirs otherwise), and a heartbeat
naming an offline dir moves the leaderships and ISR places of the replicas in it, and
only those, as Kafka's ``ReplicationControlManager.handleDirectoriesOffline`` does."""

from __future__ import annotations

import random
import uuid

import pytest

from ottla.common.features import IBP_3_7_IV2, METADATA_VERSION
from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.replication_control import DirectoryAssignment
from ottla.controller.results import ControllerError
from ottla.metadata import directory_id
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply

A1, B1, A2, A3 = (uuid.UUID(int=(n << 64) | 0xD1) for n in (1, 11, 2, 3))
"""Broker 1 has two log dirs (A1, B1), brokers 2 and 3 one each."""
DIRS = {1: [A1, B1], 2: [A2], 3: [A3]}


def register(c: QuorumController, broker: int, dirs: list[uuid.UUID]) -> int:
    """Register ``broker`` with ``dirs`` (a new incarnation) and unfence it; its epoch."""
    epoch = max((b.epoch for b in c.image.brokers.values()), default=10) + 1
    apply(c, c.cluster.register_broker(broker, uuid.uuid4(),
                                       [("PLAINTEXT", "h", 9000 + broker, 0)], None, epoch,
                                       unfence=False, log_dirs=dirs).records)
    apply(c, c.cluster.broker_heartbeat(broker, epoch, 10**9, False, False, 0).records)
    assert not c.image.brokers[broker].fenced
    return epoch


def cluster(metadata_version: int | None = None,
            dirs: dict[int, list[uuid.UUID]] = DIRS) -> tuple[QuorumController, dict[int, int]]:
    c = QuorumController(1, rng=random.Random(5))
    bootstrap = c.features.bootstrap_records()
    if metadata_version is not None:
        bootstrap = [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version)]
    for offset, rec in enumerate(bootstrap):
        c.replay(rec, offset)
    epochs = {}
    for broker, broker_dirs in dirs.items():
        epochs[broker] = register(c, broker, broker_dirs)
    return c, epochs


def heartbeat(c: QuorumController, broker: int, epoch: int, offline: list[uuid.UUID],
              want_fence: bool = False) -> list:
    result = c.cluster.broker_heartbeat(broker, epoch, 10**9, want_fence, False, 0, offline)
    apply(c, result.records)
    return result.records


def assign(c: QuorumController, broker: int, epoch: int,
           placement: dict[uuid.UUID, list[tuple[uuid.UUID, list[int]]]]):
    result = c.replication.assign_replicas_to_dirs(
        broker, epoch, [DirectoryAssignment(d, topics) for d, topics in placement.items()])
    apply(c, result.records)
    return result


def errors(result) -> dict[tuple[uuid.UUID, uuid.UUID, int], ErrorCode]:
    return {(d.directory, t, p): e for d in result.response for t, answers in d.topics
            for p, e in answers}


def test_registration_records_the_log_dirs_and_new_replicas_get_the_only_one() -> None:
    c, _ = cluster()
    assert c.image.brokers[1].directories == tuple(sorted([A1, B1]))
    assert c.image.brokers[2].directories == (A2,)
    created = c.replication.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})])
    record = next(rec for rec in created.records if isinstance(rec, r.PartitionRecord))
    # Kafka's defaultDir: a broker's only dir, UNASSIGNED among several.
    assert record.directories == (directory_id.UNASSIGNED, A2, A3)
    apply(c, created.records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert [part.directory(b) for b in (1, 2, 3)] == [directory_id.UNASSIGNED, A2, A3]


@pytest.mark.parametrize("dirs,message", [
    ([], "No directories specified in request"),
    ([directory_id.LOST], "Reserved directory ID in request"),
    ([A1, A1], "Duplicate directory ID in request"),
    ([A2], "Broker 2 is already registered with directory"),
])
def test_registration_with_bad_log_dirs_is_refused_as_kafka_does(dirs, message) -> None:
    c, _ = cluster()
    with pytest.raises(ControllerError) as refused:
        c.cluster.register_broker(4, uuid.uuid4(), [("PLAINTEXT", "h", 9004, 0)], None, 99,
                                  unfence=False, log_dirs=dirs)
    assert refused.value.code == ErrorCode.invalid_registration
    assert message in refused.value.message


def test_assign_replicas_to_dirs_records_each_replicas_dir() -> None:
    c, epochs = cluster()
    apply(c, c.replication.create_topics([
        NewTopic("t", assignments={0: [1, 2, 3], 1: [2, 1, 3]}),
        NewTopic("u", assignments={0: [2, 3]})]).records)
    t, u = c.image.topics_by_name["t"], c.image.topics_by_name["u"]
    missing = uuid.UUID(int=(77 << 64) | 1)
    result = assign(c, 1, epochs[1], {A1: [(t.topic_id, [0])],
                                       B1: [(t.topic_id, [1, 9]), (u.topic_id, [0]),
                                            (missing, [0])]})
    assert errors(result) == {
        (A1, t.topic_id, 0): ErrorCode.none, (B1, t.topic_id, 1): ErrorCode.none,
        (B1, t.topic_id, 9): ErrorCode.unknown_topic_or_partition,
        (B1, u.topic_id, 0): ErrorCode.not_leader_or_follower,  # not a replica there
        (B1, missing, 0): ErrorCode.unknown_topic_id}
    changes = [rec for rec in result.records if isinstance(rec, r.PartitionChangeRecord)]
    assert [(rec.partition_id, rec.directories, rec.leader, rec.isr) for rec in changes] == [
        (0, (A1, A2, A3), -2, None), (1, (A2, B1, A3), -2, None)]
    assert t.partitions[0].directory(1) == A1 and t.partitions[1].directory(1) == B1
    assert t.partitions[0].partition_epoch == 1
    # Saying it again changes nothing.
    assert assign(c, 1, epochs[1], {A1: [(t.topic_id, [0])]}).records == []


def test_assign_replicas_to_dirs_refuses_stale_broker_epochs() -> None:
    c, epochs = cluster()
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1]})]).records)
    topic_id = c.image.topics_by_name["t"].topic_id
    for broker, epoch in ((1, epochs[1] - 1), (1, epochs[1] + 1), (7, 0)):
        with pytest.raises(ControllerError) as refused:
            c.replication.assign_replicas_to_dirs(
                broker, epoch, [DirectoryAssignment(A1, [(topic_id, [0])])])
        assert refused.value.code == ErrorCode.stale_broker_epoch
    with pytest.raises(ControllerError) as stale:
        c.cluster.broker_heartbeat(1, epochs[1] - 1, 10**9, False, False, 0, [A1])
    assert stale.value.code == ErrorCode.stale_broker_epoch


def test_an_offline_dir_moves_the_leadership_of_its_partitions_only() -> None:
    c, epochs = cluster(metadata_version=25)  # 4.0-IV3: ELR off, the last ISR member stays
    apply(c, c.replication.create_topics([
        NewTopic("t", assignments={0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 1, 3]}),
        NewTopic("solo", assignments={0: [1]})]).records)
    t, solo = c.image.topics_by_name["t"], c.image.topics_by_name["solo"]
    assign(c, 1, epochs[1], {A1: [(t.topic_id, [0, 2]), (solo.topic_id, [0])],
                             B1: [(t.topic_id, [1])]})
    before = {p: (part.leader, part.leader_epoch) for p, part in t.partitions.items()}

    records = heartbeat(c, 1, epochs[1], [A1])
    changes = {rec.partition_id if rec.topic_id == t.topic_id else ("solo", 0): rec
               for rec in records if isinstance(rec, r.PartitionChangeRecord)}
    assert set(changes) == {0, 2, ("solo", 0)}
    assert records[-1] == r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epochs[1],
                                                           log_dirs=(B1,))
    assert c.image.brokers[1].directories == (B1,)
    # t-0 was led from A1: broker 2 leads it now, and broker 1 left its ISR.
    assert (t.partitions[0].leader, t.partitions[0].isr) == (2, [2, 3])
    assert t.partitions[0].leader_epoch == before[0][1] + 1
    # t-1's replica on broker 1 is in B1, online: nothing changes.
    assert (t.partitions[1].leader, t.partitions[1].isr) == (1, [1, 3, 2])
    assert t.partitions[1].leader_epoch == before[1][1]
    # t-2, followed from A1: broker 1 leaves the ISR, broker 2 keeps leading.
    assert (t.partitions[2].leader, t.partitions[2].isr) == (2, [2, 3])
    # solo-0 has no one else: no leader, its last ISR member stays (as when fenced).
    assert (solo.partitions[0].leader, solo.partitions[0].isr) == (-1, [1])
    assert c.image.topics_by_name["t"].partitions[1].directory(1) == B1

    # The next heartbeats name A1 again: nothing new to do.
    assert heartbeat(c, 1, epochs[1], [A1]) == []

    # Broker 1 may not lead a replica in A1 while A1 is offline: not after being fenced
    # and unfenced, not in a preferred election, not in an unclean one.
    heartbeat(c, 1, epochs[1], [A1], want_fence=True)
    heartbeat(c, 1, epochs[1], [A1])
    assert not c.image.brokers[1].fenced
    assert solo.partitions[0].leader == -1
    preferred = c.replication.elect_leaders(0, [("t", 0)])
    assert preferred.response[("t", 0)][0] == ErrorCode.preferred_leader_not_available
    assert preferred.records == []
    unclean = c.replication.elect_leaders(1, [("solo", 0)])
    assert unclean.response[("solo", 0)][0] == ErrorCode.eligible_leaders_not_available
    # Brokers 2 and 3 go silent: t-0 has no one left to lead it, broker 1 least of all.
    apply(c, c.cluster.fence_stale_brokers(now_ms=10**6, session_timeout_ms=1,
                                           exempt=frozenset({1})).records)
    assert t.partitions[0].leader == -1
    unclean = c.replication.elect_leaders(1, [("t", 0)])
    assert unclean.response[("t", 0)][0] == ErrorCode.eligible_leaders_not_available

    # A new incarnation registers with both dirs again (the disk was replaced): A1 is
    # online, and broker 1 leads what it alone has.
    register(c, 1, [A1, B1])
    assert c.image.brokers[1].directories == tuple(sorted([A1, B1]))
    assert solo.partitions[0].leader == 1


def test_a_replica_assigned_to_a_dir_already_offline_leaves_its_isr_and_leadership() -> None:
    """The dir failed before the broker could say it held the replica (Kafka's
    "offline-dir-assignment"): the assignment itself moves the partition."""
    c, epochs = cluster()
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2]})]).records)
    t = c.image.topics_by_name["t"]
    records = heartbeat(c, 1, epochs[1], [A1])  # nothing known to be in A1 yet
    assert [type(rec) for rec in records] == [r.BrokerRegistrationChangeRecord]
    assert t.partitions[0].leader == 1
    result = assign(c, 1, epochs[1], {A1: [(t.topic_id, [0])]})
    assert errors(result) == {(A1, t.topic_id, 0): ErrorCode.none}
    assert len(result.records) == 1
    part = t.partitions[0]
    assert (part.leader, part.isr, part.directory(1)) == (2, [2], A1)


def test_new_replicas_of_a_broker_with_one_dir_left_go_to_it() -> None:
    c, epochs = cluster()
    heartbeat(c, 1, epochs[1], [B1])
    apply(c, c.replication.create_topics([NewTopic("later", assignments={0: [1]})]).records)
    assert c.image.topics_by_name["later"].partitions[0].directory(1) == A1


def test_a_heartbeat_that_unfences_and_reports_an_offline_dir_elects_nothing_there() -> None:
    c, epochs = cluster()
    apply(c, c.replication.create_topics([NewTopic("solo", assignments={0: [1]})]).records)
    solo = c.image.topics_by_name["solo"]
    assign(c, 1, epochs[1], {A1: [(solo.topic_id, [0])]})
    heartbeat(c, 1, epochs[1], [], want_fence=True)
    assert solo.partitions[0].leader == -1
    records = heartbeat(c, 1, epochs[1], [A1])  # unfenced, A1 offline, in one heartbeat
    assert not c.image.brokers[1].fenced and c.image.brokers[1].directories == (B1,)
    assert solo.partitions[0].leader == -1
    assert not [rec for rec in records if isinstance(rec, r.PartitionChangeRecord)]


def test_reassigned_replicas_keep_their_dirs_and_new_ones_get_the_default() -> None:
    c, epochs = cluster()
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2]})]).records)
    t = c.image.topics_by_name["t"]
    assign(c, 1, epochs[1], {B1: [(t.topic_id, [0])]})
    result = c.replication.alter_partition_reassignments([("t", 0, [3, 1])])
    apply(c, result.records)
    part = t.partitions[0]
    assert part.replicas == [3, 1, 2] and part.adding_replicas == [3]
    assert [part.directory(b) for b in part.replicas] == [A3, B1, A2]


def test_before_metadata_version_3_7_iv2_log_dirs_are_not_tracked() -> None:
    c, epochs = cluster(metadata_version=IBP_3_7_IV2 - 1)
    assert c.image.brokers[1].directories == ()  # not recorded
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2]})]).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert part.directories == [] and part.directory(1) == directory_id.MIGRATING
    assert heartbeat(c, 1, epochs[1], [A1]) == []
    with pytest.raises(ControllerError) as refused:
        c.replication.assign_replicas_to_dirs(1, epochs[1], [])
    assert refused.value.code == ErrorCode.unsupported_version


def test_the_records_and_a_snapshot_keep_the_dirs() -> None:
    c, epochs = cluster()
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2]})]).records)
    assign(c, 1, epochs[1], {B1: [(c.image.topics_by_name["t"].topic_id, [0])]})
    heartbeat(c, 1, epochs[1], [A1])
    copy = MetadataImage()
    for rec in c.image.to_records():
        copy.replay(r.decode(r.encode(rec)))
    assert copy.digest() == c.image.digest()
    assert copy.brokers[1].directories == (B1,)
    assert copy.topics_by_name["t"].partitions[0].directories == [B1, A2]
    assert r.encode(r.PartitionRecord(partition_id=0, topic_id=A1, replicas=(1,), isr=(1,)))[
        :3] == bytes([1, 3, 2])  # frame 1, PartitionRecord v2
    assert r.encode(r.RegisterBrokerRecord.at(25)(broker_id=1, incarnation_id=A1,
                                                  broker_epoch=1))[
        :3] == bytes([1, 0, 3])  # RegisterBrokerRecord v3 (below 4.3-IV0)


def test_older_record_versions_are_read() -> None:
    """PartitionRecord v0 (no Directories) and RegisterBrokerRecord v1 (no
    IsMigratingZkBroker, no LogDirs), as Kafka before 3.7 and older Ottla (in frame
    version 0) wrote them."""
    partition_v0 = bytes([0, 3, 0]) + bytes(4) + A1.bytes + bytes([2, 0, 0, 0, 1]) + \
        bytes([2, 0, 0, 0, 1]) + bytes([1, 1]) + bytes([0, 0, 0, 1]) + bytes([0, 0, 0, 3]) + \
        bytes([0, 0, 0, 4]) + bytes([0])
    record = r.decode(partition_v0)
    assert record == r.PartitionRecord(partition_id=0, topic_id=A1, replicas=(1,), isr=(1,),
                                       leader=1, leader_epoch=3, partition_epoch=4)
    broker_v1 = bytes([0, 0, 1]) + bytes([0, 0, 0, 7]) + A2.bytes + bytes(7) + bytes([5]) + \
        bytes([1, 1, 0, 1, 0, 0])
    assert r.decode(broker_v1) == r.RegisterBrokerRecord(
        broker_id=7, incarnation_id=A2, broker_epoch=5, rack=None, fenced=True)
    image = MetadataImage()
    image.replay(r.decode(broker_v1))
    assert image.brokers[7].directories == () and image.brokers[7].has_online_dir(A1)
