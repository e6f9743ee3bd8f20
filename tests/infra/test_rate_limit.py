"""Fixed-window counters (infra/rate_limit.py) when requests or processes race on a window,
and the store that the /mcp router counts in from the event loop."""

from __future__ import annotations

import asyncio
import threading

from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache

from infra.rate_limit import FixedWindow, event_loop_counter_store


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


def test_requests_on_one_event_loop_share_one_store():
    async def store_of_a_request():  # each task runs in a context of its own, as a request
        return event_loop_counter_store()

    async def two_requests():
        return await asyncio.gather(store_of_a_request(), store_of_a_request())

    first, second = asyncio.run(two_requests())
    assert first is second
    assert isinstance(first, LocMemCache)  # the default cache


def test_with_a_shared_cache_each_thread_counts_through_its_own_backend_of_it(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    here = event_loop_counter_store()
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(event_loop_counter_store()))
    thread.start()
    thread.join()
    assert isinstance(here, DummyCache)
    assert isinstance(elsewhere[0], DummyCache)
    assert elsewhere[0] is not here
    assert event_loop_counter_store() is here


def test_event_loop_threads_share_the_local_memory_counts():
    """Each thread has its own backend of the local-memory cache, counting in the same process
    memory: a limit holds across the threads of one process."""
    window = FixedWindow(name="threads", limit=1, window=60, store=event_loop_counter_store())
    window.reset("tenant")
    assert window.hit("tenant") is None
    elsewhere = []

    def hit_from_another_thread():
        other = FixedWindow(name="threads", limit=1, window=60, store=event_loop_counter_store())
        elsewhere.append(other.hit("tenant"))

    thread = threading.Thread(target=hit_from_another_thread)
    thread.start()
    thread.join()
    assert elsewhere[0] is not None  # the second event of the window: over the limit
