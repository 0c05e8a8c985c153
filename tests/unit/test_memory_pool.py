"""The node's request memory pool: grants in order, waits when spent, gives back."""

from __future__ import annotations

from ottla.server.memory_pool import MemoryPool


def test_reservations_wait_in_order_when_the_pool_is_spent() -> None:
    pool = MemoryPool(100)
    granted: list[str] = []
    assert pool.reserve(60, lambda: granted.append("first"))
    assert not pool.reserve(50, lambda: granted.append("big"))
    # A small one that would fit does not overtake the big one waiting.
    assert not pool.reserve(10, lambda: granted.append("small"))
    assert pool.used == 60
    pool.release(60)
    assert granted == ["big", "small"]
    assert pool.used == 60


def test_a_cancelled_waiter_is_never_granted_and_unblocks_the_line() -> None:
    pool = MemoryPool(100)
    granted: list[str] = []
    pool.reserve(90, lambda: None)

    def gone() -> None:
        granted.append("gone")
    assert not pool.reserve(50, gone)
    assert not pool.reserve(5, lambda: granted.append("small"))
    pool.cancel(gone)
    assert granted == ["small"]
    pool.release(90)
    assert granted == ["small"] and pool.used == 5


def test_no_capacity_means_no_limit() -> None:
    pool = MemoryPool(None)
    assert pool.reserve(10**12, lambda: None)
    assert pool.available is None
