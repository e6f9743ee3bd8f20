"""A thread action racing a revision of the same memory, on separate connections: the
revision's copied memberships check their thread's key at COMMIT (deferred foreign keys) while
it holds the memory, and thread actions lock the thread before the memory. Neither deadlocks:
the revision wins and the thread action finds the memory superseded. A delete racing anything
else that touches its thread (a thread action, a decision, another delete, a create of its name,
an erasure): one waits for the other, and what comes second sees what came first, never a
database error."""

import functools
import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from accounts import erasure
from accounts.erasure import erase_account
from memories import thread_sql, threads
from memories.briefing import Selector, build_briefing
from memories.errors import AccountInactive, Conflict, NotFound
from memories.handoff import build_handoff
from memories.models import MembershipState, Memory, Thread, ThreadMembership
from memories.search import clean_filters, search_memories
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

    def join_then_linger(successor: Memory, **given) -> None:
        join(successor, **given)
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
        lambda: threads.revise_memory_with_proposals(
            owner=tenant, predecessor_id=member_of_launch.id, content="ship on saturday"
        )[0],
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
        lambda: threads.revise_memory_with_proposals(
            owner=tenant, predecessor_id=memory.id, content="ship on tuesday"
        )[0],
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
    owned = threads._owned_memories

    def owned_after_a_pause(owner, memory_ids):
        thread_locked.set()
        time.sleep(LINGER_SECONDS)
        return owned(owner, memory_ids)

    monkeypatch.setattr(threads, "_owned_memories", owned_after_a_pause)
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


def _delete_then_linger(owner, name: str, deleted: threading.Event) -> Thread:
    """delete_thread, its locks held a moment after it ran; the event is set then."""
    with transaction.atomic():
        thread = threads.delete_thread(owner=owner, name=name)
        deleted.set()
        time.sleep(LINGER_SECONDS)
    return thread


def _during_a_delete(owner, work: Callable) -> list:
    """The outcomes of deleting the thread "launch" and of `work`, run while the delete holds
    its locks."""
    deleted = threading.Event()
    return race(lambda: _delete_then_linger(owner, "launch", deleted), work, deleted)


def test_a_delete_racing_a_revision_of_a_member_waits_and_deletes_the_successors_membership(
    tenant, member_of_launch, copied_then_lingering
):
    revised, deleted = race(
        lambda: threads.revise_memory_with_proposals(
            owner=tenant, predecessor_id=member_of_launch.id, content="ship on saturday"
        )[0],
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        copied_then_lingering,
    )
    assert isinstance(revised, Memory), revised
    assert isinstance(deleted, Thread), deleted
    assert not Thread.objects.filter(owner=tenant).exists()
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_a_new_memorys_proposal_racing_a_delete_leaves_the_deleted_thread_out(
    tenant, member_of_launch
):
    deleted, recorded = _during_a_delete(
        tenant,
        lambda: threads.record_memory_with_proposals(
            owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
        ),
    )
    assert isinstance(deleted, Thread), deleted
    memory, proposals = recorded
    assert proposals == []
    assert Memory.objects.filter(id=memory.id).exists()
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_a_delete_racing_a_new_memorys_proposal_deletes_the_proposal(
    tenant, member_of_launch, monkeypatch
):
    proposed = threading.Event()
    propose = threads.propose_thread_memberships

    def propose_then_linger(*, memory: Memory) -> list:
        made = propose(memory=memory)
        proposed.set()
        time.sleep(LINGER_SECONDS)
        return made

    monkeypatch.setattr(threads, "propose_thread_memberships", propose_then_linger)
    recorded, deleted = race(
        lambda: threads.record_memory_with_proposals(
            owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
        ),
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        proposed,
    )
    _memory, [proposal] = recorded
    assert proposal.thread == "launch"
    assert isinstance(deleted, Thread), deleted
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


