"""Producer ids for idempotent and transactional producers (Kafka's
RPCProducerIdManager): blocks allocated by the controller (AllocateProducerIds), handed
out one by one; concurrent callers share one allocation."""

from __future__ import annotations

import asyncio
from typing import Any

from ottla.broker.controller_client import ControllerClient
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode, KafkaError

ALLOCATE_PRODUCER_IDS_VERSION = 0


class ProducerIdManager:
    def __init__(self, broker_id: int, controller: ControllerClient) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self._next = 0
        self._end = 0
        self._allocating: asyncio.Future[Any] | None = None

    async def generate(self, broker_epoch: int) -> int:
        while self._next >= self._end:
            if self._allocating is None:
                self._allocating = asyncio.ensure_future(self.controller.call(
                    ApiKey.ALLOCATE_PRODUCER_IDS, ALLOCATE_PRODUCER_IDS_VERSION,
                    {"broker_id": self.broker_id, "broker_epoch": broker_epoch}))
            allocating = self._allocating
            try:
                response = await asyncio.shield(allocating)
            finally:
                if self._allocating is allocating and allocating.done():
                    self._allocating = None
            if response.error_code != ErrorCode.none:
                raise KafkaError(response.error_code, "The controller did not allocate "
                                 "producer ids")
            if self._next >= self._end:
                self._next = response.producer_id_start
                self._end = response.producer_id_start + response.producer_id_len
        pid = self._next
        self._next += 1
        return pid
