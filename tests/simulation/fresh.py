"""Where a run's fresh simulation seeds start."""

from __future__ import annotations

import os
import random

LOW, HIGH = 10**6, 2**31
"""Fresh seeds lie far above the fixed ones."""


def fresh_start(only: str | None) -> int:
    """The first fresh seed: ``only`` (a seed being replayed), or drawn anew each run.

    Under pytest-xdist every worker collects the tests itself and must collect the same
    ones, so the draw comes from the run's id, which all workers of one run share."""
    if only is not None:
        return int(only)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id:
        return LOW + int(run_id, 16) % (HIGH - LOW)
    return random.SystemRandom().randrange(LOW, HIGH)