@pytest.fixture
def thread_locked_then_lingering(monkeypatch) -> threading.Event:
    """A thread action (rename, pin, add or remove members) that, having locked its thread,
    waits a moment before it goes on; the event is set then."""
    locked = threading.Event()
    thread_of = threads._thread

    def thread_then_linger(owner, name, *, lock=False, for_delete=False):
        found = thread_of(owner, name, lock=lock, for_delete=for_delete)
        if lock:  # the thread action's, not a delete's
            locked.set()
            time.sleep(LINGER_SECONDS)
        return found

    monkeypatch.setattr(threads, "_thread", thread_then_linger)
    return locked


# Thread actions that lock their thread by name (_thread) and then do different things.
THREAD_ACTIONS = {
    "add_members": lambda owner, memory: threads.add_thread_members(
        owner=owner, name="launch", memory_ids=[memory.id]
    ),
    "remove_members": lambda owner, memory: threads.remove_thread_members(
        owner=owner, name="launch", memory_ids=[memory.id]
    ),
    "rename": lambda owner, memory: threads.rename_thread(
        owner=owner, name="launch", new_name="liftoff"
    ),
}


@pytest.mark.parametrize("action", THREAD_ACTIONS)
def test_a_thread_action_racing_a_delete_of_its_thread_is_not_found(
    tenant, member_of_launch, action
):
    deleted, acted = _during_a_delete(
        tenant,
        lambda: THREAD_ACTIONS[action](tenant, member_of_launch),
    )
    assert isinstance(deleted, Thread), deleted
    assert isinstance(acted, NotFound) and "thread 'launch'" in str(acted), acted
    assert not Thread.objects.filter(owner=tenant).exists()
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_a_delete_racing_add_members_waits_and_deletes_the_new_member_too(
    tenant, member_of_launch, thread_locked_then_lingering
):
    other = record_memory(owner=tenant, memory_type="note", topic="launch", content="t-minus 3")
    added, deleted = race(
        lambda: THREAD_ACTIONS["add_members"](tenant, other),
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        thread_locked_then_lingering,
    )
    assert isinstance(added, threads.MembersChange) and added.unchanged == [], added
    assert isinstance(deleted, Thread) and deleted.member_count == 2, deleted
    assert not Thread.objects.filter(owner=tenant).exists()
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_a_delete_racing_a_rename_by_the_old_name_is_not_found(
    tenant, member_of_launch, thread_locked_then_lingering
):
    """The delete waits for the rename's lock, then finds no thread of that name."""
    renamed, deleted = race(
        lambda: threads.rename_thread(owner=tenant, name="launch", new_name="liftoff"),
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        thread_locked_then_lingering,
    )
    assert isinstance(renamed, Thread), renamed
    assert isinstance(deleted, NotFound), deleted
    assert Thread.objects.get(owner=tenant).name == "liftoff"


def test_deciding_a_proposal_racing_a_delete_of_its_thread_is_not_found(tenant, member_of_launch):
    _memory, [proposal] = threads.record_memory_with_proposals(
        owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
    )
    deleted, decided = _during_a_delete(
        tenant,
        lambda: threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True),
    )
    assert isinstance(deleted, Thread) and deleted.proposal_count == 1, deleted
    assert isinstance(decided, NotFound), decided
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def _a_proposal_whose_first_decision_lingers(tenant, monkeypatch):
    """A proposal of a new memory for 'launch', and an event set once the first decision of it
    holds its memory's lock, which that decision then keeps for LINGER_SECONDS."""
    _memory, [proposal] = threads.record_memory_with_proposals(
        owner=tenant, memory_type="decision", topic="launch plans", content="ship on monday"
    )
    locked = threading.Event()
    locked_memories = threads._locked_memories

    def memories_then_linger(owner, ids):
        found = locked_memories(owner, ids)
        if not locked.is_set():
            locked.set()
            time.sleep(LINGER_SECONDS)
        return found

    monkeypatch.setattr(threads, "_locked_memories", memories_then_linger)
    return proposal, locked


