"""``ottla transactions``: kafka-transactions.sh, to look at transactions and to find and
abort hanging ones, over raw wire requests as Kafka's Admin client sends them.

- ``list [--duration-filter MS] [--state S] [--producer-id ID]``: ListTransactions to
  every broker (each answers for the ``__transaction_state`` partitions it leads).
  ``--state`` and ``--producer-id`` are Ottla's: the filters the API has, which Kafka's
  tool leaves out.
- ``describe --transactional-id ID``: DescribeTransactions to the id's coordinator.
- ``describe-producers --topic T --partition P [--broker-id B]``: DescribeProducers to
  the leader (or broker B), with each producer's open transaction's start offset.
- ``abort --topic T --partition P --start-offset O`` (or ``--producer-id``,
  ``--producer-epoch``, ``--coordinator-epoch``): an ABORT marker through WriteTxnMarkers
  to the partition's leader, as ``Admin.abortTransaction`` writes it.
- ``find-hanging --broker-id B | --topic T [--partition P]
  [--max-transaction-timeout MIN]``: transactions open on a partition for longer than
  the longest transaction timeout whose coordinator does not know them (no
  transactional id has the producer id, or its transaction does not include the
  partition): nothing will ever end them, and they hold back read_committed consumers.
"""

from __future__ import annotations

import argparse
import dataclasses
import struct
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ottla.cli.common import connect, fail, read_command_config
from ottla.protocol.api import ApiKey
from ottla.protocol.codec import skip_tagged_fields
from ottla.protocol.errors import ErrorCode
from ottla.protocol.varint import read_unsigned_varint

CLIENT_ID = "ottla-transactions"
RETRY_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
TRANSACTION_KEY = 1
DEBUG_HINT = " Enable debug logging for additional detail."

_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator, ErrorCode.not_leader_or_follower,
              ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition,
              ErrorCode.replica_not_available, ErrorCode.broker_not_available}

T = TypeVar("T")


class ToolError(Exception):
    """A failure the tool reports on stderr and exits 1 for, in Kafka's words."""


