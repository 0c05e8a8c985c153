"""Kafka Streams and Kafka Connect 4.4 on Ottla, each held against the same run on Apache
Kafka 4.4 (tests/kafka_ref): what a user of either framework sees must not depend on which
of the two serves it.

Streams: an application that re-keys page views by page (a repartition topic) and counts
them per page in one-minute windows of event time (a windowed state store and its
changelog), under exactly_once_v2, as two instances on 3 Ottla brokers (transaction log
and offsets topic on 3 replicas, min ISR 2); one instance is SIGKILLed mid-run and
restarted. Its committed output (read_committed, the last count per page and window) must
be exactly what the same application writes on Kafka for the same input, with no count
ever going backwards; and until the kill neither instance may leave RUNNING, since on
Kafka nothing else moves a task (a producer-sequence bug once fenced Ottla's stream
threads here: a batch skipping ahead of one still being verified was appended).

Connect: a distributed worker with its config, offset and status topics on the cluster
runs a file source -> topic -> file sink pipeline (this package's own small file
connectors: connect-file is not served by the registry here) while lines are appended,
and is restarted mid-run; the sink file must end equal to the source file.

Without a JDK or, when Kafka is not installed yet, Maven, these tests fail; they never
skip."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import KRaftCluster
from tests.kafka_ref.cluster import single_node
from tests.kafka_ref.install import InstallError
from tests.streams_connect import (
    SINK_CONNECTOR,
    SOURCE_CONNECTOR,
    ConnectWorker,
    JavaProcess,
    JavaProcessError,
    StreamsInstance,
    classpath,
    java_problem,
)

pytestmark = pytest.mark.timeout(400)


@dataclass(frozen=True)
class Platform:
    """Where a scenario runs: a bootstrap and the replication its topics get there."""

    name: str
    bootstrap: str
    replication_factor: int
    topic_configs: dict[str, str] = field(default_factory=dict)


# --- the clusters --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def java_classes() -> str:
    """The compiled Streams application and connectors (and Kafka's jars): without a JDK
    or Maven the tests fail with the reason."""
    problem = java_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    try:
        return classpath()
    except InstallError as e:
        failure = e
    pytest.fail(f"Apache Kafka 4.4 could not be installed (make kafka-ref): {failure}",
                pytrace=False)


@pytest.fixture(scope="module")
def kafka(java_classes: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """Apache Kafka 4.4, one combined node: the reference."""
    with single_node(tmp_path_factory.mktemp("kafka")) as node:
        yield Platform("kafka", node.bootstrap, 1)


@pytest.fixture(scope="module")
def ottla(java_classes: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """Ottla: 1 controller and 3 brokers, transactions and group offsets on 3 replicas."""
    cluster = KRaftCluster(str(tmp_path_factory.mktemp("ottla")), controllers=1, brokers=3,
                           broker_props={"transaction.state.log.replication.factor": "3",
                                         "transaction.state.log.min.isr": "2",
                                         "offsets.topic.replication.factor": "3",
                                         "group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield Platform("ottla", cluster.bootstrap, 3, {"min.insync.replicas": "2"})
    finally:
        cluster.stop()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def create_topics(platform: Platform, partitions: int, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": platform.bootstrap})
    futures = admin.create_topics([
        NewTopic(name, partitions, platform.replication_factor, config=platform.topic_configs)
        for name in names], operation_timeout=30)
    for future in futures.values():
        future.result(60)


class TopicReader:
    """A read_committed reader of a whole topic from its start, without a group: every
    committed record, in order per partition."""

    def __init__(self, platform: Platform, topic: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": platform.bootstrap,
                                  "group.id": unique("reader"),
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                              for p in range(partitions)])
        self.records: list[tuple[str | None, str]] = []

    def poll(self) -> None:
        for message in self.consumer.consume(1000, timeout=0.2):
            if message.error():
                raise AssertionError(f"reading {message.topic()}: {message.error()}")
            key = message.key()
            self.records.append((key.decode() if key is not None else None,
                                 message.value().decode()))

    def read_to_end(self, topic: str, timeout: float = 30.0) -> list[tuple[str | None, str]]:
        """Everything in partition 0 of a topic no transaction writes to, up to its end."""
        _, end = self.consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        deadline = time.monotonic() + timeout
        while len(self.records) < end and time.monotonic() < deadline:
            self.poll()
        return self.records

    def close(self) -> None:
        self.consumer.close()


def wait_while_running(condition: Callable[[], bool], processes: list[JavaProcess],
                       timeout: float, what: Callable[[], str]) -> None:
    """Until ``condition()``; every process in ``processes`` must stay up meanwhile (one
    that exits, or reports an error, fails the wait with its log)."""
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            process.drain()
            failed = [e for e in process.events if e["event"] == "error"]
            if not process.running or failed:
                raise JavaProcessError(f"while waiting for {what()}: {process.name} "
                                       f"{'failed' if failed else 'exited'}"
                                       + process.report())
        if time.monotonic() > deadline:
            raise JavaProcessError(f"timed out after {timeout:g} s waiting for {what()}"
                                   + "".join(p.report() for p in processes))


# --- Kafka Streams -------------------------------------------------------------------------

VIEWS = 6000
PARTITIONS = 4
EPOCH_MS = (int(time.time()) // 3600 - 1) * 3_600_000
"""Event time of the first page view: the start of the hour before the module's import.
Recent enough that no broker's time-based retention touches the changelogs; the same for
both runs, so that both compute the same windows."""


def page_views() -> list[tuple[str, str, int]]:
    """(user, page, event time in ms): 100 ms apart with up to 5 s of jitter either way, so
    some arrive after later ones (the windows' grace keeps them), over about 10 minutes."""
    rng = random.Random(4404)
    return [(f"user-{rng.randrange(40)}", f"page-{rng.randrange(12)}",
             EPOCH_MS + i * 100 + rng.randrange(-5000, 5000)) for i in range(VIEWS)]


def expected_counts() -> dict[str, int]:
    """What the application must end with: views per page per one-minute window."""
    return dict(Counter(f"{page}@{ts - ts % 60_000}" for _, page, ts in page_views()))


@dataclass
class StreamsRun:
    counts: dict[str, int]
    """The last committed count of every page and window."""
    history: dict[str, list[int]]
    """Every committed count of each page and window, in the order written."""
    counted_at_kill: int
    unsettled_before_kill: list[tuple[str, str]]
    """(instance, state) of every state change after both instances ran with tasks and
    before the kill: a rebalance nobody caused (a fenced producer, a lost member)."""
    why_unsettled: list[str]
    """The instances' log lines that say why they rebalanced before the kill, if they did."""
    seconds: float


def produce_page_views(platform: Platform, topic: str, errors: list[str]) -> None:
    """The page views at about 600 a second, so that the run lasts a while; keyed by user
    with Kafka's Java partitioner, so both runs place them alike."""
    producer = Producer({"bootstrap.servers": platform.bootstrap, "acks": "all",
                         "enable.idempotence": True, "partitioner": "murmur2_random",
                         "linger.ms": 5})

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))
    for i, (user, page, ts) in enumerate(page_views()):
        producer.produce(topic, key=user, value=page, timestamp=ts, on_delivery=delivered)
        if i % 150 == 149:
            producer.poll(0)
            time.sleep(0.25)  # pacing the input, not waiting for a state
    if producer.flush(60):
        errors.append("page views still unacknowledged after 60 s")


