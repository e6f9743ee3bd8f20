"""Database outages and overload: a retryable answer for the client, recovery without a restart.

What the client sees (docs/operations.md): while PostgreSQL is unreachable, restarting, or too
slow (a statement or lock wait cut off by DATABASE_STATEMENT_TIMEOUT_MS / DATABASE_LOCK_TIMEOUT_MS,
or no pooled connection within DATABASE_POOL_TIMEOUT), an MCP request gets HTTP 503 with
`Retry-After` (RFC 9110 §15.6.4, §10.2.3) and a JSON-RPC -32603 error whose message says
"Database unavailable, retry" and whose `data` says `{"retryable": true}`. Nothing was written by
such a request, or everything was: each write is one transaction.

Recovery: after PostgreSQL restarts, every idle pooled connection is dead, but a pool only finds
out when a request uses one (and fails). The first failure therefore checks every idle
connection of both pools (psycopg_pool's `check()`: a dead one is dropped and replaced), so the
outage does not cost one failed request per pooled connection after the database is back
(tests/e2e/test_load_and_faults_live.py: no failure once it was back).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import UnionType

import psycopg
from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults

from infra import asyncdb

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
MESSAGE = "Database unavailable, retry"
# At most one round of pool checks per this many seconds per process.
_CHECK_INTERVAL_SECONDS = 0.5
_last_check = 0.0
_checks: set[asyncio.Task] = set()


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc` and what it was raised from or during (Django wraps psycopg's errors), at most 10."""
    seen = 0
    while exc is not None and seen < 10:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def _caused_by(exc: BaseException | None, kinds: type | UnionType | tuple[type, ...]) -> bool:
    """Whether `exc` or what it was raised from is one of `kinds`."""
    return any(isinstance(cause, kinds) for cause in _causes(exc))


# psycopg_pool.PoolTimeout, QueryCanceled, LockNotAvailable, AdminShutdown, SerializationFailure
# and DeadlockDetected are all psycopg OperationalErrors.
_UNAVAILABLE = (
    OperationalError
    | InterfaceError
    | psycopg.OperationalError
    | psycopg.InterfaceError
    | psycopg.errors.ReadOnlySqlTransaction
)


def is_unavailable(exc: BaseException | None) -> bool:
    """True for errors that say "the database cannot answer now" (connection lost or refused,
    pool timeout, statement or lock timeout, serialization failure, a server that takes no
    writes for now: a standby during fail-over, a read-only guard), through Django's wrappers."""
    return _caused_by(exc, _UNAVAILABLE)


def is_deadlock(exc: BaseException | None) -> bool:
    """True when PostgreSQL ended the statement to break a deadlock, through Django's wrappers."""
    return _caused_by(exc, psycopg.errors.DeadlockDetected)


def is_busy(exc: BaseException | None) -> bool:
    """True when a row was held by another transaction past the lock timeout, or PostgreSQL
    ended the statement to break a deadlock: worth trying again at once, unlike the rest of
    is_unavailable."""
    return _caused_by(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected))


def _is_read_only(exc: BaseException | None) -> bool:
    return _caused_by(exc, psycopg.errors.ReadOnlySqlTransaction)


@dataclass
class Outcome:
    """Per-request flag the router reads to turn the reply into a 503 (handlers run in tasks
    that copy the request's context, so the flag is a shared mutable object, not a value)."""

    unavailable: bool = False


request_outcome: ContextVar[Outcome | None] = ContextVar("request_outcome", default=None)


def mark_unavailable(exc: BaseException | None = None) -> None:
    """Record the failure for this request's reply and drop dead pooled connections (after a
    refused write, every pooled connection: one opened while the server took no writes keeps
    refusing them after it takes them again)."""
    outcome = request_outcome.get()
    if outcome is not None:
        outcome.unavailable = True
    if _due_for_check():
        task = asyncio.get_running_loop().create_task(_check_pools(drain=_is_read_only(exc)))
        _checks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(_checks.discard)


def _due_for_check() -> bool:
    """At most one round of pool checks per _CHECK_INTERVAL_SECONDS per process."""
    global _last_check
    now = time.monotonic()
    if now - _last_check < _CHECK_INTERVAL_SECONDS:
        return False
    _last_check = now
    return True


async def _check_pools(*, drain: bool = False) -> None:
    try:
        await asyncdb.check_pool(drain=drain)
        await asyncio.to_thread(check_django_pool, drain=drain)
    except Exception as exc:  # a check that fails now is retried on the next failure
        logger.warning("database pool check failed: %s", type(exc).__name__)


def check_django_pool(*, drain: bool = False) -> None:
    """Drop the dead idle connections of Django's pool (or, with `drain`, renew them all)."""
    pool = connections["default"].pool  # Django's psycopg pool (None without pooling)
    if pool is None:
        return
    if drain:
        pool.drain()
    else:
        pool.check()


def server_error(request: HttpRequest) -> HttpResponse:
    """The site's handler500. A page that failed because the database cannot answer now gets the
    same retryable answer as /mcp: 503 with `Retry-After` (RFC 9110 §15.6.4) and a page saying
    so, rendered without touching the database, and, as for /mcp, drops the dead pooled
    connections (so that pages after a restart fail once, not once per pooled connection).
    Anything else is Django's plain 500."""
    failure = sys.exc_info()[1]
    if is_unavailable(failure):
        if _due_for_check():
            try:
                check_django_pool(drain=_is_read_only(failure))
            except Exception as exc:  # retried on the next failure
                logger.warning("database pool check failed: %s", type(exc).__name__)
        response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return defaults.server_error(request)
