"""Database guards and service rules of threads and due dates: due dates are substance,
proposals never apply themselves. (A membership never crosses tenants: test_tenant_keys.)"""

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounts.erasure import erase_account
from memories import services, threads
from memories.briefing import read_pinned_threads
from memories.errors import AccountInactive, Conflict, DuplicateMemory, InvalidInput, NotFound
from memories.models import MembershipState, Memory, Thread, ThreadMembership
from memories.services import record_memory, revise_memory
from memories.threads import (
    add_thread_members,
    create_thread,
    record_memory_with_proposals,
    rename_thread,
    revise_memory_with_proposals,
)
from tests.factories import ThreadFactory, ThreadMembershipFactory
from tests.memories.conftest import commit_elsewhere
from tests.memories.made_up_credentials import CREDENTIALS


def test_due_date_is_fixed_at_insert(tenant):
    due = timezone.now() + timedelta(days=2)
    memory = record_memory(
        owner=tenant, memory_type="commitment", topic="t", content="c", due_at=due
    )
    with pytest.raises(IntegrityError, match="due_at of memory"), transaction.atomic():
        Memory.objects.filter(pk=memory.pk).update(due_at=due + timedelta(days=1))


def test_only_commitments_have_due_dates_in_the_database(tenant):
    with pytest.raises(IntegrityError, match="memory_due_at_only_on_commitments"):
        Memory.objects.create(
            owner=tenant,
            memory_type="note",
            topic="t",
            content="c",
            content_length=1,
            recorded_at=timezone.now(),
            due_at=timezone.now(),
        )


def test_revise_carries_the_due_date_while_it_stays_a_commitment(tenant):
    due = timezone.now() + timedelta(days=2)
    first = record_memory(
        owner=tenant, memory_type="commitment", topic="t", content="v1", due_at=due
    )
    second = revise_memory(owner=tenant, predecessor_id=first.id, content="v2")
    assert second.due_at == due and second.commitment_status == "open"
    later = due + timedelta(days=5)
    third = revise_memory(owner=tenant, predecessor_id=second.id, content="v3", due_at=later)
    assert third.due_at == later
    note = revise_memory(owner=tenant, predecessor_id=third.id, content="v4", memory_type="note")
    assert note.due_at is None


def test_proposals_stay_proposals_and_rejections_stick(tenant):
    seed = record_memory(owner=tenant, memory_type="note", topic="quarterly budget", content="a")
    add_thread_members(
        owner=tenant, name=create_thread(owner=tenant, name="budget").name, memory_ids=[seed.id]
    )
    memory, proposals = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="quarterly budget review", content="b"
    )
    assert [p.thread for p in proposals] == ["budget"]
    row = ThreadMembership.objects.get(memory=memory)
    assert row.state == MembershipState.PROPOSED and row.decided_at is None


def test_proposals_come_with_their_threads_names_best_first(tenant):
    for name, topic in (("budget", "quarterly budget"), ("reviews", "quarterly budget review")):
        seed = record_memory(owner=tenant, memory_type="note", topic=topic, content=name)
        add_thread_members(
            owner=tenant, name=create_thread(owner=tenant, name=name).name, memory_ids=[seed.id]
        )
    memory, proposals = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="quarterly budget review notes", content="c"
    )
    assert [p.thread for p in proposals] == ["reviews", "budget"]
    assert proposals[0].similarity > proposals[1].similarity
    assert {p.memory_id for p in proposals} == {memory.id}


