"""A ``Target``: what a scenario sees of one cluster (Kafka's or Ottla's), and the helpers
that set data up the same way on both."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch
from tests.helpers import WireClient, wait_until
from tests.oracle.jsonify import from_json, to_json

Side = Literal["kafka", "ottla"]
CODEC_LOCK = threading.Lock()
"""Held while a request is encoded or a response decoded: ``ottla.protocol.schema_guard``
generates its checks lazily and not thread-safely, and a scenario runs on both targets at
once (the nodes serve in parallel all the same; only the CPU work is serialised)."""
NO_RESPONSE = "no_response"
"""The key of what ``Target.request`` returns when the broker closed the connection or did
not answer: a difference like any other, not an exception that would end the scenario."""


@dataclass
class Target:
    """One cluster as a scenario drives it: its broker and controller listeners, raw
    requests through a ``WireClient`` (decoded to JSON), and confluent-kafka for data."""

    side: Side
    bootstrap: str
    controller: str
    scenario: str = ""
    run_tag: str = ""
    """Appended to every ``topic`` name: lets a run reuse nodes that an earlier run used."""
    now: int = 0
    """A wall-clock time (ms) the runner sets, the same on both sides, when a scenario
    starts: record timestamps near the present that still compare equal."""
    topic_ids: dict[str, str] = field(default_factory=dict)
    """The id (text) of each topic this side created or looked up in the running scenario,
    and its name: the normaliser shows an id as its topic's name, ``<id of NAME>``."""
    _clients: dict[str, WireClient] = field(default_factory=dict, repr=False)

    # --- raw requests ------------------------------------------------------------------

    def wire(self, controller: bool = False, timeout: float = 15.0) -> WireClient:
        """A new connection of the scenario's own (it closes it), for requests whose
        connection matters: a parked fetch, a session, a second client."""
        return WireClient(self.controller if controller else self.bootstrap, timeout=timeout,
                          client_id="ottla-oracle")

    def request(self, api: int, version: int, body: Mapping[str, Any], *,
                controller: bool = False) -> dict[str, Any]:
        """Send one request on this target's shared connection (to the controller listener
        with ``controller``) and return the decoded response as JSON. UUIDs in ``body``
        may be given as text. A broker that closes the connection or does not answer
        yields ``{"no_response": why}``, and the next request reconnects."""
        key = "controller" if controller else "broker"
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self.wire(controller)
        try:
            return to_json(self.exchange(client, api, version, body))
        except (ConnectionError, TimeoutError) as e:
            self._clients.pop(key).close()
            return {NO_RESPONSE: "closed" if isinstance(e, ConnectionError) else "timeout"}

    @staticmethod
    def exchange(client: WireClient, api: int, version: int, body: Mapping[str, Any]) -> Any:
        """``client.request`` with the codec's work under ``CODEC_LOCK``; the decoded
        (kio) response."""
        Target.send(client, api, version, body)
        return Target.receive(client, api, version)

    @staticmethod
    def send(client: WireClient, api: int, version: int, body: Mapping[str, Any]) -> None:
        """Send a request on ``client`` without waiting (a JoinGroup that the coordinator
        parks): ``receive`` its answer later. One request in flight per client."""
        with CODEC_LOCK:
            schema = request_schema(api, version)
            client.correlation_id += 1
            frame = encode_request(api, version, client.correlation_id, client.client_id,
                                   build(schema, from_json(schema, body)))
        client.send_raw(frame)

    to_json = staticmethod(to_json)

    @staticmethod
    def receive(client: WireClient, api: int, version: int) -> Any:
        raw = client.recv_frame()
        with CODEC_LOCK:
            got, response = decode_response(api, version, raw)
        assert got == client.correlation_id, f"correlation id {got} != {client.correlation_id}"
        return response

    def topic_id(self, name: str) -> str:
        """The id of ``name`` from Metadata v12 (text; the zero UUID if unknown)."""
        meta = self.request(ApiKey.METADATA, 12, {
            "topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        found = meta["topics"][0]["topic_id"]
        self.topic_ids[found] = name
        return found

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # --- names and coordinators ----------------------------------------------------------

    def topic(self, suffix: str) -> str:
        """A name owned by the running scenario (scenarios share the nodes of a run)."""
        return f"{self.scenario}-{suffix}{self.run_tag}"

    def group(self, suffix: str) -> str:
        return self.topic(suffix)

    def find_coordinator(self, key: str, key_type: int = 0, timeout: float = 30.0) -> None:
        """Until the coordinator of ``key`` (0 group, 1 transaction, 2 share) answers: the
        first look-up creates the internal topic, so both clusters need a moment; and for
        a group until its coordinator has loaded its shard (Kafka answers FindCoordinator
        before, and group requests NOT_COORDINATOR meanwhile)."""
        def found() -> bool:
            response = self.request(ApiKey.FIND_COORDINATOR, 4,
                                    {"key_type": key_type, "coordinator_keys": [key]})
            if response.get("coordinators", [{}])[0].get("error_code") != "NONE":
                return False
            if key_type != 0:
                return True
            described = self.request(ApiKey.DESCRIBE_GROUPS, 5, {
                "groups": [key], "include_authorized_operations": False})
            return described.get("groups", [{}])[0].get("error_code") == "NONE"
        wait_until(found, timeout, 0.2, f"{self.side}'s coordinator of {key!r}")

    # --- topics and data through confluent-kafka ----------------------------------------

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1,
                     configs: Mapping[str, str] | None = None) -> str:
        """Create ``name`` with confluent-kafka's AdminClient and wait until every partition
        has a leader in this broker's metadata; returns its topic id (text)."""
        admin = self.admin()  # kept while the future runs: a dropped client cancels it
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1, config=dict(configs or {}))], operation_timeout=30)
        futures[name].result(30)
        return self.wait_for_topic(name, partitions)

    def wait_for_topic(self, name: str, partitions: int, timeout: float = 30.0) -> str:
        """Until the broker's metadata has a leader for every partition and the leader
        serves each (Kafka's metadata cache shows a leader a moment before its replica
        manager has made the partition: a produce then gets NOT_LEADER_OR_FOLLOWER)."""
        def ready() -> str | None:
            meta = self.request(ApiKey.METADATA, 12, {
                "topics": [{"name": name, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            (topic,) = meta["topics"]
            leaders = [p["leader_id"] for p in topic["partitions"]]
            if topic["error_code"] != "NONE" or len(leaders) != partitions or min(
                    leaders, default=-1) < 0:
                return None
            served = self.request(ApiKey.LIST_OFFSETS, 7, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": name, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                    for p in range(partitions)]}]})
            if all(p["error_code"] == "NONE" for p in served["topics"][0]["partitions"]):
                self.topic_ids[topic["topic_id"]] = name
                return topic["topic_id"]
            return None
        return wait_until(ready, timeout, 0.1, f"{self.side}: topic {name} with leaders")

    def producer(self, **config: str | int | bool) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, **config})

    def produce(self, topic: str, values: Iterable[str | bytes | None], partition: int = 0,
                key: str | None = None, timestamps: Sequence[int] | None = None,
                **config: str | int | bool) -> list[int]:
        """Produce ``values`` with confluent-kafka (idempotent, acks=all) and return the
        offsets they got, in order; every delivery must succeed."""
        producer = self.producer(**{"enable.idempotence": True, **config})
        offsets: list[int] = []
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets.append(msg.offset())
        for i, value in enumerate(values):
            extra = {"timestamp": timestamps[i]} if timestamps is not None else {}
            producer.produce(topic, value=value, key=key, partition=partition,
                             on_delivery=delivered, **extra)
        if producer.flush(30) != 0 or errors:
            raise AssertionError(f"{self.side}: produce to {topic} failed: {errors}")
        return offsets

    def produce_batch(self, topic: str, partition: int,
                      records: Sequence[tuple[bytes | None, bytes | None]],
                      timestamp: int | Sequence[int], **batch: Any) -> dict[str, Any]:
        """One v2 batch built here, byte for byte the same on both sides, through a raw
        Produce v9 (acks=all); returns the partition's response."""
        response = self.request(ApiKey.PRODUCE, 9, {
            "transactional_id": batch.pop("transactional_id", None), "acks": -1,
            "timeout": 10000, "topic_data": [{"name": topic, "partition_data": [
                {"index": partition,
                 "records": build_batch(records, timestamp=timestamp, **batch)}]}]})
        if NO_RESPONSE in response:
            return response
        return response["responses"][0]["partition_responses"][0]
