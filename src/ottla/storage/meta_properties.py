"""``meta.properties``: the identity of a formatted log directory (KRaft, version 1).

Every log dir carries the cluster id, the node id and its own directory id; a node refuses
to start on a directory that is unformatted or belongs to another cluster or node.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ottla.common.config import load_properties
from ottla.common.files import write_atomically
from ottla.common.uuids import random_uuid

META_PROPERTIES = "meta.properties"


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
                    ignore_formatted: bool = False,
                    directory_ids: dict[str, str] | None = None) -> list[str]:
    """Write meta.properties into each log dir; returns the dirs formatted. A dir in
    ``directory_ids`` gets that directory.id (the metadata dir of a controller named by
    ``--initial-controllers``, as kafka-storage.sh does), the others a random one."""
    formatted = []
    for d in log_dirs:
        existing = MetaProperties.read(d)
        if existing is not None:
            if ignore_formatted:
                continue
            raise MetaPropertiesError(f"Log directory {d} is already formatted. Use "
                                      "--ignore-formatted to ignore this directory and format "
                                      "the others.")
        MetaProperties(cluster_id, node_id,
                       (directory_ids or {}).get(d) or random_uuid()).write(d)
        formatted.append(d)
    return formatted
