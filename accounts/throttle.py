"""Failed log-in throttling, per username and per client IP, in Django's cache.

A fixed window per key: the first failure starts a window of LOGIN_FAILURE_WINDOW_SECONDS; once a
key has reached its limit, every attempt on it is refused without checking the password (so a
locked-out guesser learns nothing) until the window ends. Usernames are case-folded so `Alice`
and `alice` share one budget. A successful log-in clears that username's count, never the IP's.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache


def _key(kind: str, value: str) -> str:
    # Hashed: cache keys must be short and safe for every backend, and usernames are free text.
    digest = hashlib.sha256(value.casefold().encode()).hexdigest()
    return f"login-failures:{kind}:{digest}"


def _keys(*, username: str, ip: str) -> dict[str, tuple[str, int]]:
    return {
        "username": (_key("username", username), settings.LOGIN_FAILURES_PER_USERNAME),
        "ip": (_key("ip", ip), settings.LOGIN_FAILURES_PER_IP),
    }


def login_is_throttled(*, username: str, ip: str) -> bool:
    """True when this username or this IP has used up its failed attempts for the window."""
    return any(
        cache.get(key, 0) >= limit for key, limit in _keys(username=username, ip=ip).values()
    )


def record_login_failure(*, username: str, ip: str) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    for key, _limit in _keys(username=username, ip=ip).values():
        # add() starts the window only if the key is absent; incr() keeps the original expiry.
        if not cache.add(key, 1, timeout=window):
            try:
                cache.incr(key)
            except ValueError:  # expired between add() and incr(): start a new window
                cache.add(key, 1, timeout=window)


def clear_login_failures(*, username: str) -> None:
    cache.delete(_key("username", username))
