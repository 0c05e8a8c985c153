"""Runs a RaftReplica on the event loop: the KRaft client of one node.

The replica decides; this driver does the I/O around each decision, in this order:

1. the quorum state (epoch, vote, leader) is written to ``quorum-state`` and fsynced
   before any message the decision produced leaves, so a vote is never given twice;
2. messages go out as Kafka's KRaft RPCs: requests on a connection per peer (a second
   one for Fetch and FetchSnapshot, which the leader may hold while it long-polls), and
   answers to inbound requests back on the connection they came on;
3. newly committed entries are handed to the listeners (the metadata publisher, then
   the controller), in offset order;
4. appended entries are fsynced on a worker thread, coalesced, and the replica is told
   once they are durable: only then does a leader count them, or a follower fetch on;
5. a snapshot the replica decided to take or install is written and fsynced on a worker
   thread too, and handed back once it is durable: only then does the log adopt it
   (``FileRaftLog.begin_snapshot`` / ``write_snapshot`` / ``end_snapshot``).

Voters are ``controller.quorum.voters`` (``kraft.version`` 0, static), or the voter set
of the metadata log (``kraft.version`` 1, KIP-853: first the one ``storage format`` wrote
into the bootstrap snapshot, or the static voters' once UpdateFeatures upgraded
``kraft.version``, then the VotersRecords of the log), whose endpoints say
where each voter listens; a node that is not among them (a broker, a controller not
added yet) runs the replica as an observer and finds the leader through the voters or
``controller.quorum.bootstrap.servers``. AddRaftVoter, RemoveRaftVoter and
UpdateRaftVoter are decided by the replica and answered here once it says so. Timers
tick every 20 ms.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from ottla import __version__
from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.client.security import ClientSecurity
from ottla.common.files import write_atomically
from ottla.common.steady_clock import SteadyClock
from ottla.common.tasks import within
from ottla.metadata import records as metadata_records
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.raft import wire
from ottla.raft.file_log import FileRaftLog
from ottla.raft.messages import (
    Committed,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Outgoing,
    Snapshot,
    VoterApiVersionsRequest,
    VoterApiVersionsResponse,
    VoteRequest,
    VoteResponse,
)
from ottla.raft.quorum import RaftConfig, RaftReplica, Role, VoterChangeResult
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet
from ottla.raft.voters_record import snapshot_voters

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
TICK_SECONDS = 0.02
_RESPONSES = {VoteRequest: VoteResponse, FetchRequest: FetchResponse,
              FetchSnapshotRequest: FetchSnapshotResponse}


class RaftListener(Protocol):
    def on_committed(self, committed: Committed) -> None:
        """Entries (after a snapshot to load first, if any) the quorum has committed."""

    def on_raft_state(self) -> None:
        """The epoch, the leader or this replica's role changed."""


def read_quorum_state(directory: str) -> tuple[int, int | None]:
    """(epoch, voted for) from ``quorum-state``; (0, None) when there is none."""
    try:
        with open(os.path.join(directory, QUORUM_STATE_FILE), encoding="utf-8") as f:
            state = json.load(f)
    except (FileNotFoundError, ValueError):
        return 0, None
    voted = int(state.get("votedId", -1))
    return int(state.get("leaderEpoch", 0)), None if voted < 0 else voted