def test_a_memory_id_sent_as_a_proposal_id_names_the_proposal_to_decide(tenant, other_tenant):
    """remember answers a memory's id beside its proposals' ids: deciding a proposal by the
    memory's id is refused naming the memory's open proposal, and a memory without one says
    how it joins a thread instead."""
    seed = record_memory(owner=tenant, memory_type="note", topic="quarterly budget", content="a")
    add_thread_members(
        owner=tenant, name=create_thread(owner=tenant, name="budget").name, memory_ids=[seed.id]
    )
    memory, [proposal] = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="quarterly budget review", content="b"
    )
    with pytest.raises(NotFound) as refused:
        threads.decide_thread_proposal(owner=tenant, proposal_id=str(memory.id), accept=True)
    assert str(refused.value) == (
        f"not_found: open proposal {memory.id}: that is a memory's id; proposalId takes a "
        f"proposal's, and this memory's open proposals are {proposal.id} (thread 'budget')"
    )
    with pytest.raises(NotFound) as refused:
        threads.decide_thread_proposal(owner=tenant, proposal_id=seed.id, accept=False)
    assert str(refused.value).endswith(
        "that is a memory's id, with no open proposal; it is a member of 'budget'"
    )
    loose = record_memory(owner=tenant, memory_type="note", topic="lunch", content="d")
    with pytest.raises(NotFound) as refused:
        threads.decide_thread_proposal(owner=tenant, proposal_id=loose.id, accept=False)
    assert str(refused.value).endswith(
        "that is a memory's id, with no open proposal; add_members makes a memory a member of a "
        "thread"
    )
    # Another account's memory is not told apart from an unknown id.
    theirs = record_memory(owner=other_tenant, memory_type="note", topic="t", content="c")
    with pytest.raises(NotFound) as refused:
        threads.decide_thread_proposal(owner=tenant, proposal_id=theirs.id, accept=True)
    assert str(refused.value) == f"not_found: open proposal {theirs.id}"
    assert ThreadMembership.objects.get(id=proposal.id).state == MembershipState.PROPOSED
    # Nor is any id, when it is no UUID: what one is, is said.
    with pytest.raises(NotFound) as refused:
        threads.decide_thread_proposal(owner=tenant, proposal_id="budget", accept=True)
    assert str(refused.value) == (
        "not_found: open proposal budget: a proposal's id is a UUID, as remember's proposals "
        "and list give it"
    )


def test_a_memory_and_its_proposals_are_written_together_or_not_at_all(tenant, monkeypatch):
    def fail(*, memory):
        raise RuntimeError("proposals failed")

    monkeypatch.setattr(threads, "propose_thread_memberships", fail)
    with pytest.raises(RuntimeError, match="proposals failed"):
        record_memory_with_proposals(owner=tenant, memory_type="note", topic="t", content="lost")
    assert not Memory.objects.filter(owner=tenant, content="lost").exists()


def test_a_duplicate_with_proposals_names_the_memory_it_repeats(tenant):
    first, _ = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="t", content="same"
    )
    with pytest.raises(DuplicateMemory) as raised:
        record_memory_with_proposals(owner=tenant, memory_type="note", topic="t", content="same")
    assert raised.value.existing_id == first.id


def test_a_revised_member_stays_in_its_threads_or_is_not_revised(tenant, monkeypatch):
    memory = record_memory(owner=tenant, memory_type="note", topic="standup", content="v1")
    thread = create_thread(owner=tenant, name="rituals")
    add_thread_members(owner=tenant, name=thread.name, memory_ids=[memory.id])
    successor, _ = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, content="v2"
    )
    assert ThreadMembership.objects.get(memory=successor).state == MembershipState.MEMBER

    def fail(successor, **given):
        raise RuntimeError("joining failed")

    monkeypatch.setattr(threads, "_join_predecessors_threads", fail)
    with pytest.raises(RuntimeError, match="joining failed"):
        revise_memory_with_proposals(owner=tenant, predecessor_id=successor.id, content="v3")
    assert Memory.objects.current().get(owner=tenant, topic="standup").content == "v2"


def test_a_decided_membership_has_its_decision_time(tenant):
    memory = record_memory(owner=tenant, memory_type="note", topic="standup notes", content="a")
    thread = create_thread(owner=tenant, name="rituals")
    undated = ThreadMembership(
        owner=tenant, thread=thread, memory=memory, state=MembershipState.MEMBER
    )
    with (
        pytest.raises(IntegrityError, match="membership_decided_unless_proposed"),
        transaction.atomic(),
    ):
        undated.save()
    undated.state = MembershipState.PROPOSED
    undated.save()  # an open proposal has no decision yet


def test_an_erased_account_cannot_name_threads_again(tenant):
    create_thread(owner=tenant, name="before")
    erase_account(user=tenant)
    with pytest.raises(AccountInactive):
        create_thread(owner=tenant, name="after")
    with pytest.raises(AccountInactive):
        rename_thread(owner=tenant, name="[erased]", new_name="after")


