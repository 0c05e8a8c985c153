"""Incremental fetch sessions (KIP-227).

A client that fetches many partitions can open a session with a full fetch (epoch 0); the
broker remembers the partitions and what it last told the client about each. Later
fetches (epoch 1, 2, ...) name only partitions whose fetch position changed plus those to
forget, and the response carries only partitions with something new: records, a moved
high watermark, log start offset or last stable offset, or an error.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uuid

    from ottla.metadata.image import TopicImage

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_IDLE_MS = 120_000


@dataclass(slots=True)
class CachedPartition:
    topic: str
    topic_id: Any
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    # What the last response told the client:
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def resolve_name(self, topics_by_id: Mapping[uuid.UUID, TopicImage]) -> None:
        """A partition cached under a topic id the broker did not know yet (a follower may
        learn of a new partition first) takes the topic's name once it is known; the
        client names it again only when its position moves, so nothing else would."""
        if not self.topic and self.topic_id is not None:
            known = topics_by_id.get(self.topic_id)
            if known is not None:
                self.topic = known.name

    def would_respond(self, data: dict[str, Any]) -> bool:
        """Whether a partition's fresh data differs from what the client already knows."""
        return bool(data.get("error_code", 0) != 0 or data.get("records")
                    or data.get("diverging_epoch")
                    or data["high_watermark"] != self.high_watermark
                    or data["last_stable_offset"] != self.last_stable_offset
                    or data["log_start_offset"] != self.log_start_offset)

    def must_respond(self, data: dict[str, Any]) -> bool:
        """``would_respond``, remembering what is sent."""
        changed = self.would_respond(data)
        self.high_watermark = data["high_watermark"]
        self.last_stable_offset = data["last_stable_offset"]
        self.log_start_offset = data["log_start_offset"]
        return changed


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int
    """The epoch the next incremental fetch must carry."""
    partitions: OrderedDict[tuple[Any, int], CachedPartition]
    uses_topic_ids: bool
    last_used_ms: int


class FetchSessionCache:
    def __init__(self, max_slots: int, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self.rng = rng or random.Random()
        self._ids = itertools.count(1)
        self.evictions = 0
        """Sessions evicted to make room for a new one (Kafka's
        IncrementalFetchSessionEvictionsPerSec)."""

    def partitions_cached(self) -> int:
        """The partitions all sessions hold (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(session.partitions) for session in self.sessions.values())

    def create(self, partitions: OrderedDict[tuple[Any, int], CachedPartition],
               uses_topic_ids: bool, now_ms: int) -> int:
        """Cache a new session; INVALID_SESSION_ID if there is no room for it."""
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots:
            oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
            if now_ms - oldest.last_used_ms < EVICTION_IDLE_MS:
                return INVALID_SESSION_ID
            del self.sessions[oldest.id]
            self.evictions += 1
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(session_id, 1, partitions, uses_topic_ids,
                                                 now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self.rng.randrange(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)


PartitionKey = tuple[Any, int]
FetchEntry = dict[str, Any]


class FetchSessionHandler:
    """The fetching side of a session (Kafka's ``FetchSessionHandler``), as followers use
    it: the first fetch is full and opens a session; later ones name only partitions whose
    fetch position changed, and those left out since the last one are forgotten. Any
    session error, a failed request or a broker without room for a session starts over
    with a full fetch."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[PartitionKey, FetchEntry] = {}
        """What the broker's session holds for each partition."""
        self._next: dict[PartitionKey, FetchEntry] = {}
        self._full = True

    def build(self, entries: dict[PartitionKey, FetchEntry]
              ) -> tuple[int, int, dict[PartitionKey, FetchEntry], list[PartitionKey]]:
        """(session id, epoch, partitions to send, partitions to forget) for a fetch of
        ``entries``."""
        self._next = dict(entries)
        self._full = self.session_id == INVALID_SESSION_ID
        if self._full:
            return INVALID_SESSION_ID, INITIAL_EPOCH, dict(entries), []
        changed = {key: entry for key, entry in entries.items() if self.sent.get(key) != entry}
        forgotten = [key for key in self.sent if key not in entries]
        return self.session_id, self.epoch, changed, forgotten

    def handle_response(self, error_code: int, session_id: int) -> None:
        """After the response to the last ``build``: follow the session, or drop it."""
        if error_code != 0 or session_id == INVALID_SESSION_ID:
            self.reset()
            return
        if self._full:
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch == 2**31 - 1 else self.epoch + 1
        self.sent = self._next

    def reset(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}
