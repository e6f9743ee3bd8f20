"""A thread action racing a revision of the same memory, on separate connections: the
revision's copied memberships check their thread's key at COMMIT (deferred foreign keys) while
it holds the memory, and thread actions lock the thread before the memory. Neither deadlocks:
the revision wins and the thread action finds the memory superseded."""

import functools
import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection

from memories import threads
from memories.errors import Conflict, NotFound
from memories.models import MembershipState, Memory, Thread, ThreadMembership
from memories.services import record_memory

pytestmark = pytest.mark.django_db(transaction=True)

LINGER_SECONDS = 0.5


def race(first: Callable, second: Callable, started: threading.Event) -> list:
    """Run `first`, then `second` once `first` has set `started`, each on its own connection;
    their results or errors."""
    outcomes: list = [None, None]

    def run(index: int, work: Callable, wait_for: threading.Event | None) -> None:
        try:
            if wait_for is not None:
                assert wait_for.wait(10)
            outcomes[index] = work()
        except Exception as error:  # collected and asserted on below
            outcomes[index] = error
        finally:
            connection.close()

    workers = [
        threading.Thread(target=run, args=(0, first, None)),
        threading.Thread(target=run, args=(1, second, started)),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    return outcomes


@pytest.fixture
def copied_then_lingering(monkeypatch) -> threading.Event:
    """A revision that, having copied its predecessor's memberships (and holding the memory),
    waits a moment before it commits; the event is set then."""
    copied = threading.Event()
    join = threads._join_predecessors_threads

    def join_then_linger(successor: Memory) -> None:
        join(successor)
        copied.set()
        time.sleep(LINGER_SECONDS)

    monkeypatch.setattr(threads, "_join_predecessors_threads", join_then_linger)
    return copied


@pytest.fixture
def member_of_launch(tenant) -> Memory:
    memory = record_memory(
        owner=tenant, memory_type="decision", topic="launch plan", content="ship on friday"
    )
    threads.create_thread(owner=tenant, name="launch")
    threads.add_thread_members(owner=tenant, name="launch", memory_ids=[memory.id])
    return memory


@pytest.mark.parametrize("change", [threads.add_thread_members, threads.remove_thread_members])
def test_a_membership_change_racing_a_revision_is_a_conflict(
    tenant, member_of_launch, copied_then_lingering, change
):
    revised, changed = race(
        lambda: threads.revise_memory_in_threads(
            owner=tenant, predecessor_id=member_of_launch.id, content="ship on saturday"
        ),
        lambda: change(owner=tenant, name="launch", memory_ids=[member_of_launch.id]),
        copied_then_lingering,
    )
    assert isinstance(revised, Memory), revised
    assert isinstance(changed, Conflict) and "superseded" in str(changed), changed
    assert ThreadMembership.objects.get(memory=revised).state == MembershipState.MEMBER


def test_accepting_a_proposal_racing_its_memorys_revision_is_a_conflict(
    tenant, member_of_launch, copied_then_lingering
):
    memory, [proposal] = threads.record_memory_with_proposals(
        owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
    )
    revised, accepted = race(
        lambda: threads.revise_memory_in_threads(
            owner=tenant, predecessor_id=memory.id, content="ship on tuesday"
        ),
        lambda: threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True),
        copied_then_lingering,
    )
    assert isinstance(revised, Memory), revised
    assert isinstance(accepted, Conflict), accepted
    # The successor carries the proposal, still open.
    assert ThreadMembership.objects.get(memory=revised).state == MembershipState.PROPOSED


def test_accepting_a_proposal_racing_add_members_of_its_memory(
    tenant, member_of_launch, monkeypatch
):
    """Either may commit first (the acceptance then finds no open proposal, or the add finds a
    member already); neither deadlocks, and the memory ends a member."""
    memory, [proposal] = threads.record_memory_with_proposals(
        owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
    )
    thread_locked = threading.Event()
    owned = threads._owned_memory_ids

    def owned_after_a_pause(owner, memory_ids):
        thread_locked.set()
        time.sleep(LINGER_SECONDS)
        return owned(owner, memory_ids)

    monkeypatch.setattr(threads, "_owned_memory_ids", owned_after_a_pause)
    outcomes = race(
        lambda: threads.add_thread_members(owner=tenant, name="launch", memory_ids=[memory.id]),
        lambda: threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True),
        thread_locked,
    )
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert all(isinstance(error, NotFound) for error in errors), outcomes
    assert ThreadMembership.objects.get(id=proposal.id).state == MembershipState.MEMBER


def test_two_renames_swapping_two_names_are_conflicts_never_an_outage(tenant):
    """Each rename's update waits in the unique index for the other's old name; when both are
    in their update at once PostgreSQL ends one (a database error the client would read as an
    outage): as one after the other, whichever is refused is a conflict."""
    at_once = threading.Event()
    at_once.set()
    outcomes = []
    for round_ in range(30):
        first, second = f"first {round_}", f"second {round_}"
        threads.create_thread(owner=tenant, name=first)
        threads.create_thread(owner=tenant, name=second)
        both_ready = threading.Barrier(2)

        def rename(name: str, new_name: str, ready: threading.Barrier) -> Thread:
            ready.wait(10)
            return threads.rename_thread(owner=tenant, name=name, new_name=new_name)

        outcomes += race(
            functools.partial(rename, first, second, both_ready),
            functools.partial(rename, second, first, both_ready),
            at_once,
        )
    assert {type(outcome) for outcome in outcomes} <= {Thread, Conflict}, outcomes
    assert Conflict in {type(outcome) for outcome in outcomes}
