"""Native asyncio PostgreSQL access for the request hot paths (bearer-token check, memory reads).

Why not the async ORM there: each async ORM call is a `sync_to_async` hop to a worker thread,
which costs about as much as the SQL itself (docs/performance.md). psycopg 3 talks to PostgreSQL
from the event loop directly. The connection settings come from Django's
`DATABASES["default"]`, read when the first connection is made, so the test database that
pytest-django swaps in is the one used.

One `psycopg_pool.AsyncConnectionPool` per process, opened lazily on first use (daphne sends no
ASGI lifespan event to open it at start-up) and bound to the running event loop. With
`ASYNC_DATABASE_POOL_MAX = 0` every use opens and closes its own connection: the test settings
do this, because each async test runs on its own event loop and nothing may outlive it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import weakref
from abc import ABC, abstractmethod
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

Call = tuple[str, Sequence[object]]  # (prepared statement name, arguments)

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
    # Timestamps come back in UTC, as on Django's connections: the readable range of a
    # timestamptz column (memories.fields.ReadableDateTimeField) is stated in UTC.
    if not settings.DATABASE_TRANSACTION_POOLER:  # there, `_POOLED_PREAMBLE` sets the zone
        kwargs["options"] = (
            f"{kwargs.get('options', '')} -c plan_cache_mode=force_generic_plan -c timezone=UTC"
        ).strip()
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
            # Not waiting for the pool to fill: during an outage each request then waits at
            # most the pool's timeout for a connection (a retryable 503 after it), while the pool
            # keeps trying in the background, instead of every request in turn waiting for a
            # fill that cannot happen.
            await pool.open(wait=False)
            _pool = pool
    return _pool


async def _configure(conn: psycopg.AsyncConnection) -> None:
    """Row-level security (memories/tenancy.py): act as the application role, if configured.
    Then prepare the registered statements (`prepared_statement`)."""
    role = settings.DATABASE_APP_ROLE
    if role and not settings.DATABASE_TRANSACTION_POOLER:  # else per message (execute_prepared)
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
    conn: psycopg.AsyncConnection, calls: Sequence[Call]
) -> list[list[tuple]]:
    """Run prepared statements, `(name, arguments)` each, in one round trip and one transaction;
    return the rows of each.

    They go as one simple-query message of `EXECUTE name(…)` statements, the arguments bound as
    literals by psycopg's client-side cursor. PostgreSQL runs a multi-statement simple query as
    one implicit transaction (protocol docs, "Multiple Statements in a Simple Query"), so a
    `set_config(…, true)` holds for the statements after it and ends with the message, and a
    failure rolls back all of them. Why not the extended protocol's pipeline: psycopg spends an
    event-loop wait on each statement sent in pipeline mode, and another on the sync; this costs
    one send and one read, much less client CPU per batch (docs/performance.md). The
    statements were prepared when the connection opened: no planning per call."""
    prepared = settings.ASYNC_DATABASE_PREPARE
    pooled = settings.DATABASE_TRANSACTION_POOLER
    if pooled:
        # The message is one transaction on whichever server connection the pooler lends: its
        # role and time zone are set for that transaction only ("none": the login role).
        calls = [(_POOLED_PREAMBLE, (settings.DATABASE_APP_ROLE or "none",)), *calls]
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
    return results[1:] if pooled else results


@asynccontextmanager
async def connection() -> AsyncIterator[psycopg.AsyncConnection]:
    """An autocommit connection for a few statements; give it back promptly. It sees no rows
    of the tenant tables when row-level security is on: read those with `run_as_tenant`."""
    if settings.ASYNC_DATABASE_POOL_MAX <= 0:
        async with await psycopg.AsyncConnection.connect(**connection_kwargs()) as conn:
            await _configure(conn)
            yield conn
        return
    pool = await _get_pool()
    async with pool.connection() as conn:
        yield conn


# The PostgreSQL setting that names the tenant for row-level security: the tenant policies of
# migrations memories/0007 and 0008 compare each row's owner with it. Every statement that sets
# it builds its SQL from this name.
TENANT_SETTING = "threengram.tenant_id"

_POOLED_PREAMBLE = prepared_statement(
    "threengram_pooled_preamble",
    "SELECT set_config('role', $1, true), set_config('timezone', 'UTC', true)",
)
SET_TENANT = prepared_statement(
    "threengram_set_tenant", f"SELECT set_config('{TENANT_SETTING}', $1, true)"
)


class LoopTurnBatch[Item, Result](ABC):
    """Runs together the items that callers submit in the same turn of the event loop.

    A PostgreSQL round trip costs the sender far more CPU than the statements cost the server:
    waking the backend (the client's `send`) dominates the event loop's time, the lookups
    themselves are cheap (docs/performance.md). So the requests that reach a query in the same
    loop turn send one message together: `submit(item)` waits for that item's own result of
    `run(items)`. A lone request waits for nothing but the end of the current turn. Nothing is
    cached or shared between requests beyond the message itself, not even a failure: when the
    batch fails, its items run again one by one and each gets its own result or error."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running: set[asyncio.Task[None]] = set()

    @abstractmethod
    async def run(self, items: list[Item]) -> list[Result]:
        """The result of each item, in order."""

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (tests): nothing carries over
            self._loop, self._pending = loop, []
        if not self._pending:
            # An empty context: the batch serves many requests, and belongs to none of them
            # (their request ids must not tag its log records).
            loop.call_soon(self._flush, context=contextvars.Context())
        future = loop.create_future()
        self._pending.append((item, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._run_batch(batch))
        self._running.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._running.discard)

    def isolates(self, exc: Exception) -> bool:
        """Whether a failed batch of several items is worth running again item by item. Not when
        the database cannot answer at all (infra/dbfaults.py): each item alone would fail
        the same way, at the cost of a connection attempt each. A statement timeout counts as
        that: the batches' statements are reads by key whose cost no request controls, so a
        timeout means the database is overloaded, and running each item again would add to the
        load. A batch whose statements a request could make slow must isolate on QueryCanceled
        too, or one request's timeout fails the others in its message."""
        from infra.dbfaults import is_unavailable  # dbfaults imports this module

        return not is_unavailable(exc)

    async def _run_batch(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results = await self.run([item for item, _ in batch])
            if len(results) != len(batch):  # a waiter without its result would wait forever
                raise RuntimeError(f"{len(results)} results for {len(batch)} items")
        except Exception as exc:
            if len(batch) > 1 and self.isolates(exc):
                # One item (a row that cannot be read, a value the statement refuses) must fail
                # its own request only, not the others that happened to share its message: each
                # runs again alone. Nothing of the failed message was kept (one implicit
                # transaction), and nothing is retried when the batch succeeds.
                waiting = [member for member in batch if not member[1].done()]
                await asyncio.gather(*(self._run_batch([member]) for member in waiting))
                return
            self._fail(batch, exc)
        except BaseException as exc:
            self._fail(batch, exc)
            raise
        else:
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():  # a request cancelled meanwhile (client gone)
                    future.set_result(result)

    @staticmethod
    def _fail(batch: list[tuple[Item, asyncio.Future[Result]]], exc: BaseException) -> None:
        # Every waiting request answers for itself (503 on an outage); none is left hanging.
        for _, future in batch:
            if not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)


class _TenantCalls(LoopTurnBatch[tuple[int, list[Call]], list[list[tuple]]]):
    async def run(self, items: list[tuple[int, list[Call]]]) -> list[list[list[tuple]]]:
        message: list[Call] = []
        spans = []  # where each item's own calls are in the message (after its tenant setting)
        for tenant_id, calls in items:
            own = as_tenant(tenant_id, calls)
            start = len(message) + len(own) - len(calls)
            spans.append((start, start + len(calls)))
            message += own
        if not message:
            return [[] for _ in items]
        async with connection() as conn:
            rows = await execute_prepared(conn, message)
        return [rows[start:end] for start, end in spans]


_tenant_calls = _TenantCalls()


async def run_as_tenant(tenant_id: int, calls: Sequence[Call]) -> list[list[tuple]]:
    """Run prepared `calls` for `tenant_id` on a pooled connection; return the rows of each.

    The calls of the requests that get here in the same turn of the event loop go in one
    message (`LoopTurnBatch`), one implicit transaction: under row-level security each
    request's calls come right after their own tenant setting, so they see that tenant's rows
    and no other's; without it, the statements themselves must name the owner. If one
    statement of the message fails, the requests run again one by one (`LoopTurnBatch`), so
    only the one whose own statements fail gets the error."""
    # Checked here, in the caller: inside the batch a bad id would fail the whole message.
    return await _tenant_calls.submit((int(tenant_id), list(calls)))


def as_tenant(tenant_id: int, calls: Sequence[Call]) -> list[Call]:
    """`calls` for `execute_prepared`, acting for `tenant_id` under row-level security.

    The transaction-local `set_config` goes first in the same message, one implicit transaction:
    it applies to these statements and ends with the message, so a pooled connection never
    carries a tenant to its next user (fail closed); in a message shared by several requests
    (`run_as_tenant`) each request's calls start with a setting of their own. One round trip,
    as without RLS. Without RLS (no application role configured), `calls` as they are."""
    if not settings.DATABASE_APP_ROLE:
        return list(calls)
    return [(SET_TENANT, (str(int(tenant_id)),)), *calls]


async def close() -> None:
    """Close this process's pool (a graceful shutdown; the next use opens a new one)."""
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        await pool.close()


async def check_pool(*, drain: bool = False) -> None:
    """Drop this process's dead idle connections now (infra/dbfaults.py: after a database
    restart), instead of letting one request fail on each of them; with `drain`, renew every
    connection (opened while the server took no writes, one keeps refusing them)."""
    pool = _pool
    if pool is not None and _pool_loop is asyncio.get_running_loop():
        await (pool.drain() if drain else pool.check())
