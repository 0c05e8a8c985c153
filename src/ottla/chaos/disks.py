"""A disk of its own per node, for the disk-full fault: each node's data directory is a
tmpfs mount of a fixed size, which the nemesis fills to the last page so that the node's
next write that needs space fails with ENOSPC, as on a full disk, and frees when healed.

Mounting needs root (CAP_SYS_ADMIN); without it the fault cannot be injected and the run
refuses to start. There is no honest stand-in: a per-process file size limit (RLIMIT_FSIZE)
raises EFBIG and SIGXFSZ, not ENOSPC, and filling the machine's own disk would strike
every process on it. When the nodes have stopped, ``release`` copies each disk's files to
the directory under it and unmounts it, so the report keeps the nodes' data.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

DISK_BYTES = 256 * 1024 * 1024
"""Each node's disk: room for hours of the workloads' records, filled only by the fault."""
FILLER = ".chaos-disk-full"
"""The file that fills a disk (a log dir's files are directories; a node skips it)."""
CHUNKS = (1024 * 1024, 4096)


class Disks:
    def __init__(self, dirs: dict[int, str], size_bytes: int = DISK_BYTES) -> None:
        self.dirs = dirs
        self.size_bytes = size_bytes
        self.mounted: list[int] = []

    def mount(self) -> None:
        """A tmpfs at every node's (empty) data dir; none is left mounted on a failure."""
        for node, path in sorted(self.dirs.items()):
            os.makedirs(path, exist_ok=True)
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes},mode=0755",
                 f"ottla-chaos-disk-{node}", path], capture_output=True, text=True)
            if done.returncode != 0:
                self.release()
                raise RuntimeError(
                    "disk-full needs a filesystem of its own per node, and mounting a "
                    f"tmpfs at {path} failed ({done.stderr.strip() or done.returncode}): run "
                    "as root (CAP_SYS_ADMIN), or leave disk-full out of --faults")
            self.mounted.append(node)

    def fill(self, node: int) -> int:
        """Write to the disk until it has no whole page free: the bytes written."""
        written = 0
        with open(os.path.join(self.dirs[node], FILLER), "ab", buffering=0) as f:
            for size in CHUNKS:
                chunk = bytes(size)
                while True:
                    try:
                        written += f.write(chunk) or 0
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        return written

    def free(self, node: int) -> None:
        try:
            os.remove(os.path.join(self.dirs[node], FILLER))
        except FileNotFoundError:
            pass

    def release(self) -> None:
        """Every disk's files copied to the directory under it, and the disk unmounted
        (the nodes must have stopped)."""
        while self.mounted:
            node = self.mounted.pop()
            path = self.dirs[node]
            self.free(node)
            saved = f"{path.rstrip('/')}.saved"
            shutil.rmtree(saved, ignore_errors=True)
            shutil.copytree(path, saved, symlinks=True)
            if subprocess.run(["umount", path], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", path], capture_output=True, check=True)
            for name in os.listdir(saved):
                os.rename(os.path.join(saved, name), os.path.join(path, name))
            os.rmdir(saved)
