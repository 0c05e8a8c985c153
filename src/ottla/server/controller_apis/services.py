"""What the controller side of a node gives its request handlers (Kafka's ControllerApis
and its collaborators): the controller channel (run an operation on the active
controller, forward to it), the metadata quorum's Raft driver, the metadata image and the
node's config."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ottla.common.server_config import KafkaConfig
from ottla.metadata.image import MetadataImage
from ottla.server.controller_channel import ControllerChannel
from ottla.server.raft_driver import RaftDriver
from ottla.server.request_dispatcher import RequestDispatcher


@dataclass
class ControllerServices:
    node_id: int
    cluster_id: str
    config: KafkaConfig
    image: MetadataImage
    channel: ControllerChannel
    raft: RaftDriver
    clock: Callable[[], float] = time.time
    dispatcher: RequestDispatcher[ControllerServices] | None = field(default=None, repr=False)
    """The controller listener's dispatcher: the Envelope handler runs inner requests
    through it, as if they had arrived on the listener."""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)
