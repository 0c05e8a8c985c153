"""Log directory ids as the metadata uses them (Kafka's ``DirectoryId``, KIP-858).

Every log dir has a random ``directory.id`` in its meta.properties. A broker registers
with the ids of its log dirs, each partition records the directory of each of its
replicas, and a broker's heartbeats name the directories that went offline. Ids whose 64
high bits are zero and low bits below 100 are reserved for three states of a replica's
directory:

- ``MIGRATING``: not known (the partition was made before directories were tracked, at
  a metadata.version below 3.7-IV2); treated as online.
- ``UNASSIGNED``: the broker has not yet said where it put the replica (its broker has
  several log dirs); treated as online.
- ``LOST``: the directory is gone; offline.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

MIGRATING = uuid.UUID(int=0)
UNASSIGNED = uuid.UUID(int=1)
LOST = uuid.UUID(int=2)


def reserved(directory: uuid.UUID) -> bool:
    """Kafka's ``DirectoryId.reserved``: an id no log dir may have."""
    return directory.int >> 64 == 0 and directory.int & ((1 << 64) - 1) < 100


def is_online(directory: uuid.UUID, online_dirs: Collection[uuid.UUID]) -> bool:
    """Kafka's ``DirectoryId.isOnline``: whether a replica in ``directory`` is in one of a
    broker's ``online_dirs``. A directory not yet known or assigned counts as online, as
    does any directory of a broker that registered none (an older broker)."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not online_dirs or directory in online_dirs


def normalized(directories: Sequence[uuid.UUID | None], replicas: int) -> list[uuid.UUID]:
    """The directories a partition record gives for its ``replicas``, as the image keeps
    them: empty when none is known (all ``MIGRATING``, Kafka's ``defaultToMigrating``).
    The wire's zero id, ``MIGRATING``, reads as None."""
    known = [MIGRATING if d is None else d for d in directories]
    if len(known) != replicas or all(d == MIGRATING for d in known):
        return []
    return known