def run_windowed_counts(platform: Platform, base: Path) -> StreamsRun:
    """Two instances of the application; once both process and some counts are committed,
    one is SIGKILLed and restarted at once; until every view is counted."""
    started = time.monotonic()
    input_topic, output_topic = unique("page-views"), unique("page-counts")
    create_topics(platform, PARTITIONS, input_topic, output_topic)
    config = {
        "application.id": unique("page-counts-app"),
        "bootstrap.servers": platform.bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "replication.factor": str(platform.replication_factor),
        **{f"topic.{k}": v for k, v in platform.topic_configs.items()},
        "num.stream.threads": "1",
        # A dead instance's tasks move after 10 s, not the default 45 s.
        "main.consumer.session.timeout.ms": "10000",
        "main.consumer.heartbeat.interval.ms": "2000",
    }
    instances = [StreamsInstance(base / name, name, input_topic, output_topic, config)
                 for name in ("instance-a", "instance-b")]
    victim = instances[1]
    output = TopicReader(platform, output_topic, PARTITIONS)
    history: dict[str, list[int]] = defaultdict(list)
    read = [0]

    def counted() -> int:
        """Views counted in the committed output so far (the last count of each window)."""
        output.poll()
        for key, value in output.records[read[0]:]:
            history[key].append(int(value))
        read[0] = len(output.records)
        return sum(counts[-1] for counts in history.values())

    producer_errors: list[str] = []
    producer = threading.Thread(target=produce_page_views,
                                args=(platform, input_topic, producer_errors))
    try:
        for instance in instances:
            instance.start()
        wait_while_running(lambda: all(i.active_tasks() for i in instances), instances, 120,
                           lambda: f"both instances RUNNING with tasks: "
                                   f"{[i.state() for i in instances]}")
        settled = [len(i.events) for i in instances]
        producer.start()
        wait_while_running(lambda: counted() >= VIEWS // 4, instances, 120,
                           lambda: f"a quarter of the views counted ({counted()})")
        unsettled = [(i.name, e["state"]) for i, mark in zip(instances, settled)
                     for e in i.events[mark:] if e["event"] == "state"]
        why_unsettled = rebalance_reasons(instances) if unsettled else []
        wait_while_running(lambda: bool(victim.active_tasks()), instances, 60,
                           lambda: f"the victim processing ({victim.state()})")
        counted_at_kill = counted()
        victim.kill9()
        victim.start()
        expected = expected_counts()
        wait_while_running(
            lambda: counted() >= VIEWS and set(history) == set(expected)
            and victim.state() is not None and victim.state()["state"] == "RUNNING",
            instances, 240,
            lambda: f"all {VIEWS} views counted in {len(expected)} windows (counted: "
                    f"{counted()} in {len(history)}) and the restarted instance RUNNING "
                    f"({victim.state()})")
        producer.join(60)
        assert producer_errors == []
        for instance in instances:
            instance.stop()
    finally:
        for instance in instances:
            instance.stop(check=False)
        output.close()
    return StreamsRun({key: counts[-1] for key, counts in history.items()}, dict(history),
                      counted_at_kill, unsettled, why_unsettled, time.monotonic() - started)


