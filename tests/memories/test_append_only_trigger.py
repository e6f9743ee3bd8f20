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


# --- the embedding: filled or cleared, never replaced ----------------------------------------


def unit_vector(n: int) -> str:
    return str([1.0 if i == n else 0.0 for i in range(256)])


def stored_embedding(memory) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT embedding::text FROM memories_memory WHERE id = %s", [memory.id])
        return cursor.fetchone()[0]


def test_an_empty_embedding_may_be_filled_and_a_filled_one_cleared(memory):
    fill = "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s"
    raw(fill, [unit_vector(0), memory.id])
    assert stored_embedding(memory).startswith("[1,0,0")
    # The same vector again changes nothing, so it is no replacement.
    raw(fill, [unit_vector(0), memory.id])
    raw("UPDATE memories_memory SET embedding = NULL WHERE id = %s", [memory.id])
    assert stored_embedding(memory) is None
    raw(fill, [unit_vector(1), memory.id])  # a change of model: cleared, then filled again
    assert stored_embedding(memory).startswith("[0,1,0")


def test_an_embedding_is_never_replaced_in_place(memory):
    raw(
        "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s",
        [unit_vector(0), memory.id],
    )
    with pytest.raises(IntegrityError, match="may be filled or cleared, not replaced") as refused:
        raw(
            "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s",
            [unit_vector(1), memory.id],
        )
    assert refused.value.__cause__.sqlstate == "23001"  # restrict_violation
    assert stored_embedding(memory).startswith("[1,0,0")


def test_an_erased_memory_never_gets_an_embedding(memory):
    raw(
        "UPDATE memories_memory SET content = '[erased]', content_length = 8, topic = '[erased]',"
        " tags = '{[erased]}', scope = 'erased', project = '[erased]' WHERE id = %s",
        [memory.id],
    )
    with pytest.raises(IntegrityError, match=r"erased memory .* holds no embedding"):
        raw(
            "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s",
            [unit_vector(0), memory.id],
        )
    assert stored_embedding(memory) is None