def test_a_delete_racing_an_acceptance_waits_and_deletes_the_new_member_too(
    tenant, member_of_launch, monkeypatch
):
    proposal, locked = _a_proposal_whose_first_decision_lingers(tenant, monkeypatch)
    decided, deleted = race(
        lambda: threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True),
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        locked,
    )
    assert isinstance(decided, ThreadMembership), decided
    assert isinstance(deleted, Thread), deleted
    assert (deleted.member_count, deleted.proposal_count) == (2, 0)
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_two_deletes_of_one_thread_delete_it_once_and_the_other_is_not_found(
    tenant, member_of_launch
):
    first, second = _during_a_delete(
        tenant,
        lambda: threads.delete_thread(owner=tenant, name="launch"),
    )
    assert isinstance(first, Thread), first
    assert isinstance(second, NotFound) and "thread 'launch'" in str(second), second


def test_a_create_of_the_deleted_name_waits_and_starts_afresh(tenant, member_of_launch):
    threads.remove_thread_members(owner=tenant, name="launch", memory_ids=[member_of_launch.id])
    deleted, created = _during_a_delete(
        tenant,
        lambda: threads.create_thread(owner=tenant, name="LAUNCH"),
    )
    assert isinstance(deleted, Thread), deleted
    assert isinstance(created, Thread), created
    assert list(Thread.objects.filter(owner=tenant).values_list("name", flat=True)) == ["LAUNCH"]
    # The rejection went with the old thread: the memory may join the new one.
    threads.add_thread_members(owner=tenant, name="launch", memory_ids=[member_of_launch.id])


def test_a_revision_of_a_member_of_two_threads_racing_a_delete_of_one_keeps_the_other(
    tenant, member_of_launch
):
    threads.create_thread(owner=tenant, name="friday")
    threads.add_thread_members(owner=tenant, name="friday", memory_ids=[member_of_launch.id])
    deleted, revised = _during_a_delete(
        tenant,
        lambda: threads.revise_memory_with_proposals(
            owner=tenant, predecessor_id=member_of_launch.id, content="ship on saturday"
        )[0],
    )
    assert isinstance(deleted, Thread), deleted
    assert isinstance(revised, Memory), revised
    assert Memory.objects.current().get(owner=tenant).content == "ship on saturday"
    [kept] = ThreadMembership.objects.filter(memory=revised)
    assert (kept.thread.name, kept.state) == ("friday", MembershipState.MEMBER)


def test_an_erasure_racing_a_delete_waits_and_erases_the_threads_left(tenant, member_of_launch):
    threads.create_thread(owner=tenant, name="friday")
    deleted, erased = _during_a_delete(
        tenant,
        lambda: erase_account(user=tenant),
    )
    assert isinstance(deleted, Thread), deleted
    assert not isinstance(erased, Exception), erased
    assert erased.counts["threads"] == 1
    assert list(Thread.objects.filter(owner=tenant).values_list("name", flat=True)) == ["[erased]"]


def test_a_delete_racing_an_erasure_finds_the_account_inactive(
    tenant, member_of_launch, monkeypatch
):
    erasing = threading.Event()

    def linger(user, now) -> dict:
        erasing.set()
        time.sleep(LINGER_SECONDS)
        return {}

    monkeypatch.setattr(erasure, "ERASURE_STEPS", [*erasure.ERASURE_STEPS, linger])
    erased, deleted = race(
        lambda: erasure.erase_account(user=tenant),
        lambda: threads.delete_thread(owner=tenant, name="launch"),
        erasing,
    )
    assert not isinstance(erased, Exception), erased
    assert isinstance(deleted, AccountInactive), deleted
    assert Thread.objects.get(owner=tenant).name == "[erased]"
    assert ThreadMembership.objects.filter(owner=tenant).count() == 1


