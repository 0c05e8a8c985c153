"""QuorumControllers on the simulated quorum: the metadata state machine under faults.

Every voter runs a QuorumController on the timeline with the same OffsetControl the
node's driver uses (claim when leading with the epoch's start committed, replay
standbys' batches as they commit, revert on renounce); the active one turns random admin
operations (registrations, heartbeats, topic creation and deletion, configs, fencing,
elections, producer ids) into record batches, now and then inside a metadata
transaction that spans several batches and ends, aborts, or is left open by a leader
that loses its epoch (its successor aborts it first). Every node, observers included,
applies committed batches to a MetadataImage through the brokers' MetadataLoader, and
snapshots carry the image as records, so a node far behind loads it from there.

Checked as the run goes: at every offset that is a multiple of ``DIGEST_EVERY`` and a
batch boundary, all nodes' images have the same digest; a controller that claims or
renounces outside a transaction has exactly its node's committed image; replay never
fails. A broken rule raises a ``Violation`` naming its ``MetadataInvariant``.
"""

from __future__ import annotations

import enum
import random
import uuid
from typing import Any

from ottla.common.topics import NewTopic
from ottla.controller.offset_control import OffsetControl
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import ControllerError
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.raft.messages import Committed, Snapshot
from ottla.raft.quorum import RaftReplica
from ottla.timeline import SnapshotRegistry
from tests.simulation.raft_cluster import SimulatedQuorum, Violation

DIGEST_EVERY = 8


class MetadataInvariant(enum.Enum):
    """The metadata state machine's rules, beside the quorum's ``Invariant``."""

    IMAGES_AGREE = "every node's image has one digest at each sampled offset"
    CONTROLLER_IS_COMMITTED = "a controller claims and renounces with its node's committed image"


class MetadataQuorum(SimulatedQuorum):
    def __init__(self, seed: int, voters: int, observers: int = 0,
                 ids: list[int] | None = None) -> None:
        self.loaders: dict[int, MetadataLoader] = {}
        self.controls: dict[int, OffsetControl] = {}
        self.own_transaction: dict[int, int] = {}  # node -> epoch it began one in
        self.transactions = {"begun": 0, "ended": 0, "aborted": 0, "dangling": 0}
        self.digests: dict[int, str] = {}
        self.claims = 0
        self.renounced_with_pending = 0
        self.ops_rng = random.Random(seed * 7919)
        super().__init__(seed, voters, observers, ids)

    # --- node lifecycle: the state machines are rebuilt from the log -----------------------

    def boot(self, n: int) -> None:
        self.loaders[n] = MetadataLoader(MetadataImage())
        if n in self.voter_ids:
            self.controls[n] = OffsetControl(QuorumController(
                n, rng=random.Random(self.ops_rng.random()), registry=SnapshotRegistry()))
        super().boot(n)

    # --- applying -------------------------------------------------------------------------

    def load_snapshot(self, n: int, snapshot: Snapshot) -> None:
        super().load_snapshot(n, snapshot)  # checks the entries it covers
        data = snapshot.data[1]
        self.loaders[n].load_snapshot(decode_snapshot(data).records, snapshot.end_offset)
        self._check_digest(n, snapshot.end_offset)
        control = self.controls.get(n)
        if control is not None:
            control.on_committed(Committed(snapshot.end_offset, [],
                                           Snapshot(snapshot.end_offset, snapshot.epoch, data)))

    def apply(self, n: int, base: int, entries: list[Any]) -> None:
        super().apply(n, base, entries)  # checks the entries against the committed log
        control = self.controls.get(n)
        if control is not None:
            control.on_committed(Committed(base, entries))
        loader = self.loaders[n]
        offset = base
        for entry in entries:
            for i, record in enumerate(entry.payload or ()):
                loader.apply(record, offset + i)
            offset += entry.count
            self._check_digest(n, offset)

    def maybe_snapshot(self, n: int, replica: RaftReplica) -> None:
        if not self.loaders[n].in_transaction:
            super().maybe_snapshot(n, replica)

    def snapshot_state(self, n: int) -> object:
        return encode_snapshot(self.loaders[n].image.to_records(), self.now)

    def _check_digest(self, n: int, end_offset: int) -> None:
        if end_offset % DIGEST_EVERY:
            return
        digest = self.loaders[n].image.digest()
        expected = self.digests.setdefault(end_offset, digest)
        if digest != expected:
            raise Violation(MetadataInvariant.IMAGES_AGREE,
                            f"node {n}'s metadata at offset {end_offset} differs")

    # --- leadership -------------------------------------------------------------------------

    def on_state(self, n: int, replica: RaftReplica) -> None:
        control = self.controls.get(n)
        if control is None:
            return
        if control.claimed and not (replica.is_leader and replica.epoch == control.claim_epoch):
            if control.replayed_end > control.committed_end:
                self.renounced_with_pending += 1
            self.note("controller {} renounces epoch {}", n, control.claim_epoch)
            control.renounce()
            self._check_controller(n, "did not revert to its committed state")
        if control.can_claim(replica.is_leader, replica.epoch, replica.epoch_start_offset):
            control.claim(replica.epoch)
            self.claims += 1
            self.note("controller {} claims epoch {}", n, replica.epoch)
            self._check_controller(n, "claimed with a state other than the committed one")

    def _check_controller(self, n: int, problem: str) -> None:
        """Outside transactions, a standby's controller state is its node's image."""
        control, loader = self.controls[n], self.loaders[n]
        if control.transaction_start < 0 and not loader.in_transaction and \
                control.controller.image.digest() != loader.image.digest():
            raise Violation(MetadataInvariant.CONTROLLER_IS_COMMITTED, f"controller {n} {problem}")

    def propose(self, n: int, replica: RaftReplica) -> bool:
        control = self.controls.get(n)
        if control is None or not control.claimed or control.claim_epoch != replica.epoch:
            return False
        base = replica.log.end_offset
        records = self._transaction_records(n, control, replica.epoch)
        if records is None:
            try:
                records = random_operation(self.ops_rng, control.controller, self.now, base)
            except ControllerError:
                return False
            if records and control.transaction_start < 0 and self.ops_rng.random() < 0.05:
                records = [r.BeginTransactionRecord(name="sim"), *records]
                self.own_transaction[n] = replica.epoch
                self.transactions["begun"] += 1
        if not records:
            return False
        control.before_append(base)
        assert replica.propose(tuple(records), self.clock(n), len(records)) == base
        control.replay_appended(records, base, self.now)
        return True

    def _transaction_records(self, n: int, control: OffsetControl, epoch: int
                             ) -> list[Any] | None:
        """Closing an open transaction: one left by another leader is aborted first (as
        the driver does on activation); our own ends or aborts now and then."""
        if control.transaction_start < 0:
            return None
        if self.own_transaction.get(n) != epoch:
            self.transactions["dangling"] += 1
            return [r.AbortTransactionRecord(reason="new leader")]
        choice = self.ops_rng.random()
        if choice < 0.25:
            self.transactions["ended"] += 1
            return [r.EndTransactionRecord()]
        if choice < 0.35:
            self.transactions["aborted"] += 1
            return [r.AbortTransactionRecord(reason="sim")]
        return None


