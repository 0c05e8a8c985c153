"""Applies committed metadata records to a MetadataImage, as a broker does (sans I/O).

Records of a metadata transaction (KIP-868) are held back and reach the image together
at its EndTransactionRecord, or never (AbortTransactionRecord), so an image never shows
half an operation. Used by the node's MetadataPublisher and by the simulation.
"""

from __future__ import annotations

from typing import Any

from ottla.metadata import records as r
from ottla.metadata.delta import MetadataDelta
from ottla.metadata.image import MetadataImage

STATE_RECORDS = (r.TopicRecord, r.PartitionRecord, r.PartitionChangeRecord,
                 r.RemoveTopicRecord, r.ConfigRecord, r.RegisterBrokerRecord,
                 r.UnregisterBrokerRecord, r.UnfenceBrokerRecord, r.FenceBrokerRecord,
                 r.BrokerRegistrationChangeRecord, r.RegisterControllerRecord)
"""Records after which a broker updates its partitions and coordinators, and a
controller sees whether its registration is in the log."""
LEADER_RECOVERING = 1
"""KIP-704's leader recovery state of a leader elected uncleanly."""


class MetadataLoader:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._transaction: list[tuple[Any, int]] | None = None
        self.delta = MetadataDelta()
        """What the records applied since the last ``take_delta`` changed."""
        self.unclean_elections = 0
        """Committed changes that elected a leader uncleanly (it must recover its log):
        Kafka's UncleanLeaderElectionsPerSec, which its controllers count from the
        records they apply (TopicDelta's election stats), as here."""
        self.elr_elections = 0
        """Committed changes whose leader came from the partition's eligible leader
        replicas (KIP-966): ElectionFromEligibleLeaderReplicasPerSec."""

    def take_delta(self) -> MetadataDelta:
        delta, self.delta = self.delta, MetadataDelta()
        return delta

    @property
    def in_transaction(self) -> bool:
        """A snapshot now would lose what is held back: take none."""
        return self._transaction is not None

    def _count_election(self, record: r.PartitionChangeRecord | r.PartitionRecord) -> None:
        """As Kafka's TopicDelta: a change of a known partition whose leader must
        recover is an unclean election; one whose leader was in its ELR, an election
        from the ELR."""
        topic = self.image.topics_by_id.get(record.topic_id)
        previous = topic.partitions.get(record.partition_id) if topic is not None else None
        if previous is None:
            return
        if record.leader_recovery_state == LEADER_RECOVERING:
            self.unclean_elections += 1
        if record.leader in previous.elr:
            self.elr_elections += 1

    def load_snapshot(self, records: list[Any], end_offset: int) -> None:
        """Replace the image with a snapshot's (snapshots are outside transactions)."""
        self._transaction = None
        self.image.clear()
        for record in records:
            self.image.replay(record, end_offset - 1)
        self.delta = MetadataDelta(full=True)

    def apply(self, record: Any, offset: int) -> bool:
        """Replay one committed record; whether the image's topics, brokers or configs
        changed."""
        if isinstance(record, r.BeginTransactionRecord):
            self._transaction = []
        elif isinstance(record, r.EndTransactionRecord):
            held, self._transaction = self._transaction or [], None
            return any([self.apply(rec, off) for rec, off in held])
        elif isinstance(record, r.AbortTransactionRecord):
            self._transaction = None
        elif self._transaction is not None:
            self._transaction.append((record, offset))
            return False
        self.delta.note(record, self.image)
        if isinstance(record, (r.PartitionChangeRecord, r.PartitionRecord)):
            self._count_election(record)
        self.image.replay(record, offset)
        return isinstance(record, STATE_RECORDS)
