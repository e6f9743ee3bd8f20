"""Two revisions of one memory racing on separate connections: exactly one successor wins and
the other gets a Conflict. Real threads, real PostgreSQL connections, committed transactions."""

import threading

import pytest
from django.db import connection

from memories.errors import Conflict, DuplicateMemory
from memories.models import Memory
from memories.services import record_memory, revise_memory

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


def test_concurrent_identical_remembers_store_one(tenant):
    outcomes = race(
        [lambda: record_memory(owner=tenant, memory_type="note", topic="t", content="same")] * 4
    )
    assert sum(isinstance(o, Memory) for o in outcomes) == 1, outcomes
    assert sum(isinstance(o, DuplicateMemory) for o in outcomes) == 3
    assert Memory.objects.count() == 1