def random_operation(rng: random.Random, c: QuorumController, now: int, base: int
                     ) -> list[Any]:
    """The records of one admin operation picked at random (maybe none)."""
    brokers = sorted(c.image.brokers.values(), key=lambda b: b.broker_id)
    topics = sorted(c.image.topics_by_name)
    choice = rng.random()
    if not brokers or choice < 0.1:
        b = rng.randint(1, 4)
        return c.cluster.register_broker(
            b, uuid.UUID(int=rng.getrandbits(128)), [("PLAINTEXT", "h", 9000 + b, 0)],
            f"rack{b % 2}", base, now_ms=now, unfence=False).records
    broker = rng.choice(brokers)
    if choice < 0.3:
        return c.cluster.broker_heartbeat(broker.broker_id, broker.epoch, base, False,
                                  rng.random() < 0.1, now).records
    if choice < 0.5:
        return c.replication.create_topics([NewTopic(f"t{rng.randint(0, 11)}", rng.randint(1, 3),
                                         rng.randint(1, 2))]).records
    if choice < 0.58 and topics:
        return c.replication.delete_topics([rng.choice(topics)], [None]).records
    if choice < 0.68 and topics:
        return c.configuration.incremental_alter_configs([(
            ConfigResourceType.TOPIC, rng.choice(topics), [
            ("retention.ms", 0, str(rng.randint(1, 10**6)))])]).records
    if choice < 0.76:
        return c.cluster.fence_stale_brokers(now, 400).records
    if choice < 0.84:
        return c.replication.elect_leaders(rng.choice([0, 1]), None).records
    if choice < 0.9:
        return c.producer_ids.allocate_producer_ids(broker.broker_id, broker.epoch).records
    if choice < 0.95:
        return c.replication.balance_partition_leaders().records
    return [r.NoOpRecord()]
