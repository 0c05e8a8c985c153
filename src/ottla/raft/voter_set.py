"""Who votes in the metadata quorum: Kafka's ReplicaKey, VoterSet and VoterSetHistory.

With ``kraft.version`` 1 (KIP-853) the voter set is log state: each VotersRecord a
leader appends replaces the whole set, and takes effect as soon as it is in a replica's
log, committed or not. A replica's set is therefore the last VotersRecord of its log, or,
before any, the one of its snapshot (or of the bootstrap checkpoint ``storage format``
wrote); truncating the log reverts to the set before. ``kraft.version`` 0 keeps the set
fixed (``controller.quorum.voters``).

A voter is named by its node id and the directory id of its metadata log
(``meta.properties`` ``directory.id``): a node whose disk was replaced comes back with a
new directory id and is not the voter it was (it lost its log and its votes), until it
is added again. Voters of a static set have no directory id and match any.

``kraft.version`` itself is log state too (a KRaftVersionRecord): a static quorum's
leader upgrades it to 1 by appending the record with the static voters' VotersRecord,
and from then on the voters are those of the log.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    id: int
    directory_id: str | None = None
    """Kafka's directory uuid (base64 text); None where unknown (``kraft.version`` 0)."""

    def __str__(self) -> str:
        return f"{self.id}" if self.directory_id is None else f"{self.id}:{self.directory_id}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener a voter serves the quorum on (VotersRecord's Endpoint)."""

    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()
    kraft_versions: tuple[int, int] = (0, 1)
    """The ``kraft.version`` range the voter supports (min, max)."""

    def is_voter(self, key: ReplicaKey) -> bool:
        """Kafka's VoterNode.isVoter: the ids match, and so do the directory ids when this
        voter has one."""
        return self.key.id == key.id and (
            self.key.directory_id is None or self.key.directory_id == key.directory_id)


@dataclass(frozen=True)
class VoterSet:
    """An immutable set of voters, at most one per node id."""

    nodes: tuple[VoterNode, ...]
    ids: frozenset[int] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        nodes = tuple(sorted(self.nodes, key=lambda n: n.key.id))
        if len({n.key.id for n in nodes}) != len(nodes):
            raise ValueError(f"two voters with one id: {nodes}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "ids", frozenset(n.key.id for n in nodes))

    @classmethod
    def of(cls, voters: VoterSet | set[int] | frozenset[int] | list[int]) -> VoterSet:
        """A set from plain ids (a static quorum's ``controller.quorum.voters``)."""
        if isinstance(voters, VoterSet):
            return voters
        return cls(tuple(VoterNode(ReplicaKey(v)) for v in voters))

    @property
    def keys(self) -> tuple[ReplicaKey, ...]:
        return tuple(n.key for n in self.nodes)

    @property
    def majority(self) -> int:
        return len(self.nodes) // 2 + 1

    def node(self, node_id: int) -> VoterNode | None:
        for n in self.nodes:
            if n.key.id == node_id:
                return n
        return None

    def is_voter(self, key: ReplicaKey) -> bool:
        node = self.node(key.id)
        return node is not None and node.is_voter(key)

    def is_only_voter(self, key: ReplicaKey) -> bool:
        return len(self.nodes) == 1 and self.is_voter(key)

    def add_voter(self, voter: VoterNode) -> VoterSet | None:
        """None when the id already votes."""
        if voter.key.id in self.ids:
            return None
        return VoterSet((*self.nodes, voter))

    def remove_voter(self, key: ReplicaKey) -> VoterSet | None:
        """None unless ``key`` (id and directory id) is a voter and not the only one: as
        in Kafka, the last voter cannot be removed."""
        node = self.node(key.id)
        if node is None or node.key != key or len(self.nodes) == 1:
            return None
        return VoterSet(tuple(n for n in self.nodes if n.key.id != key.id))

    def update_voter(self, voter: VoterNode) -> VoterSet | None:
        """The same voter with new endpoints or kraft versions; None if not a voter."""
        old = self.node(voter.key.id)
        if old is None or not old.is_voter(voter.key):
            return None
        return VoterSet(tuple(voter if n.key.id == voter.key.id else n for n in self.nodes))

    def update_voter_ignoring_directory_id(self, voter: VoterNode) -> VoterSet | None:
        """Kafka's updateVoterIgnoringDirectoryId: a static quorum's voter (no directory
        id in the set) replaced by ``voter``, directory id included; None if not a voter."""
        if voter.key.id not in self.ids:
            return None
        return VoterSet(tuple(voter if n.key.id == voter.key.id else n for n in self.nodes))

    def needs_update(self, local: VoterNode) -> bool:
        """Kafka's voterNodeNeedsUpdate: ``local`` is a voter here, but the set says
        other endpoints (in any order), kraft versions or directory id."""
        node = self.node(local.key.id)
        return node is not None and node.is_voter(local.key) and (
            node.key, frozenset(node.endpoints), node.kraft_versions) != (
            local.key, frozenset(local.endpoints), local.kraft_versions)

    def supports(self, kraft_version: int) -> bool:
        """Every voter supports ``kraft_version`` (Kafka's supportsVersion)."""
        return all(low <= kraft_version <= high for low, high in
                   (n.kraft_versions for n in self.nodes))

    def __str__(self) -> str:
        return "{" + ", ".join(str(k) for k in self.keys) + "}"


class LogHistory(Generic[T]):
    """A value at each offset of a log (Kafka's LogHistory): a base (the snapshot's or
    the bootstrap's) and the values the log's control records set, by offset, so that
    truncation reverts to the value before and a reader can ask which was in force at an
    offset. The voter set and ``kraft.version`` each keep one."""

    def __init__(self, base: T) -> None:
        self._base = base
        self._offsets: list[int] = []
        self._sets: list[T] = []

    def add_at(self, offset: int, voters: T) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"voter set at {offset} is not after {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def last(self) -> T:
        return self._sets[-1] if self._sets else self._base

    def last_offset(self) -> int:
        """Where the last set was written; -1 when it is the base (committed)."""
        return self._offsets[-1] if self._offsets else -1

    def value_at(self, offset: int) -> T:
        """The set in force at ``offset``: the last one written at or before it."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._sets[i - 1] if i else self._base

    def truncate_new_entries(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: sets written there or later are gone."""
        i = bisect.bisect_left(self._offsets, end_offset)
        del self._offsets[i:]
        del self._sets[i:]

    def truncate_old_entries(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (a snapshot): the set in force just
        before it becomes the base."""
        i = bisect.bisect_left(self._offsets, start_offset)
        if i:
            self._base = self._sets[i - 1]
            del self._offsets[:i]
            del self._sets[:i]

    def reset(self, base: T) -> None:
        """An installed snapshot replaces the whole log."""
        self._base = base
        self._offsets.clear()
        self._sets.clear()


VoterSetHistory = LogHistory[VoterSet]
