"""ExponentialBackoff: the delay of each retry, as Kafka's ExponentialBackoff computes it."""

from __future__ import annotations

import random

import pytest

from ottla.common.backoff import ExponentialBackoff


def test_the_delay_doubles_from_the_initial_one_up_to_the_ceiling() -> None:
    backoff = ExponentialBackoff(50, 1000)
    assert [backoff.backoff(n) for n in range(7)] == [50, 100, 200, 400, 800, 1000, 1000]


def test_the_ceiling_is_exact_and_a_huge_attempt_count_does_not_overflow() -> None:
    backoff = ExponentialBackoff(100, 30_000)
    assert backoff.backoff(9) == 30_000  # 100 * 2**9 = 51200, past the ceiling
    assert backoff.backoff(10**6) == 30_000


def test_another_multiplier() -> None:
    backoff = ExponentialBackoff(10, 1000, multiplier=3)
    assert [backoff.backoff(n) for n in range(6)] == [10, 30, 90, 270, 810, 1000]


def test_an_initial_delay_at_or_above_the_ceiling_is_the_ceiling_every_time() -> None:
    assert [ExponentialBackoff(500, 500).backoff(n) for n in range(3)] == [500] * 3
    assert [ExponentialBackoff(800, 500).backoff(n) for n in range(3)] == [500] * 3


def test_no_initial_delay_stays_none() -> None:
    assert [ExponentialBackoff(0, 1000).backoff(n) for n in range(12)] == [0] * 12


def test_jitter_spreads_the_delay_around_its_term_and_never_past_the_ceiling() -> None:
    backoff = ExponentialBackoff(100, 1000, jitter=0.2, rng=random.Random(7))
    for attempts, term in ((0, 100), (1, 200), (2, 400)):
        delays = [backoff.backoff(attempts) for _ in range(200)]
        assert all(0.8 * term <= d <= 1.2 * term for d in delays)
        assert len(set(delays)) > 1
    assert all(800 <= backoff.backoff(10) <= 1000 for _ in range(200))


def test_the_same_seed_gives_the_same_delays() -> None:
    def delays(seed: int) -> list[float]:
        backoff = ExponentialBackoff(100, 10_000, jitter=0.5, rng=random.Random(seed))
        return [backoff.backoff(n) for n in range(8)]

    assert delays(3) == delays(3)


@pytest.mark.parametrize(("multiplier", "jitter"), [(1, 0.0), (0.5, 0.0), (2, 1.0), (2, -0.1)])
def test_a_multiplier_that_does_not_grow_or_a_jitter_out_of_range_is_refused(
        multiplier: float, jitter: float) -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(100, 1000, multiplier=multiplier, jitter=jitter)
