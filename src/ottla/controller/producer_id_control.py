"""Blocks of producer ids for the brokers' idempotent and transactional producers (Kafka's
ProducerIdControlManager, KIP-730): the next free id is a record in the metadata log, so
no two blocks overlap across controller failovers."""

from __future__ import annotations

from ottla.controller.results import ControllerError, ControllerResult
from ottla.metadata import records as r
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdControlManager:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ControllerResult:
        """A block of producer ids for a broker (AllocateProducerIds): (start, length)."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch:
            raise ControllerError(ErrorCode.stale_broker_epoch,
                                  f"Broker {broker_id} is not registered at epoch {broker_epoch}")
        start = self.image.next_producer_id
        record = r.ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                     next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult([record], (start, PRODUCER_ID_BLOCK_SIZE))
