"""Test helpers: a real ``ottla server`` process on free ports and KRaft clusters of them
(from ``ottla.chaos.processes``, which the chaos harness shares), a raw wire client, and
what of a file the page cache holds."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
from collections.abc import Iterator

from ottla.chaos.processes import (  # noqa: F401 - the tests import them from here
    KRaftCluster,
    OttlaProcess,
    exit_status,
    free_port,
    stop_all,
    terminate,
    wait_until,
)
from ottla.client.blocking import BlockingClient


def cached_bytes(path: str, start: int = 0, end: int | None = None) -> int:
    """How many bytes of ``path`` in ``[start, end)`` are in the page cache (``mincore``
    of a mapping made and dropped here), counted in whole pages."""
    page = mmap.PAGESIZE
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        end = size if end is None else min(end, size)
        if size == 0 or end <= start:
            return 0
        pages = (size + page - 1) // page
        vec = (ctypes.c_ubyte * pages)()
        with mmap.mmap(f.fileno(), size) as mapping:
            view = (ctypes.c_char * size).from_buffer(mapping)
            try:
                if ctypes.CDLL(None, use_errno=True).mincore(
                        ctypes.c_void_p(ctypes.addressof(view)), ctypes.c_size_t(size), vec):
                    raise OSError(ctypes.get_errno(), "mincore")
            finally:
                del view
    return sum(vec[i] & 1 for i in range(start // page, (end + page - 1) // page)) * page


def on_tmpfs(path: str) -> bool:
    """Whether ``path`` is on a file system that is the page cache (nothing to drop)."""
    best, fstype, where = "", "", os.path.realpath(path)
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, kind = line.split()[:3]
            if where.startswith(point.rstrip("/") + "/") and len(point) > len(best):
                best, fstype = point, kind
    return fstype in ("tmpfs", "ramfs")


@contextlib.contextmanager
def running_ottla(data_dir: str, **overrides: str) -> Iterator[OttlaProcess]:
    """A node for the ``with`` block, stopped and checked at its end. If the block fails,
    that failure is raised, with the node's unclean exit (if any) as a note on it."""
    node = OttlaProcess(data_dir, overrides=dict(overrides)).start()
    try:
        yield node
    except BaseException as failure:
        try:
            node.stop()
        except AssertionError as e:
            failure.add_note(str(e))
        raise
    node.stop()


WireClient = BlockingClient
"""The tests' raw protocol client (``ottla.client.blocking``)."""


def format_node(node: OttlaProcess, release_version: str, *flags: str) -> None:
    """``ottla storage format --release-version`` on a combined dev node not started yet,
    with the settings it will start with (its ``--override``s on the dev defaults, as a
    server.properties beside its data dir), so that it starts at that metadata.version."""
    import subprocess
    import sys

    from ottla.common.server_config import dev_defaults

    args = node.args()
    props = dev_defaults()  # what ``ottla server`` adds to its overrides
    props.update(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--override")
    config = os.path.join(os.path.dirname(node.data_dir.rstrip("/")),
                          f"format-{node.node_id}-{node.port}.properties")
    with open(config, "w") as f:
        f.write("".join(f"{key}={value}\n" for key, value in props.items()))
    subprocess.run([sys.executable, "-m", "ottla", "storage", "format", "-t",
                    "MkU3OEVBNTcwNTJENDM2Qg", "-c", config, "-r", release_version, *flags],
                   check=True, capture_output=True, timeout=60)
