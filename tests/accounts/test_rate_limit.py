"""Fixed-window counters (accounts/rate_limit.py) when requests or processes race on a window."""

from __future__ import annotations

import pytest

from accounts import rate_limit
from accounts.rate_limit import FixedWindow


class RacingCache:
    """A shared cache where another request acts between this one's calls."""

    def __init__(self, counter_after_first_miss: int | None) -> None:
        self.counter_after_first_miss = counter_after_first_miss
        self.counter: int | None = None
        self.misses = 0

    def incr(self, key: str) -> int:
        if self.counter is None:
            self.misses += 1
            if self.misses == 1:
                self.counter = self.counter_after_first_miss
            raise ValueError(key)
        self.counter += 1
        return self.counter

    def add(self, key: str, value: int, timeout: int) -> bool:
        if self.counter is not None:  # someone else created it first
            return False
        self.counter = value
        return True

    def set(self, key: str, value: int, timeout: int) -> None:
        self.counter = value


@pytest.fixture
def window() -> FixedWindow:
    return FixedWindow(name="race", limit=5, window=60)


def test_a_counter_created_meanwhile_by_another_request_counts_this_one_too(monkeypatch, window):
    cache = RacingCache(counter_after_first_miss=5)  # the other requests reached the limit
    monkeypatch.setattr(rate_limit, "cache", cache)
    assert window.hit("tenant") is not None  # the sixth event: over the limit
    assert cache.counter == 6


def test_a_counter_gone_again_starts_a_new_window_at_one(monkeypatch, window):
    cache = RacingCache(counter_after_first_miss=None)  # created and expired in between
    cache.add = lambda key, value, timeout: False
    monkeypatch.setattr(rate_limit, "cache", cache)
    assert window.hit("tenant") is None
    assert cache.counter == 1
