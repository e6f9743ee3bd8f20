"""The one fixed-window limiter of the server: the /mcp per-user limit (counted from the event
loop), the OAuth token and registration endpoints (per client address) and the log-in throttle
(accounts/throttle.py).

A window is a fixed interval aligned to multiples of its length; an event counts in the window it
falls in, and a subject past the limit waits until that window ends. The counters live in the
default cache. With several server processes, configure a shared cache (CACHES) so that every
process sees the same counts; the local-memory default counts per process (and the /mcp limit,
counted from the event loop, then counts in `local_counts`, per process as well).
A refusal is HTTP 429 with Retry-After (RFC 6585 §4, RFC 9110 §10.2.3).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field

from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """The peer address as the ASGI server reports it. Behind a proxy, run daphne with
    --proxy-headers so that this is the client and not the proxy; X-Forwarded-For is never read
    here because any client can forge it."""
    return request.META.get("REMOTE_ADDR", "") or "unknown"


@dataclass(frozen=True)
class FixedWindow:
    """At most `limit` events per `subject` in each window of `window` seconds."""

    name: str
    limit: int
    window: int
    # Where the counters live: Django's default cache, or `event_loop_counter_store()` from
    # async code.
    store: BaseCache | LocalCounts = field(default_factory=lambda: cache, compare=False, repr=False)

    def _key(self, subject: str) -> tuple[str, int]:
        now = int(time.time())
        start = now - now % self.window
        digest = hashlib.sha256(subject.encode()).hexdigest()
        return f"throttle:{self.name}:{start}:{digest}", start + self.window - now

    def retry_after(self, subject: str) -> int | None:
        """Seconds until the window ends when the limit is reached, else None."""
        key, remaining = self._key(subject)
        if self.store.get(key, 0) >= self.limit:
            return max(remaining, 1)
        return None

    def hit(self, subject: str) -> int | None:
        """Count one event; return the seconds to wait if it went over the limit, else None."""
        key, remaining = self._key(subject)
        # One cache call in the common case (the /mcp hot path counts every request): the
        # window's counter exists.
        try:
            count = self.store.incr(key)
        except ValueError:  # the window's first event
            if self.store.add(key, 1, timeout=self.window):
                count = 1
            else:  # another request (or process) created it meanwhile
                try:
                    count = self.store.incr(key)
                except ValueError:  # ... and it expired since: a new window
                    self.store.set(key, 1, timeout=self.window)
                    count = 1
        if count > self.limit:
            return max(remaining, 1)
        return None

    def reset(self, subject: str) -> None:
        self.store.delete(self._key(subject)[0])


class LocalCounts:
    """Counters in this process's memory, with the part of Django's cache API that FixedWindow
    uses (get, incr, add, set, delete, clear).

    What the local-memory cache backend would count (per process, too), without its per-call
    work that counters do not need: checking the key character by character, pickling every
    value, keeping an LRU order: work the /mcp hot path, which counts every request, need not pay
    (docs/performance.md)."""

    SWEEP_AT = 10_000  # entries; expired windows are dropped when a new one would pass this

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, float]] = {}  # key -> (count, monotonic expiry)
        self._lock = threading.Lock()

    def _live(self, key: str, now: float) -> tuple[int, float] | None:
        entry = self._counts.get(key)
        return entry if entry is not None and entry[1] > now else None

    def get(self, key: str, default: int | None = None) -> int | None:
        entry = self._live(key, time.monotonic())
        return default if entry is None else entry[0]

    def incr(self, key: str, delta: int = 1) -> int:
        with self._lock:
            entry = self._live(key, time.monotonic())
            if entry is None:
                raise ValueError(f"Key '{key}' not found")  # as Django's backends
            count = entry[0] + delta
            self._counts[key] = (count, entry[1])
            return count

    def add(self, key: str, value: int, timeout: float) -> bool:
        with self._lock:
            now = time.monotonic()
            if self._live(key, now) is not None:
                return False
            self._store(key, value, now + timeout, now)
            return True

    def set(self, key: str, value: int, timeout: float) -> None:
        with self._lock:
            now = time.monotonic()
            self._store(key, value, now + timeout, now)

    def delete(self, key: str) -> None:
        with self._lock:
            self._counts.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()

    def _store(self, key: str, value: int, expiry: float, now: float) -> None:
        if len(self._counts) >= self.SWEEP_AT:
            self._counts = {k: entry for k, entry in self._counts.items() if entry[1] > now}
        self._counts[key] = (value, expiry)


local_counts = LocalCounts()
_event_loop_caches = threading.local()
_caches_generation = 0  # bumped when CACHES changes (tests): every thread then builds anew


def event_loop_counter_store() -> BaseCache | LocalCounts:
    """Where code on an event loop counts: `local_counts` when the default cache is the
    per-process local-memory one, else that cache's backend, one instance per thread.

    `django.core.cache.cache` resolves its backend through asgiref's `Local`, which in async code
    keeps one backend per context, and every ASGI request runs in a context of its own: each
    request built a new backend object, costing more CPU than the count itself
    (docs/performance.md). Requests on one event loop share its thread and never interleave within
    a cache call (the calls are synchronous), so one backend per thread is safe, as it is for
    Django's own per-thread backends."""
    held = getattr(_event_loop_caches, "held", None)
    if held is None or held[0] != _caches_generation:
        backend = caches.create_connection(DEFAULT_CACHE_ALIAS)
        store = local_counts if isinstance(backend, LocMemCache) else backend
        held = _event_loop_caches.held = (_caches_generation, store)
    return held[1]


@receiver(setting_changed)
def _forget_event_loop_caches(*, setting: str, **kwargs: object) -> None:
    global _caches_generation
    if setting == "CACHES":
        _caches_generation += 1
