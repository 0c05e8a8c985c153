"""Writes a run's history as it happens: operations from any client thread, numbered in
the order they completed, one line each in ``history.jsonl`` (flushed per line, so a run
that dies still leaves what it did)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TextIO

from ottla.chaos.history import Kind, Op, Outcome


class Recorder:
    def __init__(self, path: str) -> None:
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - close()
        self._lock = threading.Lock()
        self._next = 0
        self.ops: list[Op] = []

    @staticmethod
    def now() -> int:
        return time.monotonic_ns()

    def record(self, process: str, kind: Kind, outcome: Outcome, invoke_ns: int,
               complete_ns: int | None = None, **fields: object) -> Op:
        """Number the operation, keep it and write its line."""
        with self._lock:
            op = Op(index=self._next, process=process, kind=kind, outcome=outcome,
                    invoke_ns=invoke_ns,
                    complete_ns=complete_ns if complete_ns is not None else self.now(),
                    **fields)  # type: ignore[arg-type]
            self._next += 1
            self.ops.append(op)
            self._file.write(op.to_json() + "\n")
            self._file.flush()
            return op

    def rewrite(self, ops: list[Op]) -> None:
        """Replace the history (a deliberately broken run, to show the checker sees it)."""
        with self._lock:
            self.ops = [replace(op, index=i) for i, op in enumerate(ops)]
            self._next = len(self.ops)
            self._file.seek(0)
            self._file.truncate()
            self._file.write("".join(op.to_json() + "\n" for op in self.ops))
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
