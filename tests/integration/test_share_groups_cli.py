"""``ottla share-groups`` and ``ottla console-share-consumer`` against a real node, with
librdkafka's ShareConsumer as the group's members: start offsets and lag (KIP-1226) that
drop as records are accepted, resetting the offsets of an empty group (refused while it
has members), deleting offsets and groups, listing and describing, and the console share
consumer reading a number of records and leaving the rest to others."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ottla.protocol.api import ApiKey
from tests.helpers import WireClient, wait_until
from tests.integration.test_admin import run_cli

TOPIC = "jobs"
FAST = {"group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "6000"}


@pytest.fixture
def node(make_ottla):
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic(TOPIC, partitions=1).topics[0].error_code == 0
    return node


def share_cli(node, *args: str):
    return run_cli("share-groups", "--bootstrap-server", node.bootstrap, *args)


def start_from_earliest(node, group: str) -> None:
    """share.auto.offset.reset=earliest: the group's share-partitions start at the log
    start, so records produced before a member's first fetch are delivered."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(node, count: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(first, first + count):
        producer.produce(TOPIC, str(i).encode(), partition=0)
    assert producer.flush(30) == 0


def member(node, group: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    return consumer


def receive(consumer: ShareConsumer, count: int, timeout: float = 60) -> list[Any]:
    """Poll until ``count`` records arrived (left unacknowledged)."""
    got: list[Any] = []

    def enough() -> bool:
        got.extend(m for m in consumer.poll(0.3) or [] if m.error() is None)
        return len(got) >= count
    wait_until(enough, timeout=timeout, message=lambda: f"{len(got)} of {count} records")
    return got


def accept(consumer: ShareConsumer, messages: list[Any], accepted: set[int]) -> None:
    """ACCEPT the records whose values are in ``accepted``, RELEASE the others, and wait
    for the broker to confirm."""
    for m in messages:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT if int(m.value()) in accepted
                             else AcknowledgeType.RELEASE)
    results = consumer.commit_sync(30)
    assert all(error is None for error in results.values()), results


def offset_rows(output: str, group: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.startswith(group + " ")]


def describe_offsets(node, group: str, *extra: str) -> list[list[str]]:
    described = share_cli(node, "--describe", "--group", group, *extra)
    assert described.returncode == 0, described.stdout + described.stderr
    return offset_rows(described.stdout, group)


def group_state(node, group: str) -> str:
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0].group_state


def leave(consumer: ShareConsumer, node, group: str) -> None:
    consumer.close()
    wait_until(lambda: group_state(node, group) == "Empty", timeout=30,
               message=f"group {group} to be empty")


