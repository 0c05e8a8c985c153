"""``ottla consumer-groups``: list, describe with lag, reset offsets, delete."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.helpers import WireClient, wait_until
from tests.integration.test_admin import run_cli

TOPIC = "ledger"


@pytest.fixture
def group(ottla):
    """Group 'audit' with committed offsets 3, 5 and nothing on a 3-partition topic of 10
    records per partition."""
    with WireClient(ottla.bootstrap) as c:
        assert c.create_topic(TOPIC, partitions=3).topics[0].error_code == 0
    producer = Producer({"bootstrap.servers": ottla.bootstrap})
    for p in range(3):
        for i in range(10):
            producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "audit",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 5)],
                    asynchronous=False)
    consumer.close()
    return "audit"


def groups_cli(node, *args: str):
    return run_cli("consumer-groups", "--bootstrap-server", node.bootstrap, *args)


def committed(node, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(3)], timeout=10)]
    finally:
        consumer.close()


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.startswith("audit ")]


def test_list_and_describe_show_offsets_and_lag(ottla, group) -> None:
    listed = groups_cli(ottla, "--list")
    assert listed.returncode == 0 and "audit" in listed.stdout.split()
    with_state = groups_cli(ottla, "--list", "--state", "Empty")
    assert ["audit", "Empty", "classic"] in [ln.split() for ln in with_state.stdout.splitlines()]
    described = groups_cli(ottla, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    assert "has no active members" in described.stdout
    assert [r[:6] for r in rows(described.stdout)] == [
        ["audit", TOPIC, "0", "3", "10", "7"], ["audit", TOPIC, "1", "5", "10", "5"]]


def test_reset_offsets_dry_run_execute_and_clamping(ottla, group) -> None:
    dry = groups_cli(ottla, "--reset-offsets", "--group", group, "--topic", TOPIC,
                     "--to-earliest", "--dry-run")
    assert [r[3] for r in rows(dry.stdout)] == ["0", "0", "0"]
    assert committed(ottla, group) == [3, 5, -1001]
    done = groups_cli(ottla, "--reset-offsets", "--group", group, "--topic", f"{TOPIC}:0,1",
                      "--shift-by", "-4", "--execute")
    assert done.returncode == 0, done.stderr
    assert committed(ottla, group)[:2] == [0, 1]  # 3-4 is clamped to the log start
    groups_cli(ottla, "--reset-offsets", "--group", group, "--topic", TOPIC, "--to-offset",
               "99", "--execute")
    assert committed(ottla, group) == [10, 10, 10]  # clamped to the log end
    by_time = groups_cli(ottla, "--reset-offsets", "--group", group, "--topic", TOPIC,
                         "--to-datetime", "2000-01-01T00:00:00.000", "--dry-run")
    assert [r[3] for r in rows(by_time.stdout)] == ["0", "0", "0"]
    missing = groups_cli(ottla, "--reset-offsets", "--group", group, "--topic", TOPIC,
                         "--execute")
    assert missing.returncode != 0


def test_reset_of_an_active_group_is_refused_and_delete_needs_an_empty_group(ottla,
                                                                           group) -> None:
    member = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    member.subscribe([TOPIC])
    try:
        wait_until(lambda: member.poll(0.2) is not None or member.assignment(), 30,
                   message="the member to join")
        refused = groups_cli(ottla, "--reset-offsets", "--group", group, "--all-topics",
                             "--to-latest", "--execute")
        assert refused.returncode != 0
        assert "can only be reset if the group 'audit' is inactive" in refused.stdout
        busy = groups_cli(ottla, "--delete", "--group", group)
        assert busy.returncode != 0
        members = groups_cli(ottla, "--describe", "--group", group, "--members")
        assert len(rows(members.stdout)) == 1
    finally:
        member.close()
    wait_until(lambda: "Empty" in groups_cli(ottla, "--describe", "--group", group,
                                             "--state").stdout, 30)
    deleted = groups_cli(ottla, "--delete", "--group", group)
    assert deleted.returncode == 0
    assert "Deletion of requested consumer groups ('audit') was successful." in deleted.stdout
    assert "audit" not in groups_cli(ottla, "--list").stdout.split()


def test_delete_offsets(ottla, group) -> None:
    result = groups_cli(ottla, "--delete-offsets", "--group", group, "--topic", f"{TOPIC}:0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert committed(ottla, group) == [-1001, 5, -1001]
