"""Reads that tolerate lag go to a streaming read replica, when one is configured.

`DATABASE_REPLICA_URL` adds the `replica` database. Only the services that a client does not read
right after its own write run on it, each named where it is called (`tolerant_read`): search,
briefing, handoff, describe_environment and the memory browser's list page. Everything else reads
the primary: `resources/read` and `get_memories` (a client reads the memory it just wrote), the
token check (a revoked token fails on its very next request), and every read inside a write.

A replica that cannot answer (down, restarting, too slow) costs a logged warning and the same
read on the primary, never an error for the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from infra.dbfaults import is_unavailable

REPLICA = "replica"
logger = logging.getLogger(__name__)

_lag_tolerant: ContextVar[bool] = ContextVar("lag_tolerant", default=False)


def configured() -> bool:
    return REPLICA in settings.DATABASES


def read_alias() -> str:
    """The database this code's reads go to: the replica inside `tolerant_read`, else the
    primary."""
    return REPLICA if _lag_tolerant.get() and configured() else DEFAULT_DB_ALIAS


@contextmanager
def one_snapshot() -> Iterator[str]:
    """A transaction on `read_alias()` (yielded) whose statements all see the database as of its
    first: under READ COMMITTED a revision committing between two statements of one answer would
    show a memory and its successor together, or counts that disagree with the items listed. A
    read-only transaction at REPEATABLE READ never fails to serialize. Inside a caller's
    transaction, that one's isolation stands (a savepoint cannot change it)."""
    alias = read_alias()
    connection = connections[alias]
    outermost = not connection.in_atomic_block
    with transaction.atomic(using=alias):
        if outermost:
            # On the raw cursor (it sets no tenant and reads no rows), before any other statement
            # of the transaction, as PostgreSQL requires.
            with connection.connection.cursor() as raw:
                raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield alias


@contextmanager
def _on_replica() -> Iterator[None]:
    token = _lag_tolerant.set(True)
    try:
        yield
    finally:
        _lag_tolerant.reset(token)


def tolerant_read[T](function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)`, a read-only service, with its reads on the replica; on the
    primary when there is none or it cannot answer."""
    if not configured():
        return function(*args, **kwargs)
    try:
        with _on_replica():
            return function(*args, **kwargs)
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        logger.warning(
            "read replica unavailable (%s), reading from the primary", type(exc).__name__
        )
        # A dead pooled connection must not be lent again: the pool checks them (dbfaults).
        connections[REPLICA].close()
    return function(*args, **kwargs)


class ReplicaRouter:
    """Django database router: the ORM's reads inside `tolerant_read` go to the replica; writes,
    migrations and every other read to the primary."""

    def db_for_read(self, model: type, **hints: Any) -> str | None:
        return REPLICA if _lag_tolerant.get() and configured() else None

    def db_for_write(self, model: type, **hints: Any) -> str | None:
        # Named, not None: Django would otherwise write an object back to the database it was
        # read from, which for a row read on the replica is a read-only standby.
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two copies of it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db != REPLICA  # a standby is read-only; it gets the schema by replication
