"""Which records the controller has replayed, which are committed, and whether it is the
active controller: Kafka's OffsetControlManager and the replay switch (seed 003), sans
I/O so that the asyncio driver and the simulation run the same bookkeeping.

Standby: committed batches are replayed as they commit. Active (claimed): the
controller's own batches are replayed when appended, after a timeline snapshot at their
base offset; commits delete the snapshots below the committed offset, so the one at the
committed offset is there whenever uncommitted records are. Renounce reverts to it:
exactly the appended-but-uncommitted records are forgotten, and if they commit after
all (the next leader kept them) they come back as committed batches.
"""

from __future__ import annotations

import sys
from typing import Any

from ottla.controller.quorum_controller import QuorumController
from ottla.metadata.bootstrap import decode_snapshot
from ottla.raft.messages import Committed


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
            for record in decode_snapshot(committed.snapshot.data).records:
                image.replay(record, end - 1)
            self.committed_end = self.replayed_end = end
        offset = committed.base_offset
        for entry in committed.entries:
            end = offset + entry.count
            if entry.payload is not None and end > self.replayed_end:
                for i, record in enumerate(entry.payload):
                    self.controller.replay(record, offset + i)
            offset = end
        self.committed_end = offset
        self.replayed_end = max(self.replayed_end, offset)
        if self.claimed:
            self.registry.delete_snapshots_up_to(self.committed_end)

    def can_claim(self, is_leader: bool, epoch: int, epoch_start_offset: int) -> bool:
        """A leader claims its epoch once everything before the epoch's leader-change
        entry is committed and replayed here: then its state is the whole log's."""
        return is_leader and self.claim_epoch != epoch and \
            self.committed_end > epoch_start_offset

    def claim(self, epoch: int) -> None:
        self.claim_epoch = epoch
        self.controller.last_heartbeat_ms.clear()  # soft state: rebuilt from heartbeats

    def renounce(self) -> None:
        self.claim_epoch = -1
        if self.replayed_end > self.committed_end:
            self.registry.revert_to_snapshot(self.committed_end)
        self.registry.delete_snapshots_up_to(sys.maxsize)
        self.replayed_end = self.committed_end

    def before_append(self, base_offset: int) -> None:
        """A snapshot of the state before the batch at ``base_offset``."""
        self.registry.get_or_create_snapshot(base_offset)

    def replay_appended(self, records: list[Any], base_offset: int) -> None:
        """The active controller applies its own batch as soon as it is appended."""
        for i, record in enumerate(records):
            self.controller.replay(record, base_offset + i)
        self.replayed_end = base_offset + len(records)

    def cancel_append(self, base_offset: int) -> None:
        """The batch could not be appended after all: forget its snapshot."""
        self.registry.revert_to_snapshot(base_offset)