@pytest.fixture
def proposed_for_budget(tenant):
    """A memory proposed for the thread "budget", whose member has a similar topic."""
    seed = record_memory(owner=tenant, memory_type="note", topic="quarterly budget", content="a")
    create_thread(owner=tenant, name="budget")
    add_thread_members(owner=tenant, name="budget", memory_ids=[seed.id])
    memory, [proposal] = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="quarterly budget review", content="b"
    )
    return memory, proposal


def test_a_revision_carries_open_proposals_and_rejections_to_the_successor(
    tenant, proposed_for_budget
):
    memory, proposal = proposed_for_budget
    successor, _ = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, content="b2"
    )
    [open_proposal] = threads.list_open_proposals(owner=tenant)
    assert open_proposal.memory_id == successor.id
    assert open_proposal.similarity == pytest.approx(proposal.similarity, abs=1e-3)
    # The superseded memory's proposal is no longer open: the successor's is.
    with pytest.raises(Conflict) as raised:
        threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True)
    # Named, so the agent acts on it without listing every open proposal to find it.
    assert str(raised.value) == (
        f"conflict: memory {memory.id} of proposal {proposal.id} is superseded by "
        f"{successor.id}, whose proposal is {open_proposal.id}: accept_proposal "
        f"{open_proposal.id}"
    )
    threads.decide_thread_proposal(owner=tenant, proposal_id=open_proposal.id, accept=False)
    with pytest.raises(Conflict, match=f"whose proposal {open_proposal.id} for thread 'budget' "):
        threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True)
    third, _ = revise_memory_with_proposals(owner=tenant, predecessor_id=successor.id, content="b3")
    assert ThreadMembership.objects.get(memory=third).state == MembershipState.REJECTED
    [listed] = threads.list_threads(owner=tenant)
    assert (listed.member_count, listed.proposal_count) == (1, 0)


def test_a_revision_moved_to_another_topic_is_proposed_for_the_threads_it_now_fits(tenant):
    seed = record_memory(owner=tenant, memory_type="note", topic="quarterly budget", content="a")
    create_thread(owner=tenant, name="budget")
    add_thread_members(owner=tenant, name="budget", memory_ids=[seed.id])
    memory, none_yet = record_memory_with_proposals(
        owner=tenant, memory_type="note", topic="lunch order", content="pizza, for the review"
    )
    assert none_yet == []
    successor, [proposal] = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, topic="quarterly budget review"
    )
    assert (proposal.thread, proposal.memory_id) == ("budget", successor.id)
    [listed] = threads.list_open_proposals(owner=tenant)
    assert listed.id == proposal.id


def test_a_proposal_id_sent_for_a_memory_id_is_told_apart(
    tenant, other_tenant, proposed_for_budget
):
    """remember answers a memory's id and its proposals' ids side by side: one sent where the
    other belongs is named for what it is, with the memory it proposes."""
    memory, proposal = proposed_for_budget
    expected = (
        f"not_found: memory {proposal.id}: {proposal.id} is an open thread proposal's id; "
        "accept_proposal or reject_proposal takes it; the memory it proposes for thread "
        f"'budget' is {memory.id}"
    )
    calls = [
        lambda: add_thread_members(owner=tenant, name="budget", memory_ids=[proposal.id]),
        lambda: services.archive_memory(owner=tenant, memory_id=proposal.id),
        lambda: services.resolve_commitment(owner=tenant, memory_id=proposal.id, status="resolved"),
        lambda: revise_memory(owner=tenant, predecessor_id=proposal.id, content="x"),
    ]
    for call in calls:
        with pytest.raises(NotFound) as raised:
            call()
        assert str(raised.value) == expected
    threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=True)
    with pytest.raises(NotFound, match=r"decided already \(member\); the memory it proposes"):
        services.archive_memory(owner=tenant, memory_id=proposal.id)
    # Another tenant's proposal id is any unknown id to them.
    with pytest.raises(NotFound) as raised:
        services.archive_memory(owner=other_tenant, memory_id=proposal.id)
    assert str(raised.value) == f"not_found: memory {proposal.id}"