def test_describe_shows_start_offset_and_lag_dropping_as_records_are_accepted(node) -> None:
    start_from_earliest(node, "lagging")
    produce(node, 10)
    consumer = member(node, "lagging")
    try:
        records = receive(consumer, 10)
        header = share_cli(node, "--describe", "--group", "lagging")
        assert header.stdout.splitlines()[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        assert describe_offsets(node, "lagging") == [["lagging", TOPIC, "0", "0", "10"]]
        # As Kafka, an acknowledgement is stored with the start offset as it was (0) and
        # the records it settled above it (4), which come off the lag: 10 - 0 - 4. The
        # start offset it moved (to 3) is stored with the next acknowledgement.
        accept(consumer, records, {0, 1, 2, 5})
        assert describe_offsets(node, "lagging") == [["lagging", TOPIC, "0", "0", "6"]]
        accept(consumer, receive(consumer, 6), set(range(10)))
        assert describe_offsets(node, "lagging", "--offsets") == [
            ["lagging", TOPIC, "0", "3", "0"]]  # 10 - 3 - 7
        produce(node, 4, first=10)
        verbose = describe_offsets(node, "lagging", "--verbose")
        assert verbose == [["lagging", TOPIC, "0", "0", "3", "4"]]  # leader epoch 0
    finally:
        consumer.close()


def consumed_and_left(node, group: str, count: int) -> None:
    """The group's only member accepts ``count`` records and leaves: the group is empty,
    nothing left to deliver (its start offset stored as it was before the member's one
    acknowledgement, 0, as Kafka stores it, and all ``count`` records settled above it)."""
    start_from_earliest(node, group)
    produce(node, count)
    consumer = member(node, group)
    accept(consumer, receive(consumer, count), set(range(count)))
    leave(consumer, node, group)
    assert describe_offsets(node, group) == [[group, TOPIC, "0", "0", "0"]]


def test_reset_offsets_of_an_empty_group_dry_run_and_execute(node) -> None:
    consumed_and_left(node, "replay", 5)
    dry = share_cli(node, "--reset-offsets", "--group", "replay", "--topic", TOPIC,
                    "--to-earliest", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION",
                                                  "NEW-OFFSET"]
    assert offset_rows(dry.stdout, "replay") == [["replay", TOPIC, "0", "0"]]
    assert describe_offsets(node, "replay") == [["replay", TOPIC, "0", "0", "0"]]
    done = share_cli(node, "--reset-offsets", "--group", "replay", "--topic", TOPIC,
                     "--to-earliest", "--execute")
    assert done.returncode == 0, done.stdout + done.stderr
    assert offset_rows(done.stdout, "replay") == [["replay", TOPIC, "0", "0"]]
    assert describe_offsets(node, "replay") == [["replay", TOPIC, "0", "0", "5"]]
    latest = share_cli(node, "--reset-offsets", "--group", "replay", "--all-topics",
                       "--to-latest", "--execute")
    assert offset_rows(latest.stdout, "replay") == [["replay", TOPIC, "0", "5"]]
    assert describe_offsets(node, "replay") == [["replay", TOPIC, "0", "5", "0"]]


def test_reset_to_earliest_of_an_empty_group_delivers_the_records_again(node) -> None:
    consumed_and_left(node, "again", 5)
    done = share_cli(node, "--reset-offsets", "--group", "again", "--topic", TOPIC,
                     "--to-earliest", "--execute")
    assert done.returncode == 0, done.stdout + done.stderr
    second = member(node, "again")
    try:
        records = receive(second, 5, timeout=20)
        assert sorted(int(m.value()) for m in records) == list(range(5))
        accept(second, records, set(range(5)))
    finally:
        second.close()
    assert describe_offsets(node, "again") == [["again", TOPIC, "0", "0", "0"]]


def test_offsets_set_before_a_group_exists_are_where_its_members_start(node) -> None:
    produce(node, 5)
    # By time: no record that late, so the end of the log (Kafka's warning).
    later = share_cli(node, "--reset-offsets", "--group", "fresh", "--topic", f"{TOPIC}:0",
                      "--to-datetime", "2999-01-01T00:00:00.000", "--execute")
    assert later.returncode == 0, later.stdout + later.stderr
    assert "Partition 0 from topic jobs is empty. Falling back to latest" in later.stdout
    assert describe_offsets(node, "fresh") == [["fresh", TOPIC, "0", "5", "0"]]
    earliest = share_cli(node, "--reset-offsets", "--group", "fresh", "--all-topics",
                         "--to-earliest", "--execute")
    assert offset_rows(earliest.stdout, "fresh") == [["fresh", TOPIC, "0", "0"]]
    assert describe_offsets(node, "fresh") == [["fresh", TOPIC, "0", "0", "5"]]
    # share.auto.offset.reset is latest, but the group's state says 0.
    consumer = member(node, "fresh")
    try:
        records = receive(consumer, 5)
        assert sorted(int(m.value()) for m in records) == list(range(5))
    finally:
        consumer.close()


def test_reset_is_refused_while_the_group_has_members(node) -> None:
    start_from_earliest(node, "busy")
    produce(node, 3)
    consumer = member(node, "busy")
    try:
        receive(consumer, 3)
        refused = share_cli(node, "--reset-offsets", "--group", "busy", "--topic", TOPIC,
                            "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert "Share group 'busy' is not empty." in refused.stderr
        with WireClient(node.bootstrap) as client:
            altered = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
                "group_id": "busy", "topics": [{"topic_name": TOPIC, "partitions": [
                    {"partition_index": 0, "start_offset": 0}]}]})
        assert altered.error_code == 68  # NON_EMPTY_GROUP
        busy = share_cli(node, "--delete", "--group", "busy")
        assert busy.returncode == 1
        assert "Share group 'busy' is not EMPTY." in busy.stdout
    finally:
        consumer.close()