class Retry(Exception):
    """A retriable answer: ask again (Kafka's admin client does) until the deadline."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transactions", help="analyze and repair transactional state "
                       "(kafka-transactions.sh)",
                       description="This tool is used to analyze the transactional state of "
                       "producers in the cluster. It can be used to detect and recover from "
                       "hanging transactions.")
    _common(p, argparse.SUPPRESS)
    commands = p.add_subparsers(dest="transactions_command", metavar="COMMAND")
    commands.required = True

    ls = commands.add_parser("list", help="list transactions")
    ls.add_argument("--duration-filter", type=int, help="Duration (in millis) to filter by: "
                    "if < 0, all transactions will be returned; otherwise, only transactions "
                    "running longer than this duration will be returned")
    ls.add_argument("--state", action="append", default=[],
                    help="only transactions in this state (repeatable; e.g. Ongoing)")
    ls.add_argument("--producer-id", type=int, action="append", default=[],
                    help="only transactions of this producer id (repeatable)")
    ls.set_defaults(run=run, action=_list)

    describe = commands.add_parser("describe", help="describe the state of an active "
                                   "transactional-id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    describe.set_defaults(run=run, action=_describe)

    producers = commands.add_parser("describe-producers", help="describe the states of "
                                    "active producers for a topic partition")
    producers.add_argument("--broker-id", type=int, help="optional broker id to describe "
                           "the producer state on a specific replica")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    producers.set_defaults(run=run, action=_describe_producers)

    abort = commands.add_parser("abort", help="abort a hanging transaction (requires "
                                "administrative privileges)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    abort.add_argument("--start-offset", type=int,
                       help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, help="producer id")
    abort.add_argument("--producer-epoch", type=int, help="producer epoch")
    abort.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    abort.set_defaults(run=run, action=_abort)

    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int,
                         help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15,
                         help="maximum transaction timeout in minutes to limit the scope of "
                              "the search (15 minutes by default)")
    hanging.add_argument("--topic", help="topic name to limit search to (required if "
                         "--partition is specified)")
    hanging.add_argument("--partition", type=int, help="partition number")
    hanging.set_defaults(run=run, action=_find_hanging)

    for command in (ls, describe, producers, abort, hanging):
        _common(command, argparse.SUPPRESS)  # also accepted after the command
    p.set_defaults(bootstrap_server=None, command_config=None)


def _common(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--bootstrap-server", metavar="host:port", default=default,
                   help="hostname and port for the broker to connect to")
    p.add_argument("--command-config", metavar="FILE", default=default,
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")


def run(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        return fail("--bootstrap-server is required")
    try:
        with Cluster(args.bootstrap_server, read_command_config(args.command_config)) as cluster:
            args.action(cluster, args)
    except ToolError as e:
        print(e, file=sys.stderr)
        return 1
    except (OSError, ConnectionError) as e:
        return fail(str(e))
    return 0


# --- the cluster, over raw requests --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    replicas: tuple[int, ...]


class Cluster:
    """The brokers and partitions (Metadata), with a connection per broker asked."""

    def __init__(self, bootstrap: str, properties: dict[str, str] | None = None) -> None:
        self.properties = properties or {}
        self.bootstrap = connect(bootstrap, CLIENT_ID, self.properties)
        self.clients: dict[int, Any] = {}
        self.brokers: dict[int, str] = {}
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}
        self.refresh(None)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self.clients.values():
            client.close()
        self.bootstrap.close()

    def refresh(self, topics: list[str] | None) -> None:
        """Brokers and the partitions of ``topics`` (every topic for None)."""
        response = self.bootstrap.request(ApiKey.METADATA, 12, {
            "topics": None if topics is None else [{"name": t, "topic_id": None}
                                                   for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        for topic in response.topics:
            if topic.error_code == ErrorCode.none:
                for p in topic.partitions:
                    self.partitions[(topic.name, p.partition_index)] = PartitionInfo(
                        p.leader_id, tuple(p.replica_nodes))

    def client(self, node_id: int) -> Any:
        if node_id not in self.clients:
            if node_id not in self.brokers:
                raise Retry(f"broker {node_id} is not known")
            self.clients[node_id] = connect(self.brokers[node_id], CLIENT_ID, self.properties)
        return self.clients[node_id]

    def leader(self, topic: str, partition: int) -> int:
        self.refresh([topic])
        info = self.partitions.get((topic, partition))
        if info is None:
            raise ToolError(f"Topic partition {topic}-{partition} does not exist")
        if info.leader < 0:
            raise Retry(f"{topic}-{partition} has no leader")
        return info.leader

    def coordinator(self, key: str, key_type: int = TRANSACTION_KEY) -> int:
        """The node coordinating ``key`` (a transactional id, or a group id with
        ``key_type`` 0)."""
        found = self.bootstrap.request(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": key_type, "coordinator_keys": [key]})
        coordinator = found.coordinators[0]
        error = ErrorCode(coordinator.error_code)
        if error in _RETRIABLE:
            raise Retry(error.name)
        if error != ErrorCode.none:
            raise ToolError(f"{error.name}: {coordinator.error_message}")
        self.brokers[coordinator.node_id] = f"{coordinator.host}:{coordinator.port}"
        return int(coordinator.node_id)


def retrying(action: Callable[[], T], timeout_s: float = RETRY_TIMEOUT_S) -> T:
    """``action`` until it stops answering retriably (a coordinator loading, a leader
    moving), as the admin client retries; a ToolError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action()
        except Retry as e:
            if time.monotonic() >= deadline:
                raise ToolError(f"Timed out waiting for the cluster: {e}.") from e
            time.sleep(RETRY_BACKOFF_S)


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each column padded to its widest value
    and followed by a tab."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("".join(value.ljust(width) + "\t" for value, width in zip(row, widths,
                                                                       strict=True)))


def now_ms() -> int:
    return int(time.time() * 1000)


# --- list --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Listing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


def list_transactions(cluster: Cluster, states: list[str], producer_ids: list[int],
                      duration_ms: int = -1) -> list[Listing]:
    """ListTransactions to every broker."""
    listings = []
    for node_id in sorted(cluster.brokers):
        def ask(node_id: int = node_id) -> Any:
            response = cluster.client(node_id).request(ApiKey.LIST_TRANSACTIONS, 1, {
                "state_filters": states, "producer_id_filters": producer_ids,
                "duration_filter": duration_ms})
            error = ErrorCode(response.error_code)
            if error == ErrorCode.coordinator_load_in_progress:
                raise Retry(error.name)
            if error != ErrorCode.none:
                raise ToolError(f"Failed to list transactions: ListTransactions request to "
                                f"broker {node_id} failed with {error.name}.{DEBUG_HINT}")
            return response
        response = retrying(ask)
        listings += sorted((Listing(t.transactional_id, node_id, t.producer_id,
                                    t.transaction_state)
                            for t in response.transaction_states),
                           key=lambda listing: listing.transactional_id)
    return listings


def _list(cluster: Cluster, args: argparse.Namespace) -> None:
    duration = -1 if args.duration_filter is None else args.duration_filter
    rows = [[t.transactional_id, str(t.coordinator), str(t.producer_id), t.state]
            for t in list_transactions(cluster, args.state, args.producer_id, duration)]
    print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


# --- describe ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Description:
    error: ErrorCode
    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    coordinator: int = -1


