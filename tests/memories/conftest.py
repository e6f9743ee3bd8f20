import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone
from psycopg.conninfo import make_conninfo

import memories.search
from infra import asyncdb
from memories import account_indexes, tenancy
from tests.factories import MemoryFactory


def as_never_analyzed(cursor, *tables: str) -> None:
    """Clear the statistics of `tables` as if none were ever gathered (right after a bulk load
    or a restore, before autovacuum's ANALYZE): their sizes and their columns', which an ANALYZE
    (autovacuum's among them) after earlier tests' rows may have left."""
    for table in tables:
        cursor.execute("SELECT pg_clear_relation_stats('public', %s)", [table])
        cursor.execute(
            "SELECT pg_clear_attribute_stats('public', %s, a.attname, false)"
            " FROM pg_attribute a WHERE a.attrelid = %s::regclass"
            " AND a.attnum > 0 AND NOT a.attisdropped",
            [table, table],
        )


def as_reindexed_and_never_analyzed(cursor, *tables: str) -> None:
    """`tables` as right after a restore, as far as a plan of a few rows can tell: their indexes
    built from the rows they hold, and no statistics gathered (as_never_analyzed). Earlier
    tests' rows are rolled back, but the index pages they took are kept; without statistics,
    the plans of a few rows are near ties that the indexes' sizes decide, so the plan chosen
    would depend on which tests ran before."""
    for table in tables:
        # Not CONCURRENTLY, which no transaction may hold: the test's rows are in one, and the
        # rebuilt indexes are rolled back with them.
        cursor.execute(f"REINDEX TABLE {table}")
    as_never_analyzed(cursor, *tables)


def patch_search(patcher: pytest.MonkeyPatch, name: str, value: object) -> None:
    """Set `name` to `value` for one test (through `patcher`) in every module of memories/search/
    that binds it: a module that imports a name holds a binding of its own, the one its functions
    read (LEXICAL_CANDIDATES is read in page.py and in candidates.py)."""
    package = memories.search
    modules = [package] + [
        importlib.import_module(f"{package.__name__}.{module.name}")
        for module in pkgutil.iter_modules(package.__path__)
    ]
    bound = [module for module in modules if name in vars(module)]
    assert bound, f"no module of memories/search/ binds {name}"
    assert all(vars(module)[name] is vars(bound[0])[name] for module in bound), name
    for module in bound:
        patcher.setattr(module, name, value)


def server_conninfo(**changes: str) -> str:
    """The test server's connection string, as the suite's own connections reach it (`changes`:
    another database or user)."""
    params = asyncdb.connection_kwargs()
    params.pop("autocommit")
    return make_conninfo(**params | changes)


@contextmanager
def server_admin() -> Iterator[psycopg.Connection]:
    """A connection to create and drop databases and roles with: without the suite's statement
    timeout, which a DROP DATABASE waiting for a checkpoint on a loaded machine outlasts."""
    with psycopg.connect(server_conninfo(), autocommit=True) as admin:
        admin.execute("SET statement_timeout = 0")
        yield admin


def search_statement(sql: str) -> tuple[str, str]:
    """A message of fetch_rows (memories/search/sql.py), split into its plan settings ("SELECT
    set_config(...); ", or "" when it has none) and its statement (without the resets after it)."""
    if not sql.startswith("SELECT set_config("):
        return "", sql
    settings, _, rest = sql.partition("; ")
    return settings + "; ", rest.split("; RESET ")[0]


def explain_as_sent(execute, sql: str, params, many: bool, context: dict) -> dict:
    """The plan of a search statement (`sql`, a message of fetch_rows, memories/search/sql.py),
    under its plan settings; an execute wrapper's arguments."""
    settings, statement = search_statement(sql)
    execute(f"{settings}EXPLAIN (FORMAT JSON) {statement}", params, many, context)
    if settings:
        context["cursor"].nextset()
    return context["cursor"].fetchone()[0][0]["Plan"]


def mark_invalid(kind: account_indexes.Kind, owner_ids: list[int]) -> None:
    """The accounts' indexes of `kind` as a CREATE INDEX CONCURRENTLY that did not finish
    leaves them: invalid (still written to, never read). The test is skipped where the
    database role may not do that (it takes a superuser)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("marking an index invalid takes a superuser")
        for owner_id in owner_ids:
            cursor.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)",
                [kind.index_name(owner_id)],
            )


@pytest.fixture
def orm_as_app_role(transactional_db) -> Iterator[None]:
    """The ORM with DATABASE_APP_ROLE on: new connections become the app role. Closed before
    the test database is flushed (as the owner: the app role may not TRUNCATE memories)."""
    connections.close_all()
    try:
        with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
            yield
            connections.close_all()
    finally:
        connections.close_all()


@pytest.fixture
def account_indexes_dropped(transactional_db):
    """For a test that builds account indexes: they are built CONCURRENTLY, which no transaction
    may hold (no test transaction), and they outlive the test's rows, so every one is dropped
    after the test, however its set-up ended."""
    yield
    for kind in account_indexes.KINDS:
        for owner_id in kind.indexes():
            kind.drop(owner_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'i' "
            "AND (relname LIKE '%\\_replacement' OR relname LIKE '%\\_replaced')"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


def bury_under_recent_notes(owner, *, memory_type: str, content: str):
    """An old memory about the zeppelin hangar's lease, behind the account's four most recent
    memories, which are unrelated notes."""
    old = MemoryFactory(
        owner=owner,
        memory_type=memory_type,
        topic="Zeppelin hangar lease",
        content=content,
        recorded_at=timezone.now() - timedelta(days=30),
    )
    for n in range(4):
        MemoryFactory(owner=owner, topic=f"Recent note {n}", content=f"Unrelated note {n}.")
    return old


def commit_elsewhere(owner_id: int, write: Callable[[], object]) -> None:
    """Run `write` for `owner_id` in another thread, on its own connection, and wait for it to
    commit: a write that a read in one snapshot, already begun, must not see."""

    def in_another_connection() -> None:
        try:
            with tenancy.acting_for(owner_id):
                write()
        finally:
            connection.close()

    writer = threading.Thread(target=in_another_connection)
    writer.start()
    writer.join(10)
