"""Batch save modes as Spark's Kafka sink takes them: ErrorIfExists (the default) writes.

Spark's Kafka sink accepts Append and ErrorIfExists alike (a topic is never "already
there" in the sense of a table) and refuses Overwrite and Ignore. PySpark's Python Data
Source API cannot say so: the JVM's ``DataFrameWriter.save`` refuses every mode but
Append and Overwrite for a Python data source (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``)
before any Python code of the source runs, so ``df.write.format("ottla").save()`` would
fail although ``format("kafka")`` writes.

``install`` wraps ``save`` of PySpark's ``DataFrameWriter``: when Spark refuses
ErrorIfExists for the ``ottla`` format, the same write is saved again in Append mode
(nothing was planned or written yet, the refusal comes from the analysis); when it refuses
Ignore, the error says what to write instead. Writes to every other format and every other
error pass through untouched.
"""

from __future__ import annotations

import functools
from typing import Any

from ottla.spark.options import FORMAT, OptionError

REFUSED = "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"
ALLOWED = "use mode(\"append\") or the default mode (ErrorIfExists), as with Spark's Kafka sink"
_MARK = "_ottla_save_mode"


class SaveModeError(OptionError):
    """A save mode a topic cannot take."""


def refused(mode: str) -> SaveModeError:
    return SaveModeError(f"save mode {mode} is not allowed for a topic: {ALLOWED}")


def refused_mode(error: BaseException) -> str | None:
    """The save mode that Spark refused for the ``ottla`` format in ``error``, if it is
    that refusal (``ErrorIfExists`` or ``Ignore``)."""
    get_condition = getattr(error, "getCondition", None)
    if get_condition is None or get_condition() != REFUSED:
        return None
    params = error.getMessageParameters() or {}  # type: ignore[attr-defined]
    if params.get("source", "").strip('"`').lower() != FORMAT:
        return None
    return params.get("createMode", "").strip('"`') or None


def install(writer_class: type) -> None:
    """Wrap ``writer_class.save`` (PySpark's classic or Connect ``DataFrameWriter``) once."""
    original = writer_class.save
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def save(self: Any, path: str | None = None, format: str | None = None,
             mode: str | None = None, partitionBy: Any = None,
             **options: Any) -> None:
        try:
            return original(self, path, format, mode, partitionBy, **options)
        except Exception as e:
            refused_as = refused_mode(e)
            if refused_as is None:
                raise
            if refused_as != "ErrorIfExists":
                raise refused(refused_as) from e
        # Spark's Kafka sink writes in ErrorIfExists exactly as in Append.
        return original(self, path, format, "append", partitionBy, **options)

    setattr(save, _MARK, True)
    writer_class.save = save  # type: ignore[method-assign]
