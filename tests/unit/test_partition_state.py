"""The partition's replication state and its purgatories, without a broker: the high
watermark follows the ISR, a parked ``acks=all`` write completes exactly once, on the
progress of its partition, a lost leadership, or its deadline; the ISR grows and shrinks
one pending change at a time; a follower's high watermark follows its leader's; and a
fetcher's divergence and a follower's truncation are decided over the epoch history."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ottla.broker.purgatory.delayed_fetch import DelayedFetch
from ottla.broker.purgatory.delayed_operation import DelayedOperation, DelayedOperationPurgatory
from ottla.broker.purgatory.delayed_produce import DelayedProduce, ProducePartitionStatus
from ottla.broker.replication.partition_state import (
    LeaderAndIsr,
    PartitionState,
    diverging_epoch,
    leader_epoch_entries,
    truncation_offset,
)
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.leader_epoch import epoch_end_offset

LEADER, F1, F2 = 1, 2, 3
TP = ("orders", 0)


def leader_state(isr: tuple[int, ...] = (LEADER, F1, F2), epoch: int = 5,
                 log_end: int = 0) -> PartitionState:
    state = PartitionState(LEADER, LeaderAndIsr(-1, -1, 0, [], []), log_end, 0)
    state.update(LeaderAndIsr(LEADER, epoch, 1, [LEADER, F1, F2], list(isr)), now_ms=0)
    return state


# --- the high watermark ----------------------------------------------------------------

def test_a_sole_replica_high_watermark_is_its_log_end() -> None:
    state = PartitionState(LEADER, LeaderAndIsr(LEADER, 0, 0, [LEADER], [LEADER]), 0, 0)
    assert state.on_local_append(7) is True
    assert state.high_watermark == 7


def test_the_high_watermark_is_the_smallest_log_end_in_the_isr() -> None:
    state = leader_state()
    assert state.on_local_append(10) is False  # followers not heard from: it holds
    assert state.high_watermark == 0
    assert state.on_follower_fetch(F1, 6, now_ms=1) is False
    assert state.on_follower_fetch(F2, 4, now_ms=1) is True
    assert state.high_watermark == 4
    assert state.on_follower_fetch(F2, 10, now_ms=2) is True
    assert state.high_watermark == 6


def test_a_replica_outside_the_isr_does_not_hold_the_high_watermark_back() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_local_append(10)
    state.on_follower_fetch(F2, 0, now_ms=1)
    state.on_follower_fetch(F1, 10, now_ms=1)
    assert state.high_watermark == 10


def test_the_leader_high_watermark_never_moves_back() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 8, now_ms=1)
    state.on_follower_fetch(F2, 8, now_ms=1)
    assert state.high_watermark == 8
    assert state.on_follower_fetch(F1, 3, now_ms=2) is False  # a stale or restarted fetch
    assert state.high_watermark == 8


def test_a_new_leader_epoch_forgets_follower_positions_but_keeps_them_caught_up() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 10, now_ms=1)
    state.on_follower_fetch(F2, 10, now_ms=1)
    state.update(LeaderAndIsr(LEADER, 6, 2, [LEADER, F1, F2], [LEADER, F1, F2]), now_ms=50)
    assert state.followers[F1].log_end_offset == -1
    assert state.followers[F1].last_caught_up_ms == 50
    state.on_local_append(12)
    assert state.high_watermark == 10  # until the followers fetch again


def test_a_follower_fetching_to_the_log_end_is_caught_up_at_that_time() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 9, now_ms=100)
    assert state.followers[F1].last_caught_up_ms == 0
    state.on_follower_fetch(F1, 10, now_ms=200)
    assert state.followers[F1].last_caught_up_ms == 200


def test_a_follower_keeps_no_follower_positions() -> None:
    state = leader_state()
    state.update(LeaderAndIsr(F1, 6, 2, [LEADER, F1, F2], [LEADER, F1, F2]), now_ms=0)
    assert not state.is_leader and state.followers == {}
    assert state.on_follower_fetch(F2, 5, now_ms=1) is False


# --- when an acks=all write is done ----------------------------------------------------

def test_an_acks_all_write_is_done_once_the_high_watermark_covers_it() -> None:
    state = leader_state()
    state.on_local_append(10)
    assert state.check_enough_replicas(10, 5, 2) == (False, ErrorCode.none)
    state.on_follower_fetch(F1, 10, 1)
    state.on_follower_fetch(F2, 10, 1)
    assert state.check_enough_replicas(10, 5, 2) == (True, ErrorCode.none)


def test_an_isr_below_min_insync_when_done_is_not_enough_replicas_after_append() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.update(LeaderAndIsr(LEADER, 5, 2, [LEADER, F1, F2], [LEADER]), now_ms=1)
    assert state.high_watermark == 10
    assert state.check_enough_replicas(10, 5, 2) == \
        (True, ErrorCode.not_enough_replicas_after_append)


def test_a_write_from_a_lost_leadership_is_not_leader_or_follower() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.update(LeaderAndIsr(F1, 6, 2, [LEADER, F1, F2], [F1, F2]), now_ms=1)
    assert state.check_enough_replicas(10, 5, 2) == (True, ErrorCode.not_leader_or_follower)


# --- the purgatory ---------------------------------------------------------------------

class Gate(DelayedOperation):
    """Completes once ``open`` is set; counts its completions."""

    def __init__(self, deadline_ms: int) -> None:
        super().__init__(deadline_ms)
        self.open = False
        self.completions = 0
        self.expired = False

    def try_complete(self, now_ms: int) -> bool:
        return self.open and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expired = True


def test_an_operation_that_can_complete_at_once_is_never_parked() -> None:
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
    gate = Gate(100)
    gate.open = True
    assert purgatory.try_complete_else_watch(gate, ["a"], 0) is True
    assert gate.completions == 1 and purgatory.watched() == 0


def test_a_parked_operation_completes_when_a_watched_key_moves() -> None:
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
    gate = Gate(100)
    assert purgatory.try_complete_else_watch(gate, ["a", "b"], 0) is False
    assert purgatory.watched("a") == purgatory.watched("b") == 1
    assert purgatory.check_and_complete("a", 1) == 0  # moved, but not enough
    gate.open = True
    assert purgatory.check_and_complete("c", 2) == 0  # not watched there
    assert purgatory.check_and_complete("b", 3) == 1
    assert gate.completions == 1
    assert purgatory.watched("a") == 0 and purgatory.check_and_complete("a", 4) == 0
    assert purgatory.expire(1000) == 0 and gate.completions == 1 and not gate.expired


def test_operations_expire_at_their_deadline_in_order_and_only_once() -> None:
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
    deadlines: list[int] = []
    purgatory.on_deadline_change = deadlines.append
    late, early = Gate(200), Gate(100)
    purgatory.try_complete_else_watch(late, ["a"], 0)
    purgatory.try_complete_else_watch(early, ["a"], 0)
    assert deadlines == [200, 100]  # the driver hears when the earliest moves earlier
    assert purgatory.next_deadline() == 100
    assert purgatory.expire(99) == 0
    assert purgatory.expire(100) == 1 and early.expired and early.completions == 1
    assert not late.expired and purgatory.next_deadline() == 200
    late.open = True
    assert purgatory.check_and_complete("a", 150) == 1
    assert purgatory.next_deadline() is None
    assert purgatory.expire(300) == 0 and not late.expired and late.completions == 1


def test_complete_all_answers_what_is_parked() -> None:
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test")
    gates = [Gate(100), Gate(200)]
    for gate in gates:
        purgatory.try_complete_else_watch(gate, ["a"], 0)
    assert purgatory.complete_all() == 2
    assert [g.completions for g in gates] == [1, 1] and purgatory.watched() == 0


# --- the two delayed requests ----------------------------------------------------------

def parked_produce(state: PartitionState, purgatory: DelayedOperationPurgatory[tuple[str, int]],
                   required: int, answers: list[dict[tuple[str, int], ErrorCode]],
                   deadline: int = 1000, hosted: bool = True) -> DelayedProduce:
    operation = DelayedProduce(
        deadline, {TP: ProducePartitionStatus(required, state.leader_epoch, 2)},
        lambda tp: state if hosted and tp == TP else None,
        lambda statuses: answers.append({tp: s.error for tp, s in statuses.items()}))
    purgatory.try_complete_else_watch(operation, [TP], 0)
    return operation


def test_a_delayed_produce_answers_once_the_isr_has_the_records() -> None:
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("p")
    state = leader_state()
    state.on_local_append(3)
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    parked_produce(state, purgatory, 3, answers)
    state.on_follower_fetch(F1, 3, 1)
    purgatory.check_and_complete(TP, 1)
    assert answers == []
    state.on_follower_fetch(F2, 3, 2)
    purgatory.check_and_complete(TP, 2)
    assert answers == [{TP: ErrorCode.none}]
    purgatory.expire(5000)
    assert len(answers) == 1


def test_a_delayed_produce_times_out_with_request_timed_out() -> None:
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("p")
    state = leader_state()
    state.on_local_append(3)
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    parked_produce(state, purgatory, 3, answers, deadline=500)
    purgatory.expire(500)
    assert answers == [{TP: ErrorCode.request_timed_out}]


def test_a_delayed_produce_for_a_removed_partition_is_not_leader_or_follower() -> None:
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("p")
    state = leader_state()
    state.on_local_append(3)
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    operation = parked_produce(state, purgatory, 3, answers)
    operation._partition = lambda tp: None
    purgatory.check_and_complete(TP, 1)
    assert answers == [{TP: ErrorCode.not_leader_or_follower}]


def test_a_delayed_fetch_answers_with_data_or_with_what_there_is_at_its_deadline() -> None:
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("f")
    available = [0]
    answers: list[int] = []
    for deadline in (100, 200):
        purgatory.try_complete_else_watch(DelayedFetch(
            deadline, lambda: available[0] if available[0] >= 10 else None,
            lambda: available[0], answers.append), [TP], 0)
    available[0] = 4
    purgatory.expire(100)
    assert answers == [4]
    available[0] = 12
    purgatory.check_and_complete(TP, 150)
    assert answers == [4, 12]


# --- ISR expansion ---------------------------------------------------------------------
# A follower joins the ISR once its log reaches the high watermark and everything before
# this leader's epoch; one change is in flight at a time, and while it is, the high
# watermark sees the larger of the two ISRs.

def test_a_follower_joins_the_isr_only_once_it_has_the_high_watermark() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_local_append(10)
    state.on_follower_fetch(F1, 8, now_ms=1)
    assert state.high_watermark == 8
    state.on_follower_fetch(F2, 7, now_ms=1)
    assert state.isr_to_expand(F2) is None and state.pending_isr is None
    state.on_follower_fetch(F2, 8, now_ms=2)
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]
    assert state.pending_isr == [LEADER, F1, F2]
    assert state.isr == [LEADER, F1]  # not until the controller answers


def test_a_follower_joins_the_isr_only_once_it_has_what_earlier_leaders_wrote() -> None:
    # Leader of epoch 5 from offset 10: the high watermark (0, not yet advanced in this
    # epoch) is not enough, the follower needs the leader epoch's start offset.
    state = leader_state(isr=(LEADER, F1), log_end=10)
    assert (state.leader_epoch_start_offset, state.high_watermark) == (10, 0)
    state.on_follower_fetch(F2, 5, now_ms=1)
    assert state.isr_to_expand(F2) is None
    state.on_follower_fetch(F2, 10, now_ms=2)
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]


def test_isr_expansion_is_not_decided_for_members_strangers_or_on_a_follower() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_follower_fetch(F1, 0, now_ms=1)
    assert state.isr_to_expand(F1) is None  # already in
    assert state.isr_to_expand(9) is None  # not a replica
    follower = leader_state(isr=(LEADER, F1))
    follower.update(LeaderAndIsr(F1, 6, 2, [LEADER, F1, F2], [LEADER, F1]), now_ms=0)
    assert follower.isr_to_expand(F2) is None


def test_only_one_isr_change_is_pending_at_a_time() -> None:
    state = leader_state(isr=(LEADER,))
    state.on_local_append(4)
    assert state.high_watermark == 4
    state.on_follower_fetch(F1, 4, now_ms=1)
    state.on_follower_fetch(F2, 4, now_ms=1)
    assert state.isr_to_expand(F1) == [LEADER, F1]
    assert state.isr_to_expand(F2) is None  # caught up too, but F1's change is in flight
    assert state.isr_to_shrink(now_ms=10**9, replica_lag_time_max_ms=1) is None
    assert state.isr_answered([LEADER, F1], 2) is False
    assert state.isr == [LEADER, F1] and state.pending_isr is None
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]


def test_a_pending_addition_holds_the_high_watermark_back() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_local_append(10)
    state.on_follower_fetch(F1, 6, now_ms=1)
    state.on_follower_fetch(F2, 6, now_ms=1)
    assert state.high_watermark == 6
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]
    assert state.maximal_isr == [LEADER, F1, F2]
    assert state.on_follower_fetch(F1, 10, now_ms=2) is False  # F2 counts already
    assert state.high_watermark == 6
    assert state.on_follower_fetch(F2, 8, now_ms=2) is True
    assert state.high_watermark == 8


# --- ISR shrink ------------------------------------------------------------------------

LAG_MS = 30_000


def test_a_follower_behind_the_log_end_for_the_lag_time_leaves_the_isr() -> None:
    state = leader_state()  # every follower caught up as of 0, when it became leader
    state.on_local_append(10)
    state.on_follower_fetch(F1, 10, now_ms=LAG_MS)
    state.on_follower_fetch(F2, 4, now_ms=LAG_MS)
    assert state.isr_to_shrink(now_ms=LAG_MS, replica_lag_time_max_ms=LAG_MS) is None
    assert state.isr_to_shrink(now_ms=LAG_MS + 1, replica_lag_time_max_ms=LAG_MS) == \
        [LEADER, F1]
    assert state.pending_isr == [LEADER, F1]


def test_a_follower_at_the_log_end_stays_in_the_isr_however_long_since_it_caught_up(
        ) -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 10, now_ms=1)
    state.on_follower_fetch(F2, 10, now_ms=1)
    # Nothing was written since: no fetch brings them further, and they need nothing.
    assert state.isr_to_shrink(now_ms=10 * LAG_MS, replica_lag_time_max_ms=LAG_MS) is None
    state.on_local_append(12)
    state.on_follower_fetch(F1, 12, now_ms=10 * LAG_MS)
    assert state.isr_to_shrink(now_ms=10 * LAG_MS, replica_lag_time_max_ms=LAG_MS) == \
        [LEADER, F1]


def test_a_follower_never_heard_from_leaves_the_isr_after_the_lag_time() -> None:
    state = leader_state()
    state.on_local_append(3)
    state.on_follower_fetch(F1, 3, now_ms=LAG_MS + 1)
    assert state.isr_to_shrink(now_ms=LAG_MS + 1, replica_lag_time_max_ms=LAG_MS) == \
        [LEADER, F1]


def test_followers_keeping_up_with_steady_writes_stay_in_the_isr() -> None:
    # Every 100 ms the leader appends, then each follower fetches from where the leader's
    # log ended at its previous fetch: never at the log end when it fetches, but never
    # more than one fetch behind (Kafka's lastFetchLeaderLogEndOffset rule).
    state = leader_state()
    end_at_last_fetch = 0
    now = 0
    for step in range(1, 4 * LAG_MS // 100):
        now = step * 100
        state.on_local_append(state.log_end_offset + 10)
        state.on_follower_fetch(F1, end_at_last_fetch, now_ms=now)
        state.on_follower_fetch(F2, end_at_last_fetch, now_ms=now)
        assert state.followers[F1].log_end_offset < state.log_end_offset
        end_at_last_fetch = state.log_end_offset
    assert state.isr_to_shrink(now_ms=now, replica_lag_time_max_ms=LAG_MS) is None
    assert state.followers[F1].last_caught_up_ms == now - 100
    # F2 stops fetching: it leaves once the lag time has passed since its last catch-up.
    state.on_local_append(state.log_end_offset + 10)
    state.on_follower_fetch(F1, end_at_last_fetch, now_ms=now + 100)
    assert state.followers[F1].last_caught_up_ms == now
    assert state.isr_to_shrink(now_ms=now - 100 + LAG_MS,
                               replica_lag_time_max_ms=LAG_MS) is None
    assert state.isr_to_shrink(now_ms=now - 100 + LAG_MS + 1,
                               replica_lag_time_max_ms=LAG_MS) == [LEADER, F1]


def test_a_follower_that_falls_further_behind_with_each_fetch_leaves_the_isr() -> None:
    state = leader_state()
    for step in range(1, 2 * LAG_MS // 100):
        state.on_local_append(state.log_end_offset + 10)
        behind = state.log_end_offset - 5 * step  # it gets less than was written
        state.on_follower_fetch(F1, state.log_end_offset, now_ms=step * 100)
        state.on_follower_fetch(F2, behind, now_ms=step * 100)
    now = (2 * LAG_MS // 100 - 1) * 100
    assert state.isr_to_shrink(now_ms=now, replica_lag_time_max_ms=LAG_MS) == [LEADER, F1]


def test_a_pending_removal_keeps_the_removed_replica_counting_until_answered() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F2, 4, now_ms=1)
    state.on_follower_fetch(F1, 10, now_ms=LAG_MS + 1)
    assert state.high_watermark == 4
    assert state.isr_to_shrink(now_ms=LAG_MS + 1, replica_lag_time_max_ms=LAG_MS) == \
        [LEADER, F1]
    assert state.maximal_isr == [LEADER, F1, F2]
    state.on_local_append(11)
    assert state.on_follower_fetch(F1, 11, now_ms=LAG_MS + 2) is False
    assert state.high_watermark == 4  # F2 may still be in the ISR the controller has
    assert state.isr_answered([LEADER, F1], 2) is True
    assert (state.isr, state.assignment.partition_epoch, state.high_watermark) == \
        ([LEADER, F1], 2, 11)


# --- the controller's answer -----------------------------------------------------------

def test_an_answered_expansion_applies_the_isr_and_its_partition_epoch() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_local_append(6)
    state.on_follower_fetch(F1, 6, now_ms=1)
    state.on_follower_fetch(F2, 6, now_ms=1)
    state.isr_to_expand(F2)
    assert state.isr_answered([LEADER, F1, F2], 2) is False  # 6 was already committed
    assert state.assignment == LeaderAndIsr(LEADER, 5, 2, [LEADER, F1, F2],
                                            [LEADER, F1, F2])
    assert state.pending_isr is None


def test_an_error_answer_changes_nothing_but_allows_a_new_change() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_follower_fetch(F2, 0, now_ms=1)
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]
    before = LeaderAndIsr(LEADER, 5, 1, [LEADER, F1, F2], [LEADER, F1])
    assert state.isr_answered(None, -1) is False
    assert state.assignment == before and state.pending_isr is None
    assert state.isr_to_expand(F2) == [LEADER, F1, F2]  # the next event tries again


def test_an_answer_with_a_stale_partition_epoch_changes_nothing_but_clears_pending() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_follower_fetch(F2, 0, now_ms=1)
    state.isr_to_expand(F2)
    assert state.isr_answered([LEADER, F1, F2], 1) is False  # the epoch it has already
    assert state.isr == [LEADER, F1] and state.assignment.partition_epoch == 1
    assert state.pending_isr is None


def test_a_metadata_update_with_a_new_partition_epoch_clears_the_pending_change() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_follower_fetch(F2, 0, now_ms=1)
    state.isr_to_expand(F2)
    # The same assignment again (a delta touching something else) leaves it pending.
    state.update(LeaderAndIsr(LEADER, 5, 1, [LEADER, F1, F2], [LEADER, F1]), now_ms=2)
    assert state.pending_isr == [LEADER, F1, F2]
    # The controller committed the change (or another) first: the image overtakes it.
    state.update(LeaderAndIsr(LEADER, 5, 2, [LEADER, F1, F2], [LEADER, F1, F2]), now_ms=3)
    assert state.pending_isr is None and state.isr == [LEADER, F1, F2]
    assert state.followers[F2].log_end_offset == 0  # the same leader epoch: kept


# --- a follower's high watermark -------------------------------------------------------

def follower_state(log_end: int) -> PartitionState:
    state = PartitionState(F1, LeaderAndIsr(-1, -1, 0, [], []), log_end, 0)
    state.update(LeaderAndIsr(LEADER, 5, 1, [LEADER, F1, F2], [LEADER, F1, F2]), now_ms=0)
    assert not state.is_leader
    return state


def test_a_follower_high_watermark_is_its_leaders_as_far_as_its_log_reaches() -> None:
    state = follower_state(log_end=10)
    assert state.on_leader_high_watermark(7) is True and state.high_watermark == 7
    assert state.on_leader_high_watermark(15) is True and state.high_watermark == 10
    assert state.on_leader_high_watermark(15) is False
    state.on_local_append(12)
    assert state.high_watermark == 10  # an append alone does not move it on a follower
    assert state.on_leader_high_watermark(15) is True and state.high_watermark == 12


def test_a_follower_high_watermark_may_move_back() -> None:
    state = follower_state(log_end=10)
    state.on_leader_high_watermark(10)
    assert state.on_leader_high_watermark(8) is True  # a new leader that knows less
    assert state.high_watermark == 8
    state.on_truncation(6)
    assert (state.log_end_offset, state.high_watermark) == (6, 6)
    assert state.on_leader_high_watermark(8) is False and state.high_watermark == 6


def test_a_leader_ignores_a_leader_high_watermark() -> None:
    state = leader_state()
    state.on_local_append(10)
    assert state.on_leader_high_watermark(10) is False and state.high_watermark == 0


# --- divergence and truncation ----------------------------------------------------------

@dataclass(slots=True)
class History:
    """An epoch history as a list of (epoch, start offset), answering as the leader-epoch
    cache does."""

    entries: list[tuple[int, int]]

    def end_offset_for_leader_epoch(self, epoch: int, log_end_offset: int
                                    ) -> tuple[int, int]:
        return epoch_end_offset(self.entries, epoch, log_end_offset)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1


# The leader's log: epoch 0 from 0, epoch 2 from 5, epoch 4 from 8, up to 10.
LEADER_HISTORY = History([(0, 0), (2, 5), (4, 8)])


def test_a_fetcher_whose_last_epoch_ends_at_or_after_its_offset_has_not_diverged() -> None:
    assert diverging_epoch(LEADER_HISTORY, 4, 10, 0, 10) is None
    assert diverging_epoch(LEADER_HISTORY, 4, 9, 0, 10) is None
    assert diverging_epoch(LEADER_HISTORY, 2, 8, 0, 10) is None  # epoch 2 ends at 8
    assert diverging_epoch(LEADER_HISTORY, 0, 3, 0, 10) is None


def test_a_fetcher_past_where_its_last_epoch_ends_on_the_leader_has_diverged() -> None:
    assert diverging_epoch(LEADER_HISTORY, 2, 9, 0, 10) == (2, 8)
    assert diverging_epoch(LEADER_HISTORY, 0, 6, 0, 10) == (0, 5)


def test_a_fetcher_with_an_epoch_the_leader_never_had_diverged_at_the_one_below() -> None:
    # Epoch 3 was a leader whose records nobody else got: the leader's epoch 2 ends at 8.
    assert diverging_epoch(LEADER_HISTORY, 3, 7, 0, 10) == (2, 8)
    assert diverging_epoch(LEADER_HISTORY, 1, 4, 0, 10) == (0, 5)


def test_a_last_epoch_the_leader_cannot_place_is_offset_out_of_range() -> None:
    with pytest.raises(KafkaError) as raised:
        diverging_epoch(LEADER_HISTORY, 5, 10, 0, 10)  # above every epoch the leader has
    assert raised.value.code == ErrorCode.offset_out_of_range
    with pytest.raises(KafkaError) as raised:
        diverging_epoch(History([]), 0, 0, 0, 0)  # a leader with no epochs at all
    assert raised.value.code == ErrorCode.offset_out_of_range


def test_a_fetch_before_the_leaders_log_start_is_offset_out_of_range() -> None:
    with pytest.raises(KafkaError) as raised:
        diverging_epoch(LEADER_HISTORY, 2, 3, 4, 10)
    assert raised.value.code == ErrorCode.offset_out_of_range


def test_an_epoch_older_than_the_leaders_history_ends_where_its_history_starts() -> None:
    # The leader deleted epochs 0 and 1: its history starts with epoch 2 at 5.
    history = History([(2, 5), (4, 8)])
    assert diverging_epoch(history, 1, 5, 5, 10) is None
    assert diverging_epoch(history, 1, 7, 5, 10) == (1, 5)


def test_a_follower_truncates_to_where_the_leaders_copy_of_the_epoch_ends() -> None:
    follower = History([(0, 0), (2, 5)])
    assert truncation_offset(follower, 2, 7, 0, 10) == 7
    assert truncation_offset(follower, 0, 4, 0, 10) == 4  # its own epoch 0 ends at 5


def test_a_follower_truncates_to_its_own_copy_of_the_epoch_if_shorter() -> None:
    follower = History([(0, 0), (2, 5), (3, 6)])
    assert truncation_offset(follower, 2, 8, 0, 9) == 6
    assert truncation_offset(History([(0, 0)]), 0, 8, 0, 5) == 5  # its log ends first


def test_a_follower_without_the_leaders_epoch_truncates_to_its_largest_earlier_one() -> None:
    # The leader's epoch 3 ends at 7; this follower went from epoch 2 (ending at 8) to 4.
    follower = History([(0, 0), (2, 5), (4, 8)])
    assert truncation_offset(follower, 3, 7, 0, 10) == 8
    # Its next fetch names epoch 2, which ends at 6 on the leader: cut again there.
    assert truncation_offset(History([(0, 0), (2, 5)]), 2, 6, 0, 8) == 6


def test_a_follower_without_epochs_up_to_the_leaders_truncates_to_the_leaders_end() -> None:
    assert truncation_offset(History([(0, 0)]), 3, 4, 0, 9) == 4  # only epochs below
    assert truncation_offset(History([(5, 0)]), 3, 4, 0, 9) == 0  # 3 is older than all
    assert truncation_offset(History([]), 3, 4, 0, 9) == 4
    assert truncation_offset(History([]), -1, 4, 0, 9) == 4
    assert truncation_offset(History([(0, 0)]), 0, 2, 3, 9) == 3  # never below its start


# --- KIP-392: reading from the nearest replica -------------------------------------------

RACKS = {LEADER: "a", F1: "b", F2: "b"}


def test_a_consumer_in_the_leaders_rack_or_without_one_reads_the_leader() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 10, now_ms=1)
    assert state.preferred_read_replica(5, "a", RACKS.get) == -1
    assert state.preferred_read_replica(5, "", RACKS.get) == -1
    assert state.preferred_read_replica(5, "c", RACKS.get) == -1  # nobody in that rack


def test_a_consumer_in_a_followers_rack_is_sent_to_the_follower_furthest_ahead() -> None:
    state = leader_state()
    state.on_local_append(10)
    state.on_follower_fetch(F1, 6, now_ms=1)
    state.on_follower_fetch(F2, 9, now_ms=1)
    assert state.preferred_read_replica(5, "b", RACKS.get) == F2
    # A follower that does not have the fetch offset yet is no candidate.
    assert state.preferred_read_replica(8, "b", {**RACKS, F2: "z"}.get) == -1


def test_a_follower_outside_the_isr_is_never_preferred() -> None:
    state = leader_state(isr=(LEADER, F1))
    state.on_local_append(10)
    state.on_follower_fetch(F2, 10, now_ms=1)
    assert state.preferred_read_replica(5, "b", {**RACKS, F1: "x"}.get) == -1


def test_a_new_leaders_own_epoch_starts_at_its_log_end_before_any_append() -> None:
    """A follower whose last epoch lies between the leader's latest written epoch and
    the leader's current one is told where the written one ends (instead of being
    refused OFFSET_OUT_OF_RANGE), so it cuts what a deposed leader gave it."""
    entries = [(0, 0), (3, 10)]
    history = History(entries)
    # The follower got epoch 4 records (offsets 15..19) from a leader that lost them.
    assert diverging_epoch(history, 4, 20, 0, 15, leader_epoch=5) == (3, 15)
    # Without the leader's own epoch (a follower's view), epoch 4 is simply unknown.
    with pytest.raises(KafkaError) as unknown:
        diverging_epoch(history, 4, 20, 0, 15)
    assert unknown.value.code == ErrorCode.offset_out_of_range


def test_a_leaders_epochs_hold_its_own_from_its_log_end_as_kafkas_cache_does() -> None:
    """Kafka's new leader assigns its epoch at its log end at once (``makeLeader``)."""
    assert leader_epoch_entries([], 0, 0) == [(0, 0)]  # a new, empty partition
    assert leader_epoch_entries([(0, 0), (3, 10)], 5, 15) == [(0, 0), (3, 10), (5, 15)]
    # Once it has written in its epoch the log's own entries say it all.
    assert leader_epoch_entries([(0, 0), (5, 15)], 5, 20) == [(0, 0), (5, 15)]
    # An entry at the log end (the deleted log's epoch, kept at its start) gives way.
    assert leader_epoch_entries([(3, 10)], 4, 10) == [(4, 10)]
    assert leader_epoch_entries([(0, 0)], -1, 5) == [(0, 0)]  # no epoch: no leader


def test_with_elr_the_high_watermark_waits_for_min_isr_in_sync_replicas() -> None:
    """KIP-966: below min.insync.replicas the high watermark stops, so the replicas that
    left the ISR still have everything committed (and stay eligible to lead)."""
    state = leader_state(isr=(LEADER, F1))
    state.hw_min_isr = 2
    state.on_local_append(5)
    state.on_follower_fetch(F1, 5, now_ms=1)
    assert state.high_watermark == 5
    state.update(LeaderAndIsr(LEADER, 5, 2, [LEADER, F1, F2], [LEADER]), now_ms=2)
    assert state.on_local_append(9) is False
    assert state.high_watermark == 5
    state.hw_min_isr = 0  # without ELR a lone leader commits alone
    assert state.on_local_append(10) is True and state.high_watermark == 10
