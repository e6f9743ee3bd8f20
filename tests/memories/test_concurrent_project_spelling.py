"""Two first writes of one project at once, spelt in two cases ('Atlas', 'atlas'), as an agent's
parallel calls send them: the second waits for the first to commit and stores its spelling, so
briefing, handoff and search (which match a project exactly) do not see two projects. Real
PostgreSQL connections in two threads, committed transactions: the first write is held open
inside its transaction, after its insert, until the second is seen waiting."""

import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np
import pytest
from django.db import connection, transaction

from memories import tenancy
from memories.embedding import embed_memories, memory_text
from memories.errors import DuplicateMemory
from memories.models import Memory
from memories.services import record_memory, revise_memory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["as the owner", "as the app role under RLS"])
def acting_for(request) -> Callable[[int], AbstractContextManager]:
    """Writes as the table's owner, or as a server process makes them: as the app role, under
    row-level security (its advisory lock and its lookups included)."""
    if request.param == "as the owner":
        return lambda tenant_id: nullcontext()
    request.getfixturevalue("orm_as_app_role")
    return tenancy.acting_for


class Write(threading.Thread):
    """`work` on a connection of its own (a thread's), within `acting`; its outcome (the memory,
    or the error it raised) in `outcome`."""

    def __init__(self, work: Callable[[], Memory], acting: AbstractContextManager) -> None:
        super().__init__()
        self.work, self.acting, self.outcome = work, acting, None

    def run(self) -> None:
        try:
            with self.acting:
                self.outcome = self.work()
        except Exception as error:  # asserted on by the test
            self.outcome = error
        finally:
            connection.close()


class HeldOpen:
    """An `and_then`: keeps its write's transaction open, after the insert, until released."""

    def __init__(self) -> None:
        self.inserted, self.released = threading.Event(), threading.Event()

    def __call__(self, memory: Memory) -> None:
        self.inserted.set()
        self.released.wait(30)


