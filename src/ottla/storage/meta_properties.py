"""``meta.properties``: the identity of a formatted log directory (KRaft, version 1).

Every log dir carries the cluster id, the node id and its own directory id; a node refuses
to start on a directory that is unformatted or belongs to another cluster or node.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass

from ottla.config import load_properties
from ottla.storage.checkpoint import write_atomically

META_PROPERTIES = "meta.properties"


def kafka_uuid_text(value: uuid.UUID) -> str:
    """A UUID as Kafka prints ids: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str | None) -> uuid.UUID:
    """The UUID of a Kafka id (the zero UUID for none)."""
    if not text:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def random_uuid() -> str:
    """A Kafka-style id: a random UUID as 22 characters of URL-safe base64."""
    while True:
        text = kafka_uuid_text(uuid.uuid4())
        if not text.startswith("-"):  # Kafka avoids ids that look like flags
            return text


class MetaPropertiesError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = 1

    def write(self, log_dir: str) -> None:
        os.makedirs(log_dir, exist_ok=True)
        text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
                f"node.id={self.node_id}\ndirectory.id={self.directory_id}\n"
                f"version={self.version}\ncluster.id={self.cluster_id}\n")
        write_atomically(os.path.join(log_dir, META_PROPERTIES), text.encode())

    @classmethod
    def read(cls, log_dir: str) -> MetaProperties | None:
        path = os.path.join(log_dir, META_PROPERTIES)
        try:
            with open(path, encoding="utf-8") as f:
                props = load_properties(f.read())
        except FileNotFoundError:
            return None
        try:
            return cls(props["cluster.id"], int(props["node.id"]),
                       props.get("directory.id", ""), int(props.get("version", "1")))
        except (KeyError, ValueError) as e:
            raise MetaPropertiesError(f"{path} is invalid: {e}") from None


def check_log_dirs(log_dirs: list[str], node_id: int) -> str:
    """Verify every log dir is formatted for this node and one cluster; return its id."""
    cluster_ids = set()
    for d in log_dirs:
        meta = MetaProperties.read(d)
        if meta is None:
            raise MetaPropertiesError(
                f"No meta.properties found in {d} (have you run `ottla storage format`?)")
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                f"Stored node id {meta.node_id} in {d} doesn't match the configured node.id "
                f"{node_id}")
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise MetaPropertiesError(f"Log directories hold different cluster ids: {cluster_ids}")
    return cluster_ids.pop()


def format_log_dirs(log_dirs: list[str], cluster_id: str, node_id: int,
                    ignore_formatted: bool = False) -> list[str]:
    """Write meta.properties into each log dir; returns the dirs formatted."""
    formatted = []
    for d in log_dirs:
        existing = MetaProperties.read(d)
        if existing is not None:
            if ignore_formatted:
                continue
            raise MetaPropertiesError(f"Log directory {d} is already formatted. Use "
                                      "--ignore-formatted to ignore this directory and format "
                                      "the others.")
        MetaProperties(cluster_id, node_id, random_uuid()).write(d)
        formatted.append(d)
    return formatted
