"""What a controller operation returns, and how it refuses (Kafka's ControllerResult and
the errors of its control managers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ottla.protocol.errors import ErrorCode, KafkaError

MAX_RECORDS_PER_USER_OP = 10_000
"""Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the most records one operation a
client asks for may write (the controller's own, such as fencing, are not bounded)."""


@dataclass(slots=True)
class ControllerResult:
    """The records an operation writes and the response its caller gets once they are
    committed. An operation reads the image and changes nothing itself."""

    records: list[Any]
    response: Any = None


class ControllerError(KafkaError):
    """An operation refused with a Kafka error; raised out of a whole operation, it is
    the error of everything the request named."""

    message: str

    def __init__(self, code: ErrorCode | int, message: str) -> None:
        super().__init__(code, message)


class BatchTooLarge(ControllerError):
    """An operation that would write more than ``MAX_RECORDS_PER_USER_OP`` records."""

    def __init__(self, message: str = "Unable to perform excessively large batch operation."
                 ) -> None:
        super().__init__(ErrorCode.policy_violation, message)


class NotControllerError(ControllerError):
    """This node is not (or no longer) the active controller: ask the active one."""

    def __init__(self, message: str = "This node is not the active controller") -> None:
        super().__init__(ErrorCode.not_controller, message)


TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_NEW_PARTITIONS = "Excessively large number of additional partitions per request."
"""Kafka 4.4's words when CreateTopics and CreatePartitions ask for too much."""


def check_user_op(records: int, message: str | None = None) -> None:
    """Refuse an operation a client asked for before it makes more records than Kafka
    allows one (and before the work of making them: a request for 2^31-1 partitions is
    33 bytes)."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise BatchTooLarge() if message is None else BatchTooLarge(message)


PartitionChangeQuota = Callable[[int], None]
"""Charges the requesting client's controller mutation quota (KIP-599) for partitions
created or deleted, raising ``ControllerError`` THROTTLING_QUOTA_EXCEEDED when its bucket
is empty (Kafka's ``ControllerRequestContext.applyPartitionChangeQuota``). The request's
driver makes it; the sans-I/O managers only call it where Kafka's do."""


def no_quota(partitions: int) -> None:
    """Operations the controller starts itself, and clients without a quota."""
