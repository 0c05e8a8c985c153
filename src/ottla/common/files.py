"""Writing files so that a crash leaves the old or the new one, never a part."""

from __future__ import annotations

import os


def write_atomically(path: str, data: bytes, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file
    (after a power loss too only with ``sync``; without it the caller fsyncs later)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_path(os.path.dirname(path) or ".")


def fsync_path(path: str) -> None:
    """fsync a file or directory by name (a directory: the names in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
