"""The KRaft RPCs as the consensus core sees them, free of wire encoding.

Field meanings follow Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
UpdateRaftVoter schemas (KIP-595, pre-vote from KIP-996, KIP-853); the driver maps them
to the kio wire types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ottla.protocol.errors import ErrorCode
from ottla.raft.voter_set import VoterNode, VoterSet


class RecordSerde(Protocol):
    """How the records of an entry become the values of a batch's records, and back."""

    def encode(self, record: Any) -> bytes: ...

    def decode(self, value: bytes) -> Any: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry: the epoch of the leader that appended it, its payload and how many
    offsets it spans. An entry is a record batch: the controller writes each operation's
    records as one, applied all or nothing, and Raft never splits it (followers fetch,
    truncate and commit at entry boundaries). A ``None`` payload is the leader-change
    control record a new leader writes first (a ``LeaderChange`` when the voters come
    with it)."""

    epoch: int
    payload: Any
    count: int = 1
    raw: bytes | None = field(default=None, compare=False, repr=False)
    """The record batch as the leader wrote it, when the entry came from a log on disk
    or the wire: a follower appends these bytes as they are."""


@dataclass(frozen=True, slots=True)
class KRaftVersionUpgrade:
    """The payload of the control batch that upgrades ``kraft.version`` (KIP-853): a
    KRaftVersionRecord and the VotersRecord of the voters from then on, as Kafka's
    leader writes them in one batch (an entry of two offsets)."""

    kraft_version: int
    voters: VoterSet


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The payload of the control batch a new leader starts its epoch with when it
    also writes the voters (Kafka's LeaderState.appendStartOfEpochControlRecords, at
    ``kraft.version`` 1 when the set is only the bootstrap's or says otherwise of this
    leader): the LeaderChangeMessage, a KRaftVersionRecord and the VotersRecord with
    the leader as it is now, one entry of three offsets. A leader change alone is the
    ``None`` payload."""

    kraft_version: int
    voters: VoterSet


def written_voters(payload: Any) -> VoterSet | None:
    """The voter set an entry's payload writes (a VotersRecord, alone or in an upgrade
    or leader-change batch), if any."""
    if isinstance(payload, VoterSet):
        return payload
    if isinstance(payload, (KRaftVersionUpgrade, LeaderChange)):
        return payload.voters
    return None


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_id: int
    epoch: int  # the epoch the candidate would lead (current + 1 for a pre-vote)
    last_epoch: int
    end_offset: int
    pre_vote: bool
    candidate_directory_id: str | None = None
    voter_directory_id: str | None = None
    """The directory id the candidate knows the receiving voter by (KIP-853): a
    replica whose disk was replaced has another and must not vote as the old one."""


@dataclass(frozen=True, slots=True)
class VoteResponse:
    voter_id: int
    epoch: int
    granted: bool
    pre_vote: bool
    leader_id: int | None = None  # who the voter follows, when it knows


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    leader_id: int
    epoch: int
    voter_directory_id: str | None = None
    """The directory id the leader knows the receiving voter by (KIP-853): a replaced
    disk is not that voter and ignores it."""


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A resigning leader asks the voters to elect a successor without waiting."""

    leader_id: int
    epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """From a follower (a voter) or an observer (a broker). With ``max_wait_ms`` the
    leader parks a fetch that finds nothing new until entries arrive, the high watermark
    moves or the wait ends (long polling)."""

    replica_id: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    known_high_watermark: int = -1
    """The high watermark the fetcher last heard (KIP-1166): a parked fetch is answered
    at once when the leader's is newer."""
    replica_directory_id: str | None = None
    """So the leader knows the fetcher by its ReplicaKey (KIP-853): a voter's id with
    another directory id is an observer."""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    leader_id: int | None
    epoch: int
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    base_offset: int = 0
    diverging_epoch: int = -1  # with diverging_end_offset: truncate and fetch again
    diverging_end_offset: int = -1
    snapshot_end_offset: int = -1  # the fetch offset is gone: fetch this snapshot
    snapshot_epoch: int = -1
    error: str | None = None  # "fenced_leader_epoch", "not_leader", "timeout"


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """A voter tells the leader of ``epoch`` where it listens and which kraft.version
    range it supports (UpdateRaftVoter, KIP-853): its node in the voter set, as it
    would have it."""

    voter: VoterNode
    epoch: int


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error: ErrorCode
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class VoterApiVersionsRequest:
    """The leader asks a voter it is adding (an ApiVersions to the endpoint the
    AddRaftVoter named, as Kafka's AddVoterHandler) which kraft.version range it
    supports."""

    voter: VoterNode


@dataclass(frozen=True, slots=True)
class VoterApiVersionsResponse:
    """The node's ApiVersions answer (a replica answers for its node in tests)."""

    error: ErrorCode
    kraft_versions: tuple[int, int] | None
    """Its ``kraft.version`` SupportedFeatureKey (min, max); None when it names none."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state machine at ``end_offset`` (exclusive), whose last entry had ``epoch``.
    Written as a ``<end_offset>-<epoch>.checkpoint`` file by the driver."""

    end_offset: int
    epoch: int
    data: Any
    voters: VoterSet | None = None
    """The voter set in force at ``end_offset`` (``kraft.version`` 1: Kafka writes it
    in every snapshot's header); None for a static quorum."""


@dataclass(frozen=True, slots=True)
class SnapshotWrite:
    """A snapshot the replica decided to keep, for the driver to make durable: writing
    and fsyncing a file is too slow for the event loop, so the driver does it on a worker
    thread and hands it back (``RaftReplica.snapshot_written``); only then does the log
    adopt it, so the log never relies on a file that is not on disk yet."""

    snapshot: Snapshot
    install: bool
    """True: the leader's snapshot replaces the whole log (a follower far behind);
    False: this replica's own snapshot replaces the log before its end."""


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    epoch: int
    end_offset: int
    snapshot_epoch: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    leader_id: int | None
    epoch: int
    snapshot: Snapshot | None  # None: that snapshot is gone, fetch again


@dataclass(frozen=True, slots=True)
class Outgoing:
    destination: int
    message: Any


@dataclass
class Committed:
    """Entries newly committed (below the high watermark), for the state machine; a
    ``snapshot`` replaces the state machine's state before the entries are applied."""

    base_offset: int
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
