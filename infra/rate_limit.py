"""The one fixed-window limiter of the server: the /mcp per-user limit (counted from the event
loop), the OAuth token and registration endpoints (per client address) and the log-in throttle
(accounts/throttle.py).

A window is a fixed interval aligned to multiples of its length; an event counts in the window it
falls in, and a subject past the limit waits until that window ends. The counters live in the
default cache. With several server processes, configure a shared cache (CACHES) so that every
process sees the same counts; the local-memory default counts per process (and the /mcp limit,
counted from the event loop, counts per process as well).
A refusal is HTTP 429 with Retry-After (RFC 6585 §4, RFC 9110 §10.2.3).
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from dataclasses import dataclass, field

from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, cache, caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest


def client_network(request: HttpRequest) -> str:
    """The peer, as the limits per client address count it: the address the ASGI server reports,
    an IPv6 one by its /64 (RFC 4291 §2.5.4: a host or a LAN is given a whole /64, and could
    count a fresh address for each request) and an IPv4-mapped one as its IPv4 address. Behind a
    proxy, run uvicorn with --proxy-headers --forwarded-allow-ips <the proxy's address>
    (deploy/nginx.conf) so that this is the client and not the proxy (not daphne's
    --proxy-headers, which takes X-Forwarded-For from any client); X-Forwarded-For is never read
    here because any client can forge it."""
    address = request.META.get("REMOTE_ADDR", "") or "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


@dataclass(frozen=True)
class FixedWindow:
    """At most `limit` events per `subject` in each window of `window` seconds."""

    name: str
    limit: int
    window: int
    # Where the counters live: Django's default cache, or `event_loop_counter_store()` from
    # async code.
    store: BaseCache = field(default_factory=lambda: cache, compare=False, repr=False)

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


_event_loop_caches = threading.local()
_caches_generation = 0  # bumped when CACHES changes (tests): every thread then builds anew


def event_loop_counter_store() -> BaseCache:
    """Where code on an event loop counts: the default cache's backend, one instance per thread
    (instances of the local-memory backend share their counters within the process).

    `django.core.cache.cache` resolves its backend through asgiref's `Local`, which in async code
    keeps one backend per context, and every ASGI request runs in a context of its own: each
    request would build a new backend object, costing more CPU than the count itself
    (docs/performance.md). Requests on one event loop share its thread and never interleave within
    a cache call (the calls are synchronous), so one backend per thread is safe, as it is for
    Django's own per-thread backends."""
    held = getattr(_event_loop_caches, "held", None)
    if held is None or held[0] != _caches_generation:
        backend = caches.create_connection(DEFAULT_CACHE_ALIAS)
        held = _event_loop_caches.held = (_caches_generation, backend)
    return held[1]


@receiver(setting_changed)
def _forget_event_loop_caches(*, setting: str, **kwargs: object) -> None:
    global _caches_generation
    if setting == "CACHES":
        _caches_generation += 1
