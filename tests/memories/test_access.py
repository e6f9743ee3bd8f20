"""The access gate shared by the memory resource and the get_memories tool."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.test import override_settings
from django.utils import timezone

from infra import asyncdb
from memories import tenancy
from memories.access import COLUMNS, READ_OWNED, MemoryRow, read_owned_memories
from memories.fields import readable_instant_sql
from memories.models import Memory
from memories.services import record_memory, resolve_commitment, revise_memory
from tests.factories import MemoryFactory, UserFactory, insert_commitment_due_at

pytestmark = pytest.mark.anyio

LIFECYCLE_AND_BODY_ATTRIBUTES = [
    "id",
    "content",
    "content_length",
    "memory_type",
    "topic",
    "scope",
    "project",
    "recorded_at",
    "status",
    "valid_to",
    "commitment_status",
    "tags",
    "predecessor_id",
]


@pytest.fixture
def corpus(transactional_db):
    owner, other = UserFactory(), UserFactory()
    return {
        "owner": owner,
        "mine": MemoryFactory(owner=owner, tags=["a", "b"], project="p"),
        "also_mine": MemoryFactory(
            owner=owner, memory_type="commitment", due_at=timezone.now() + timedelta(days=2)
        ),
        "theirs": MemoryFactory(owner=other),
    }


async def test_returns_only_the_owners_memories(corpus):
    mine, also_mine, theirs = corpus["mine"], corpus["also_mine"], corpus["theirs"]
    found = await read_owned_memories(
        owner_id=corpus["owner"].pk,
        ids=[str(mine.id), also_mine.id, str(theirs.id), "junk", None, str(uuid.uuid4())],
    )
    assert set(found) == {mine.id, also_mine.id}
    row = found[mine.id]
    assert isinstance(row, MemoryRow)
    for name in LIFECYCLE_AND_BODY_ATTRIBUTES:
        expected = getattr(mine, name)
        assert getattr(row, name) == (tuple(expected) if name == "tags" else expected), name
    assert found[also_mine.id].commitment_status == "open"
    assert found[also_mine.id].due_at == also_mine.due_at is not None
    assert row.resource_uri == f"threengram://memory/{mine.id}" and row.valid_to is None


@pytest.fixture
def revised_resolved_commitment(transactional_db) -> list[Memory]:
    """A commitment with tags, a project, a scope and a due date, revised, resolved, and
    revised again: between them its versions hold a value in every field of MemoryRow."""
    owner = UserFactory()
    first = record_memory(
        owner=owner,
        memory_type="commitment",
        topic="Release checklist",
        content="Ship the release checklist.",
        scope="team",
        project="atlas",
        tags=["release", "ops"],
        due_at=timezone.now() + timedelta(days=3),
    )
    second = revise_memory(owner=owner, predecessor_id=first.id, content="Ship it by Friday.")
    resolve_commitment(owner=owner, memory_id=second.id, status="resolved")
    third = revise_memory(owner=owner, predecessor_id=second.id, topic="Release done")
    return list(Memory.objects.filter(pk__in=[first.id, second.id, third.id]).order_by("pk"))


async def test_every_field_of_a_gate_row_holds_its_own_column(revised_resolved_commitment):
    """Each field of MemoryRow holds what the ORM reads for the Memory attribute of its name,
    whatever the order of the gate's columns: a column list out of step with the fields would
    hand one field another's value."""
    versions = revised_resolved_commitment
    found = await read_owned_memories(
        owner_id=versions[0].owner_id, ids=[str(memory.id) for memory in versions]
    )
    names = [field.name for field in dataclasses.fields(MemoryRow)]
    for name in names:
        assert any(getattr(memory, name) is not None for memory in versions), name
    for memory in versions:
        for name in names:
            expected = getattr(memory, name)
            read = getattr(found[memory.id], name)
            assert read == (tuple(expected) if name == "tags" else expected), name


def test_the_gate_reads_each_field_from_the_column_of_its_name():
    """One column per field of MemoryRow, in the fields' order, each the Memory column of the
    field's name (the due date clamped to the readable range, as the ORM reads it)."""
    names = [field.name for field in dataclasses.fields(MemoryRow)]
    assert tuple(readable_instant_sql(n) if n == "due_at" else n for n in names) == COLUMNS
    assert set(names) <= {field.column for field in Memory._meta.concrete_fields}


async def test_no_ids_reads_nothing(corpus):
    assert await read_owned_memories(owner_id=corpus["owner"].pk, ids=[]) == {}


async def test_under_row_level_security_the_gate_reads_as_the_owner_it_is_given(corpus):
    """The gate's read sets its tenant in the same message (infra.asyncdb.as_tenant): the
    owner's rows are visible to it, another tenant's stay absent."""
    owner, mine, theirs = corpus["owner"], corpus["mine"], corpus["theirs"]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        found = await read_owned_memories(owner_id=owner.pk, ids=[str(mine.id), str(theirs.id)])
        as_them = await read_owned_memories(owner_id=theirs.owner_id, ids=[str(mine.id)])
    assert set(found) == {mine.id}
    assert as_them == {}


@pytest.fixture
def messages(monkeypatch) -> list[list[str]]:
    """The statement names of each message the gate's native connections send."""
    sent: list[list[str]] = []
    real_execute_prepared = asyncdb.execute_prepared

    async def recording_execute_prepared(conn, calls):
        sent.append([name for name, _ in calls])
        return await real_execute_prepared(conn, calls)

    monkeypatch.setattr(asyncdb, "execute_prepared", recording_execute_prepared)
    return sent


