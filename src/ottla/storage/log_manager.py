"""The log manager: every partition log of this node across its ``log.dirs``.

On start it detects whether the last shutdown was clean (``.kafka_cleanshutdown`` in each
dir), loads every partition directory (recovering those written since their recovery
point) and removes the marker, so that a crash from here on is detected at the next
start. On shutdown it flushes every log, writes the recovery-point and log-start-offset
checkpoints and then the marker.

Each log dir is known by the ``directory.id`` of its meta.properties (KIP-858): a new log
goes to the dir the metadata assigns it where that dir is online, and a dir that fails is
reported (``on_dir_offline``) so that the broker tells the controller.

A replica moving to another log dir has a future log there (``futures``) until it is
swapped in; one found at start is opened with its partition's log, for the move to go on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ottla.common.files import write_atomically
from ottla.common.topics import TopicPartition
from ottla.common.uuids import parse_kafka_uuid
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from ottla.storage.log import (
    DELETE_DIR_SUFFIX,
    Log,
    future_dir_name,
    log_dir_name,
    parse_future_dir_name,
    parse_log_dir_name,
)
from ottla.storage.log_config import LogConfig
from ottla.storage.meta_properties import MetaProperties, MetaPropertiesError
from ottla.storage.page_cache import PageCacheWindow
from ottla.storage.segment import DELETED_SUFFIX, LogSegment

log = logging.getLogger(__name__)



class LogManager:
    def __init__(self, log_dirs: list[str], now_ms: int,
                 skip_dirs: frozenset[str] = frozenset()) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.logs: dict[TopicPartition, Log] = {}
        self.skip_dirs = skip_dirs
        self.futures: dict[TopicPartition, Log] = {}
        """Future logs: replicas being copied to another log dir (AlterReplicaLogDirs),
        each to take its partition's place once caught up (``replace_current_with_future``)."""
        self.preferred_dirs: dict[TopicPartition, str] = {}
        """Where a partition not hosted yet is to be made (AlterReplicaLogDirs before the
        metadata placed it here: Kafka's ``maybeUpdatePreferredLogDir``)."""
        """Partition directory names owned by someone else (the metadata log)."""
        self.on_roll: Callable[[Log, int], None] | None = None
        self.in_background: Callable[[Callable[[], None]], object] = lambda job: job()
        self.page_cache: PageCacheWindow | None = None
        """The logs' drop-behind policy (``log.page.cache.window.bytes``), if set."""
        self._checkpoint_lock = threading.Lock()
        self._failed_dirs: list[str] = []
        """Log dirs whose checkpoint write failed in the background: offline next turn."""
        """Runs file removals. Unlinking a GiB of cached segment takes 0.06-0.45 s here,
        so the node hands them to a worker thread (Kafka: its scheduler threads);
        renames, which make a deletion visible, stay with the caller."""
        self._loaded: dict[TopicPartition, str] = {}
        self._found_futures: dict[TopicPartition, str] = {}
        """The future logs ``discover`` found (their paths), opened with their partition's."""
        self._checkpoints: dict[str, tuple[dict[TopicPartition, int], dict[TopicPartition, int],
                                           dict[TopicPartition, int]]] = {}
        """Per dir, the recovery points and log start offsets checkpointed before this
        start, read once, for the logs ``discover`` found."""
        self._partitions_per_dir: dict[str, int] = dict.fromkeys(self.log_dirs, 0)
        self._doomed: list[tuple[int, Any]] = []
        """(when, segment) of segments renamed .deleted, waiting for file.delete.delay.ms."""
        self.offline_dirs: set[str] = set()
        """Log dirs that had an I/O error: their partitions are offline."""
        self.cordoned_dirs: frozenset[str] = frozenset()
        """Log dirs ``cordoned.log.dirs`` names (KIP-1066, absolute): they keep their
        replicas and take no new ones while another dir can."""
        self.flush_timer: Callable[[Callable[[], None]], None] | None = None
        """Given to every log this opens, to time its segment flushes (``Log.flush_timer``);
        set before ``discover``."""
        self.on_dir_offline: Callable[[str], None] | None = None
        """Called with a log dir that has just gone offline (from within whatever
        operation failed: the callee should act on a later turn)."""
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
        self.directory_ids: dict[str, uuid.UUID] = {}
        """Each log dir's ``directory.id`` (those whose meta.properties gives one)."""
        for d in self.log_dirs:
            try:
                meta = MetaProperties.read(d)
            except MetaPropertiesError:
                meta = None
            if meta is not None and meta.directory_id:
                self.directory_ids[d] = parse_kafka_uuid(meta.directory_id)
        self.clean_shutdown = {d: os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
                               for d in self.log_dirs}
        self.previous_broker_epoch = self._read_shutdown_epoch()
        """The broker epoch of the last clean shutdown, the same in every log dir, or
        -1 (Kafka's readBrokerEpochFromCleanShutdownFiles)."""
        for d, clean in self.clean_shutdown.items():
            if not clean and any(parse_log_dir_name(n) and n not in skip_dirs
                                 for n in os.listdir(d)):
                log.info("No clean shutdown marker in %s: logs are checked above their "
                         "recovery points", d)
        self._now_ms = now_ms

    def _read_shutdown_epoch(self) -> int:
        epoch = None
        for d in self.log_dirs:
            try:
                with open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "rb") as f:
                    found = json.loads(f.read() or b"{}").get("brokerEpoch", -1)
            except (OSError, ValueError, AttributeError):
                return -1
            if not isinstance(found, int) or (epoch is not None and found != epoch):
                return -1
            epoch = found
        return -1 if epoch is None else epoch

    def discover(self) -> dict[TopicPartition, str]:
        """The partition directories on disk, per log dir (removing leftovers of deletes)."""
        found: dict[TopicPartition, str] = {}
        self._found_futures.clear()
        for d in self.log_dirs:
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path) or name in self.skip_dirs:
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                future_of = parse_future_dir_name(name)
                if future_of is not None:
                    # A move a restart interrupted: resumed once its partition's log is
                    # open (``load_log``), as Kafka's loadLogs keeps future logs.
                    if future_of in self._found_futures:  # never made by Ottla: keep one
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        self._found_futures[future_of] = path
                    continue
                tp = parse_log_dir_name(name)
                if tp is None:
                    continue
                other = found.get(tp)
                if other is not None:
                    # A crash between the two renames of a move's swap: both dirs hold
                    # the whole log, and only the new one may have taken appends since.
                    # Kafka refuses to start here; the copy that reaches further is
                    # kept, the other removed.
                    other_path = os.path.join(other, name)
                    keep, drop = (path, other_path) if _log_end_hint(path) > \
                        _log_end_hint(other_path) else (other_path, path)
                    log.warning("Duplicate log directories for %s in %s and %s: keeping "
                                "%s, the one that reaches further", name, other, d, keep)
                    shutil.rmtree(drop, ignore_errors=True)
                    if keep == other_path:
                        continue
                found[tp] = d
        self._loaded = found
        self._checkpoints.clear()
        return found

    def use_page_cache_window(self, window_bytes: int) -> None:
        """Keep only each segment's newest ``window_bytes`` cached (log.page.cache.window.bytes),
        the work done by whatever ``in_background`` is when it comes (inline at shutdown)."""
        self.page_cache = PageCacheWindow(window_bytes, lambda job: self.in_background(job),
                                          self._write_back_failed)
        for log_ in self.logs.values():
            log_.use_page_cache_window(self.page_cache)

    def _write_back_failed(self, segment: LogSegment, error: OSError) -> None:
        """From a worker thread: the segment's dir goes offline on the loop's next turn."""
        log.error("Writing back %s failed: %s", segment.path, error)
        self._failed_dirs.append(os.path.dirname(segment.directory))

    def load_log(self, tp: TopicPartition, config: LogConfig, topic_id: uuid.UUID | None,
                 now_ms: int, directory: uuid.UUID | None = None) -> Log:
        """Open (recovering if needed) a log found by ``discover``, or create it: in the
        log dir whose id is ``directory`` (where the metadata places the replica) if that
        dir is online, else in the least loaded online dir.

        An I/O error (a full disk: ENOSPC) takes the log dir offline, not the node: a new
        log is then made in another online dir, one found on disk stays where it is, and
        with nowhere to put it this raises KAFKA_STORAGE_ERROR (Kafka's getOrCreateLog),
        so the partition is offline until a restart with the dir repaired. So does a log
        whose dir went offline while it was open."""
        existing = self.logs.get(tp)
        if existing is not None:
            if existing.offline:
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"{log_dir_name(*tp)}: log directory "
                                 f"{os.path.dirname(existing.dir)} is offline")
            existing.config = config
            return existing
        found = self._loaded.get(tp)
        while True:
            parent = found or self._assigned_dir(directory) or self._preferred_dir(tp) \
                or self._least_loaded_dir()
            if parent in self.offline_dirs:  # its own dir, or every dir, is offline
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"{log_dir_name(*tp)}: log directory {parent} is offline")
            try:
                log_ = self._open_log(parent, tp, config, topic_id, now_ms, found is not None)
            except OSError as e:
                log.error("I/O error in log directory %s opening %s: %s", parent,
                          log_dir_name(*tp), e)
                self.mark_offline(parent)
                if found is None:  # leave nothing half made for the next start to find
                    shutil.rmtree(os.path.join(parent, log_dir_name(*tp)), ignore_errors=True)
                continue
            break
        self.logs[tp] = log_
        self.preferred_dirs.pop(tp, None)
        self._partitions_per_dir[parent] += 1
        self._resume_future(tp, log_, now_ms)
        return log_

    def _resume_future(self, tp: TopicPartition, current: Log, now_ms: int) -> None:
        """Open the future log of ``tp`` a restart found, for its move to go on; one in
        an offline dir, or in the log's own dir, is removed instead."""
        path = self._found_futures.pop(tp, None)
        if path is None:
            return
        parent = os.path.dirname(path)
        if parent in self.offline_dirs or parent == os.path.dirname(current.dir):
            shutil.rmtree(path, ignore_errors=True)
            return
        try:
            future = self._open_log(parent, tp, current.config, current.topic_id, now_ms,
                                    False, name=os.path.basename(path))
        except OSError as e:
            log.error("I/O error in log directory %s opening %s: %s", parent, path, e)
            self.mark_offline(parent)
            return
        log.info("Resuming the move of %s to %s at offset %d", log_dir_name(*tp), parent,
                 future.log_end_offset)
        self.futures[tp] = future

    def _preferred_dir(self, tp: TopicPartition) -> str | None:
        preferred = self.preferred_dirs.get(tp)
        return preferred if preferred not in self.offline_dirs else None

    def check_log_dir(self, log_dir: str) -> None:
        """Raise unless ``log_dir`` is one of this node's log dirs, online and not
        cordoned (Kafka's ``alterReplicaLogDirs``: LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR,
        INVALID_REPLICA_ASSIGNMENT)."""
        if log_dir not in self.log_dirs:
            raise KafkaError(ErrorCode.log_dir_not_found,
                             f"Log dir {log_dir} is not found in the config.")
        if log_dir in self.offline_dirs:
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"Log directory {log_dir} is offline")
        if log_dir in self.cordoned_dirs:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Log directory {log_dir} is cordoned")

    def create_future_log(self, tp: TopicPartition, log_dir: str, now_ms: int) -> Log:
        """An empty future log of ``tp`` in ``log_dir``, for its replica to be copied
        into (the current log's config and topic id)."""
        current = self.logs[tp]
        future = self._open_log(log_dir, tp, current.config, current.topic_id, now_ms, False,
                                name=future_dir_name(*tp))
        future.log_start_offset = current.log_start_offset
        future.truncate_fully_and_start_at(current.log_start_offset, now_ms)
        self.futures[tp] = future
        return future

    def abort_future_log(self, tp: TopicPartition) -> None:
        """Give up a move: the future log is closed and removed."""
        future = self.futures.pop(tp, None)
        if future is not None:
            doomed = future.rename_for_deletion()
            self.in_background(lambda: shutil.rmtree(doomed, ignore_errors=True))

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """The caught-up future log of ``tp`` becomes its log, under the partition's name
        in its own dir; the old one is renamed ``.<uuid>-delete`` and removed in the
        background (Kafka's ``replaceCurrentWithFutureLog``). The caller carries over
        what the log's owner keeps beside the files (high watermark and the like)."""
        future, current = self.futures.pop(tp), self.logs[tp]
        # The new name first: a crash between the renames leaves two whole copies of
        # the same records, never none (``discover`` keeps the one that reaches further).
        future.rename_dir(os.path.join(os.path.dirname(future.dir), log_dir_name(*tp)))
        self.logs[tp] = future
        self._partitions_per_dir[os.path.dirname(current.dir)] -= 1
        self._partitions_per_dir[os.path.dirname(future.dir)] += 1
        doomed = current.rename_for_deletion()
        self.in_background(lambda: shutil.rmtree(doomed, ignore_errors=True))
        self.checkpoint()  # the figures of both dirs, now that the log changed dirs
        self.checkpoint_high_watermarks()
        return future

    def _open_log(self, parent: str, tp: TopicPartition, config: LogConfig,
                  topic_id: uuid.UUID | None, now_ms: int, found: bool,
                  name: str | None = None) -> Log:
        # A new log starts at 0 whatever an old checkpoint says about a namesake.
        recovery_point, log_start_offset, high_watermark = \
            self._checkpointed(parent, tp) if found else (0, 0, 0)
        log_ = Log(os.path.join(parent, name or log_dir_name(*tp)), tp[0], tp[1], config,
                   topic_id=topic_id, now_ms=now_ms, recovery_point=recovery_point,
                   log_start_offset=log_start_offset,
                   clean_shutdown=self.clean_shutdown.get(parent, False))
        # The high watermark last checkpointed: committed then, so still committed now
        # (a replica that truncated below it lowers it again when it fetches).
        log_.high_watermark = max(log_.log_start_offset,
                                  min(high_watermark, log_.log_end_offset))
        log_.on_roll = self.on_roll
        log_.flush_timer = self.flush_timer
        log_.discard = self._discard_segments
        log_.use_page_cache_window(self.page_cache)
        log_.on_io_error = lambda failed: self.mark_offline(os.path.dirname(failed.dir))
        return log_

    def _checkpointed(self, parent: str, tp: TopicPartition) -> tuple[int, int, int]:
        """(recovery point, log start offset, high watermark) of a log found on disk. The
        checkpoint files are read once per dir: reading them per log made opening n logs
        cost n^2."""
        offsets = self._checkpoints.get(parent)
        if offsets is None:
            offsets = self._checkpoints[parent] = (
                read_offsets(os.path.join(parent, RECOVERY_POINT_CHECKPOINT)),
                read_offsets(os.path.join(parent, LOG_START_OFFSET_CHECKPOINT)),
                read_offsets(os.path.join(parent, REPLICATION_OFFSET_CHECKPOINT)))
        return offsets[0].get(tp, 0), offsets[1].get(tp, 0), offsets[2].get(tp, 0)

    def _assigned_dir(self, directory: uuid.UUID | None) -> str | None:
        """The online log dir whose id is ``directory``, if any."""
        if directory is None:
            return None
        return next((d for d, dir_id in self.directory_ids.items()
                     if dir_id == directory and d not in self.offline_dirs), None)

    def directory_id(self, log_dir: str) -> uuid.UUID | None:
        """The ``directory.id`` of a log dir (None if its meta.properties has none)."""
        return self.directory_ids.get(log_dir)

    def directory_id_of(self, tp: TopicPartition) -> uuid.UUID | None:
        """The id of the log dir holding ``tp``'s open log."""
        log_ = self.logs.get(tp)
        return None if log_ is None else self.directory_ids.get(os.path.dirname(log_.dir))

    def forget_offline(self, tp: TopicPartition) -> None:
        """Drop the open log of ``tp`` if its dir is offline (its topic was deleted): the
        files stay for the dir's repair, and a topic made again under the name gets a
        new log in an online dir."""
        log_ = self.logs.get(tp)
        if log_ is not None and log_.offline:
            del self.logs[tp]
            self._partitions_per_dir[os.path.dirname(log_.dir)] -= 1

    def _least_loaded_dir(self) -> str:
        """Where a new partition goes (Kafka's ``nextLogDirs``): the online log dir with
        the fewest partitions (counted as logs open and close, not by walking them for
        every new one) among those not cordoned; the first online one when all are."""
        online = [d for d in self.log_dirs if d not in self.offline_dirs] or self.log_dirs
        open_ = [d for d in online if d not in self.cordoned_dirs]
        if not open_:
            return online[0]
        counts = self._partitions_per_dir
        return min(open_, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def mark_offline(self, log_dir: str) -> None:
        """A log dir failed: every partition in it goes offline (KAFKA_STORAGE_ERROR);
        the node keeps serving the other dirs."""
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        log.error("Log directory %s is offline; its partitions answer KAFKA_STORAGE_ERROR",
                  log_dir)
        for log_ in [*self.logs.values(), *self.futures.values()]:
            if os.path.dirname(log_.dir) == log_dir:
                log_.offline = True
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir)

    def _online(self, log_dir: str, action: Callable[[], None]) -> None:
        if log_dir in self.offline_dirs:
            return
        try:
            action()
        except OSError as e:
            log.error("I/O error in log directory %s: %s", log_dir, e)
            self.mark_offline(log_dir)

    def started(self) -> None:
        """Loading is done: remove the clean-shutdown markers so a crash is noticed, and
        the future logs of partitions no longer here."""
        for path in self._found_futures.values():
            log.info("Deleting the future log %s of a partition not hosted here", path)
            shutil.rmtree(path, ignore_errors=True)
        self._found_futures.clear()
        for d in self.log_dirs:
            try:
                os.unlink(os.path.join(d, CLEAN_SHUTDOWN_FILE))
            except FileNotFoundError:
                pass
        self._loaded.clear()
        self._checkpoints.clear()

    def delete_stray(self, keep: set[TopicPartition]) -> None:
        """Delete partition directories on disk that the metadata no longer knows."""
        for tp in list(self._loaded):
            if tp not in keep and tp not in self.logs:
                path = os.path.join(self._loaded[tp], log_dir_name(*tp))
                log.info("Deleting stray log %s", path)
                shutil.rmtree(path, ignore_errors=True)
                del self._loaded[tp]

    def delete_log(self, tp: TopicPartition) -> None:
        self.abort_future_log(tp)
        log_ = self.logs.pop(tp, None)
        if log_ is not None:
            self._partitions_per_dir[os.path.dirname(log_.dir)] -= 1
            doomed = log_.rename_for_deletion()
            self.in_background(lambda: shutil.rmtree(doomed, ignore_errors=True))

    def update_configs(self, configs: Mapping[TopicPartition, LogConfig]) -> None:
        for tp, config in configs.items():
            if tp in self.logs:
                self.logs[tp].config = config

    def flush_dirty(self, now_ms: int) -> None:
        """fsync logs whose ``flush.ms`` has passed since their last flush."""
        self._take_failed_dirs_offline()
        for log_ in self.logs.values():
            if not log_.offline and log_.recovery_point < log_.log_end_offset and \
                    now_ms - log_.last_flush_ms >= log_.config.flush_ms:
                self._online(os.path.dirname(log_.dir), log_.flush)
                log_.last_flush_ms = now_ms

    def cleanup(self, now_ms: int) -> int:
        """Retention for every log (log.retention.check.interval.ms): segments past
        ``retention.ms``/``retention.bytes`` are renamed ``.deleted`` now and unlinked
        ``file.delete.delay.ms`` later. Returns the number of segments deleted."""
        count = 0
        for log_ in list(self.logs.values()):
            if log_.offline:
                continue
            try:
                doomed = log_.delete_old_segments(now_ms)
            except OSError as e:
                log_.fail(e)
                continue
            if doomed:
                count += len(doomed)
                delay = log_.config["file.delete.delay.ms"]
                self._doomed.extend((now_ms + delay, s) for s in doomed)
        if count:
            self.checkpoint()
        self.delete_doomed(now_ms)
        return count

    def delete_doomed(self, now_ms: int, force: bool = False) -> None:
        """Close and unlink deleted segments whose delay has passed."""
        keep, due_now = [], []
        for due, segment in self._doomed:
            if force or due <= now_ms:
                segment.close()
                due_now.extend(path + DELETED_SUFFIX for path in segment.all_files())
            else:
                keep.append((due, segment))
        self._doomed = keep
        if due_now:
            self.in_background(lambda: unlink_all(due_now))

    def _discard_segments(self, segments: list[LogSegment]) -> None:
        """Segments a log cut off (DeleteRecords, truncation): closed now, their files
        unlinked by ``in_background``."""
        paths = []
        for segment in segments:
            segment.close()
            paths.extend(segment.all_files())
        self.in_background(lambda: unlink_all(paths))

    def checkpoint(self) -> None:
        """Write recovery points and log start offsets of every online log dir: the
        figures are taken here, the files written (and fsynced, which took tens of ms
        under heavy writeback) by ``in_background``; a failed write takes its dir
        offline at the next call or ``flush_dirty``."""
        self._take_failed_dirs_offline()
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            logs = [(tp, lg) for tp, lg in self.logs.items() if os.path.dirname(lg.dir) == d]
            recovery_points = {tp: lg.recovery_point for tp, lg in logs}
            start_offsets = {tp: lg.log_start_offset for tp, lg in logs}

            def write(d: str = d, recovery_points: dict[TopicPartition, int] = recovery_points,
                      start_offsets: dict[TopicPartition, int] = start_offsets) -> None:
                try:
                    with self._checkpoint_lock:  # one writer per file at a time
                        write_offsets(os.path.join(d, RECOVERY_POINT_CHECKPOINT),
                                      recovery_points)
                        write_offsets(os.path.join(d, LOG_START_OFFSET_CHECKPOINT),
                                      start_offsets)
                except OSError as e:
                    log.error("I/O error in log directory %s: %s", d, e)
                    self._failed_dirs.append(d)
            self.in_background(write)
        self._take_failed_dirs_offline()

    def checkpoint_high_watermarks(self) -> None:
        """Write every online log dir's high watermarks (``replication-offset-checkpoint``,
        every ``replica.high.watermark.checkpoint.interval.ms``), in the background like
        the other checkpoints. After a crash a log starts from the last one written:
        lower than it was, never higher than what was committed."""
        self._take_failed_dirs_offline()
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            marks = {tp: lg.high_watermark for tp, lg in self.logs.items()
                     if os.path.dirname(lg.dir) == d}

            def write(d: str = d, marks: dict[TopicPartition, int] = marks) -> None:
                try:
                    with self._checkpoint_lock:
                        write_offsets(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT), marks)
                except OSError as e:
                    log.error("I/O error in log directory %s: %s", d, e)
                    self._failed_dirs.append(d)
            self.in_background(write)

    def _take_failed_dirs_offline(self) -> None:
        while self._failed_dirs:
            d = self._failed_dirs.pop()
            if d not in self.offline_dirs:
                self.mark_offline(d)

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log; the clean-shutdown marker written last holds
        ``broker_epoch`` as Kafka's does (``{"version":0,"brokerEpoch":N}``), telling
        the controller next time that nothing acknowledged was lost."""
        self.in_background = lambda job: job()  # the worker threads may be gone
        self.delete_doomed(0, force=True)
        for log_ in self.logs.values():
            self._online(os.path.dirname(log_.dir), log_.flush)
        self.checkpoint()
        self.checkpoint_high_watermarks()
        for log_ in self.logs.values():
            try:
                log_.close()
            except OSError:
                pass
        for log_ in self.futures.values():  # their moves go on at the next start
            self._online(os.path.dirname(log_.dir), log_.flush)
            try:
                log_.close()
            except OSError:
                pass
        self.futures.clear()
        marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                            separators=(",", ":")).encode()
        for d in self.log_dirs:
            # An offline dir gets no clean-shutdown marker: its logs are checked next time.
            self._online(d, lambda d=d: write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE),
                                                         marker))
        self.logs.clear()
        self._partitions_per_dir = dict.fromkeys(self.log_dirs, 0)

    def describe(self) -> dict[str, dict[TopicPartition, Any]]:
        result: dict[str, dict[TopicPartition, Any]] = {d: {} for d in self.log_dirs}
        for tp, lg in self.logs.items():
            result.setdefault(os.path.dirname(lg.dir), {})[tp] = lg
        return result

    def describe_futures(self) -> dict[str, dict[TopicPartition, Log]]:
        """The future logs per log dir (DescribeLogDirs' ``is_future_key`` entries)."""
        result: dict[str, dict[TopicPartition, Log]] = {}
        for tp, lg in self.futures.items():
            result.setdefault(os.path.dirname(lg.dir), {})[tp] = lg
        return result


def _log_end_hint(path: str) -> tuple[int, int]:
    """How far a partition directory's log reaches, from its file names and sizes alone:
    the base offset of its newest segment, then that segment's size."""
    newest = (-1, 0)
    for name in os.listdir(path):
        if name.endswith(".log"):
            try:
                base = int(name[:-4])
            except ValueError:
                continue
            if base >= newest[0]:
                newest = (base, os.path.getsize(os.path.join(path, name)))
    return newest


def unlink_all(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
