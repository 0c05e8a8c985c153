"""Share sessions (KIP-932, Kafka's ShareSessionCache): what each member fetches from
this broker, and the epoch its next ShareFetch or ShareAcknowledge must carry.

A member opens its session with epoch 0 (a session it had is replaced: its records go
back), sends each next request with the epoch the last one left, and closes it with -1.
A session also ends when the connection it last fetched on closes (Kafka 4.1+'s share
session disconnect listener).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ottla.common.topics import TopicIdPartition
from ottla.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

Connection = tuple[str, str, int]
"""(listener, client host, client port)."""


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    """The epoch the member's next request must carry."""
    partitions: set[TopicIdPartition] = field(default_factory=set)
    connection: Connection | None = None
    """Where the member last fetched: the session ends when that connection closes."""


class ShareSessionCache:
    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __iter__(self) -> Iterator[ShareSession]:
        return iter(list(self._sessions.values()))

    def get_or_open(self, group_id: str, member_id: str, epoch: int
                    ) -> tuple[ShareSession, ShareSession | None]:
        """The member's session for a request at ``epoch``, and the session it replaced
        (epoch 0 opens a new one). Raises SHARE_SESSION_NOT_FOUND or
        INVALID_SHARE_SESSION_EPOCH as Kafka does."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            replaced = self._sessions.pop(key, None)
            session = self._sessions[key] = ShareSession(group_id, member_id, 1)
            return session, replaced
        session = self._sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found,
                             f"No share session for member {member_id}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch,
                             f"Expected share session epoch {session.epoch}, got {epoch}")
        if epoch != FINAL_EPOCH:
            session.epoch += 1
        return session, None

    def is_open(self, session: ShareSession) -> bool:
        return self._sessions.get((session.group_id, session.member_id)) is session

    def remove(self, session: ShareSession) -> None:
        if self._sessions.get((session.group_id, session.member_id)) is session:
            del self._sessions[(session.group_id, session.member_id)]

    def on(self, connection: Connection) -> list[ShareSession]:
        """The sessions last used on ``connection``."""
        return [s for s in self._sessions.values() if s.connection == connection]

    def has_members(self, group_id: str) -> bool:
        return any(s.group_id == group_id for s in self._sessions.values())