def _on_its_own_connection(work: Callable):
    """The outcome of `work`, run and committed on another connection, waited for."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(work())
        except Exception as error:  # asserted on by the caller
            outcome.append(error)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=30)
    return outcome[0]


@pytest.fixture
def deleted_once_looked_up(tenant, monkeypatch) -> None:
    """A read filtered by a thread finds the thread by its name; then the thread is deleted
    (committed, on another connection) before the read itself runs."""
    members_sql = thread_sql.members_sql

    def look_up_then_delete(owner_id: int, name: str, params: dict, **given) -> str:
        clause = members_sql(owner_id, name, params, **given)
        deleted = _on_its_own_connection(lambda: threads.delete_thread(owner=tenant, name=name))
        assert isinstance(deleted, Thread), deleted
        return clause

    monkeypatch.setattr(thread_sql, "members_sql", look_up_then_delete)


def _found_by_search(owner) -> int:
    page = search_memories(owner_id=owner.pk, query="ship", filters=clean_filters(thread="launch"))
    return len(page.hits)


def _found_by_briefing(owner) -> int:
    briefing = build_briefing(owner_id=owner.pk, selector=Selector.clean("thread", "launch"))
    return sum(section.count for section in briefing.sections.values())


def _found_by_handoff(owner) -> int:
    handoff = build_handoff(owner_id=owner.pk, selector=Selector.clean("thread", "launch"))
    return sum(section.count for section in handoff.sections.values())


# How many memories each read filtered by the thread "launch" finds.
READS_BY_THREAD = {
    "search": _found_by_search,
    "briefing": _found_by_briefing,
    "handoff": _found_by_handoff,
}


def test_a_search_by_a_thread_deleted_after_its_name_was_looked_up_is_not_found(
    tenant, member_of_launch, deleted_once_looked_up
):
    """Whichever connection the search runs on (the replica's may even lag the lookup's), a
    search that finds the thread's members gone because the thread is gone says so, as for a
    thread never created."""
    with pytest.raises(
        NotFound, match=r"^not_found: thread 'launch'; describe_environment lists your threads$"
    ):
        _found_by_search(tenant)


@pytest.mark.parametrize("read", ["briefing", "handoff"])
def test_a_briefing_reads_its_thread_as_it_stood_when_looked_up(
    tenant, member_of_launch, deleted_once_looked_up, read
):
    """A briefing or handoff reads one snapshot, which its lookup of the thread's name began:
    a delete committed after it is not seen, so the thread is answered with its members, as it
    stood, never as a thread with none."""
    assert READS_BY_THREAD[read](tenant) == 1
    assert not Thread.objects.filter(owner=tenant).exists()


@pytest.mark.parametrize("read", READS_BY_THREAD)
def test_a_read_by_a_thread_with_no_match_finds_nothing_and_is_not_refused(
    tenant, member_of_launch, read
):
    assert READS_BY_THREAD[read](tenant) == 1
    threads.remove_thread_members(owner=tenant, name="launch", memory_ids=[member_of_launch.id])
    assert READS_BY_THREAD[read](tenant) == 0


@pytest.mark.parametrize(("accept", "expected"), [(True, ThreadMembership), (False, Conflict)])
def test_a_decision_racing_an_acceptance_of_one_proposal_answers_as_after_it(
    tenant, member_of_launch, monkeypatch, accept, expected
):
    """A double-submitted acceptance (or a rejection racing it) waits for the first and then
    answers as it would have after it: the acceptance again, or the conflict that names the way
    back; not `not_found`, as for a proposal that never existed."""
    proposal, locked = _a_proposal_whose_first_decision_lingers(tenant, monkeypatch)
    accepted, second = race(
        lambda: threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True),
        lambda: threads.decide_thread_proposal(
            owner=tenant, proposal_id=proposal.id, accept=accept
        ),
        locked,
    )
    assert isinstance(accepted, ThreadMembership), accepted
    assert isinstance(second, expected), second
    assert ThreadMembership.objects.get(id=proposal.id).state == MembershipState.MEMBER
