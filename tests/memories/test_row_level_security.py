"""Row-level security, the second wall of tenant isolation (memories/tenancy.py, migration
memories/0007): as the application role, a query that forgets the tenant filter still sees
nothing of another tenant, and nothing at all without a tenant."""

from __future__ import annotations

import copy
import functools
import io
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import override_settings

from accounts.erasure import erase_account
from infra import asyncdb
from memories import replica, services, tenancy, threads
from memories.errors import Conflict, NotFound
from memories.models import ERASED, AccountUsage, Memory, Thread, ThreadMembership
from memories.search import clean_filters, search_memories
from tests.factories import MemoryFactory, UserFactory
from tests.mcp_gateway.conftest import ROOT, free_port, subprocess_database_url
from tests.memories.conftest import patch_search, server_admin, server_conninfo

ROLE = tenancy.APP_ROLE


@pytest.fixture
def two_tenants(transactional_db):
    """Rows of two tenants, written as the owner (RLS does not bind it)."""
    tenant, other = UserFactory(), UserFactory()
    for owner in (tenant, other):
        memory = MemoryFactory(owner=owner, content=f"secret of {owner.username}")
        threads.create_thread(owner=owner, name="work")
        threads.add_thread_members(owner=owner, name="work", memory_ids=[str(memory.id)])
    return tenant, other


@pytest.fixture
def app_role_sql(transactional_db) -> Iterator[psycopg.Connection]:
    """A plain connection acting as the application role, as a server process does."""
    with psycopg.connect(subprocess_database_url(), autocommit=True) as conn:
        conn.execute(f"SET ROLE {ROLE}")
        yield conn


