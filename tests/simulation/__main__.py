"""``python -m tests.simulation``: see ``tests.simulation.runner`` and docs/testing.md."""

import sys

from tests.simulation.runner import main

sys.exit(main())
