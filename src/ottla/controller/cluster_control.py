"""The brokers of the cluster (Kafka's ClusterControlManager): registration under a
broker epoch with the broker's log dirs, heartbeats that keep a session, unfence a
caught-up broker and report log dirs gone offline, and fencing of the silent. What
fencing or an offline dir does to partitions (leaders moved, ISRs shrunk) is the
replication manager's to decide."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ottla.common.features import (
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    controller_registration_supported,
    controller_unregistration_supported,
    cordoned_log_dirs_supported,
)
from ottla.controller.replication_control import ReplicationControlManager
from ottla.controller.results import ControllerError, ControllerResult
from ottla.metadata import directory_id
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import CONTROLLER_ID_NOT_REGISTERED, ErrorCode

SECURITY_PROTOCOLS = frozenset({0, 1, 2, 3})
"""Kafka's ``SecurityProtocol`` ids: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."""


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
                        previous_broker_epoch: int = -1,
                        log_dirs: Sequence[uuid.UUID] | None = None,
                        features: Sequence[tuple[str, int, int]] = ()) -> ControllerResult:
        """Register (or re-register after a restart) a broker.

        ``broker_epoch`` is the offset the registration record will get, as in KRaft. A
        remote broker registers fenced and is unfenced by its heartbeats once caught up
        (``unfence=False``), and a new incarnation of it first gives up its leaderships;
        the broker in the controller's own process is unfenced at once.

        ``previous_broker_epoch`` is the epoch the broker wrote in its clean-shutdown
        marker (-1 without one). A new incarnation whose previous epoch is not the one
        registered here stopped uncleanly (kill -9, power loss): with ELR on, it leaves
        every ISR and ELR before it registers (KIP-966).

        ``log_dirs``: the ids of the broker's log dirs (BrokerRegistration v2+), all
        online again with the new registration. From metadata.version 3.7-IV2 they are
        checked as Kafka does (INVALID_REGISTRATION: none, a reserved id, one twice, one
        another broker has) and recorded. None: the caller has none to report (a broker
        in the controller's own process, tests).

        ``features``: (name, min, max) levels the broker supports, recorded for
        UpdateFeatures to check (a feature it does not name, it supports only at 0).
        """
        if log_dirs is not None and self.replication.directories_tracked:
            self._check_log_dirs(broker_id, log_dirs)
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
        level = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
        records.append(r.RegisterBrokerRecord.at(level)(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=broker_epoch,
            end_points=tuple(r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                             for n, h, p, s in endpoints),
            features=tuple(r.BrokerFeature(name=n, min_supported_version=low,
                                           max_supported_version=high)
                           for n, low, high in features),
            rack=rack, fenced=True,
            log_dirs=tuple(log_dirs or ()) if self.replication.directories_tracked else ()))
        self.last_heartbeat_ms[broker_id] = now_ms
        if unfence:
            records += self._unfence(broker_id, broker_epoch)
        return ControllerResult(records, broker_epoch)

    def register_controller(self, controller_id: int, incarnation_id: uuid.UUID,
                            endpoints: Sequence[tuple[str, str, int, int]],
                            features: Sequence[tuple[str, int, int]]) -> ControllerResult:
        """ControllerRegistration (KIP-919, Kafka's ``registerController``): record where a
        controller listens and what it supports, replacing its previous registration.
        Kafka checks only that the metadata.version has controller registrations
        (UNSUPPORTED_VERSION) and that each listener's security protocol is one it knows;
        ``zk_migration_ready`` is always written false."""
        level = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
        if not controller_registration_supported(level):
            raise ControllerError(ErrorCode.unsupported_version,
                                  "The current MetadataVersion is too old to support "
                                  "controller registrations.")
        for name, _host, _port, protocol in endpoints:
            if protocol not in SECURITY_PROTOCOLS:
                # A RuntimeException in Kafka: UNKNOWN_SERVER_ERROR, with its toString.
                raise ControllerError(ErrorCode.unknown_server_error,
                                      f"java.lang.RuntimeException: Unknown security protocol "
                                      f"{protocol} in listener {name}")
        listeners = {n: (n, h, p, s) for n, h, p, s in endpoints}  # by name, last wins
        return ControllerResult([r.RegisterControllerRecord(
            controller_id=controller_id, incarnation_id=incarnation_id,
            zk_migration_ready=False,
            end_points=tuple(r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                             for n, h, p, s in listeners.values()),
            features=tuple(r.BrokerFeature(name=name, min_supported_version=low,
                                           max_supported_version=high)
                           for name, low, high in features))])

    def _check_log_dirs(self, broker_id: int, log_dirs: Sequence[uuid.UUID]) -> None:
        if not log_dirs:
            raise ControllerError(ErrorCode.invalid_registration,
                                  "No directories specified in request")
        if any(directory_id.reserved(d) for d in log_dirs):
            raise ControllerError(ErrorCode.invalid_registration,
                                  "Reserved directory ID in request")
        if len(set(log_dirs)) != len(log_dirs):
            raise ControllerError(ErrorCode.invalid_registration,
                                  "Duplicate directory ID in request")
        for other in self.image.brokers.values():
            if other.broker_id == broker_id:
                continue
            taken = next((d for d in log_dirs if d in other.directories), None)
            if taken is not None:
                raise ControllerError(ErrorCode.invalid_registration,
                                      f"Broker {other.broker_id} is already registered "
                                      f"with directory {taken}")

    def has_online_dir(self, broker_id: int, directory: uuid.UUID) -> bool:
        """Whether ``broker_id`` is registered and ``directory`` is online on it."""
        broker = self.image.brokers.get(broker_id)
        return broker is not None and broker.has_online_dir(directory)

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """Kafka's ``defaultDir``: the log dir a new replica on the broker gets."""
        return self.replication.default_dir(broker_id)

    def broker_heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                         want_fence: bool, want_shutdown: bool, now_ms: int,
                         offline_dirs: Sequence[uuid.UUID] = (),
                         cordoned_dirs: Sequence[uuid.UUID] | None = None) -> ControllerResult:
        """BrokerHeartbeat: keep the session alive, unfence a caught-up broker that asks,
        fence one that asks (or is shutting down), and move the partitions whose replica
        on the broker is in a log dir newly among ``offline_dirs`` (KIP-858, from
        metadata.version 3.7-IV2, after the fencing or unfencing as in Kafka's
        ``processBrokerHeartbeat``); from 4.3-IV0, record ``cordoned_dirs`` (KIP-1066)
        when they differ from the registration's (Kafka's ``handleDirectoriesCordoned``).
        Response: HeartbeatReply."""
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
        offline = [d for d in offline_dirs if d in broker.directories] \
            if self.replication.directories_tracked else []
        if (want_fence or want_shutdown) and not broker.fenced:
            records = self._fence({broker_id: broker_epoch})
            fenced = True
        elif not want_fence and not want_shutdown and broker.fenced and caught_up:
            records = self._unfence(broker_id, broker_epoch, offline)
            fenced = False
        if offline:
            decided = {(rec.topic_id, rec.partition_id) for rec in records
                       if isinstance(rec, r.PartitionChangeRecord)}
            records += self.replication.handle_directories_offline(
                broker_id, broker_epoch, offline, decided)
        level = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
        if cordoned_dirs is not None and cordoned_log_dirs_supported(level) and (
                broker.cordoned_directories is None
                or set(broker.cordoned_directories) != set(cordoned_dirs)):
            records.append(r.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=broker_epoch,
                cordoned_log_dirs=tuple(cordoned_dirs)))
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

    def next_session_expiry_ms(self, session_timeout_ms: int) -> int | None:
        """When the first unfenced broker's session runs out, if none heartbeats before:
        Kafka's BrokerHeartbeatManager schedules its fencing check for then, so a dead
        broker is fenced at the end of its session, not up to a polling period later."""
        last = [self.last_heartbeat_ms[b.broker_id] for b in self.image.live_brokers()
                if b.broker_id in self.last_heartbeat_ms]
        return min(last) + session_timeout_ms if last else None

    def unregister_broker(self, broker_id: int) -> ControllerResult:
        """Forget a broker (kafka-cluster unregister, Kafka's ``unregisterBroker``): it
        leaves every ISR and ELR it is in and every leadership it holds, then its
        registration goes. A broker still running registers again."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            raise ControllerError(ErrorCode.broker_id_not_registered,
                                  f"Broker ID {broker_id} is not currently registered")
        self.last_heartbeat_ms.pop(broker_id, None)
        records = self.replication.handle_brokers_fenced({broker_id}, {broker_id})
        records.append(r.UnregisterBrokerRecord(broker_id=broker_id,
                                                broker_epoch=registration.epoch))
        return ControllerResult(records, None)

    def unregister_controller(self, controller_id: int, active_id: int) -> ControllerResult:
        """Forget a controller's registration (kafka-cluster unregister-controller,
        KIP-1220, Kafka's ``unregisterController``), asked of the active controller
        ``active_id``, which cannot unregister itself. Kafka writes an
        UnregisterControllerRecord from metadata.version 4.4-IV2 and below it refuses, as
        here, before it looks at the controller's registration."""
        if controller_id == active_id:
            raise ControllerError(ErrorCode.invalid_request,
                                  "Controller cannot unregister itself while it is active.")
        level = self.image.features.get(METADATA_VERSION, METADATA_VERSION_LEVEL)
        if not controller_unregistration_supported(level):
            raise ControllerError(ErrorCode.unsupported_version,
                                  "The current MetadataVersion is too old to support "
                                  "controller unregistration.")
        if controller_id not in self.image.controllers:
            raise ControllerError(CONTROLLER_ID_NOT_REGISTERED,
                                  f"Controller ID {controller_id} is not currently registered.")
        return ControllerResult([r.UnregisterControllerRecord(controller_id=controller_id)])

    def _fence(self, brokers: dict[int, int]) -> list[Any]:
        """FenceBrokerRecords (broker id -> epoch), and the ISR and leader changes of the
        partitions they were in, decided for all of them at once: decided one broker at a
        time against the same image, the last change would undo the others."""
        return [*(r.FenceBrokerRecord(id=b, epoch=e) for b, e in brokers.items()),
                *self.replication.handle_brokers_fenced(set(brokers))]

    def _unfence(self, broker_id: int, epoch: int,
                 offline_dirs: Sequence[uuid.UUID] = ()) -> list[Any]:
        """UnfenceBrokerRecord, and leaders for partitions that had none it can lead
        (not from log dirs going offline in the same heartbeat)."""
        return [r.UnfenceBrokerRecord(id=broker_id, epoch=epoch),
                *self.replication.handle_broker_unfenced(broker_id, offline_dirs)]
