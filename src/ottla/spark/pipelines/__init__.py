"""Pipelines that run on the ``ottla`` Spark format, one command each.

Each module has ``HELP``, ``add_arguments(parser)`` and ``run(spark, args) -> int``;
``ottla pipeline run NAME`` creates the session and calls it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

PIPELINES = {
    "windowed-counts": "ottla.spark.pipelines.windowed_counts",
    "archive": "ottla.spark.pipelines.archive",
    "lag-report": "ottla.spark.pipelines.lag_report",
}


def load(name: str) -> ModuleType:
    return importlib.import_module(PIPELINES[name])