def parse_describe_transactions(frame: bytes) -> list[Description]:
    """A DescribeTransactions v0 response frame (after the size), read by hand: kio
    refuses the TransactionStartTimeMs of -1 an id that has not begun a transaction
    has."""
    int16, int32, int64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
    pos = skip_tagged_fields(frame, 4) + 4  # correlation id, header tags, throttle time

    def string() -> str:
        nonlocal pos
        n, pos = read_unsigned_varint(frame, pos)
        value = bytes(frame[pos:pos + n - 1]).decode()
        pos += n - 1
        return value

    def number(kind: struct.Struct) -> int:
        nonlocal pos
        (value,) = kind.unpack_from(frame, pos)
        pos += kind.size
        return int(value)

    def count() -> int:
        nonlocal pos
        n, pos = read_unsigned_varint(frame, pos)
        return max(n - 1, 0)

    described = []
    for _ in range(count()):
        error = ErrorCode(number(int16))
        transactional_id, state = string(), string()
        timeout_ms, start_ms = number(int32), number(int64)
        producer_id, producer_epoch = number(int64), number(int16)
        partitions = []
        for _ in range(count()):
            topic = string()
            partitions += [(topic, number(int32)) for _ in range(count())]
            pos = skip_tagged_fields(frame, pos)
        pos = skip_tagged_fields(frame, pos)
        described.append(Description(error, transactional_id, state, timeout_ms, start_ms,
                                     producer_id, producer_epoch, tuple(partitions)))
    return described


def describe_transaction(cluster: Cluster, transactional_id: str) -> Description | None:
    """DescribeTransactions to the id's coordinator; None if the id is not found."""
    def ask() -> Description | None:
        node_id = cluster.coordinator(transactional_id)
        client = cluster.client(node_id)
        correlation_id = client.send(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                     {"transactional_ids": [transactional_id]})
        frame = client.recv_frame()
        if struct.unpack_from(">i", frame)[0] != correlation_id:
            raise ToolError("DescribeTransactions answered out of order")
        (found,) = parse_describe_transactions(frame)
        if found.error in _RETRIABLE:
            raise Retry(found.error.name)
        if found.error == ErrorCode.transactional_id_not_found:
            return None
        if found.error != ErrorCode.none:
            raise ToolError(f"Failed to describe transaction state of transactional-id "
                            f"`{transactional_id}`: DescribeTransactions request for "
                            f"transactionalId `{transactional_id}` failed due to unexpected "
                            f"error {found.error.name}.{DEBUG_HINT}")
        return dataclasses.replace(found, coordinator=node_id)
    return retrying(ask)


def _describe(cluster: Cluster, args: argparse.Namespace) -> None:
    tid = args.transactional_id
    found = describe_transaction(cluster, tid)
    if found is None:
        raise ToolError(f"Failed to describe transaction state of transactional-id `{tid}`: "
                        f"DescribeTransactions request for transactionalId `{tid}` failed "
                        f"because the ID could not be found.{DEBUG_HINT}")
    start = "None" if found.start_ms < 0 else str(found.start_ms)
    duration = "None" if found.start_ms < 0 else str(now_ms() - found.start_ms)
    print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                 "TransactionDurationMs", "TopicPartitions"],
                [[str(found.coordinator), tid, str(found.producer_id),
                  str(found.producer_epoch), found.state, str(found.timeout_ms), start,
                  duration, ",".join(f"{t}-{p}" for t, p in found.partitions)]])


# --- describe-producers ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int
    """-1: no transaction open."""