class RaftDriver:
    def __init__(self, *, node_id: int, cluster_id: str,
                 voters: dict[int, tuple[str, int]] | VoterSet,
                 directory: str, config: RaftConfig | None = None,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None,
                 on_fault: Callable[[BaseException], None] | None = None,
                 security: ClientSecurity | None = None, directory_id: str | None = None,
                 bootstrap_servers: list[tuple[str, int]] | None = None,
                 listener: str = "CONTROLLER") -> None:
        """``voters``: ``controller.quorum.voters`` (a static quorum), or the bootstrap
        voter set of a dynamic one (``kraft.version`` 1; empty for a controller formatted
        without initial controllers, which then needs ``bootstrap_servers``)."""
        dynamic = isinstance(voters, VoterSet)
        if not voters and not (dynamic and bootstrap_servers):
            raise ValueError("the metadata quorum has no voters: set controller.quorum.voters "
                             "or controller.quorum.bootstrap.servers")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.static_voters = {} if isinstance(voters, VoterSet) else dict(voters)
        """controller.quorum.voters: where each voter of a static quorum listens."""
        self.listener = listener
        """The controller listener name whose endpoint a voter set's voter is reached on."""
        self.bootstrap = {-2 - i: address for i, address in enumerate(bootstrap_servers or [])}
        """controller.quorum.bootstrap.servers, by the ids the replica knows them by
        (negative, as Kafka's bootstrap nodes)."""
        self.learned: dict[int, tuple[str, int]] = {}
        """Where a leader said it listens (Fetch's NodeEndpoints): an observer may know
        no voter's endpoint yet."""
        self.directory = directory
        self.config = config or RaftConfig()
        self.clock = clock
        """The wall clock: the metadata log's batch timestamps."""
        self.timers = SteadyClock(clock)
        """The replica's clock (its election, fetch and check-quorum timers, the fetch
        times DescribeQuorum reports): a step of the wall clock neither makes a leader
        resign nor a follower give up on its leader at once, nor holds an election."""
        self.rng = rng or random.Random()
        self.on_fault = on_fault
        self.security = security
        """TLS and SASL towards the other voters' controller listener."""
        self.listeners: list[RaftListener] = []
        voter_set = voters if isinstance(voters, VoterSet) else VoterSet(tuple(
            VoterNode(ReplicaKey(v), (Endpoint(listener, host, port),))
            for v, (host, port) in voters.items()))
        self.log = FileRaftLog(directory, node_id, sorted(voter_set.ids), metadata_records,
                               clock)
        epoch, voted = read_quorum_state(directory)
        self.replica = RaftReplica(node_id, voter_set, self.log, self.rng, self.config,
                                   epoch=epoch, voted_for=voted, directory_id=directory_id,
                                   kraft_version=1 if dynamic else 0,
                                   bootstrap_servers=tuple(sorted(self.bootstrap,
                                                                  reverse=True)))
        self._voter_changes: dict[int, asyncio.Future[VoterChangeResult]] = {}
        self._change_ids = itertools.count(1)
        self._persisted: dict[str, Any] | None = None
        self._inbound: dict[tuple[int, type], asyncio.Future[Any]] = {}
        self._clients: dict[tuple[int, str], AsyncClient] = {}
        self._state_seen: tuple[int, int | None, Role] | None = None
        self._flushing = False
        self.flush_timer: Callable[[Callable[[], None]], None] | None = None
        """Times each segment fsync of the metadata log (the node's LogFlushStats, when
        it serves metrics)."""
        self._kicked = False
        self._ticker: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._stopped = False

    def now_ms(self) -> int:
        return self.timers.ms()

    # --- what the node asks ------------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.replica.is_voter

    @property
    def is_leader(self) -> bool:
        return self.replica.is_leader and not self._stopped

    @property
    def epoch(self) -> int:
        return self.replica.epoch

    @property
    def leader_id(self) -> int | None:
        return self.replica.leader_id

    @property
    def high_watermark(self) -> int:
        return self.replica.high_watermark

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def kraft_version(self) -> int:
        """The quorum's ``kraft.version`` (the last in the log, committed or not)."""
        return self.replica.kraft_version

    def upgrade_kraft_version(self, version: int, validate_only: bool
                              ) -> tuple[ErrorCode, str | None]:
        """UpdateFeatures of ``kraft.version``: decided by the replica, which appends the
        upgrade at once; the caller's own records, appended after it, commit after it."""
        if self._stopped:
            return ErrorCode.unknown_server_error, None
        try:
            result = self.replica.upgrade_kraft_version(version, self.now_ms(), validate_only)
        except Exception as e:  # the log refused the append (EIO, ENOSPC): as in a step
            self._fail(e)
            return ErrorCode.unknown_server_error, None
        self._kick()
        return result

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """Where each current voter listens."""
        result = {}
        for v in self.replica.voters:
            address = self.address(v)
            if address is not None:
                result[v] = address
        return result

    def address(self, node: int) -> tuple[str, int] | None:
        """Where to reach ``node``: controller.quorum.voters, the endpoint of its
        listener in the voter set, or a bootstrap server."""
        if node in self.static_voters:
            return self.static_voters[node]
        if node in self.bootstrap:
            return self.bootstrap[node]
        voter = self.replica.voter_set.node(node)
        if voter is None or not voter.endpoints:
            return self.learned.get(node)
        endpoint = next((e for e in voter.endpoints if e.listener == self.listener),
                        voter.endpoints[0])
        return endpoint.host, endpoint.port

    def voter_endpoints(self) -> dict[int, list[tuple[str, str, int]]]:
        """Per voter, its (listener, host, port) endpoints, for DescribeQuorum."""
        if self.static_voters and self.replica.kraft_version < 1:
            return {v: [(self.listener, host, port)]
                    for v, (host, port) in self.static_voters.items()}
        return {n.key.id: [(e.listener, e.host, e.port) for e in n.endpoints]
                for n in self.replica.voter_set.nodes}

    async def add_voter(self, voter: VoterNode, timeout_s: float,
                        ack_when_committed: bool = True) -> VoterChangeResult:
        """AddRaftVoter: answered when the new set commits, or is appended when not
        ``ack_when_committed`` (or refused at once)."""
        return await self._change(lambda i: self.replica.add_voter(
            i, voter, self.now_ms(), ack_when_committed), timeout_s)

    async def remove_voter(self, key: ReplicaKey, timeout_s: float) -> VoterChangeResult:
        return await self._change(lambda i: self.replica.remove_voter(i, key, self.now_ms()),
                                  timeout_s)

    async def update_voter(self, voter: VoterNode) -> VoterChangeResult:
        return await self._change(
            lambda i: self.replica.update_voter(i, voter, self.now_ms()), 0)

    async def _change(self, decide: Callable[[int], VoterChangeResult | None],
                      timeout_s: float) -> VoterChangeResult:
        request_id = next(self._change_ids)
        if self._stopped:
            return VoterChangeResult(request_id, ErrorCode.not_leader_or_follower)
        future = self._voter_changes[request_id] = \
            asyncio.get_running_loop().create_future()
        immediate: list[VoterChangeResult | None] = []

        def step() -> list[Outgoing]:
            immediate.append(decide(request_id))
            return self.replica.take_outgoing()  # an AddRaftVoter's ApiVersions
        self._advance(step)
        if immediate and immediate[0] is not None:
            self._voter_changes.pop(request_id, None)
            return immediate[0]
        try:
            return await within(asyncio.shield(future), max(timeout_s, 0.001))
        except TimeoutError:  # as Kafka's expired change: the error, no message
            return VoterChangeResult(request_id, ErrorCode.request_timed_out)
        finally:
            self._voter_changes.pop(request_id, None)

    def set_local_listeners(self, endpoints: list[tuple[str, str, int]]) -> None:
        """Where this node listens for the quorum, as (listener, host, port), which a
        voter tells the leader with UpdateRaftVoter; before ``start``."""
        self.replica.local_listeners = tuple(Endpoint(*e) for e in endpoints)

    def start(self) -> None:
        self._advance(lambda: self.replica.start(self.now_ms()))
        self._schedule_tick()

    def propose(self, records: list[Any]) -> int | None:
        """Append ``records`` as one batch if this replica leads: its base offset (the
        records are committed when the high watermark passes them), else None."""
        if self._stopped:
            return None
        try:
            base = self.replica.propose(tuple(records), self.now_ms(), len(records))
        except Exception as e:
            # The log refused the append (EIO, ENOSPC): the node halts, as on any error of
            # a step (Kafka's Raft IO thread hands it to the fatal fault handler).
            self._fail(e)
            return None
        if base is not None:
            self._kick()
        return base

    def create_snapshot(self, end_offset: int, data: bytes) -> bool:
        """Start writing ``data`` (a checkpoint file of the state at ``end_offset``) to
        become the log's prefix once durable; False if that is not newer than the current
        snapshot or not applied, or a snapshot is still being written."""
        if self._stopped or not self.replica.create_snapshot(end_offset, data):
            return False
        self._maybe_write_snapshot()
        return True

    async def resign(self) -> None:
        """A leader shutting down hands leadership over (EndQuorumEpoch) at once."""
        if self.replica.is_leader:
            self._advance(lambda: self.replica.resign(self.now_ms()))
            await asyncio.sleep(0)  # let the requests leave

    async def stop(self) -> None:
        self._stopped = True
        for listener in self.listeners:
            listener.on_raft_state()  # no longer leading: a controller renounces
        if self._ticker is not None:
            self._ticker.cancel()
        for future in self._inbound.values():
            if not future.done():
                future.set_result(None)
        for request_id, change in self._voter_changes.items():
            if not change.done():
                change.set_result(VoterChangeResult(request_id,
                                                    ErrorCode.not_leader_or_follower))
        for task in list(self._tasks):
            task.cancel()
        for client in self._clients.values():
            await client.close()
        self.log.flush()
        self.log.close()

    # --- the step after every decision -----------------------------------------------------

    def _advance(self, decide: Callable[[], list[Outgoing]]) -> None:
        """Let the replica decide (handle a message, tick), then do the I/O it asks for.
        Anything the replica raises (a broken invariant) stops the node. The time between
        two of these is the replica's idle time (``poll-idle-ratio-avg``), as Kafka's Raft
        thread's wait on its queue, in the clock's fractions of milliseconds."""
        if self._stopped:
            return
        metrics = self.replica.metrics
        metrics.poll_ended(self.timers() * 1000)
        try:
            try:
                outgoing = decide()
            except Exception as e:
                self._fail(e)
                return
            self._step(outgoing)
        finally:
            metrics.poll_started(self.timers() * 1000)

    def _step(self, outgoing: list[Outgoing]) -> None:
        if self._stopped:
            return
        replica = self.replica
        try:
            state = replica.quorum_state()
            if state != self._persisted:
                self._write_quorum_state()
                self._persisted = state
            for out in outgoing:
                self._dispatch(out)
            for result in replica.take_voter_change_results():
                future = self._voter_changes.get(result.request_id)
                if future is not None and not future.done():
                    future.set_result(result)
            committed = replica.take_committed()
            if committed is not None:
                for listener in self.listeners:
                    listener.on_committed(committed)
            seen = (replica.epoch, replica.leader_id, replica.role)
            if seen != self._state_seen:
                self._state_seen = seen
                log.info("Metadata quorum: epoch %d, leader %s, this node %s", seen[0],
                         seen[1], seen[2].value)
                for listener in self.listeners:
                    listener.on_raft_state()
            self._maybe_flush()
            self._maybe_write_snapshot()
        except Exception as e:
            self._fail(e)

    def _fail(self, error: BaseException) -> None:
        log.critical("The metadata quorum failed: %s", error, exc_info=error)
        self._stopped = True
        for listener in self.listeners:
            listener.on_raft_state()  # no longer leading: a controller renounces
        if self.on_fault is not None:
            self.on_fault(error)

    def _write_quorum_state(self) -> None:
        r = self.replica
        state = {"clusterId": self.cluster_id,
                 "leaderId": -1 if r.leader_id is None else r.leader_id,
                 "leaderEpoch": r.epoch,
                 "votedId": -1 if r.voted_for is None else r.voted_for,
                 "appliedOffset": 0,
                 "currentVoters": [{"voterId": v} for v in sorted(r.voters)],
                 "data_version": 0}
        write_atomically(os.path.join(self.directory, QUORUM_STATE_FILE),
                         json.dumps(state).encode())

    def _kick(self) -> None:
        """Tick once soon: a proposal or a flush may have made progress possible."""
        if not self._kicked and not self._stopped:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._on_kick)

    def _on_kick(self) -> None:
        self._kicked = False
        self._advance(lambda: self.replica.tick(self.now_ms()))

    def _schedule_tick(self) -> None:
        if not self._stopped:
            self._ticker = asyncio.get_running_loop().call_later(TICK_SECONDS, self._on_tick)

    def _on_tick(self) -> None:
        try:
            self._advance(lambda: self.replica.tick(self.now_ms()))
        finally:
            self._schedule_tick()

    def _off_loop(self, work: Callable[[], None],
                  then: Callable[[Exception | None], None]) -> None:
        """Run blocking ``work`` (fsyncs, a snapshot write) on a worker thread, then
        ``then`` back on the loop with what it raised, if anything (which must stop the
        node, not leave a flush or a snapshot under way for ever)."""
        future = asyncio.get_running_loop().run_in_executor(None, work)

        def done(f: asyncio.Future[None]) -> None:
            try:
                f.result()
            except Exception as e:
                then(e)
                return
            then(None)
        future.add_done_callback(done)

    def _maybe_flush(self) -> None:
        if self._flushing or self.log.flushed_end_offset >= self.log.end_offset:
            return
        self._flushing = True
        token = self.log.begin_flush()

        def then(error: Exception | None) -> None:
            self._flushing = False
            self.log.end_flush(token, durable=error is None)
            if self._stopped:
                return
            if error is not None:
                self._fail(error)
            else:
                self._kick()
        self._off_loop(lambda: self.log.fsync(token, self.flush_timer), then)

    def _maybe_write_snapshot(self) -> None:
        """Write the snapshot the replica decided on, if any; the replica has the log
        adopt it only once it is durable (a stop in between leaves it to the next start,
        which finds the directory as a crash would)."""
        write = self.replica.take_snapshot_write()
        if write is None:
            return
        files = self.log.begin_snapshot(write)

        def then(error: Exception | None) -> None:
            if self._stopped:
                return
            if error is not None:
                self._fail(error)
                return
            if write.install:
                log.info("Installed the leader's metadata snapshot at offset %d",
                         write.snapshot.end_offset)
            self._advance(lambda: self.replica.snapshot_written(write, self.now_ms()))
        self._off_loop(lambda: self.log.write_snapshot(files), then)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- outbound ------------------------------------------------------------------------

    def _client(self, node: int, lane: str) -> AsyncClient | None:
        """The connection to a voter; Fetch traffic has a lane of its own, so a fetch the
        leader holds does not delay a vote."""
        address = self.address(node)
        if address is None:
            return None
        client = self._clients.get((node, lane))
        if client is not None and (client.host, client.port) != address:
            self._spawn(client.close())  # the voter moved (a replaced node)
            client = None
        if client is None:
            client = self._clients[(node, lane)] = AsyncClient(
                address[0], address[1], client_id=f"raft-{self.node_id}-{lane}",
                connect_timeout=self.config.request_timeout_ms / 1000,
                security=self.security)
        return client

    def _dispatch(self, out: Outgoing) -> None:
        message = out.message
        if isinstance(message, (VoteResponse, FetchResponse, FetchSnapshotResponse)):
            future = self._inbound.pop((out.destination, type(message)), None)
            if future is not None and not future.done():
                future.set_result(message)
            return
        if isinstance(message, FetchSnapshotRequest):
            self._spawn(self._fetch_snapshot(out.destination, message))
        elif isinstance(message, VoterApiVersionsRequest):
            self._spawn(self._voter_api_versions(message))
        else:
            self._spawn(self._send(out.destination, message))

    async def _send(self, destination: int, message: Any) -> None:
        lane = "fetch" if isinstance(message, FetchRequest) else "control"
        client = self._client(destination, lane)
        if client is None:
            return
        api_key, version, body = wire.encode_request(message, destination, self.cluster_id)
        if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
            own = self.address(self.node_id)
            if own is not None:  # KIP-853: where the new leader listens
                body["leader_endpoints"] = [{"name": self.listener, "host": own[0],
                                             "port": own[1]}]
        timeout = (self.config.request_timeout_ms + getattr(message, "max_wait_ms", 0)) / 1000
        try:
            response = await client.request(api_key, version, body, timeout)
        except (NodeUnavailable, TimeoutError, OSError):
            return  # the replica's timers deal with silence
        for node, host, port in wire.node_endpoints(response):
            self.learned[node] = (host, port)
        reply = wire.decode_response(message, destination, response, self.log.serde)
        if reply is not None:
            self._advance(lambda: self.replica.handle(destination, reply, self.now_ms()))

    async def _voter_api_versions(self, request: VoterApiVersionsRequest) -> None:
        """ApiVersions to a voter being added, at its endpoint of the controller
        listener (as Kafka's AddVoterHandler); the replica decides on the kraft.version
        range it names. A connection that fails is BROKER_NOT_AVAILABLE, as Kafka's
        network channel says of a disconnect."""
        voter = request.voter
        endpoint = next((e for e in voter.endpoints if e.listener == self.listener), None)
        error, versions = ErrorCode.broker_not_available, None
        if endpoint is not None:
            client = AsyncClient(endpoint.host, endpoint.port,
                                 client_id=f"raft-{self.node_id}-add-voter",
                                 connect_timeout=self.config.request_timeout_ms / 1000,
                                 security=self.security)
            try:
                # v4, as Kafka's client: below it a range starting at 0 is left out.
                response = await client.request(
                    ApiKey.API_VERSIONS, 4, {"client_software_name": "ottla",
                                             "client_software_version": __version__},
                    self.config.request_timeout_ms / 1000)
                error = ErrorCode(response.error_code)
                versions = next(((f.min_version, f.max_version)
                                 for f in response.supported_features or ()
                                 if f.name == "kraft.version"), None)
            except TimeoutError:
                error = ErrorCode.request_timed_out
            except (NodeUnavailable, OSError):
                pass
            finally:
                await client.close()
        answer = VoterApiVersionsResponse(error, versions)
        self._advance(lambda: self.replica.handle(voter.key.id, answer, self.now_ms()))

    async def _fetch_snapshot(self, destination: int, request: FetchSnapshotRequest) -> None:
        """Download the snapshot chunk by chunk, then hand it to the replica whole."""
        client = self._client(destination, "fetch")
        if client is None:
            return
        data = bytearray()
        leader: int | None = destination
        epoch = request.epoch
        snapshot: Snapshot | None = None
        try:
            while True:
                response = await client.request(
                    ApiKey.FETCH_SNAPSHOT, wire.FETCH_SNAPSHOT_VERSION,
                    wire.fetch_snapshot_request(request, self.cluster_id, len(data)),
                    self.config.request_timeout_ms / 1000)
                chunk = wire.snapshot_chunk(response)
                if chunk is None:
                    return
                leader, epoch, snapshot_id, size, part = chunk
                if snapshot_id is None:
                    snapshot = None
                    break
                data += part
                if len(data) >= size or not part:
                    snapshot = Snapshot(snapshot_id.end_offset, snapshot_id.epoch, bytes(data),
                                        snapshot_voters(data))
                    break
        except (NodeUnavailable, TimeoutError, OSError):
            return
        reply = FetchSnapshotResponse(leader, epoch, snapshot)
        self._advance(lambda: self.replica.handle(destination, reply, self.now_ms()))

    # --- inbound (the controller listener's KRaft handlers call these) ---------------------

    async def inbound(self, api_key: int, request: Any) -> dict[str, Any]:
        """Answer a KRaft RPC from another replica."""
        if getattr(request, "cluster_id", None) not in (None, self.cluster_id):
            return self._error_response(api_key, ErrorCode.inconsistent_cluster_id)
        decoded = wire.decode_request(api_key, request)
        if decoded is None or self._stopped:
            return self._error_response(api_key, ErrorCode.invalid_request)
        source, message = decoded
        for name, host, port in wire.leader_endpoints(request):
            if name == self.listener:
                self.learned[source] = (host, port)
        response_type = _RESPONSES.get(type(message))
        future: asyncio.Future[Any] | None = None
        if response_type is not None:
            key = (source, response_type)
            previous = self._inbound.pop(key, None)
            if previous is not None and not previous.done():
                previous.set_result(None)  # a newer request from the same replica
            future = self._inbound[key] = asyncio.get_running_loop().create_future()
        self._advance(lambda: self.replica.handle(source, message, self.now_ms()))
        if future is None:
            return wire.epoch_response(self.replica.leader_id, self.replica.epoch)
        wait = (getattr(message, "max_wait_ms", 0) + self.config.request_timeout_ms) / 1000
        try:
            reply = await within(asyncio.shield(future), wait)
        except TimeoutError:
            reply = None
        finally:
            if self._inbound.get((source, response_type)) is future:  # type: ignore[misc]
                del self._inbound[(source, response_type)]  # type: ignore[misc]
        return self._response(api_key, request, reply)

    def _response(self, api_key: int, request: Any, reply: Any) -> dict[str, Any]:
        if api_key == ApiKey.VOTE:
            return wire.vote_response(reply)
        if api_key == ApiKey.FETCH:
            if reply is None:
                reply = FetchResponse(self.replica.leader_id, self.replica.epoch,
                                      self.replica.high_watermark, error="timeout")
            leader = self.replica.leader_id
            address = self.address(leader) if leader is not None else None
            return wire.fetch_response(reply, self.log.start_offset,
                                       leader_endpoint=None if address is None or leader is None
                                       else (leader, *address))
        p = request.topics[0].partitions[0]
        return wire.fetch_snapshot_response(reply, p.position, request.max_bytes)

    def _error_response(self, api_key: int, error: ErrorCode) -> dict[str, Any]:
        epoch, leader = self.replica.epoch, self.replica.leader_id
        if api_key == ApiKey.VOTE:
            return wire.vote_response(None, error)
        if api_key == ApiKey.FETCH:
            return wire.fetch_response(None, self.log.start_offset, error)
        if api_key == ApiKey.FETCH_SNAPSHOT:
            return wire.fetch_snapshot_response(None, 0, 0, error)
        return wire.epoch_response(leader, epoch, error)