def test_delete_offsets_of_an_empty_group(node) -> None:
    start_from_earliest(node, "tidy")
    produce(node, 2)
    consumer = member(node, "tidy")
    accept(consumer, receive(consumer, 2), {0, 1})
    leave(consumer, node, "tidy")
    deleted = share_cli(node, "--delete-offsets", "--group", "tidy", "--topic", TOPIC,
                        "--topic", "nowhere")
    assert deleted.returncode == 1  # one of the topics does not exist
    status = {line.split()[0]: line.split(None, 1)[1]
              for line in deleted.stdout.splitlines()[2:] if line.strip()}
    assert status == {TOPIC: "Successful",
                      "nowhere": "Error: This server does not host this topic-partition."}
    assert describe_offsets(node, "tidy") == []
    again = share_cli(node, "--delete-offsets", "--group", "tidy", "--topic", TOPIC)
    assert "Error: There is no offset information to delete." in again.stdout
    missing = share_cli(node, "--delete-offsets", "--group", "ghost", "--topic", TOPIC)
    assert missing.returncode == 1 and "Error: Group ghost not found." in missing.stdout


def test_list_describe_members_and_state_and_delete(node) -> None:
    consumers = [member(node, "crew"), member(node, "crew")]
    try:
        def both_assigned() -> Any:
            for c in consumers:
                c.poll(0.2)
            out = share_cli(node, "--describe", "--group", "crew", "--members", "--verbose")
            rows = offset_rows(out.stdout, "crew")
            return len(rows) == 2 and all(len(r) == 7 for r in rows) and out
        members = wait_until(both_assigned, timeout=30, message="two assigned members")
        assert members.stdout.splitlines()[1].split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH",
            "ASSIGNMENT"]
        rows = offset_rows(members.stdout, "crew")
        assert [(r[2], r[4], r[6]) for r in rows] == [("/127.0.0.1", "1", f"{TOPIC}:0")] * 2
        state = share_cli(node, "--describe", "--group", "crew", "--state")
        assert state.stdout.splitlines()[1].split() == [
            "GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert offset_rows(state.stdout, "crew") == [
            ["crew", node.bootstrap, "(1)", "Stable", "2"]]
        assert share_cli(node, "--list").stdout.split() == ["crew"]
        listed = share_cli(node, "--list", "--state", "stable")
        assert [line.split() for line in listed.stdout.splitlines()] == [
            ["GROUP", "STATE"], ["crew", "Stable"]]
        assert share_cli(node, "--list", "--state", "Empty").stdout.split() == [
            "GROUP", "STATE"]
    finally:
        for c in consumers:
            c.close()
    wait_until(lambda: group_state(node, "crew") == "Empty", timeout=30)
    empty = share_cli(node, "--describe", "--group", "crew", "--state")
    assert "Share group 'crew' has no active members." in empty.stderr
    deleted = share_cli(node, "--delete", "--group", "crew")
    assert deleted.returncode == 0, deleted.stdout
    assert "Deletion of requested share groups ('crew') was successful." in deleted.stdout
    assert share_cli(node, "--list").stdout.split() == []
    gone = share_cli(node, "--describe", "--group", "crew")
    assert gone.returncode == 1 and "Share group 'crew' does not exist." in gone.stdout


def test_console_share_consumer_reads_max_messages_and_leaves_the_rest(node) -> None:
    start_from_earliest(node, "console")
    produce(node, 10)
    cli = ("console-share-consumer", "--bootstrap-server", node.bootstrap, "--topic", TOPIC,
           "--group", "console", "--formatter-property", "print.delivery=true")
    released = run_cli(*cli, "--release", "--max-messages", "3", timeout=90)
    assert released.returncode == 0, released.stderr
    assert "Processed a total of 3 messages" in released.stderr
    first = [line.split("\t") for line in released.stdout.splitlines()]
    assert [delivery for delivery, _ in first] == ["Delivery:1"] * 3
    accepted = run_cli(*cli, "--max-messages", "10", timeout=90)
    assert accepted.returncode == 0, accepted.stderr
    second = dict(reversed(line.split("\t")) for line in accepted.stdout.splitlines())
    assert sorted(second, key=int) == [str(i) for i in range(10)]
    assert all(second[value] == "Delivery:2" for _, value in first)  # released: again
    nothing = run_cli(*cli, "--timeout-ms", "3000", timeout=90)
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "Processed a total of 0 messages" in nothing.stderr