REBALANCE_CAUSES = ("Request joining group due to", "Fenced", "fenced", "TaskMigrated",
                    "Attempt to heartbeat failed", "ERROR", "WARN")


def rebalance_reasons(instances: list[StreamsInstance]) -> list[str]:
    """The lines of the instances' logs that say why a group rebalanced or a task moved."""
    return [f"{i.name}: {line[:400]}" for i in instances
            for line in i.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
            if any(cause in line for cause in REBALANCE_CAUSES)]


def assert_counts_never_go_back(run: StreamsRun) -> None:
    """Committed counts of a window only grow: a crash must neither lose counted views
    nor count one twice, even for a moment."""
    backwards = {key: counts for key, counts in run.history.items()
                 if counts != sorted(counts)}
    assert backwards == {}


@pytest.fixture(scope="module")
def kafka_windowed_counts(kafka: Platform, tmp_path_factory: pytest.TempPathFactory
                          ) -> StreamsRun:
    return run_windowed_counts(kafka, tmp_path_factory.mktemp("streams-on-kafka"))


@pytest.fixture(scope="module")
def ottla_windowed_counts(kafka_windowed_counts: StreamsRun, ottla: Platform,
                          tmp_path_factory: pytest.TempPathFactory) -> StreamsRun:
    """Ottla's run, after Kafka's: the two never compete for the machine's cores."""
    return run_windowed_counts(ottla, tmp_path_factory.mktemp("streams-on-ottla"))


def test_windowed_counts_on_kafka_survive_a_killed_instance(kafka_windowed_counts) -> None:
    """The reference: on Kafka, exactly_once_v2 counts every view once across the kill,
    and nothing but the kill moves tasks."""
    run = kafka_windowed_counts
    assert 0 < run.counted_at_kill < VIEWS
    assert run.counts == expected_counts()
    assert_counts_never_go_back(run)
    assert run.unsettled_before_kill == [], "\n".join(run.why_unsettled)