def stored_vector(memory: Memory) -> np.ndarray:
    """The vector in the row, read with raw SQL (the ORM defers the column)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding::text FROM memories_memory WHERE owner_id = %s AND id = %s",
            [memory.owner_id, memory.id],
        )
        (text,) = cursor.fetchone()
    return np.array(json.loads(text))


def writes_waiting_for_a_lock() -> int:
    """How many sessions of this database wait for an advisory lock (the server's other
    databases may have sessions of their own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return cursor.fetchone()[0]


def a_write_waits_for_a_lock() -> bool:
    return writes_waiting_for_a_lock() > 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def race(first: Write, second: Write, held: HeldOpen) -> None:
    """`first` (whose `and_then` is `held`) inserts and stays open; `second` starts then, and
    runs until it finishes or is seen waiting for a lock; then `first` commits. Asserts that
    `second` waited."""
    first.start()
    try:
        assert held.inserted.wait(30), first.outcome
        second.start()
        deadline = time.monotonic() + 30
        while second.is_alive() and not a_write_waits_for_a_lock():
            assert time.monotonic() < deadline, "the second write neither finished nor waited"
            time.sleep(0.01)
        assert second.is_alive(), f"the second write did not wait for the first: {second.outcome}"
    finally:
        held.released.set()
        first.join(30)
        if second.ident is not None:  # started
            second.join(30)
    assert not first.is_alive() and not second.is_alive()


def test_two_first_remembers_of_a_project_in_two_cases_store_one_spelling(tenant, acting_for):
    held = HeldOpen()
    first = Write(
        lambda: record_memory(
            owner=tenant,
            memory_type="decision",
            topic="storage",
            content="Atlas keeps its blobs in S3.",
            project="Atlas",
            and_then=held,
        ),
        acting_for(tenant.pk),
    )
    second = Write(
        lambda: record_memory(
            owner=tenant,
            memory_type="fact",
            topic="deploys",
            content="Atlas deploys on Fridays.",
            project="atlas",
        ),
        acting_for(tenant.pk),
    )
    race(first, second, held)
    assert isinstance(first.outcome, Memory) and isinstance(second.outcome, Memory), (
        first.outcome,
        second.outcome,
    )
    assert second.outcome.project == "Atlas"  # as the write's answer names it
    with acting_for(tenant.pk):
        assert list(
            Memory.objects.filter(owner=tenant)
            .order_by("recorded_at")
            .values_list("content", "project")
        ) == [("Atlas keeps its blobs in S3.", "Atlas"), ("Atlas deploys on Fridays.", "Atlas")]
        # Its vector stands for the text it holds, the project as stored, not as it was sent.
        [expected] = embed_memories(
            [
                memory_text(
                    topic="deploys", content="Atlas deploys on Fridays.", tags=[], project="Atlas"
                )
            ]
        )
        assert np.allclose(stored_vector(second.outcome), expected, atol=1e-6)


def test_two_first_revisions_into_a_project_in_two_cases_store_one_spelling(tenant, acting_for):
    with acting_for(tenant.pk):
        storage = record_memory(
            owner=tenant, memory_type="decision", topic="storage", content="Blobs in S3."
        )
        deploys = record_memory(
            owner=tenant, memory_type="fact", topic="deploys", content="Deploys on Fridays."
        )
    held = HeldOpen()
    first = Write(
        lambda: revise_memory(
            owner=tenant, predecessor_id=storage.id, project="Atlas", and_then=held
        ),
        acting_for(tenant.pk),
    )
    second = Write(
        lambda: revise_memory(owner=tenant, predecessor_id=deploys.id, project="atlas"),
        acting_for(tenant.pk),
    )
    race(first, second, held)
    assert isinstance(first.outcome, Memory) and isinstance(second.outcome, Memory), (
        first.outcome,
        second.outcome,
    )
    assert second.outcome.project == "Atlas"
    with acting_for(tenant.pk):
        assert set(
            Memory.objects.filter(owner=tenant, valid_to=None).values_list("content", "project")
        ) == {("Blobs in S3.", "Atlas"), ("Deploys on Fridays.", "Atlas")}


def test_two_revisions_swapping_contents_into_a_new_project_get_domain_answers(tenant, acting_for):
    """Two revisions into a project the account does not have yet, each to the content the
    other's predecessor holds, queued on the project's lock. A revision that took the lock
    after locking its predecessor's row deadlocked with the one whose insert waited on that
    row, and PostgreSQL's cancel reached the agent as a retryable database error. The lock is
    taken before the row: one after the other, each is told that the content is current."""
    with acting_for(tenant.pk):
        one = record_memory(owner=tenant, memory_type="note", topic="a", content="C one")
        two = record_memory(owner=tenant, memory_type="note", topic="b", content="C two")
    locked, release = threading.Event(), threading.Event()

    def hold_the_projects_lock() -> None:
        with transaction.atomic():
            Memory.objects.lock_project_spelling(tenant.pk, "atlas")
            locked.set()
            release.wait(30)

    holder = Write(hold_the_projects_lock, acting_for(tenant.pk))
    second = Write(
        lambda: revise_memory(
            owner=tenant, predecessor_id=two.id, content="C one", project="atlas"
        ),
        acting_for(tenant.pk),
    )
    first = Write(
        lambda: revise_memory(
            owner=tenant, predecessor_id=one.id, content="C two", project="Atlas"
        ),
        acting_for(tenant.pk),
    )
    holder.start()
    try:
        assert locked.wait(30), holder.outcome
        second.start()
        wait_for(lambda: writes_waiting_for_a_lock() == 1, "the second revision did not queue")
        first.start()
        wait_for(lambda: writes_waiting_for_a_lock() == 2, "the first revision did not queue")
    finally:
        release.set()
        for write in (holder, second, first):
            if write.ident is not None:
                write.join(30)
    assert isinstance(second.outcome, DuplicateMemory), second.outcome
    assert isinstance(first.outcome, DuplicateMemory), first.outcome
    with acting_for(tenant.pk):
        assert set(
            Memory.objects.filter(owner=tenant, valid_to=None).values_list("content", "project")
        ) == {("C one", None), ("C two", None)}
