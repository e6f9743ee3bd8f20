"""Writes racing: two revisions of one memory on separate connections (exactly one successor
wins, the other gets a Conflict), two revisions swapping two memories' contents, identical
remembers, and a duplicate that leaves between a refused write and the lookup naming it. Real
PostgreSQL connections, committed transactions."""

import threading

import pytest
from django.db import connection

from memories import services
from memories.errors import Conflict, DuplicateMemory
from memories.models import Memory
from memories.services import WRITE_ATTEMPTS, record_memory, revise_memory

pytestmark = pytest.mark.django_db(transaction=True)


def race(workers):
    barrier = threading.Barrier(len(workers))
    outcomes = [None] * len(workers)

    def run(index, work):
        try:
            barrier.wait()
            outcomes[index] = work()
        except Exception as error:  # collected and asserted on below
            outcomes[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


@pytest.mark.parametrize("round_", range(5))
def test_two_concurrent_revisions_give_one_successor_and_one_conflict(tenant, round_):
    original = record_memory(owner=tenant, memory_type="decision", topic="db", content="v1")
    outcomes = race(
        [
            lambda: revise_memory(owner=tenant, predecessor_id=original.id, content="v2-a"),
            lambda: revise_memory(owner=tenant, predecessor_id=original.id, content="v2-b"),
        ]
    )
    successors = [o for o in outcomes if isinstance(o, Memory)]
    conflicts = [o for o in outcomes if isinstance(o, Conflict)]
    assert len(successors) == 1 and len(conflicts) == 1, outcomes
    assert list(Memory.objects.filter(predecessor=original)) == successors


def test_two_revisions_swapping_contents_at_once_are_both_duplicates(tenant, monkeypatch):
    """Each has closed its predecessor before it inserts the other's content, so each waits, in
    the unique index, for the other's predecessor to close: as one after the other, both are
    refused as duplicates (not a deadlock, which the client would see as a database outage)."""
    first = record_memory(owner=tenant, memory_type="note", topic="t", content="deploy friday")
    second = record_memory(owner=tenant, memory_type="note", topic="t", content="deploy monday")
    both_closed = threading.Barrier(2)
    close = services._close

    def close_then_wait(*args):
        closed = close(*args)
        both_closed.wait(10)
        return closed

    monkeypatch.setattr(services, "_close", close_then_wait)
    outcomes = race(
        [
            lambda: revise_memory(owner=tenant, predecessor_id=first.id, content="deploy monday"),
            lambda: revise_memory(owner=tenant, predecessor_id=second.id, content="deploy friday"),
        ]
    )
    assert [type(o) for o in outcomes] == [DuplicateMemory, DuplicateMemory], outcomes
    assert {o.existing_id for o in outcomes} == {first.id, second.id}
    assert set(Memory.objects.filter(valid_to=None)) == {first, second}


def test_concurrent_identical_remembers_store_one(tenant):
    outcomes = race(
        [lambda: record_memory(owner=tenant, memory_type="note", topic="t", content="same")] * 4
    )
    assert sum(isinstance(o, Memory) for o in outcomes) == 1, outcomes
    assert sum(isinstance(o, DuplicateMemory) for o in outcomes) == 3
    assert Memory.objects.count() == 1


@pytest.fixture
def duplicate_leaving(monkeypatch, tenant):
    """Between each refused write and the lookup naming the current memory it repeats, that
    memory is revised (by another request, as it might be); `then_again` also stores the content
    once more after it, so that the next attempt is refused too. Yields the revisions made."""
    explain = services._explain_lost_insert
    revisions = []

    def revised_meanwhile(lost, then_again=False):
        [current] = Memory.objects.filter(owner=tenant, valid_to=None, content=lost.memory.content)
        revisions.append(
            revise_memory(
                owner=tenant, predecessor_id=current.id, content=f"moved {len(revisions)}"
            )
        )
        named = explain(lost)
        if then_again:
            record_memory(owner=tenant, memory_type="note", topic="t", content=lost.memory.content)
        return named

    monkeypatch.setattr(services, "_explain_lost_insert", revised_meanwhile)
    return revised_meanwhile, revisions


def test_a_remember_whose_duplicate_was_revised_meanwhile_is_stored(tenant, duplicate_leaving):
    first = record_memory(owner=tenant, memory_type="note", topic="t", content="same text")
    _, revisions = duplicate_leaving
    stored = record_memory(owner=tenant, memory_type="note", topic="t", content="same text")
    assert [r.predecessor_id for r in revisions] == [first.id]
    assert list(Memory.objects.filter(valid_to=None, content="same text")) == [stored]


def test_a_revision_whose_duplicate_was_revised_meanwhile_is_stored(tenant, duplicate_leaving):
    record_memory(owner=tenant, memory_type="note", topic="t", content="same text")
    other = record_memory(owner=tenant, memory_type="note", topic="u", content="other text")
    successor = revise_memory(owner=tenant, predecessor_id=other.id, content="same text")
    assert successor.predecessor_id == other.id
    assert list(Memory.objects.filter(valid_to=None, content="same text")) == [successor]


def test_a_write_whose_duplicates_keep_leaving_is_a_conflict(
    tenant, duplicate_leaving, monkeypatch
):
    revised_meanwhile, revisions = duplicate_leaving
    monkeypatch.setattr(
        services, "_explain_lost_insert", lambda lost: revised_meanwhile(lost, then_again=True)
    )
    record_memory(owner=tenant, memory_type="note", topic="t", content="same text")
    with pytest.raises(Conflict, match="revised or erased; retry"):
        record_memory(owner=tenant, memory_type="fact", topic="t", content="same text")
    assert len(revisions) == WRITE_ATTEMPTS
    assert not Memory.objects.filter(memory_type="fact").exists()
