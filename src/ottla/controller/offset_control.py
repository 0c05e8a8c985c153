"""Which records the controller has replayed, which are committed, and whether it is the
active controller: Kafka's OffsetControlManager and the replay switch (seed 003), sans
I/O so that the asyncio driver and the simulation run the same bookkeeping.

Standby: committed batches are replayed as they commit. Active (claimed): the
controller's own batches are replayed when appended, after a timeline snapshot at their
base offset; commits delete the snapshots below the committed offset, so the one at the
committed offset is there whenever uncommitted records are. Renounce reverts to it:
exactly the appended-but-uncommitted records are forgotten, and if they commit after
all (the next leader kept them) they come back as committed batches.

Metadata transactions (KIP-868): a BeginTransactionRecord takes a snapshot at its own
offset, an EndTransactionRecord closes the transaction, an AbortTransactionRecord
reverts to that snapshot. The stable offset stops at an open transaction's start, so
what waits on the stable offset (answers to callers) never sees half of one; a
controller that claims with a transaction left open by a crashed predecessor aborts it.
"""

from __future__ import annotations

import sys
from typing import Any

from ottla.controller.quorum_controller import QuorumController
from ottla.metadata import records as r
from ottla.metadata.bootstrap import decode_snapshot
from ottla.protocol.records import read_header
from ottla.raft.messages import Committed
from ottla.timeline import TimelineInteger


class OffsetControl:
    def __init__(self, controller: QuorumController) -> None:
        if controller.registry is None:
            raise ValueError("the controller's image must live on a SnapshotRegistry")
        self.controller = controller
        self.registry = controller.registry
        self.claim_epoch = -1
        """The Raft epoch this controller is active in, or -1 (standby)."""
        self.committed_end = 0
        """Offsets below this are committed and replayed here."""
        self.replayed_end = 0
        """Offsets below this are replayed here (beyond committed on the active one)."""
        self._transaction_start = TimelineInteger(self.registry, -1)
        """On the timeline: reverting into a transaction reopens it."""
        self._skipping_aborted = False
        """Records of a transaction this controller aborted are ignored until its abort."""
        self.last_applied_timestamp = -1
        """Kafka's LastAppliedRecordTimestamp: on a standby, the append time of the last
        committed batch it replayed (or of a snapshot loaded); on the active controller,
        when it appended its last batch (Kafka's handleScheduleAppend takes the clock
        too: the Raft client does not say when the batch goes out). -1 before any."""

    @property
    def transaction_start(self) -> int:
        """The offset of the open metadata transaction's BeginTransactionRecord, or -1."""
        return self._transaction_start.get()

    @transaction_start.setter
    def transaction_start(self, offset: int) -> None:
        self._transaction_start.set(offset)

    @property
    def stable_end(self) -> int:
        """Offsets below this are committed and outside any open transaction: a
        transaction counts as open if it is in the committed state, even when the active
        controller has already appended (not yet committed) its end."""
        start = self.transaction_start
        if self.replayed_end > self.committed_end and \
                self.registry.has_snapshot(self.committed_end):
            start = self._transaction_start.get(self.committed_end)
        return min(self.committed_end, start) if start >= 0 else self.committed_end

    def replay(self, record: Any, offset: int) -> None:
        """The one way a record changes the controller: transactions here, the rest in
        the QuorumController."""
        if self._skipping_aborted:
            if isinstance(record, r.EndTransactionRecord):
                raise RuntimeError(f"a transaction this controller aborted ended at {offset}")
            if isinstance(record, r.AbortTransactionRecord):
                self._skipping_aborted = False
            return
        if isinstance(record, r.BeginTransactionRecord):
            self.registry.get_or_create_snapshot(offset)
            self.transaction_start = offset
        elif isinstance(record, r.EndTransactionRecord):
            self.transaction_start = -1
        elif isinstance(record, r.AbortTransactionRecord):
            if self.transaction_start >= 0:
                self.registry.revert_to_snapshot(self.transaction_start)
            self.transaction_start = -1
        self.controller.replay(record, offset)

    @property
    def claimed(self) -> bool:
        return self.claim_epoch >= 0

    def on_committed(self, committed: Committed) -> None:
        """Replay what the quorum committed that this controller has not replayed yet."""
        if committed.snapshot is not None:
            if self.claimed:
                raise RuntimeError("the active controller was asked to load a snapshot")
            image = self.controller.image
            image.clear()
            end = committed.snapshot.end_offset
            snapshot = decode_snapshot(committed.snapshot.data)
            for record in snapshot.records:
                image.replay(record, end - 1)
            self.last_applied_timestamp = snapshot.last_contained_log_timestamp
            self.committed_end = self.replayed_end = end
            self.transaction_start = -1  # snapshots are taken outside transactions
            self._skipping_aborted = False
        offset = committed.base_offset
        for entry in committed.entries:
            end = offset + entry.count
            if isinstance(entry.payload, (tuple, list)) and end > self.replayed_end:
                for i, record in enumerate(entry.payload):
                    self.replay(record, offset + i)
            if not self.claimed and entry.raw is not None:
                self.last_applied_timestamp = read_header(entry.raw, 0).max_timestamp
            offset = end
        self.committed_end = offset
        self.replayed_end = max(self.replayed_end, offset)
        # Keep what a renounce or an abort may revert to; a standby keeps only the
        # snapshot of an open transaction.
        self.registry.delete_snapshots_up_to(self.stable_end)

    def can_claim(self, is_leader: bool, epoch: int, epoch_start_offset: int) -> bool:
        """A leader claims its epoch once everything before the epoch's leader-change
        entry is committed and replayed here: then its state is the whole log's."""
        return is_leader and self.claim_epoch != epoch and \
            self.committed_end > epoch_start_offset

    def claim(self, epoch: int) -> None:
        self.claim_epoch = epoch
        self.controller.cluster.last_heartbeat_ms.clear()  # soft state: rebuilt from heartbeats

    def renounce(self) -> None:
        self.claim_epoch = -1
        if self.replayed_end > self.committed_end:
            if self.registry.has_snapshot(self.committed_end):
                self.registry.revert_to_snapshot(self.committed_end)
            else:
                self._renounce_after_abort()
        self.registry.delete_snapshots_up_to(
            self.transaction_start if self.transaction_start >= 0 else sys.maxsize)
        self.replayed_end = self.committed_end

    def _renounce_after_abort(self) -> None:
        """No snapshot at the committed offset: this controller aborted a transaction
        that began in the committed log (its revert dropped the later snapshots) and the
        abort is not committed yet. That transaction is doomed: whoever leads next finds
        it open and aborts it, if our abort does not commit. So the state to keep is the
        one just after our abort (later appends are forgotten as usual), and the
        transaction's records that commit from here on are skipped until its abort."""
        later = [epoch for epoch in self.registry.epochs() if epoch > self.committed_end]
        if later:
            self.registry.revert_to_snapshot(later[0])
        self._skipping_aborted = True

    def before_append(self, base_offset: int) -> None:
        """A snapshot of the state before the batch at ``base_offset``."""
        self.registry.get_or_create_snapshot(base_offset)

    def replay_appended(self, records: list[Any], base_offset: int, now_ms: int) -> None:
        """The active controller applies its own batch as soon as it is appended."""
        for i, record in enumerate(records):
            self.replay(record, base_offset + i)
        self.replayed_end = base_offset + len(records)
        self.last_applied_timestamp = now_ms

    def cancel_append(self, base_offset: int) -> None:
        """The batch could not be appended after all: forget its snapshot."""
        self.registry.revert_to_snapshot(base_offset)
