"""What the controller side of a node gives its request handlers (Kafka's ControllerApis
and its collaborators): the controller channel (run an operation on the active
controller, forward to it), the metadata quorum's Raft driver, the metadata image and the
node's config."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ottla.broker.quota.controller_mutation_quota import (
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from ottla.common.server_config import KafkaConfig
from ottla.controller.results import ControllerError, PartitionChangeQuota
from ottla.metadata.image import MetadataImage
from ottla.protocol.errors import ErrorCode
from ottla.protocol.requests import RequestContext
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

    mutation_quotas: ControllerMutationQuotaManager | None = None
    """The clients' ``controller_mutation_rate`` buckets (KIP-599), kept by this node and
    fed from the metadata image."""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @staticmethod
    def session_ms() -> int:
        """When a broker registered or heartbeated, on the monotonic clock the active
        controller measures broker sessions with (``ControllerDriver.session_ms``)."""
        return int(time.monotonic() * 1000)

    def kraft_version(self) -> int:
        """The metadata quorum's ``kraft.version``, a finalized feature of ApiVersions."""
        return self.raft.kraft_version

    def mutation_quota(self, ctx: RequestContext, strict_since: int
                       ) -> ControllerMutationQuota:
        """The request's controller mutation quota: strict from the version that knows
        THROTTLING_QUOTA_EXCEEDED, permissive before (Kafka's ``newQuotaFor``)."""
        strict = ctx.api_version >= strict_since
        if self.mutation_quotas is None:
            return ControllerMutationQuota(None, strict)
        return self.mutation_quotas.quota_for(ctx.principal.name, ctx.client_id or "",
                                              strict, self.now_ms())

    def partition_change_quota(self, quota: ControllerMutationQuota) -> PartitionChangeQuota:
        """``quota`` as the controller's managers charge it."""
        def apply(partitions: int) -> None:
            try:
                quota.record(partitions, self.now_ms())
            except ThrottlingQuotaExceeded as e:
                raise ControllerError(ErrorCode.throttling_quota_exceeded, str(e)) from None
        return apply

    def throttle(self, ctx: RequestContext, quota: ControllerMutationQuota) -> int:
        """The throttle time the response carries. A client that sent the request here
        itself is also muted for it (KIP-219); a forwarded one is muted by its broker,
        which takes the time from the response (Kafka's
        ``sendResponseMaybeThrottleWithControllerQuota``)."""
        throttle_ms = quota.throttle(self.now_ms())
        if not ctx.forwarded and throttle_ms > ctx.throttle_ms:
            ctx.throttle_ms, ctx.throttle_quota = throttle_ms, "ControllerMutation"
        return throttle_ms
