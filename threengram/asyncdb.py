"""Native asyncio PostgreSQL access for the request hot paths (bearer-token check, memory reads).

Why not the async ORM there: each async ORM call is a `sync_to_async` hop to a worker thread, and
on a small VM a hop costs about as much as the SQL itself (docs/performance.md). psycopg 3 talks
to PostgreSQL from the event loop directly. The connection settings come from Django's
`DATABASES["default"]`, read when the first connection is made, so the test database that
pytest-django swaps in is the one used.

One `psycopg_pool.AsyncConnectionPool` per process, opened lazily on first use (daphne sends no
ASGI lifespan event to open it at start-up) and bound to the running event loop. With
`ASYNC_DATABASE_POOL_MAX = 0` every use opens and closes its own connection: the test settings
do this, because each async test runs on its own event loop and nothing may outlive it.
"""

from __future__ import annotations

import asyncio
import functools
import re
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import psycopg.sql
from django.conf import settings
from django.db import connections
from psycopg_pool import AsyncConnectionPool

# Django-only keys of DATABASES[...]["OPTIONS"] that are not libpq connection parameters.
_DJANGO_ONLY_OPTIONS = frozenset(
    {"pool", "server_side_binding", "assume_role", "isolation_level", "cursor_factory", "context"}
)

# Statements every connection prepares (PREPARE name AS sql), by name: see `execute_prepared`.
_prepared_statements: dict[str, str] = {}
# What each open connection has prepared so far.
_prepared_on: weakref.WeakKeyDictionary[psycopg.AsyncConnection, frozenset[str]] = (
    weakref.WeakKeyDictionary()
)
_STATEMENT_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_PARAMETER = re.compile(r"\$(\d+)")

_pool: AsyncConnectionPool | None = None
_pool_loop: asyncio.AbstractEventLoop | None = None
_pool_lock: asyncio.Lock | None = None


def connection_kwargs() -> dict[str, Any]:
    """libpq parameters of the default database, as Django would connect to it."""
    settings_dict = connections["default"].settings_dict
    kwargs: dict[str, Any] = {
        key: value
        for key, value in settings_dict["OPTIONS"].items()
        if key not in _DJANGO_ONLY_OPTIONS
    }
    kwargs["dbname"] = settings_dict["NAME"]
    for key, name in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if settings_dict[key]:
            kwargs[name] = settings_dict[key]
    if settings_dict["PORT"]:
        kwargs["port"] = str(settings_dict["PORT"])
    kwargs["autocommit"] = True  # single statements; no idle-in-transaction sessions
    # The hot-path statements are few, prepared after a few executions (psycopg), and have one
    # good plan (primary-key and unique-index lookups). Without this PostgreSQL keeps re-planning
    # them as "custom" plans, which cost far more CPU than executing them (docs/performance.md).
    kwargs["options"] = f"{kwargs.get('options', '')} -c plan_cache_mode=force_generic_plan".strip()
    return kwargs


async def _get_pool() -> AsyncConnectionPool:
    global _pool, _pool_loop, _pool_lock
    loop = asyncio.get_running_loop()
    if _pool is not None and _pool_loop is loop:
        return _pool
    if _pool_lock is None or _pool_loop is not loop:
        _pool_lock, _pool_loop, _pool = asyncio.Lock(), loop, None
    async with _pool_lock:
        if _pool is None:
            kwargs = connection_kwargs()
            size = settings.ASYNC_DATABASE_POOL_MAX
            pool = AsyncConnectionPool(
                kwargs=kwargs,
                configure=_configure,
                min_size=min(settings.ASYNC_DATABASE_POOL_MIN, size),
                max_size=size,
                timeout=settings.ASYNC_DATABASE_POOL_TIMEOUT,
                reconnect_timeout=settings.DATABASE_RECONNECT_TIMEOUT,
                open=False,
                name="threengram-async",
            )
            await pool.open(wait=True)
            _pool = pool
    return _pool


async def _configure(conn: psycopg.AsyncConnection) -> None:
    """Row-level security (threengram/tenancy.py): act as the application role, if configured.
    Then prepare the registered statements (`prepared_statement`)."""
    role = settings.DATABASE_APP_ROLE
    if role:
        await conn.execute(psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role)))
    if settings.ASYNC_DATABASE_PREPARE:
        await _prepare_missing(conn)
    else:
        conn.prepare_threshold = None  # psycopg's automatic preparation, too


async def _prepare_missing(conn: psycopg.AsyncConnection) -> None:
    done = _prepared_on.get(conn, frozenset())
    missing = [
        f"PREPARE {name} AS {sql}" for name, sql in _prepared_statements.items() if name not in done
    ]
    if missing:  # one round trip: without parameters psycopg sends a simple query
        await conn.execute("; ".join(missing))
    _prepared_on[conn] = frozenset(_prepared_statements)


