"""A wall clock of its own per node, for the clock-skew fault: every node runs under
libfaketime (Debian's ``faketime`` package, LD_PRELOAD), which reads the node's offset
from a file the nemesis rewrites: ``+120`` puts its clock two minutes ahead within
``REREAD_S`` (an NTP step, or a machine whose clock drifted), ``+0`` back.

Only the wall clock (CLOCK_REALTIME) is skewed: ``FAKETIME_DONT_FAKE_MONOTONIC=1``. Two
machines' wall clocks disagree and jump; CLOCK_MONOTONIC is never stepped and means
nothing across machines, so a node's timeouts, if measured on it, are untouched by skew.
A timeout that goes off (or never does) under skew is measured on the wall clock.

libfaketime 0.9.10 (Debian bookworm) turns an absolute CLOCK_MONOTONIC
``clock_nanosleep`` into a negative time when the monotonic clock is not faked, so
Python's ``time.sleep`` raises EINVAL (``OSError: [Errno 22]``) under it; the server does
not call it (asyncio, ``Event.wait`` and ``select`` are unaffected), and a call would
fail loudly in the node's log rather than sleep wrongly.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

REREAD_S = 1
"""How often a node's library reads its offset file again (FAKETIME_CACHE_DURATION)."""

LIBRARY_GLOBS = ("/usr/lib/*/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1",
                 "/usr/local/lib/faketime/libfaketimeMT.so.1")
"""The thread-safe library (a node has threads)."""


def libfaketime() -> str:
    for pattern in LIBRARY_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise RuntimeError("clock-skew needs libfaketime (apt-get install -y faketime): no "
                       f"{' or '.join(LIBRARY_GLOBS)}; or leave clock-skew out of --faults")


class Clocks:
    def __init__(self, base: str, nodes: list[int]) -> None:
        self.library = libfaketime()
        self.files = {n: os.path.join(base, f"clock-{n}.faketime") for n in nodes}
        for node in nodes:
            self.set(node, 0)
        self._verify(base)

    def env(self, node: int) -> dict[str, str]:
        return self._env(self.files[node])

    def _env(self, path: str) -> dict[str, str]:
        return {"LD_PRELOAD": self.library, "FAKETIME_TIMESTAMP_FILE": path,
                # The file read again each REREAD_S: a jump takes effect within that. Read
                # at every call (FAKETIME_NO_CACHE), a clock read costs 6 us instead of 1:
                # nodes then spent much of their CPU reading the file (more on a loaded
                # machine), missed heartbeats, and the run measured that, not the skew.
                "FAKETIME_CACHE_DURATION": str(REREAD_S),
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                # files' times as the kernel keeps them (stat under the library re-reads
                # the offset at each call: a node took twice as long to start)
                "NO_FAKE_STAT": "1"}

    def set(self, node: int, offset_s: float) -> None:
        """The node's wall clock ``offset_s`` from the real one (written whole: renamed)."""
        path = self.files[node]
        with open(f"{path}.tmp", "w", encoding="ascii") as f:
            f.write(f"{offset_s:+g}\n")
        os.replace(f"{path}.tmp", path)

    def _verify(self, base: str) -> None:
        """A process under the library sees its wall clock a day ahead and its monotonic
        clock as it is, or the run stops here."""
        probe = os.path.join(base, "clock-probe.faketime")
        with open(probe, "w", encoding="ascii") as f:
            f.write("+86400\n")
        code = "import time; print(time.time() - time.monotonic())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, **self._env(probe)}, timeout=30)
        os.remove(probe)
        try:
            skew = float(done.stdout) - (time.time() - time.monotonic())
        except ValueError:
            skew = 0.0
        if abs(skew - 86400) > 60:
            raise RuntimeError(f"{self.library} did not skew the wall clock alone of a "
                               f"process ({skew:.0f} s instead of 86400; "
                               f"{done.stderr.strip()})")
