"""The database itself refuses to rewrite history: raw SQL that bypasses every Python rule still
cannot delete a memory or change its substance, except the erasure rewrite to the sentinels."""

import pytest
from django.db import connection, transaction
from django.db.utils import IntegrityError

from tests.factories import MemoryFactory


def raw(sql, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.fixture
def memory(tenant):
    return MemoryFactory(owner=tenant, tags=["x"], project="apollo")


def test_delete_is_refused(memory):
    with pytest.raises(IntegrityError, match="append-only: DELETE"):
        raw("DELETE FROM memories_memory WHERE id = %s", [memory.id])
    assert type(memory).objects.filter(pk=memory.pk).exists()


@pytest.mark.parametrize(
    ("assignment", "params"),
    [
        ("content = %s, content_length = 3", ["new"]),
        ("topic = %s", ["new topic"]),
        ("tags = %s", [["y"]]),
        ("scope = %s", ["work"]),
        ("project = %s", ["gemini"]),
        ("memory_type = %s", ["fact"]),
        ("recorded_at = now() - interval '1 day' + %s", ["0 seconds"]),
        ("id = gen_random_uuid()::text::uuid, topic = %s", ["t"]),
        # half an erasure is not an erasure
        ("content = %s, content_length = 8", ["[erased]"]),
    ],
)
def test_substance_updates_are_refused(memory, assignment, params):
    with pytest.raises(IntegrityError, match="append-only"):
        raw(f"UPDATE memories_memory SET {assignment} WHERE id = %s", [*params, memory.id])
    fresh = type(memory).objects.get(pk=memory.pk)
    assert (fresh.content, fresh.topic, fresh.tags, fresh.project) == (
        memory.content,
        memory.topic,
        ["x"],
        "apollo",
    )


def test_owner_and_supersession_link_are_fixed(memory, other_tenant):
    successor = MemoryFactory(owner=memory.owner, predecessor=memory)
    with pytest.raises(IntegrityError, match="append-only"):
        raw("UPDATE memories_memory SET owner_id = %s WHERE id = %s", [other_tenant.pk, memory.id])
    with pytest.raises(IntegrityError, match="append-only"):
        raw("UPDATE memories_memory SET predecessor_id = NULL WHERE id = %s", [successor.id])


def test_supersession_is_final(memory):
    raw("UPDATE memories_memory SET valid_to = clock_timestamp() WHERE id = %s", [memory.id])
    with pytest.raises(IntegrityError, match="already superseded"):
        raw("UPDATE memories_memory SET valid_to = NULL WHERE id = %s", [memory.id])


def test_lifecycle_columns_may_move(memory):
    raw("UPDATE memories_memory SET status = 'archived' WHERE id = %s", [memory.id])
    memory.refresh_from_db()
    assert memory.status == "archived"


def test_the_erasure_rewrite_is_the_one_exception(memory):
    raw(
        "UPDATE memories_memory SET content = '[erased]', content_length = 8, topic = '[erased]', "
        "tags = '{[erased]}', scope = 'erased', project = '[erased]' WHERE id = %s",
        [memory.id],
    )
    memory.refresh_from_db()
    assert (memory.content, memory.topic, memory.tags) == ("[erased]", "[erased]", ["[erased]"])


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"content": "abc", "content_length": 2}, "memory_content_length_matches"),
        ({"content": "x" * 2001, "content_length": 2001}, "memory_content_length_bounds"),
        ({"scope": "Not Kebab"}, "memory_scope_kebab_case"),
        (
            {"memory_type": "note", "commitment_status": "open"},
            "memory_commitment_status_only_on_commitments",
        ),
        (
            {"memory_type": "commitment", "commitment_status": None},
            "memory_commitment_status_only_on_commitments",
        ),
        ({"tags": [str(i) for i in range(33)]}, "memory_tags_bound"),
    ],
)
def test_check_constraints_back_the_python_bounds(tenant, fields, constraint):
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        MemoryFactory(owner=tenant, **fields)
