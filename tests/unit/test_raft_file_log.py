"""The on-disk Raft log behaves like the in-memory one, across reopening."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.metadata import records as meta
from ottla.raft.file_log import FileRaftLog
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry

counter = itertools.count()


def record(n: int) -> meta.NoOpRecord | meta.FeatureLevelRecord:
    return meta.FeatureLevelRecord(name=f"f{n}", feature_level=n % 100)


ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 5), st.booleans()),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("reopen")),
), max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_file_log_matches_memory_log(tmp_path_factory, operations) -> None:
    directory = str(tmp_path_factory.mktemp("raftlog"))
    disk = FileRaftLog(directory, 1, [1, 2, 3], now_ms=1_700_000_000_000)
    memory = MemoryLog()
    epoch = 1
    try:
        for op in operations:
            if op[0] == "append":
                epoch += op[1]
                control = op[3]
                entries = [Entry(epoch, None if control else record(next(counter)))
                           for _ in range(op[2])]
                disk.append(entries)
                memory.append(entries)
            elif op[0] == "truncate":
                target = min(op[1], memory.end_offset)
                disk.truncate_to(target)
                memory.truncate_to(target)
                epoch = max(epoch, memory.last_epoch)
            else:
                disk.flush()
                disk.close()
                disk = FileRaftLog(directory, 1, [1, 2, 3], now_ms=1_700_000_000_000)
            assert disk.end_offset == memory.end_offset
            assert disk.last_epoch == memory.last_epoch
            assert disk.read(0, 1000) == memory.read(0, 1000)
            for offset in range(memory.end_offset):
                assert disk.epoch_at(offset) == memory.epoch_at(offset)
            for e in range(0, epoch + 2):
                assert disk.end_offset_for_epoch(e) == memory.end_offset_for_epoch(e), e
            if memory.end_offset > 2:
                assert disk.read(1, 2) == memory.read(1, 2)
    finally:
        disk.close()