def prepared_statement(name: str, sql: str) -> str:
    """Register `sql`, with PostgreSQL's `$1, $2, …` parameters (and no `$n` in its literals),
    to be prepared as `name` on every connection of this module; return the name, for
    `execute_prepared`."""
    if not _STATEMENT_NAME.fullmatch(name):
        raise ValueError(f"not a plain lower-case SQL name: {name!r}")
    if _prepared_statements.setdefault(name, sql) != sql:
        raise ValueError(f"{name} is already prepared as another statement")
    return name


@functools.lru_cache(maxsize=256)  # the same few statements, batch after batch
def _sql_of(index: int, name: str, arity: int, prepared: bool) -> str:
    """Statement `index` of a message: `EXECUTE name(…)`, or with `prepared` False the
    statement itself; its arguments are the named placeholders `s{index}p{n}`."""
    if not prepared:
        # Behind a transaction pooler (PgBouncer in transaction mode) a connection's PREPAREd
        # statements are not there on the next transaction: send the statement itself, planned
        # per call (docs/operations.md).
        return _PARAMETER.sub(
            lambda number: f"%(s{index}p{number[1]})s",
            _prepared_statements[name].replace("%", "%%"),
        )
    if not arity:
        return f"EXECUTE {name}"
    return f"EXECUTE {name}({', '.join(f'%(s{index}p{n})s' for n in range(1, arity + 1))})"


async def execute_prepared(
    conn: psycopg.AsyncConnection, calls: Sequence[tuple[str, Sequence[object]]]
) -> list[list[tuple]]:
    """Run prepared statements, `(name, arguments)` each, in one round trip and one transaction;
    return the rows of each.

    They go as one simple-query message of `EXECUTE name(…)` statements, the arguments bound as
    literals by psycopg's client-side cursor. PostgreSQL runs a multi-statement simple query as
    one implicit transaction (protocol docs, "Multiple Statements in a Simple Query"), so a
    `set_config(…, true)` holds for the statements after it and ends with the message, and a
    failure rolls back all of them. Why not the extended protocol's pipeline: psycopg spends an
    event-loop wait on each statement sent in pipeline mode, and another on the sync; this costs
    one send and one read, about half the client CPU per batch (docs/performance.md). The
    statements were prepared when the connection opened: no planning per call."""
    prepared = settings.ASYNC_DATABASE_PREPARE
    if prepared and any(name not in _prepared_on.get(conn, ()) for name, _ in calls):
        await _prepare_missing(conn)  # registered after this connection opened
    cursor = psycopg.AsyncClientCursor(conn)
    query = "; ".join(
        _sql_of(index, name, len(arguments), prepared)
        for index, (name, arguments) in enumerate(calls)
    )
    await cursor.execute(
        query,
        {
            f"s{index}p{number}": argument
            for index, (_, arguments) in enumerate(calls)
            for number, argument in enumerate(arguments, start=1)
        },
    )
    results = []
    for index in range(len(calls)):
        if index:
            cursor.nextset()
        results.append(await cursor.fetchall())
    return results


@asynccontextmanager
async def connection() -> AsyncIterator[psycopg.AsyncConnection]:
    """An autocommit connection for a few statements; give it back promptly. It sees no rows
    of the tenant tables when row-level security is on: read those with `execute_prepared` and
    `as_tenant`."""
    if settings.ASYNC_DATABASE_POOL_MAX <= 0:
        async with await psycopg.AsyncConnection.connect(**connection_kwargs()) as conn:
            await _configure(conn)
            yield conn
        return
    pool = await _get_pool()
    async with pool.connection() as conn:
        yield conn


SET_TENANT = prepared_statement(
    "threengram_set_tenant", "SELECT set_config('threengram.tenant_id', $1, true)"
)


def as_tenant(
    tenant_id: int, calls: Sequence[tuple[str, Sequence[object]]]
) -> list[tuple[str, Sequence[object]]]:
    """`calls` for `execute_prepared`, acting for `tenant_id` under row-level security.

    The transaction-local `set_config` goes first in the same message, one implicit transaction:
    it applies to these statements and to nothing after them, so a pooled connection never
    carries a tenant to its next user (fail closed). One round trip, as without RLS. Without
    RLS (no application role configured), `calls` as they are."""
    if not settings.DATABASE_APP_ROLE:
        return list(calls)
    return [(SET_TENANT, (str(int(tenant_id)),)), *calls]


async def close() -> None:
    """Close this process's pool (a graceful shutdown; the next use opens a new one)."""
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        await pool.close()


async def check_pool() -> None:
    """Drop this process's dead idle connections now (threengram/dbfaults.py: after a database
    restart), instead of letting one request fail on each of them."""
    pool = _pool
    if pool is not None and _pool_loop is asyncio.get_running_loop():
        await pool.check()