def test_a_revision_to_another_topic_drops_the_proposals_its_old_topic_made(
    tenant, proposed_for_budget
):
    """An open proposal compared the old topic: moved away from the thread's, the revision is
    not left proposed for it (with a similarity it no longer has); moved within it, it is
    proposed again, with the similarity of its new topic, and its answer says so."""
    memory, proposal = proposed_for_budget
    away, proposals = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, topic="holiday rota"
    )
    assert proposals == []
    assert threads.list_open_proposals(owner=tenant) == []
    [listed] = threads.list_threads(owner=tenant)
    assert listed.proposal_count == 0
    back, [again] = revise_memory_with_proposals(
        owner=tenant, predecessor_id=away.id, topic="quarterly budget"
    )
    assert (again.thread, again.memory_id) == ("budget", back.id)
    assert again.similarity == pytest.approx(1.0) != pytest.approx(proposal.similarity)
    assert [p.id for p in threads.list_open_proposals(owner=tenant)] == [again.id]


def test_a_revision_in_many_threads_is_still_proposed_for_another_it_now_fits(tenant):
    seed = record_memory(owner=tenant, memory_type="note", topic="quarterly budget", content="a")
    create_thread(owner=tenant, name="budget")
    add_thread_members(owner=tenant, name="budget", memory_ids=[seed.id])
    memory = record_memory(owner=tenant, memory_type="note", topic="lunch order", content="b")
    for name in ("food", "fridays", "office"):  # more than a memory is proposed for at once
        create_thread(owner=tenant, name=name)
        add_thread_members(owner=tenant, name=name, memory_ids=[memory.id])
    # The successor stands in those three as a member of its own (new) topic: they are no
    # place to propose it for, and so take none of the places of one that is.
    successor, proposals = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, topic="quarterly budget lunch"
    )
    assert [(p.thread, p.memory_id) for p in proposals] == [("budget", successor.id)]


def test_a_revision_of_the_same_topic_makes_no_proposal_again(tenant, proposed_for_budget):
    memory, proposal = proposed_for_budget
    threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=False)
    # The content alone changed: a proposal would compare what it compared before, and the
    # rejection stands.
    successor, proposals = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, content="b, revised"
    )
    assert proposals == []
    # Nor is a thread the memory stands in proposed again when its topic changes.
    _, proposals = revise_memory_with_proposals(
        owner=tenant, predecessor_id=successor.id, topic="quarterly budget plan"
    )
    assert proposals == []
    assert ThreadMembership.objects.filter(state=MembershipState.PROPOSED).count() == 0


def test_a_threads_member_count_leaves_out_its_archived_members(tenant, proposed_for_budget):
    """memberCount is what a listing of the thread shows by default: its current, active
    members. An archived member stays a member (the thread's search with status 'archived'
    lists it), and an open proposal of an archived memory stays open, as proposals list it."""
    proposed, _ = proposed_for_budget
    seed = ThreadMembership.objects.get(owner=tenant, state=MembershipState.MEMBER).memory
    kept = record_memory(owner=tenant, memory_type="note", topic="forecast", content="c")
    add_thread_members(owner=tenant, name="budget", memory_ids=[kept.id])
    threads.pin_thread(owner=tenant, name="budget", pinned=True)
    services.archive_memory(owner=tenant, memory_id=seed.id)
    services.archive_memory(owner=tenant, memory_id=proposed.id)

    [listed] = threads.list_threads(owner=tenant)
    assert (listed.member_count, listed.proposal_count) == (1, 1)
    [pinned] = read_pinned_threads(tenant.pk).items
    assert (pinned.member_count, pinned.proposal_count) == (1, 1)
    unpinned = threads.pin_thread(owner=tenant, name="budget", pinned=False)
    assert (unpinned.member_count, unpinned.proposal_count) == (1, 1)
    assert ThreadMembership.objects.get(memory=seed).state == MembershipState.MEMBER
    # Brought back by a revision, it is counted again: its successor holds its place.
    revise_memory_with_proposals(owner=tenant, predecessor_id=seed.id)
    [listed] = threads.list_threads(owner=tenant)
    assert listed.member_count == 2


