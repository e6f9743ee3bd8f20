"""The tenant in every key (migration 0008): primary keys, unique rules and links between tenant
rows all carry `owner_id`, so PostgreSQL refuses a link across tenants and a database distributed
by owner (Citus) can keep every key and join on one shard."""

import pytest
from django.core import serializers
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory, Thread, ThreadMembership
from memories.services import archive_memory, record_memory
from memories.threads import create_thread
from tests.factories import MemoryFactory

TENANT_TABLES = ("memories_memory", "memories_thread", "memories_threadmembership")


def catalog(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(TENANT_TABLES)])
        return cursor.fetchall()


def insert_refused(sql: str, params: list) -> str:
    """Run `sql` with its foreign keys checked at once (they are deferred to commit); return the
    name of the constraint PostgreSQL refused it with."""
    with (
        pytest.raises(IntegrityError) as refused,
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(sql, params)
    return refused.value.__cause__.diag.constraint_name


@pytest.mark.django_db
def test_every_primary_key_unique_rule_and_tenant_link_includes_the_owner():
    keys = catalog(
        """
        SELECT c.conrelid::regclass::text, c.conname, c.contype,
               array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
                     ORDER BY k.n)
        FROM pg_constraint c
        WHERE c.conrelid::regclass::text = ANY(%s) AND c.contype IN ('p', 'u', 'f')
        """
    )
    primary = {table: columns for table, _, kind, columns in keys if kind == "p"}
    assert primary == {table: ["owner_id", "id"] for table in TENANT_TABLES}
    unique = {name: columns for _, name, kind, columns in keys if kind == "u"}
    assert unique == {
        "memory_one_successor": ["owner_id", "predecessor_id"],
        "membership_unique": ["owner_id", "thread_id", "memory_id"],
    }
    # Foreign keys: to accounts_user (the owner itself), or within a tenant on (owner_id, …).
    for table, name, kind, columns in keys:
        if kind == "f":
            assert columns[0] == "owner_id", (table, name, columns)


@pytest.mark.django_db
def test_every_btree_index_of_a_tenant_table_leads_with_the_owner():
    indexes = catalog(
        """
        SELECT i.indexrelid::regclass::text, am.amname, a.attname, pg_get_indexdef(i.indexrelid)
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_am am ON am.oid = c.relam
        LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid::regclass::text = ANY(%s)
        """
    )
    btree = {name: first for name, method, first, _ in indexes if method == "btree"}
    assert len(btree) >= 8
    assert {name for name, first in btree.items() if first != "owner_id"} == set()
    # No other index: the nearest-neighbour (HNSW) and words (GIN) indexes are built at run
    # time, one per large account, partial on its owner (memories/account_indexes.py).
    assert sorted(name for name, method, *_ in indexes if method != "btree") == []


def test_postgresql_refuses_a_membership_that_crosses_tenants(tenant, other_tenant):
    thread = create_thread(owner=tenant, name="mine")
    theirs = MemoryFactory(owner=other_tenant)
    refused = insert_refused(
        "INSERT INTO memories_threadmembership (id, owner_id, thread_id, memory_id, state,"
        " created_at, decided_at) VALUES (gen_random_uuid(), %s, %s, %s, 'member', now(), now())",
        [tenant.id, thread.id, theirs.id],
    )
    assert refused == "membership_memory_same_owner"
    refused = insert_refused(
        "INSERT INTO memories_threadmembership (id, owner_id, thread_id, memory_id, state,"
        " created_at, decided_at) VALUES (gen_random_uuid(), %s, %s, %s, 'member', now(), now())",
        [other_tenant.id, thread.id, theirs.id],
    )
    assert refused == "membership_thread_same_owner"
    assert not ThreadMembership.objects.filter(thread_id=thread.id).exists()


def test_postgresql_refuses_a_predecessor_of_another_tenant(tenant, other_tenant):
    theirs = MemoryFactory(owner=other_tenant)
    refused = insert_refused(
        "INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, topic,"
        " scope, tags, recorded_at, status, predecessor_id) VALUES (gen_random_uuid(), %s, 'x', 1,"
        " 'note', 't', 'personal', '{}', now(), 'active', %s)",
        [tenant.id, theirs.id],
    )
    assert refused == "memory_predecessor_same_owner"


def test_the_orm_refuses_to_link_rows_of_two_tenants(tenant, other_tenant):
    thread = create_thread(owner=tenant, name="mine")
    theirs = MemoryFactory(owner=other_tenant)
    with pytest.raises(ValueError, match="must be a row of the same owner"):
        ThreadMembership(thread=thread, memory=theirs, state="member")
    with pytest.raises(ValueError, match="must be a row of the same owner"):
        Memory(owner=tenant, predecessor=theirs)


def test_a_row_loaded_without_its_owner_is_still_checked(tenant, other_tenant):
    thread = create_thread(owner=tenant, name="mine")
    mine = MemoryFactory(owner=tenant)
    ThreadMembership.objects.create(
        thread=thread, memory=mine, state="member", decided_at=timezone.now()
    )
    partial = ThreadMembership.objects.only("id", "state").get()
    with pytest.raises(ValueError, match="must be a row of the same owner"):
        partial.memory = MemoryFactory(owner=other_tenant)


def test_a_save_never_moves_a_row_to_another_owner(tenant, other_tenant):
    thread = create_thread(owner=tenant, name="mine")
    thread.owner = other_tenant
    with pytest.raises(DatabaseError, match="has no row of owner"), transaction.atomic():
        thread.save()
    assert list(Thread.objects.values_list("owner_id", flat=True)) == [tenant.id]


def test_rows_round_trip_through_django_serialization(tenant):
    first = record_memory(owner=tenant, memory_type="note", topic="t", content="v1")
    second = Memory.objects.create(
        owner=tenant, memory_type="note", topic="t", content="v2", content_length=2,
        recorded_at=first.recorded_at, predecessor=first,
    )  # fmt: skip
    (loaded,) = serializers.deserialize("json", serializers.serialize("json", [second]))
    assert (loaded.object.owner_id, loaded.object.predecessor_id) == (tenant.id, first.id)


def test_unlinking_keeps_the_owner(tenant):
    memory = Memory(owner=tenant, predecessor=None)
    assert memory.owner_id == tenant.id and memory.predecessor_id is None


def test_a_saved_change_names_the_whole_primary_key(tenant):
    memory = record_memory(owner=tenant, memory_type="note", topic="t", content="c")
    with CaptureQueriesContext(connection) as queries:
        archive_memory(owner=tenant, memory_id=memory.id)
    (update,) = [q["sql"] for q in queries if q["sql"].startswith("UPDATE")]
    assert '"owner_id" = ' in update and '"id" = ' in update.split("WHERE", 1)[1]


def test_orm_joins_between_tenant_rows_match_the_owner_too(tenant):
    """A join on `id` alone would span shards; every relation joins on (owner_id, id)."""
    queries = [
        ThreadMembership.objects.filter(memory__valid_to__isnull=True, thread__pinned=True),
        Memory.objects.filter(predecessor__topic="t"),
        Thread.objects.filter(memberships__state="member"),
    ]
    for queryset in queries:
        joins = str(queryset.query).split(" JOIN ")[1:]
        assert joins and all('"owner_id" = ' in join for join in joins), str(queryset.query)