def test_windowed_counts_on_ottla_equal_kafkas(ottla_windowed_counts,
                                               kafka_windowed_counts) -> None:
    """The same application and input on 3 Ottla brokers, an instance SIGKILLed mid-run
    and restarted: its committed output is Kafka's, count for count."""
    run, reference = ottla_windowed_counts, kafka_windowed_counts
    assert 0 < run.counted_at_kill < VIEWS
    differ = {k: (run.counts.get(k), v) for k, v in reference.counts.items()
              if run.counts.get(k) != v}
    assert differ == {}, "windows whose count differs, as (Ottla's, Kafka's)"
    assert run.counts == reference.counts
    assert_counts_never_go_back(run)


def test_streams_on_ottla_rebalance_only_when_an_instance_dies(ottla_windowed_counts) -> None:
    """Until the kill, both instances stay RUNNING, as on Kafka: no stream thread's
    producer is fenced and no task moves when no instance failed."""
    run = ottla_windowed_counts
    assert run.unsettled_before_kill == [], "\n".join(run.why_unsettled)


# --- Kafka Connect -------------------------------------------------------------------------

LINES = 2400


def source_lines() -> list[str]:
    """Lines of varied length, some not ASCII: source offsets are byte positions."""
    return [f"line {i:05d} {'é' * (i % 5)}{'x' * (i % 41)}" for i in range(LINES)]


def line_count(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def append_lines(path: Path, lines: list[str], stop: threading.Event) -> None:
    """Append lines in small bursts, as a log grows, until all are written."""
    for start in range(0, len(lines), 40):
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in lines[start:start + 40]))
        if stop.wait(0.05):  # pacing the input, not waiting for a state
            return


@pytest.mark.parametrize("where", ["kafka", "ottla"])
def test_a_file_pipeline_survives_a_connect_worker_restart(where, request, tmp_path) -> None:
    """A file source and a file sink on one distributed worker; lines are appended while it
    runs and the worker is stopped and started again mid-run: the sink file ends equal
    to the source file, and the topic holds each line once."""
    platform: Platform = request.getfixturevalue(where)
    topic = unique("lines")
    create_topics(platform, 1, topic)
    lines = source_lines()
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.write_text("".join(f"{line}\n" for line in lines[:LINES // 3]), encoding="utf-8")
    worker = ConnectWorker(tmp_path / "worker", platform.bootstrap, unique("connect"),
                           platform.replication_factor)
    stop = threading.Event()
    appender = threading.Thread(target=append_lines,
                                args=(source, lines[LINES // 3:], stop))
    try:
        worker.start()
        worker.wait_serving()
        worker.put_connector("lines-in", {"connector.class": SOURCE_CONNECTOR, "tasks.max": "1",
                                          "file": str(source), "topic": topic})
        worker.put_connector("lines-out", {"connector.class": SINK_CONNECTOR, "tasks.max": "1",
                                           "file": str(sink), "topics": topic})
        worker.wait_running("lines-in")
        worker.wait_running("lines-out")
        appender.start()
        worker.wait_for(lambda: line_count(sink) >= LINES // 2, 120,
                        f"half the lines in the sink ({line_count(sink)})")
        worker.stop()
        at_restart = line_count(sink)
        worker.start()
        worker.wait_serving()
        worker.wait_running("lines-in")
        worker.wait_running("lines-out")
        appender.join(60)
        worker.wait_for(lambda: line_count(sink) >= LINES, 120,
                        f"{LINES} lines in the sink ({line_count(sink)})")
        worker.stop()
    finally:
        stop.set()
        worker.stop(check=False)
    assert at_restart < LINES, "the restart came after the end of the input"
    assert sink.read_text(encoding="utf-8") == source.read_text(encoding="utf-8")
    reader = TopicReader(platform, topic, 1)
    try:
        assert [value for _, value in reader.read_to_end(topic)] == lines
    finally:
        reader.close()

