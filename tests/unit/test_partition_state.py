"""The partition's replication state and its purgatories, without a broker: the high
watermark follows the ISR, a parked ``acks=all`` write completes exactly once, on the
progress of its partition, a lost leadership, or its deadline."""

from __future__ import annotations

from ottla.broker.delayed_operations import DelayedFetch, DelayedProduce, ProducePartitionStatus
from ottla.broker.partition_state import LeaderAndIsr, PartitionState
from ottla.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from ottla.protocol.errors import ErrorCode

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
