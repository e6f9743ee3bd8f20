"""Fixed-window counters (accounts/rate_limit.py) when requests or processes race on a window,
and the per-thread backend that the /mcp router counts in."""

from __future__ import annotations

import asyncio
import threading

from django.core.cache import cache

from accounts.rate_limit import FixedWindow, event_loop_cache


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


def racing_window(store: RacingCache) -> FixedWindow:
    return FixedWindow(name="race", limit=5, window=60, store=store)


def test_a_counter_created_meanwhile_by_another_request_counts_this_one_too():
    store = RacingCache(counter_after_first_miss=5)  # the other requests reached the limit
    assert racing_window(store).hit("tenant") is not None  # the sixth event: over the limit
    assert store.counter == 6


def test_a_counter_gone_again_starts_a_new_window_at_one():
    store = RacingCache(counter_after_first_miss=None)  # created and expired in between
    store.add = lambda key, value, timeout: False
    assert racing_window(store).hit("tenant") is None
    assert store.counter == 1


def test_requests_on_one_event_loop_share_one_backend_that_counts_with_the_default_cache():
    cache.clear()

    async def backend_of_a_request():  # each task runs in a context of its own, as a request
        return event_loop_cache()

    async def two_requests():
        return await asyncio.gather(backend_of_a_request(), backend_of_a_request())

    first, second = asyncio.run(two_requests())
    assert first is second
    window = FixedWindow(name="shared", limit=2, window=60, store=first)
    window.hit("tenant")
    window.hit("tenant")
    # The same counters as the default cache's: a limit reached here is seen (and reset) there.
    assert FixedWindow(name="shared", limit=2, window=60).retry_after("tenant") is not None
    cache.clear()
    assert window.hit("tenant") is None


def test_each_thread_and_each_caches_setting_gets_its_own_backend(settings):
    here = event_loop_cache()
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(event_loop_cache()))
    thread.start()
    thread.join()
    assert elsewhere[0] is not here
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    assert type(event_loop_cache()).__name__ == "DummyCache"
