"""The access gate shared by the memory resource and the get_memories tool."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from memories.access import MemoryRow, prefetched_for_request, read_owned_memories
from tests.factories import MemoryFactory, UserFactory
from threengram import tenancy

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
def anyio_backend() -> str:
    return "asyncio"


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
    assert row.resource_uri == f"threengram://memory/{mine.id}" and row.is_current


async def test_no_ids_reads_nothing(corpus):
    assert await read_owned_memories(owner_id=corpus["owner"].pk, ids=[]) == {}


async def test_a_prefetch_answers_only_the_same_owner_and_ids(corpus):
    owner, mine = corpus["owner"], corpus["mine"]
    prefetched = {mine.id: "the row read along with the token check"}
    with prefetched_for_request(owner_id=owner.pk, ids=[str(mine.id)], memories=prefetched):
        assert await read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)]) == prefetched
        # Any other question goes to the database, through the gate's own statement.
        other_ids = await read_owned_memories(owner_id=owner.pk, ids=[str(corpus["also_mine"].id)])
        other_owner = await read_owned_memories(owner_id=owner.pk + 1, ids=[str(mine.id)])
    assert set(other_ids) == {corpus["also_mine"].id}
    assert other_owner == {}
    # Outside the block the prefetch is gone.
    found = await read_owned_memories(owner_id=owner.pk, ids=[str(mine.id)])
    assert isinstance(found[mine.id], MemoryRow)


async def test_under_row_level_security_the_gate_reads_as_the_owner_it_is_given(corpus):
    """The gate's read sets its tenant in the same message (threengram.asyncdb.as_tenant): the
    owner's rows are visible to it, another tenant's stay absent."""
    owner, mine, theirs = corpus["owner"], corpus["mine"], corpus["theirs"]
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        found = await read_owned_memories(owner_id=owner.pk, ids=[str(mine.id), str(theirs.id)])
        as_them = await read_owned_memories(owner_id=theirs.owner_id, ids=[str(mine.id)])
    assert set(found) == {mine.id}
    assert as_them == {}