@pytest.mark.parametrize("change", [add_thread_members, threads.remove_thread_members])
def test_thread_members_are_changed_by_their_current_version_only(tenant, change):
    memory = record_memory(owner=tenant, memory_type="note", topic="x", content="v1")
    successor = revise_memory(owner=tenant, predecessor_id=memory.id, content="v2")
    create_thread(owner=tenant, name="t")
    with pytest.raises(Conflict) as raised:
        change(owner=tenant, name="t", memory_ids=[successor.id, memory.id])
    assert str(raised.value) == (
        f"conflict: memory {memory.id} is already superseded by {successor.id}; send "
        f"{successor.id} instead"
    )
    other = record_memory(owner=tenant, memory_type="note", topic="y", content="w1")
    newer = revise_memory(owner=tenant, predecessor_id=other.id, content="w2")
    with pytest.raises(Conflict) as raised:
        change(owner=tenant, name="t", memory_ids=[memory.id, other.id])
    assert str(raised.value) == (
        f"conflict: memories already superseded: {memory.id} by {successor.id}, {other.id} by "
        f"{newer.id}; send the newer ids instead"
    )


def test_adding_a_member_again_is_named_unchanged_and_leaves_it_as_it_was(
    tenant, proposed_for_budget
):
    """A retry is no failure, but is told apart from a change: an id already a member is named,
    and its row keeps its decision time (the proposals compare the most recently added)."""
    proposed, _ = proposed_for_budget
    seed = ThreadMembership.objects.get(owner=tenant, state=MembershipState.MEMBER).memory
    outsider = record_memory(owner=tenant, memory_type="note", topic="lunch", content="soup")
    added_at = ThreadMembership.objects.get(memory=seed).decided_at
    change = add_thread_members(
        owner=tenant,
        name="budget",
        memory_ids=[seed.id, proposed.id, outsider.id, str(seed.id), outsider.id],
    )
    assert change.unchanged == [seed.id]
    assert (change.thread.member_count, change.thread.proposal_count) == (3, 0)
    assert ThreadMembership.objects.get(memory=seed).decided_at == added_at
    again = add_thread_members(owner=tenant, name="budget", memory_ids=[outsider.id, seed.id])
    assert again.unchanged == [outsider.id, seed.id]
    assert again.thread.member_count == 3


def test_removing_what_is_not_in_the_thread_is_named_unchanged(tenant, proposed_for_budget):
    """A member and an open proposal are taken out (the proposal rejected); a memory never in
    the thread, or taken out already, is named, and no row is written for it."""
    proposed, _ = proposed_for_budget
    seed = ThreadMembership.objects.get(owner=tenant, state=MembershipState.MEMBER).memory
    outsider = record_memory(owner=tenant, memory_type="note", topic="lunch", content="soup")
    change = threads.remove_thread_members(
        owner=tenant, name="budget", memory_ids=[outsider.id, seed.id, proposed.id, outsider.id]
    )
    assert change.unchanged == [outsider.id]
    assert (change.thread.member_count, change.thread.proposal_count) == (0, 0)
    assert not ThreadMembership.objects.filter(memory=outsider).exists()
    rejected_at = ThreadMembership.objects.get(memory=seed).decided_at
    again = threads.remove_thread_members(owner=tenant, name="budget", memory_ids=[seed.id])
    assert again.unchanged == [seed.id]
    assert ThreadMembership.objects.get(memory=seed).decided_at == rejected_at


def test_a_superseded_id_given_twice_is_named_once(tenant):
    memory = record_memory(owner=tenant, memory_type="note", topic="x", content="v1")
    successor = revise_memory(owner=tenant, predecessor_id=memory.id, content="v2")
    create_thread(owner=tenant, name="t")
    with pytest.raises(Conflict) as raised:
        add_thread_members(owner=tenant, name="t", memory_ids=[memory.id, str(memory.id)])
    assert str(raised.value) == (
        f"conflict: memory {memory.id} is already superseded by {successor.id}; send "
        f"{successor.id} instead"
    )
    assert not ThreadMembership.objects.filter(owner=tenant).exists()  # nothing half-applied


@pytest.mark.parametrize("name", ["[erased]", "[ERASED]", "  [Erased] "])
def test_no_thread_takes_the_name_erasure_gives(tenant, name):
    with pytest.raises(InvalidInput, match=r"name: '\[erased\]' is reserved"):
        create_thread(owner=tenant, name=name)
    create_thread(owner=tenant, name="kept")
    with pytest.raises(InvalidInput, match=r"newName: '\[erased\]' is reserved"):
        rename_thread(owner=tenant, name="kept", new_name=name)