def describe_producers(cluster: Cluster, partitions: list[tuple[str, int]],
                       broker_id: int | None = None
                       ) -> dict[tuple[str, int], list[ProducerState]]:
    """DescribeProducers to each partition's leader (or to ``broker_id``)."""
    found: dict[tuple[str, int], list[ProducerState]] = {}
    remaining = list(partitions)

    def ask() -> None:
        by_broker: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for topic, index in remaining:
            node = broker_id if broker_id is not None else cluster.leader(topic, index)
            by_broker[node].append((topic, index))
        for node, tps in by_broker.items():
            topics: dict[str, list[int]] = defaultdict(list)
            for topic, index in tps:
                topics[topic].append(index)
            response = cluster.client(node).request(ApiKey.DESCRIBE_PRODUCERS, 0, {
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            for topic in response.topics:
                for p in topic.partitions:
                    error = ErrorCode(p.error_code)
                    tp = (topic.name, p.partition_index)
                    if error in _RETRIABLE and broker_id is None:
                        continue  # the leader moved: asked again
                    if error != ErrorCode.none:
                        where = f"broker {broker_id}" if broker_id is not None else "leader"
                        raise ToolError(f"Failed to describe producers for partition "
                                        f"{tp[0]}-{tp[1]} on {where}: "
                                        f"{p.error_message or error.name}.{DEBUG_HINT}")
                    found[tp] = [ProducerState(
                        s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence,
                        s.last_timestamp, s.current_txn_start_offset)
                        for s in p.active_producers]
                    remaining.remove(tp)
        if remaining:
            raise Retry(f"no leader answered for {remaining}")

    retrying(ask)
    return found


def _describe_producers(cluster: Cluster, args: argparse.Namespace) -> None:
    tp = (args.topic, args.partition)
    states = describe_producers(cluster, [tp], args.broker_id)[tp]
    print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset"],
                [[str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
                  str(s.last_sequence), str(s.last_timestamp),
                  "None" if s.txn_start_offset < 0 else str(s.txn_start_offset)]
                 for s in states])


# --- abort -------------------------------------------------------------------------------------

def abort_transaction(cluster: Cluster, topic: str, partition: int, producer_id: int,
                      producer_epoch: int, coordinator_epoch: int) -> None:
    """Admin.abortTransaction: an ABORT marker for the producer written by the partition's
    leader (WriteTxnMarkers, as the transaction coordinator sends it)."""
    spec = (f"AbortTransactionSpec(topicPartition={topic}-{partition}, "
            f"producerId={producer_id}, producerEpoch={producer_epoch}, "
            f"coordinatorEpoch={coordinator_epoch})")

    def ask() -> None:
        leader = cluster.leader(topic, partition)
        response = cluster.client(leader).request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": False, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        (answer,) = [p for m in response.markers for t in m.topics for p in t.partitions]
        error = ErrorCode(answer.error_code)
        if error in _RETRIABLE:
            raise Retry(error.name)
        if error != ErrorCode.none:
            raise ToolError(f"Failed to abort transaction {spec}: WriteTxnMarkers request "
                            f"with {spec} failed due to {error.name}.{DEBUG_HINT}")

    retrying(ask)


def _abort(cluster: Cluster, args: argparse.Namespace) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise ToolError("The transaction to abort must be identified either with "
                        "--start-offset (for brokers on 3.0 or above) or with --producer-id, "
                        "--producer-epoch, and --coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise ToolError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise ToolError("Missing required argument --coordinator-epoch")
        # A transaction that hung before its producer's first marker has no coordinator
        # epoch (-1): 0 is at most any leader epoch, as Kafka's tool reasons.
        abort_transaction(cluster, *tp, args.producer_id, args.producer_epoch,
                          max(args.coordinator_epoch, 0))
        return
    states = describe_producers(cluster, [tp])[tp]
    match = next((s for s in states if s.txn_start_offset == args.start_offset), None)
    if match is None:
        raise ToolError(f"Could not find any open transactions starting at offset "
                        f"{args.start_offset} on partition {tp[0]}-{tp[1]}")
    abort_transaction(cluster, *tp, match.producer_id, match.producer_epoch,
                      max(match.coordinator_epoch, 0))


# --- find-hanging ---------------------------------------------------------------------------

def find_hanging(cluster: Cluster, partitions: list[tuple[str, int]], broker_id: int | None,
                 max_timeout_ms: int
                 ) -> list[tuple[tuple[str, int], ProducerState]]:
    """Kafka's FindHangingTransactionsCommand: transactions open on a partition for longer
    than ``max_timeout_ms`` (no live transaction can be: the coordinator would have
    aborted it) whose producer id no transactional id has, or whose transactional id's
    current transaction does not include the partition."""
    now = now_ms()
    candidates = [(tp, s) for tp, states in describe_producers(
        cluster, partitions, broker_id).items() for s in states
        if s.txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms]
    if not candidates:
        return []
    producer_ids = sorted({s.producer_id for _, s in candidates})
    ids = {t.producer_id: t.transactional_id
           for t in list_transactions(cluster, [], producer_ids)}
    described = {tid: describe_transaction(cluster, tid) for tid in set(ids.values())}
    hanging = []
    for tp, state in candidates:
        tid = ids.get(state.producer_id)
        description = described.get(tid) if tid is not None else None
        if description is None or tp not in description.partitions:
            hanging.append((tp, state))
    return hanging


def _find_hanging(cluster: Cluster, args: argparse.Namespace) -> None:
    if args.topic is None and args.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id "
                        "to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    if args.topic is not None and args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        cluster.refresh(None if args.topic is None else [args.topic])
        partitions = sorted(tp for tp, info in cluster.partitions.items()
                            if (args.topic is None or tp[0] == args.topic)
                            and (args.broker_id is None or args.broker_id in info.replicas))
    hanging = find_hanging(cluster, partitions, args.broker_id,
                           args.max_transaction_timeout * 60_000)
    now = now_ms()
    print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                 "StartOffset", "LastTimestamp", "Duration(min)"],
                [[t, str(p), str(s.producer_id), str(s.producer_epoch),
                  str(s.coordinator_epoch), str(s.txn_start_offset), str(s.last_timestamp),
                  str((now - s.last_timestamp) // 60_000)] for (t, p), s in hanging])
