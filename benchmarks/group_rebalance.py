"""How long a group takes from members joining to all members stable, classic vs KIP-848.

Two measurements, each printed beside the ceiling it is compared with:

1. The coordinator alone (in process, no network): N members join a group and the
   coordinator is driven until every member is stable; we report the CPU time and the
   number of coordinator operations. Ceiling: the same number of operations through the
   runtime when the shard only acknowledges (no group logic, no records).
2. Real clients against a real ``ottla server``: N confluent-kafka consumers subscribe to
   a topic and we time until every partition is owned exactly once. Ceiling: the same N
   clients each doing one Metadata round trip (what a client pays before any group
   protocol starts).

Run: ``python -m benchmarks.group_rebalance [--members 10 100] [--real-members 10]``.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from typing import Any

from tests.unit.test_group_coordinator import TP, MemoryPartition

from ottla.coordinator.group.consumer_protocol import ConsumerGroupConfig, HeartbeatRequest
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard, JoinRequest
from ottla.coordinator.runtime import CoordinatorResult, CoordinatorRuntime

TOPIC_ID = __import__("uuid").UUID(int=7)
PARTITIONS = 200


class Driver:
    """A runtime with one loaded shard and a counter of operations."""

    def __init__(self) -> None:
        ids = itertools.count()
        self.runtime = CoordinatorRuntime(MemoryPartition(), lambda ctx: GroupCoordinatorShard(
            ctx, GroupConfig(initial_rebalance_delay_ms=0),
            new_member_id=lambda client: f"{client}-{next(ids)}",
            topics=lambda: {"t": (TOPIC_ID, PARTITIONS)},
            consumer_config=ConsumerGroupConfig(assignment_interval_ms=0)))
        self.now = 1_000
        self.runtime.load(TP, self.now)
        self.ops = 0

    def write(self, op: Any) -> list[Any]:
        replies: list[Any] = []
        self.ops += 1
        self.runtime.write(TP, lambda shard, now: op(shard, now, replies.append),
                           replies.append, self.now)
        return replies


def classic_round(n: int) -> Driver:
    d = Driver()
    parked: dict[str, list[Any]] = {}
    for i in range(n):
        def join(member_id: str, c: str = f"c{i}"):
            req = JoinRequest("g", member_id, None, "consumer", [("range", b"")], 10_000,
                              30_000, c, "/h", 9)
            return d.write(lambda s, now, reply: s.join_group(now, req, reply))
        member_id = join("")[0]["member_id"]
        parked[member_id] = join(member_id)
    d.ops += 1
    d.runtime.poll(d.now)  # the join timer closes the barrier
    generation = next(iter(parked.values()))[0]["generation_id"]
    leader = next(r[0]["leader"] for r in parked.values())
    assignments = {m: b"x" for m in parked}
    for member_id in parked:
        if member_id != leader:
            d.write(lambda s, now, reply, m=member_id: s.sync_group(
                now, "g", generation, m, None, None, None, {}, reply))
    d.write(lambda s, now, reply: s.sync_group(now, "g", generation, leader, None, None,
                                               None, assignments, reply))
    assert d.runtime.active(TP).shard.groups["g"].state.value == "Stable"
    return d


def consumer_round(n: int) -> Driver:
    d = Driver()
    owned: dict[str, dict] = {}
    epochs: dict[str, int] = {}

    def beat(member_id: str, epoch: int) -> dict[str, Any]:
        req = HeartbeatRequest("g", member_id, epoch, None, None,
                               30_000 if epoch == 0 else -1, ("t",) if epoch == 0 else None,
                               None, None, owned.get(member_id), "c", "/h")
        response = d.write(lambda s, now, reply: s.consumer_group_heartbeat(now, req))[0]
        assert response["error_code"] == 0, response
        epochs[member_id] = response["member_epoch"]
        if response["assignment"] is not None:
            owned[member_id] = {tp["topic_id"]: set(tp["partitions"])
                                for tp in response["assignment"]["topic_partitions"]}
        return response

    for i in range(n):
        beat(f"m{i}", 0)
    group = d.runtime.active(TP).shard.groups["g"]
    for _ in range(50):
        if group.state.value == "Stable":
            break
        for member_id in list(epochs):
            beat(member_id, epochs[member_id])
    assert group.state.value == "Stable", group.state
    return d


def ack_only(ops: int) -> float:
    d = Driver()
    start = time.process_time()
    for _ in range(ops):
        d.write(lambda s, now, reply: CoordinatorResult(response=None))
    return time.process_time() - start


def in_process(members: list[int]) -> None:
    print("coordinator alone (CPU time until every member is stable)")
    print(f"{'protocol':<10}{'members':>8}{'ops':>8}{'time ms':>10}{'ceiling ms':>12}"
          f"{'ratio':>8}")
    for n in members:
        for name, run in (("classic", classic_round), ("consumer", consumer_round)):
            start = time.process_time()
            d = run(n)
            took = time.process_time() - start
            ceiling = ack_only(d.ops)
            print(f"{name:<10}{n:>8}{d.ops:>8}{took * 1000:>10.1f}{ceiling * 1000:>12.2f}"
                  f"{ceiling / took:>8.3f}")


def real_clients(members: int) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic
    from tests.helpers import OttlaProcess

    print(f"\nreal clients: {members} confluent-kafka consumers, {PARTITIONS} partitions")
    print(f"{'protocol':<10}{'join->stable s':>16}{'ceiling s':>12}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        node = OttlaProcess(f"{tmp}/data", overrides={
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.assignment.interval.ms": "100"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("bench", PARTITIONS, 1)])["bench"].result(30)
            start = time.monotonic()
            probes = [Consumer({"bootstrap.servers": node.bootstrap, "group.id": "probe"})
                      for _ in range(members)]
            for probe in probes:
                probe.list_topics("bench", timeout=30)
            ceiling = time.monotonic() - start
            for probe in probes:
                probe.close()
            for protocol in ("classic", "consumer"):
                conf: dict[str, Any] = {"bootstrap.servers": node.bootstrap,
                                        "group.id": f"bench-{protocol}",
                                        "group.protocol": protocol}
                if protocol == "classic":
                    conf.update({"partition.assignment.strategy": "cooperative-sticky",
                                 "heartbeat.interval.ms": 500})
                owned: dict[int, set[int]] = {}
                start = time.monotonic()
                consumers = []
                for i in range(members):
                    c = Consumer(conf)

                    def on_assign(consumer: Any, parts: Any, i: int = i,
                                  owned: dict[int, set[int]] = owned) -> None:
                        owned.setdefault(i, set()).update(p.partition for p in parts)

                    def on_revoke(consumer: Any, parts: Any, i: int = i,
                                  owned: dict[int, set[int]] = owned) -> None:
                        owned.setdefault(i, set()).difference_update(p.partition
                                                                     for p in parts)
                    c.subscribe(["bench"], on_assign=on_assign, on_revoke=on_revoke)
                    consumers.append(c)
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    for c in consumers:
                        c.poll(0)
                    total = sum(len(p) for p in owned.values())
                    union = set().union(*owned.values()) if owned else set()
                    if len(owned) == members and all(owned.values()) and \
                            total == PARTITIONS == len(union):
                        break
                    time.sleep(0.01)
                took = time.monotonic() - start
                for c in consumers:
                    c.close()
                print(f"{protocol:<10}{took:>16.2f}{ceiling:>12.2f}{ceiling / took:>8.3f}")
        finally:
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--real-members", type=int, nargs="*", default=[10])
    args = parser.parse_args()
    in_process(args.members)
    for n in args.real_members:
        real_clients(n)


if __name__ == "__main__":
    main()