@pytest.mark.django_db(transaction=True)
def test_concurrent_creations_keep_the_thread_cap(tenant, monkeypatch):
    Thread.objects.bulk_create(
        [Thread(owner=tenant, name=f"t{n}") for n in range(threads.THREADS_MAX - 1)]
    )
    both_locked = threading.Barrier(2, timeout=10)
    lock_live_owner = services.lock_live_owner

    def lock_then_wait(owner):
        lock_live_owner(owner)  # shared: both creations hold it at once
        both_locked.wait()

    monkeypatch.setattr(services, "lock_live_owner", lock_then_wait)
    outcomes = []

    def create(name):
        try:
            outcomes.append(create_thread(owner=tenant, name=name).name)
        except Conflict as error:
            outcomes.append(str(error))
        finally:
            connection.close()

    workers = [threading.Thread(target=create, args=(name,)) for name in ("new-a", "new-b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert Thread.objects.filter(owner=tenant).count() == threads.THREADS_MAX
    assert len(outcomes) == 2
    assert f"conflict: at most {threads.THREADS_MAX} threads per account" in outcomes


@pytest.mark.parametrize(
    "write",
    [
        lambda owner, memory: services.archive_memory(owner=owner, memory_id=memory.id),
        lambda owner, memory: services.resolve_commitment(
            owner=owner, memory_id=memory.id, status="resolved"
        ),
        lambda owner, memory: threads.pin_thread(owner=owner, name="t", pinned=True),
        lambda owner, memory: add_thread_members(owner=owner, name="t", memory_ids=[memory.id]),
        lambda owner, memory: threads.remove_thread_members(
            owner=owner, name="t", memory_ids=[memory.id]
        ),
    ],
    ids=["archive", "resolve", "pin", "add_members", "remove_members"],
)
def test_a_deactivated_account_moves_no_lifecycle_or_membership(tenant, write):
    # As memory writes do: a write racing an erasure either commits before it or sees this.
    memory = record_memory(owner=tenant, memory_type="commitment", topic="t", content="c")
    create_thread(owner=tenant, name="t")
    type(tenant).objects.filter(pk=tenant.pk).update(is_active=False)
    with pytest.raises(AccountInactive):
        write(tenant, memory)
    memory.refresh_from_db()
    assert (memory.status, memory.commitment_status) == ("active", "open")
    assert not Thread.objects.get(owner=tenant).pinned
    assert not ThreadMembership.objects.filter(owner=tenant).exists()


def test_deleting_a_thread_removes_its_memberships_and_keeps_its_memories(
    tenant, proposed_for_budget
):
    memory, proposal = proposed_for_budget
    threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=False)
    other = create_thread(owner=tenant, name="other")
    add_thread_members(owner=tenant, name="other", memory_ids=[memory.id])

    deleted = threads.delete_thread(owner=tenant, name="BUDGET")

    assert (deleted.name, deleted.member_count, deleted.proposal_count) == ("budget", 1, 0)
    assert list(Thread.objects.filter(owner=tenant)) == [other]
    assert list(ThreadMembership.objects.filter(owner=tenant).values_list("thread_id")) == [
        (other.pk,)
    ]
    assert Memory.objects.current().filter(owner=tenant).count() == 2


def test_a_deleted_threads_name_starts_afresh(tenant, proposed_for_budget):
    memory, proposal = proposed_for_budget
    threads.decide_thread_proposal(owner=tenant, proposal_id=proposal.id, accept=False)
    threads.delete_thread(owner=tenant, name="budget")
    create_thread(owner=tenant, name="budget")
    add_thread_members(owner=tenant, name="budget", memory_ids=[memory.id])  # not rejected now
    [listed] = [t for t in threads.list_threads(owner=tenant) if t.name == "budget"]
    assert listed.member_count == 1


def test_threads_are_listed_by_name_in_any_case(tenant, other_tenant):
    """As their names compare: "alpha" before "Zeta", and "ébauche" (decomposed, its e
    first) among the e's; pinned first in the list."""
    for name in ("Zeta", "alpha", "Beta", "ébauche"):
        create_thread(owner=tenant, name=name)
    create_thread(owner=tenant, name="pinned Omega", pinned=True)
    create_thread(owner=tenant, name="Pinned alpha", pinned=True)
    ThreadFactory(owner=other_tenant, name="aardvark")

    listed = [thread.name for thread in threads.list_threads(owner=tenant)]
    assert listed == ["Pinned alpha", "pinned Omega", "alpha", "Beta", "ébauche", "Zeta"]
    assert Thread.objects.names(tenant.pk) == [
        "alpha",
        "Beta",
        "ébauche",
        "Pinned alpha",
        "pinned Omega",
        "Zeta",
    ]


def test_deleting_frees_a_place_under_the_thread_cap(tenant, monkeypatch):
    monkeypatch.setattr(threads, "THREADS_MAX", 2)
    create_thread(owner=tenant, name="a")
    create_thread(owner=tenant, name="b")
    with pytest.raises(Conflict, match="at most 2 threads"):
        create_thread(owner=tenant, name="c")
    threads.delete_thread(owner=tenant, name="a")
    create_thread(owner=tenant, name="c")
    assert sorted(t.name for t in threads.list_threads(owner=tenant)) == ["b", "c"]


def test_deleting_an_unknown_or_foreign_thread_is_not_found(tenant, other_tenant):
    create_thread(owner=other_tenant, name="theirs")
    for name in ("theirs", "missing"):
        with pytest.raises(NotFound, match=f"thread '{name}'"):
            threads.delete_thread(owner=tenant, name=name)
    assert Thread.objects.filter(owner=other_tenant).count() == 1


def test_a_revision_after_a_delete_joins_only_the_threads_left(tenant):
    memory = record_memory(owner=tenant, memory_type="note", topic="standup", content="v1")
    for name in ("rituals", "team"):
        create_thread(owner=tenant, name=name)
        add_thread_members(owner=tenant, name=name, memory_ids=[memory.id])
    threads.delete_thread(owner=tenant, name="rituals")
    successor, _ = revise_memory_with_proposals(
        owner=tenant, predecessor_id=memory.id, content="v2"
    )
    [membership] = ThreadMembership.objects.filter(memory_id=successor.id)
    assert (membership.thread.name, membership.state) == ("team", MembershipState.MEMBER)
    assert membership.decided_at == successor.recorded_at


def test_a_thread_name_holding_a_credential_is_refused_and_nothing_changes(tenant):
    """A thread's name is stored, listed and shown beside its memories, as their text is."""
    key = CREDENTIALS["an AWS access key id"]
    with pytest.raises(InvalidInput) as refused:
        create_thread(owner=tenant, name=f"rotate {key}")
    assert refused.value.field == "name" and key not in str(refused.value)
    assert not Thread.objects.filter(owner=tenant).exists()
    create_thread(owner=tenant, name="rotation")
    with pytest.raises(InvalidInput) as refused:
        rename_thread(owner=tenant, name="rotation", new_name=f"rotate {key}")
    assert refused.value.field == "newName"
    assert list(Thread.objects.filter(owner=tenant).values_list("name", flat=True)) == ["rotation"]


def test_threads_and_their_open_proposals_are_described_in_one_snapshot(
    transactional_db, tenant, monkeypatch
):
    """A proposal committed after the threads are read and before the open proposals are is in
    neither: the threads' proposal counts and the list of proposals agree."""
    budget = ThreadFactory(owner=tenant, name="budget")
    real_list_threads = threads.list_threads

    def list_then_let_a_proposal_commit(**kwargs):
        listed = real_list_threads(**kwargs)
        commit_elsewhere(
            tenant.pk,
            lambda: ThreadMembershipFactory(thread=budget, state=MembershipState.PROPOSED),
        )
        return listed

    monkeypatch.setattr(threads, "list_threads", list_then_let_a_proposal_commit)
    overview = threads.describe_threads(owner=tenant)
    assert ThreadMembership.objects.filter(owner=tenant, state="proposed").exists()  # committed
    [listed] = overview.threads
    assert (listed.name, listed.proposal_count, overview.proposals) == ("budget", 0, [])