async def test_concurrent_reads_share_one_message_each_as_its_own_tenant(corpus, messages):
    """Reads that reach the gate in the same turn of the event loop go to PostgreSQL together
    (infra.asyncdb.run_as_tenant), each after its own tenant setting: every request sees
    its owner's rows and nothing of the other's, in whatever order they were batched."""
    owner, mine, theirs = corpus["owner"], corpus["mine"], corpus["theirs"]
    both = [str(mine.id), str(theirs.id)]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        as_owner, as_other, as_owner_again = await asyncio.gather(
            read_owned_memories(owner_id=owner.pk, ids=both),
            read_owned_memories(owner_id=theirs.owner_id, ids=both),
            read_owned_memories(owner_id=owner.pk, ids=[str(theirs.id)]),
        )
    assert set(as_owner) == {mine.id}
    assert set(as_other) == {theirs.id}
    assert as_owner_again == {}
    assert messages == [[asyncdb.SET_TENANT, READ_OWNED] * 3]


async def test_a_bad_owner_id_fails_its_own_read_only(corpus, messages):
    owner, mine = corpus["owner"], corpus["mine"]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        good, bad = await asyncio.gather(
            read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)]),
            read_owned_memories(owner_id="1; RESET ROLE", ids=[str(mine.id)]),
            return_exceptions=True,
        )
    assert set(good) == {mine.id}
    assert isinstance(bad, ValueError)
    assert messages == [[asyncdb.SET_TENANT, READ_OWNED]]


async def test_a_read_alone_is_not_kept_waiting_for_company(corpus, messages):
    owner, mine = corpus["owner"], corpus["mine"]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        first = await read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)])
        second = await asyncio.wait_for(
            read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)]), timeout=5
        )
    assert set(first) == set(second) == {mine.id}
    assert messages == [[asyncdb.SET_TENANT, READ_OWNED]] * 2


# Reads a tenant's due dates unclamped: a year-10000 value fails in psycopg as it is read, after
# PostgreSQL answered, which is what the gate's own read clamps the column to avoid.
RAW_DUE_DATES = asyncdb.prepared_statement(
    "threengram_test_raw_due_dates",
    "SELECT due_at FROM memories_memory WHERE owner_id = $1 AND due_at IS NOT NULL",
)


@pytest.fixture
def poisoned(transactional_db):
    """A tenant whose commitment is due in year 10000."""
    tenant = UserFactory()
    insert_commitment_due_at(tenant, "10000-01-01 00:00:00+00")
    return tenant


async def test_a_poisoned_read_fails_alone_and_its_batch_mates_get_their_rows(
    corpus, poisoned, messages
):
    owner, mine, theirs = corpus["owner"], corpus["mine"], corpus["theirs"]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        mine_read, failed, theirs_read = await asyncio.gather(
            read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)]),
            asyncdb.run_as_tenant(poisoned.pk, [(RAW_DUE_DATES, (poisoned.pk,))]),
            read_owned_memories(owner_id=theirs.owner_id, ids=[str(theirs.id)]),
            return_exceptions=True,
        )
    assert set(mine_read) == {mine.id}
    assert set(theirs_read) == {theirs.id}
    assert isinstance(failed, psycopg.DataError)
    # One message for the three, then each alone (in whatever order their connections open).
    together = [asyncdb.SET_TENANT, READ_OWNED, asyncdb.SET_TENANT, RAW_DUE_DATES]
    assert messages[0] == [*together, asyncdb.SET_TENANT, READ_OWNED]
    assert sorted(messages[1:]) == sorted(
        [[asyncdb.SET_TENANT, READ_OWNED]] * 2 + [[asyncdb.SET_TENANT, RAW_DUE_DATES]]
    )


@pytest.fixture
def stored_due(request, corpus):
    """(id, expected read-back) of a commitment of the corpus owner stored due at the SQL
    literal `request.param[0]`."""
    stored, read_back = request.param
    return insert_commitment_due_at(corpus["owner"], stored), read_back


@pytest.mark.parametrize(
    "stored_due",
    [
        ("10000-01-01 00:00:00+00", datetime.max.replace(tzinfo=UTC)),
        ("infinity", datetime.max.replace(tzinfo=UTC)),
        ("0001-01-01 00:00:00+00 BC", datetime.min.replace(tzinfo=UTC)),
        ("9999-06-01 12:00:00+00", datetime(9999, 6, 1, 12, tzinfo=UTC)),
    ],
    indirect=True,
)
async def test_a_due_date_stored_out_of_range_reads_back_clamped(corpus, stored_due):
    memory_id, read_back = stored_due
    found = await read_owned_memories(owner_id=corpus["owner"].pk, ids=[str(memory_id)])
    assert found[memory_id].due_at == read_back


@pytest.mark.parametrize(
    "stored_due", [("10000-01-01 00:00:00+00", datetime.max.replace(tzinfo=UTC))], indirect=True
)
def test_the_orm_reads_an_out_of_range_due_date_clamped(stored_due):
    memory_id, read_back = stored_due
    assert Memory.objects.get(pk=memory_id).due_at == read_back
    assert Memory.objects.values_list("due_at", flat=True).get(pk=memory_id) == read_back