def _count(conn: psycopg.Connection, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _set_tenant(conn: psycopg.Connection, tenant_id: int | None) -> None:
    conn.execute(tenancy.SET_TENANT_SQL, (tenancy.tenant_text(tenant_id), False))


def test_the_app_role_is_neither_superuser_nor_owner_nor_bypassing_rls(app_role_sql):
    superuser, bypass = app_role_sql.execute(
        "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    assert (superuser, bypass) == (False, False)
    owner = app_role_sql.execute(
        "SELECT tableowner FROM pg_tables WHERE tablename = 'memories_memory'"
    ).fetchone()[0]
    assert owner != ROLE
    privileges = app_role_sql.execute(
        "SELECT has_table_privilege('memories_memory', 'DELETE'), "
        "has_table_privilege('memories_memory', 'TRUNCATE'), "
        "has_table_privilege('memories_memory', 'INSERT')"
    ).fetchone()
    assert privileges == (False, False, True)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_role_sql.execute("TRUNCATE memories_memory")
    # Which model made the stored vectors: searches read it, only embed_memories changes it.
    assert app_role_sql.execute(
        "SELECT has_table_privilege('memories_storedvectors', 'SELECT'), "
        "has_table_privilege('memories_storedvectors', 'INSERT'), "
        "has_table_privilege('memories_storedvectors', 'UPDATE'), "
        "has_table_privilege('memories_storedvectors', 'DELETE')"
    ).fetchone() == (True, False, False, False)


def _privileges(conn: psycopg.Connection) -> tuple:
    return conn.execute(
        f"SELECT has_table_privilege('{ROLE}', 'accounts_user', 'SELECT'), "
        f"has_table_privilege('{ROLE}', 'memories_memory', 'INSERT'), "
        f"has_table_privilege('{ROLE}', 'memories_memory', 'DELETE'), "
        f"has_table_privilege('{ROLE}', 'memories_storedvectors', 'SELECT'), "
        f"has_table_privilege('{ROLE}', 'memories_storedvectors', 'INSERT'), "
        f"bool_and(has_function_privilege('{ROLE}', oid, 'EXECUTE')) "
        "FROM pg_proc WHERE proname = 'memory_recent_word_matches'"
    ).fetchone()


def test_migrate_grants_a_role_created_after_the_migrations_what_it_needs(transactional_db):
    """Where the migrating user may not create roles, a DBA creates the role later; the next
    `manage.py migrate` grants it its privileges (the migrations that would have were run)."""
    needed = (True, True, False, True, False, True)
    with psycopg.connect(subprocess_database_url(), autocommit=True) as owner:
        assert _privileges(owner) == needed
        owner.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {ROLE}")
        owner.execute(f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM {ROLE}")
        try:
            assert _privileges(owner) == (False, False, False, False, False, False)
            call_command("migrate", verbosity=0)
            assert _privileges(owner) == needed
            # ... and on the tables the owner creates later, as a later migration does.
            owner.execute("CREATE TABLE later_table (id integer)")
            assert owner.execute(
                f"SELECT has_table_privilege('{ROLE}', 'later_table', 'SELECT')"
            ).fetchone() == (True,)
        finally:
            owner.execute("DROP TABLE IF EXISTS later_table")
            tenancy.grant_app_role_privileges()


TENANT_TABLES = ("memories_memory", "memories_thread", "memories_threadmembership")


def test_without_a_tenant_no_rows_at_all(two_tenants, app_role_sql):
    _set_tenant(app_role_sql, None)
    for table in TENANT_TABLES:
        assert _count(app_role_sql, table) == 0, table


def test_a_query_without_tenant_filter_sees_only_the_current_tenant(two_tenants, app_role_sql):
    tenant, other = two_tenants
    _set_tenant(app_role_sql, tenant.pk)
    owners = app_role_sql.execute("SELECT DISTINCT owner_id FROM memories_memory").fetchall()
    assert owners == [(tenant.pk,)]
    assert app_role_sql.execute("SELECT DISTINCT owner_id FROM memories_thread").fetchall() == [
        (tenant.pk,)
    ]
    assert _count(app_role_sql, "memories_threadmembership") == 1
    contents = [row[0] for row in app_role_sql.execute("SELECT content FROM memories_memory")]
    assert contents == [f"secret of {tenant.username}"]
    # Writes are held to the tenant too: another tenant's rows cannot be changed or created.
    updated = app_role_sql.execute(
        "UPDATE memories_memory SET status = 'archived' WHERE owner_id = %s", (other.pk,)
    )
    assert updated.rowcount == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the policy's WITH CHECK
        app_role_sql.execute(
            "INSERT INTO memories_thread (id, owner_id, name, pinned, created_at) "
            "VALUES (gen_random_uuid(), %s, 'planted', false, now())",
            (other.pk,),
        )


def test_orm_query_that_forgets_the_filter_sees_only_the_tenant(two_tenants, orm_as_app_role):
    tenant, other = two_tenants
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == ROLE
    assert Memory.objects.count() == 0  # no tenant: fail closed
    with tenancy.acting_for(tenant.pk):
        assert set(Memory.objects.values_list("owner_id", flat=True)) == {tenant.pk}
        assert set(Thread.objects.values_list("owner_id", flat=True)) == {tenant.pk}
        assert ThreadMembership.objects.count() == 1
        # The services work as the app role.
        services.record_memory(owner=tenant, memory_type="fact", topic="rls", content="new fact")
        assert Memory.objects.count() == 2
    with tenancy.acting_for(other.pk):
        assert list(Memory.objects.values_list("content", flat=True)) == [
            f"secret of {other.username}"
        ]
    with tenancy.all_tenants():  # the explicit cross-tenant path (staff admin)
        assert Memory.objects.count() == 3
    assert Memory.objects.count() == 0  # and it ends with its transaction


def test_the_cross_tenant_path_is_never_opened_inside_a_transaction(two_tenants, orm_as_app_role):
    # Its SET LOCAL ROLE would outlast the block, to the end of the outer transaction.
    tenant, _ = two_tenants
    with transaction.atomic():
        with pytest.raises(RuntimeError, match="durable"), tenancy.all_tenants():
            pass
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == tenancy.APP_ROLE
        with tenancy.acting_for(tenant.pk):
            assert set(Memory.objects.values_list("owner_id", flat=True)) == {tenant.pk}


def test_a_rolled_back_tenant_switch_leaves_no_stale_tenant(two_tenants, orm_as_app_role):
    from django.db import transaction

    tenant, other = two_tenants
    with tenancy.acting_for(tenant.pk):
        assert Memory.objects.count() == 1  # committed: the connection acts for `tenant`
    with tenancy.acting_for(other.pk):
        try:
            with transaction.atomic():
                assert Memory.objects.get().owner_id == other.pk
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        # The switch to `other` was rolled back with the transaction; still `other` here.
        assert Memory.objects.get().owner_id == other.pk


def test_erasure_works_as_the_app_role(two_tenants, orm_as_app_role):
    tenant, other = two_tenants
    staff = UserFactory(is_staff=True)
    with tenancy.acting_for(staff.pk):  # a staff member asks, in the admin, for `tenant`
        result = erase_account(user=tenant, requested_by_staff=staff)
    assert result.counts["memories"] == 1
    with tenancy.all_tenants():
        assert Memory.objects.get(owner=tenant).content == ERASED
        assert Thread.objects.get(owner=tenant).name == ERASED
        assert Memory.objects.get(owner=other).content == f"secret of {other.username}"


def test_the_write_paths_work_as_the_app_role(two_tenants, orm_as_app_role):
    """record_memory_with_proposals, revise_memory_with_proposals (its one UPDATE … RETURNING, and
    the thread it inherits), archive and the thread listing, each acting for its tenant only."""
    tenant, other = two_tenants
    with tenancy.all_tenants():
        theirs = Memory.objects.get(owner=other)
    with tenancy.acting_for(tenant.pk):
        first = Memory.objects.get()
        successor, _ = threads.revise_memory_with_proposals(
            owner=tenant, predecessor_id=str(first.id), content="revised"
        )
        # Both tenants have a thread "work" with a member of this topic.
        memory, proposals = threads.record_memory_with_proposals(
            owner=tenant, memory_type="note", topic=first.topic, content="new"
        )
        assert [p.thread for p in proposals] == ["work"]
        proposed = ThreadMembership.objects.get(memory_id=memory.id)
        assert proposed.thread.owner_id == tenant.pk and proposed.state == "proposed"
        services.archive_memory(owner=tenant, memory_id=memory.id)
        (work,) = threads.list_threads(owner=tenant)
        assert work.member_count == 1  # the successor, in its predecessor's place
        assert ThreadMembership.objects.get(memory_id=successor.id).owner_id == tenant.pk
        with pytest.raises(NotFound):  # the other tenant's memory: as if missing
            services.revise_memory(owner=tenant, predecessor_id=str(theirs.id), content="x")
    with tenancy.all_tenants():
        assert Memory.objects.get(id=first.id).valid_to == successor.recorded_at
        theirs.refresh_from_db()
        assert theirs.valid_to is None


def test_the_app_role_reads_its_tenants_memory_count_and_may_write_none(two_tenants, app_role_sql):
    """Only the trigger on memories_memory (the owner's rights) writes the counts the cap on
    memory versions is held to (migration memories/0027)."""
    tenant, _other = two_tenants
    _set_tenant(app_role_sql, tenant.pk)
    counts = app_role_sql.execute("SELECT owner_id, versions FROM memories_accountusage")
    assert counts.fetchall() == [(tenant.pk, 1)]
    for statement in (
        "UPDATE memories_accountusage SET versions = 0",
        "DELETE FROM memories_accountusage",
        f"INSERT INTO memories_accountusage VALUES ({tenant.pk + 1000}, 0)",
        "TRUNCATE memories_accountusage",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_role_sql.execute(statement)


def test_a_write_as_the_app_role_is_counted_and_held_to_the_cap(
    two_tenants, orm_as_app_role, settings
):
    settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX = 2
    tenant, other = two_tenants
    with tenancy.acting_for(tenant.pk):
        services.record_memory(owner=tenant, memory_type="note", topic="T", content="second")
        with pytest.raises(Conflict, match="at most 2 memory versions per account"):
            services.record_memory(owner=tenant, memory_type="note", topic="T", content="third")
    with tenancy.all_tenants():
        counts = dict(AccountUsage.objects.values_list("owner_id", "versions"))
    assert counts == {tenant.pk: 2, other.pk: 1}


def test_the_backfill_reaches_every_tenant_with_the_app_role_on(two_tenants, orm_as_app_role):
    """An operator runs `embed_memories` with the server's settings: it acts as the owner by
    itself (like migrate), fills both tenants' vectors and rebuilds the index."""
    out = io.StringIO()
    call_command("embed_memories", stdout=out, stderr=io.StringIO())
    assert "embedded 2 memories" in out.getvalue()
    with tenancy.all_tenants(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_memory WHERE embedding IS NOT NULL")
        assert cursor.fetchone()[0] == 2
    with connection.cursor() as cursor:  # and the command left no connection past the wall
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == ROLE


def test_site_pages_and_staff_admin_as_the_app_role(two_tenants, orm_as_app_role, client):
    """The site's tenant is the logged-in user; the staff admin is the explicit cross-tenant
    path (TenantMiddleware)."""
    tenant, other = two_tenants
    client.force_login(tenant)
    page = client.get("/memories/").content.decode()
    assert f"secret of {tenant.username}" in page
    assert f"secret of {other.username}" not in page
    with tenancy.all_tenants():
        foreign_id = Memory.objects.get(owner=other).id
    assert client.get(f"/memories/{foreign_id}/").status_code == 404

    staff = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(staff)
    changelist = client.get("/admin/memories/memory/")
    assert changelist.status_code == 200
    assert changelist.context["cl"].result_count == 2  # both tenants' memories


def test_the_memories_filter_as_the_app_role_finds_the_tenants_own_only(
    two_tenants, orm_as_app_role, client
):
    """The filter folds case and accents with PostgreSQL's functions, which the app role may
    call, and reads no other tenant's rows."""
    tenant, other = two_tenants
    client.force_login(tenant)
    page = client.get("/memories/", {"q": "SÉCRET, of?"}).content.decode()
    assert f"secret of {tenant.username}" in page
    assert f"secret of {other.username}" not in page


@pytest.fixture
def admin_moved(settings) -> Iterator[str]:
    """A URLconf that mounts the admin at another path, which it yields."""
    settings.ROOT_URLCONF = "tests.memories.moved_admin_urls"
    tenancy._admin_path.cache_clear()  # kept once per process: the URLconf does not move
    yield "/staff-console/"
    tenancy._admin_path.cache_clear()


def test_the_staff_admin_is_cross_tenant_wherever_the_urlconf_mounts_it(
    two_tenants, orm_as_app_role, client, admin_moved
):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    changelist = client.get(f"{admin_moved}memories/memory/")
    assert changelist.status_code == 200
    assert changelist.context["cl"].result_count == 2  # both tenants' memories


def test_every_table_with_a_tenant_column_is_under_row_level_security(app_role_sql):
    """A new tenant table must add its policy in its migration (docs/security.md)."""
    rows = app_role_sql.execute(
        "SELECT c.relname, c.relrowsecurity FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema() "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'owner_id' "
        "WHERE c.relkind = 'r'"
    ).fetchall()
    assert {"memories_memory", "memories_thread"} <= {name for name, _ in rows}
    assert [name for name, secured in rows if not secured] == []


def test_no_tenant_survives_a_pooled_connection(two_tenants, orm_as_app_role):
    """Django's pool hands the same PostgreSQL session to the next request: it must not act
    for the previous request's tenant."""
    tenant, _other = two_tenants
    with tenancy.acting_for(tenant.pk):
        assert Memory.objects.count() == 1
    connection.close()  # back to the pool, as at the end of a request
    assert Memory.objects.count() == 0


def _raw_setting(name: str) -> str:
    """A setting of the ORM connection's session, read past the tenant wrapper."""
    with connection.connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", (name,))
        return cursor.fetchone()[0] or ""


def test_a_failed_statement_carries_its_tenant_setting_away_with_it(two_tenants, orm_as_app_role):
    """The tenant setting travels in the statement's own message: when the statement fails,
    the setting is undone with it, and the next statement sets it again."""
    tenant, other = two_tenants
    with tenancy.acting_for(tenant.pk):
        assert Memory.objects.count() == 1
    with tenancy.acting_for(other.pk):
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0 FROM memories_memory")
        assert _raw_setting(tenancy.asyncdb.TENANT_SETTING) == str(tenant.pk)  # undone
        assert list(Memory.objects.values_list("owner_id", flat=True)) == [other.pk]
        with connection.cursor() as cursor:  # the cursor reads the statement's own rows
            cursor.execute("UPDATE memories_memory SET status = 'archived' WHERE status = 'active'")
            assert cursor.rowcount == 1


def test_a_named_cursor_after_a_tenant_switch(two_tenants, orm_as_app_role):
    """QuerySet.iterator declares a server-side cursor for one statement: the tenant setting
    goes before it on its own."""
    tenant, other = two_tenants
    for owner in (tenant, other, tenant):
        with tenancy.acting_for(owner.pk):
            assert [m.owner_id for m in Memory.objects.iterator(chunk_size=10)] == [owner.pk]


def test_behind_a_transaction_pooler_nothing_stays_on_the_session(two_tenants, orm_as_app_role):
    """With DATABASE_TRANSACTION_POOLER the role and the tenant hold for each statement's own
    transaction only, outside an atomic block as inside one."""
    tenant, other = two_tenants
    with override_settings(DATABASE_TRANSACTION_POOLER=True):
        connection.ensure_connection()
        with connection.connection.cursor() as cursor:  # a session in no tenant's name yet
            cursor.execute(tenancy.SET_TENANT_SQL, ("", False))
        for owner in (tenant, other):
            with tenancy.acting_for(owner.pk):
                assert list(Memory.objects.values_list("owner_id", flat=True)) == [owner.pk]
                with transaction.atomic():
                    services.record_memory(owner=owner, memory_type="fact", topic="t", content="x")
                    assert Memory.objects.count() == 2
                assert _raw_setting(tenancy.asyncdb.TENANT_SETTING) == ""
            assert Memory.objects.count() == 0  # no tenant: fail closed
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0 FROM memories_memory")
        with tenancy.all_tenants():
            assert Memory.objects.count() == 4
        connections.close_all()


def test_a_search_behind_a_transaction_pooler_finds_its_tenants_memories_only(
    two_tenants, orm_as_app_role, settings
):
    """A search's statements carry their plan settings in their own message, in front of which
    go the role and tenant of the statement's transaction: each tenant finds its own memory,
    and nothing stays on the session."""
    settings.DATABASE_TRANSACTION_POOLER = True
    with tenancy.all_tenants():
        own = dict(Memory.objects.values_list("owner_id", "id"))
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:  # as another client may have left it
        cursor.execute(tenancy.SET_TENANT_SQL, ("", False))
    for owner in two_tenants:
        with tenancy.acting_for(owner.pk):
            page = search_memories(owner_id=owner.pk, query="secret", filters=clean_filters())
        assert [hit.id for hit in page.hits] == [own[owner.pk]]
        assert _raw_setting(tenancy.asyncdb.TENANT_SETTING) == ""


@pytest.fixture
def replica_alias(orm_as_app_role, monkeypatch) -> Iterator[BaseDatabaseWrapper]:
    """A `replica` database (memories/replica.py) on the test database itself: a standby holds
    what the primary does, and the routing and the sessions are what is tested here."""
    primary = connections[DEFAULT_DB_ALIAS]
    replica_db = type(primary)(copy.deepcopy(primary.settings_dict), replica.REPLICA)
    connections[replica.REPLICA] = replica_db
    monkeypatch.setattr(replica, "configured", lambda: True)
    try:
        yield replica_db
    finally:
        replica_db.close()
        replica_db.close_pool()
        del connections[replica.REPLICA]


def test_a_replica_behind_a_transaction_pooler_keeps_nothing_on_its_sessions(
    two_tenants, replica_alias, settings
):
    """The primary reached directly, the replica through PgBouncer
    (DATABASE_REPLICA_TRANSACTION_POOLER=1): the pooler lends each transaction of a replica
    connection whichever server session is free, as another client left it. The replica's reads
    set their role and tenant in their own transaction, and leave neither behind."""
    tenant, other = two_tenants
    settings.DATABASE_REPLICA_TRANSACTION_POOLER = True

    def owners_seen() -> list[int]:  # a read that forgets the tenant filter
        return sorted(Memory.objects.values_list("owner_id", flat=True))

    with tenancy.acting_for(tenant.pk):
        assert replica.tolerant_read(owners_seen) == [tenant.pk]
    session = replica_alias.connection
    with session.cursor() as cursor:
        cursor.execute(f"SELECT current_setting('{asyncdb.TENANT_SETTING}', true)")
        assert (cursor.fetchone()[0] or "") == ""  # nothing for the pooler's next client
        # The session as the pooler lends it next: another client's tenant on it, and the login
        # role (no client of this server session has switched it to the application role).
        cursor.execute("RESET ROLE")
        cursor.execute(tenancy.SET_TENANT_SQL, (str(other.pk), False))
    with tenancy.acting_for(tenant.pk):
        assert replica.tolerant_read(owners_seen) == [tenant.pk]


OWNERS_SEEN = asyncdb.prepared_statement(
    "threengram_test_owners_seen", "SELECT DISTINCT owner_id FROM memories_memory"
)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_gateway_pool_acts_for_one_statement_only(two_tenants, anyio_backend):
    """The gateway's async pool (infra.asyncdb): the tenant applies to the gated statement
    and never to the pooled session's next user."""
    tenant, _other = two_tenants
    with override_settings(
        DATABASE_APP_ROLE=ROLE, ASYNC_DATABASE_POOL_MAX=1, ASYNC_DATABASE_POOL_MIN=1
    ):
        try:
            async with asyncdb.connection() as conn:
                *_, owners = await asyncdb.execute_prepared(
                    conn, asyncdb.as_tenant(tenant.pk, [(OWNERS_SEEN, ())])
                )
                assert owners == [(tenant.pk,)]
            async with asyncdb.connection() as conn:  # the same (only) pooled session
                cursor = await conn.execute(
                    "SELECT current_user, count(*) FROM memories_memory GROUP BY 1"
                )
                assert await cursor.fetchall() == []  # no tenant: no rows at all
                cursor = await conn.execute("SELECT current_user")
                assert (await cursor.fetchone())[0] == ROLE
        finally:
            await asyncdb.close()


def _current_user() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        return cursor.fetchone()[0]


def test_migrate_runs_as_the_owner_while_the_app_role_is_configured(orm_as_app_role, monkeypatch):
    """Schema changes need the owner; the server's role is back once `migrate` is done."""
    from django.core.management import call_command
    from django.core.management.commands.migrate import Command as DjangoMigrateCommand

    seen: list[str] = []
    monkeypatch.setattr(
        DjangoMigrateCommand, "handle", lambda self, *args, **options: seen.append(_current_user())
    )
    assert _current_user() == ROLE
    call_command("migrate", verbosity=0)
    assert seen and seen[0] != ROLE
    assert _current_user() == ROLE


def test_the_words_function_returns_the_current_tenants_memories_only(two_tenants, app_role_sql):
    """memory_recent_word_matches runs past the policies (as the owner of the tables), so it
    applies their condition itself: the tenant of the setting, nothing when it is unset."""
    tenant, other = two_tenants
    query = (
        "SELECT id FROM memory_recent_word_matches("
        "'secret'::tsquery, NULL, NULL, now(), NULL, NULL, NULL, NULL, 10)"
    )
    assert app_role_sql.execute(query).fetchall() == []  # no tenant: fail closed
    for owner in (tenant, other):
        _set_tenant(app_role_sql, owner.pk)
        found = {row[0] for row in app_role_sql.execute(query)}
        assert found == set(Memory.objects.filter(owner=owner).values_list("id", flat=True))
    app_role_sql.execute("SELECT set_config('threengram.tenant_id', '', false)")
    assert app_role_sql.execute(query).fetchall() == []  # reset to empty: still closed


def test_the_words_function_is_the_app_role_s_alone_and_resolves_names_safely(app_role_sql):
    """Only the application role may call it (not PUBLIC: any role of the cluster), and it runs
    as the owner with a search path a caller cannot put a table or operator of its own on
    (the caller's temporary schema comes last, after the catalog and the application's)."""
    signature = (
        "memory_recent_word_matches("
        "tsquery, tsquery, timestamptz, timestamptz, text, text[], text, text, integer, text[], "
        "timestamptz)"
    )
    grantees, definer, config = app_role_sql.execute(
        "SELECT array(SELECT coalesce(r.rolname, 'PUBLIC') FROM aclexplode(p.proacl) a"
        "             LEFT JOIN pg_roles r ON r.oid = a.grantee"
        "             WHERE a.privilege_type = 'EXECUTE'),"
        "       p.prosecdef, p.proconfig "
        "FROM pg_proc p WHERE p.oid = %s::regprocedure",
        [signature],
    ).fetchone()
    assert "PUBLIC" not in grantees and ROLE in grantees
    assert definer
    schema = app_role_sql.execute("SELECT current_schema()").fetchone()[0]
    assert f"search_path=pg_catalog, {schema}, pg_temp" in config


def test_a_search_reaches_the_words_index_as_the_app_role(
    two_tenants, account_indexes_dropped, orm_as_app_role, monkeypatch, settings
):
    tenant, other = two_tenants
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 1)
    call_command("index_accounts", stdout=io.StringIO())
    settings.SEARCH_EMBEDDER = "none"
    # The walk reads nothing: a hit comes through the account's words index.
    patch_search(monkeypatch, "WALK_RECENT_MAX", 0)
    for owner in (tenant, other):
        with tenancy.acting_for(owner.pk):
            page = search_memories(owner_id=owner.pk, query="secret", filters=clean_filters())
        assert [hit.excerpt for hit in page.hits] == [f"secret of {owner.username}"]
    # A question walks (nothing, here), then looks its rare terms up through the same index.
    for owner in (tenant, other):
        question = f"the secret of {owner.username}: noted and kept where?"
        with tenancy.acting_for(owner.pk):
            page = search_memories(owner_id=owner.pk, query=question, filters=clean_filters())
        assert [hit.excerpt for hit in page.hits] == [f"secret of {owner.username}"]


@contextmanager
def _fresh_database_owned_by_a_new_user(
    *, role_grant: str = "", vector: bool = True
) -> Iterator[str]:
    """A fresh database owned by a new user that may not create roles (`role_grant`: how it
    holds the application role, which exists already), as that user's conninfo; `vector`: the
    DBA has created the extension there."""
    name = f"tg_owner_{uuid.uuid4().hex[:8]}"
    with server_admin() as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER NOCREATEROLE")
        if role_grant:
            admin.execute(f"GRANT {ROLE} TO {name} {role_grant}")
        admin.execute(f"CREATE DATABASE {name} OWNER {name}")
        try:
            if vector:
                with psycopg.connect(server_conninfo(dbname=name)) as fresh:
                    fresh.execute("CREATE EXTENSION vector")
            yield server_conninfo(dbname=name, user=name)
        finally:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            admin.execute(f"DROP OWNED BY {name}")  # what it granted itself
            admin.execute(f"DROP ROLE {name}")


@pytest.fixture
def owner_outside_the_app_role(transactional_db) -> Iterator[str]:
    """The application role exists already (made for another database of the server)."""
    with _fresh_database_owned_by_a_new_user() as conninfo:
        yield conninfo


def _migrate(conninfo: str, *args: str, app_role: str = ROLE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "migrate", *args],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": conninfo,
            "DATABASE_APP_ROLE": app_role,
            "SECRET_KEY": "migrate-test-secret-key",
            "DEBUG": "0",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_migrate_names_the_grant_a_dba_must_run_and_migrates_nothing(owner_outside_the_app_role):
    run = _migrate(owner_outside_the_app_role)
    assert run.returncode == 1
    user = psycopg.conninfo.conninfo_to_dict(owner_outside_the_app_role)["user"]
    assert f"GRANT {ROLE} TO {user};" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    with psycopg.connect(owner_outside_the_app_role) as fresh:
        assert fresh.execute("SELECT to_regclass('django_migrations')").fetchone() == (None,)


def test_migrate_names_the_extension_a_dba_must_create_and_migrates_nothing(transactional_db):
    """pgvector is not a trusted extension: an owner that is not a superuser cannot create it.
    migrate said so only as a traceback from memories/0009, with the migrations before it
    applied; now it stops first, naming the statement and the database."""
    with _fresh_database_owned_by_a_new_user(role_grant="", vector=False) as conninfo:
        user = psycopg.conninfo.conninfo_to_dict(conninfo)["user"]
        with server_admin() as admin:
            admin.execute(f"GRANT {ROLE} TO {user}")
        run = _migrate(conninfo)
        assert run.returncode == 1
        assert "Traceback" not in run.stderr + run.stdout
        assert f"in database {user}: CREATE EXTENSION vector;" in run.stderr
        with psycopg.connect(conninfo) as fresh:
            assert fresh.execute("SELECT to_regclass('django_migrations')").fetchone() == (None,)


@pytest.fixture
def debian_postgresql_15() -> Iterator[str]:
    """Debian 12's own PostgreSQL (15), started in a folder of its own: the server an operator
    on Debian 12 gets from apt. Its conninfo, as its superuser over its Unix socket."""
    from scripts.scale_out import ensure_debian_package

    bin_dir = Path("/usr/lib/postgresql/15/bin")
    try:
        ensure_debian_package(str(bin_dir / "postgres"), "postgresql-15")
    except (RuntimeError, subprocess.CalledProcessError) as missing:
        pytest.skip(f"Debian's postgresql-15 cannot be installed here: {missing}")
    folder = Path(tempfile.mkdtemp(prefix="tg-pg15-", dir="/tmp"))
    # PostgreSQL refuses to run as root; the Debian package made the postgres user.
    user = "postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(folder, user)
    port = str(free_port())
    run = functools.partial(subprocess.run, check=True, user=user, capture_output=True)
    try:
        run([bin_dir / "initdb", "-D", folder / "data", "-U", "postgres", "--auth=trust"])
        options = f"-p {port} -k {folder} -h ''"
        # -l: the server's output to a file, not to this process's pipes (which it would hold
        # open, so that the run never ended).
        log = folder / "log"
        run([bin_dir / "pg_ctl", "-D", folder / "data", "-o", options, "-l", log, "-w", "start"])
        try:
            yield f"host={folder} port={port} user=postgres dbname=postgres"
        finally:
            run([bin_dir / "pg_ctl", "-D", folder / "data", "-m", "immediate", "stop"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_migrate_on_a_server_before_postgresql_18_says_so_and_migrates_nothing(
    debian_postgresql_15,
):
    """Debian 12's PostgreSQL is 15: migrate failed there with a traceback ending in
    'unrecognized privilege type: "SET"', which names neither the version nor what to do."""
    run = _migrate(debian_postgresql_15)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr + run.stdout
    assert "threengram needs PostgreSQL 18 or later" in run.stderr
    assert "runs PostgreSQL 15." in run.stderr
    with psycopg.connect(debian_postgresql_15) as server:
        assert server.execute("SELECT to_regclass('django_migrations')").fetchone() == (None,)


def test_migrate_plan_and_check_tell_what_would_run_and_grant_nothing(owner_outside_the_app_role):
    """Asked only what would be migrated, migrate answers that; it neither refuses for the role
    a real run needs nor tries to grant it."""
    plan = _migrate(owner_outside_the_app_role, "--plan")
    assert plan.returncode == 0, plan.stderr
    assert "memories.0007_row_level_security" in plan.stdout
    assert _migrate(owner_outside_the_app_role, "--check").returncode == 1  # unapplied ones
    with psycopg.connect(owner_outside_the_app_role) as fresh:
        assert fresh.execute(
            "SELECT pg_has_role(current_user, %s, 'MEMBER')", [ROLE]
        ).fetchone() == (False,)


def test_migrate_leaves_the_role_s_creator_able_to_act_as_it(transactional_db):
    """A user with CREATEROLE that creates the role (migration 0007, or a DBA's statements run
    as it) holds it with ADMIN OPTION only, as PostgreSQL 16 and later grant a creator: a member
    that may not SET ROLE to it, so every connection of the server failed."""
    as_created = "WITH ADMIN TRUE, INHERIT FALSE, SET FALSE"
    with _fresh_database_owned_by_a_new_user(role_grant=as_created) as conninfo:
        run = _migrate(conninfo)
        assert run.returncode == 0, run.stderr
        with psycopg.connect(conninfo) as server:
            server.execute(f"SET ROLE {ROLE}")
            assert server.execute("SELECT current_user").fetchone() == (ROLE,)


def test_migrate_needs_the_role_only_where_this_database_uses_it(transactional_db):
    """Migrated before the role existed, with row-level security off (DATABASE_APP_ROLE empty):
    a role made later for another database of the server, which this owner may not use, does
    not stop its next migrate; it does once the setting asks the servers to act as it."""
    with _fresh_database_owned_by_a_new_user(role_grant="") as conninfo:
        user = psycopg.conninfo.conninfo_to_dict(conninfo)["user"]
        with server_admin() as admin:
            admin.execute(f"GRANT {ROLE} TO {user}")
            assert _migrate(conninfo, app_role="").returncode == 0
            admin.execute(f"REVOKE {ROLE} FROM {user}")
        again = _migrate(conninfo, app_role="")
        assert again.returncode == 0, again.stderr
        refused = _migrate(conninfo)
        assert refused.returncode == 1
        assert f"GRANT {ROLE} TO {user};" in refused.stderr
