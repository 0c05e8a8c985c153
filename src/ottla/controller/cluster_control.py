"""The brokers of the cluster (Kafka's ClusterControlManager): registration under a
broker epoch, heartbeats that keep a session and unfence a caught-up broker, and fencing
of the silent. What fencing does to partitions (leaders moved, ISRs shrunk) is the
replication manager's to decide."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ottla.controller.replication_control import ReplicationControlManager
from ottla.controller.results import ControllerError, ControllerResult
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode


@dataclass(slots=True)
class HeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class ClusterControlManager:
    def __init__(self, image: MetadataImage, replication: ReplicationControlManager) -> None:
        self.image = image
        self.replication = replication
        self.last_heartbeat_ms: dict[int, int] = {}
        """Broker sessions: soft state of the active controller, not in the log."""

    def register_broker(self, broker_id: int, incarnation_id: uuid.UUID,
                        endpoints: Sequence[tuple[str, str, int, int]], rack: str | None,
                        broker_epoch: int, *, now_ms: int = 0, unfence: bool = True,
                        previous_broker_epoch: int = -1) -> ControllerResult:
        """Register (or re-register after a restart) a broker.

        ``broker_epoch`` is the offset the registration record will get, as in KRaft. A
        remote broker registers fenced and is unfenced by its heartbeats once caught up
        (``unfence=False``), and a new incarnation of it first gives up its leaderships;
        the broker in the controller's own process is unfenced at once.

        ``previous_broker_epoch`` is the epoch the broker wrote in its clean-shutdown
        marker (-1 without one). A new incarnation whose previous epoch is not the one
        registered here stopped uncleanly (kill -9, power loss): with ELR on, it leaves
        every ISR and ELR before it registers (KIP-966).
        """
        records: list[Any] = []
        existing = self.image.brokers.get(broker_id)
        restarted = existing is None or existing.incarnation_id != incarnation_id
        unclean = restarted and (existing is None or previous_broker_epoch != existing.epoch)
        fence = restarted and existing is not None and not existing.fenced and not unfence
        if fence:
            # A remote broker restarted: it leads nothing until it has caught up.
            records.append(r.FenceBrokerRecord(id=broker_id, epoch=existing.epoch))
        if fence or unclean:
            records += self.replication.handle_brokers_fenced(
                {broker_id} if fence else set(), unclean_shutdown={broker_id} if unclean else ())
        records.append(r.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=broker_epoch,
            end_points=tuple(r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                             for n, h, p, s in endpoints),
            rack=rack, fenced=True))
        self.last_heartbeat_ms[broker_id] = now_ms
        if unfence:
            records += self._unfence(broker_id, broker_epoch)
        return ControllerResult(records, broker_epoch)

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                         want_fence: bool, want_shutdown: bool, now_ms: int
                         ) -> ControllerResult:
        """BrokerHeartbeat: keep the session alive, unfence a caught-up broker that asks,
        fence one that asks (or is shutting down). Response: HeartbeatReply."""
        broker = self.image.brokers.get(broker_id)
        if broker is None:  # as Kafka: a heartbeat before registration has a stale epoch
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Received a heartbeat from broker {broker_id}, but no "
                                  "broker with that id is registered")
        if broker.epoch != broker_epoch:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Expected broker epoch {broker.epoch}, got {broker_epoch}")
        self.last_heartbeat_ms[broker_id] = now_ms
        caught_up = metadata_offset >= broker.epoch
        records: list[Any] = []
        fenced = broker.fenced
        if (want_fence or want_shutdown) and not broker.fenced:
            records = self._fence({broker_id: broker_epoch})
            fenced = True
        elif not want_fence and not want_shutdown and broker.fenced and caught_up:
            records = self._unfence(broker_id, broker_epoch)
            fenced = False
        return ControllerResult(records, HeartbeatReply(caught_up, fenced, want_shutdown))

    def fence_stale_brokers(self, now_ms: int, session_timeout_ms: int,
                            exempt: frozenset[int] = frozenset()) -> ControllerResult:
        """Fence every unfenced broker silent for ``broker.session.timeout.ms``."""
        stale: dict[int, int] = {}
        for broker in self.image.live_brokers():
            if broker.broker_id in exempt:
                continue
            last = self.last_heartbeat_ms.get(broker.broker_id)
            if last is None:
                self.last_heartbeat_ms[broker.broker_id] = now_ms  # e.g. after failover
            elif now_ms - last > session_timeout_ms:
                stale[broker.broker_id] = broker.epoch
        if not stale:
            return ControllerResult([], [])
        return ControllerResult(self._fence(stale), list(stale))

    def _fence(self, brokers: dict[int, int]) -> list[Any]:
        """FenceBrokerRecords (broker id -> epoch), and the ISR and leader changes of the
        partitions they were in, decided for all of them at once: decided one broker at a
        time against the same image, the last change would undo the others."""
        return [*(r.FenceBrokerRecord(id=b, epoch=e) for b, e in brokers.items()),
                *self.replication.handle_brokers_fenced(set(brokers))]

    def _unfence(self, broker_id: int, epoch: int) -> list[Any]:
        """UnfenceBrokerRecord, and leaders for partitions that had none it can lead."""
        return [r.UnfenceBrokerRecord(id=broker_id, epoch=epoch),
                *self.replication.handle_broker_unfenced(broker_id)]
