"""Threads: named, curated groups of a tenant's memories, and the server's membership proposals.

The server only ever *proposes* (a `proposed` membership row); a memory becomes a member only
when the tenant adds it or accepts the proposal. A rejected proposal is kept so it is not made
again. Every function takes the owner (propose_thread_memberships takes the new memory, and
proposes within its owner) and looks threads and memories up within that owner, so an unknown
id and another tenant's id fail alike (NotFound).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from infra import dbfaults
from memories import bounds, replica, services
from memories.credentials import refuse_credential
from memories.errors import Conflict, InvalidInput, NotFound
from memories.models import (
    ERASED,
    MembershipState,
    Memory,
    Status,
    Thread,
    ThreadMembership,
    parse_memory_id,
    thread_name_key,
    thread_name_key_text,
)

THREADS_MAX = 200  # per tenant: keeps proposals, listings and describe_environment bounded
MEMBERS_PER_CALL_MAX = 20
LIST_MAX = 100
PROPOSALS_PER_MEMORY_MAX = 3
# A new memory is proposed for a thread when one of the thread's current members has the same
# project and a topic at least this similar (pg_trgm similarity, 0..1).
PROPOSAL_TOPIC_SIMILARITY = 0.45
PROPOSAL_MEMBERS_COMPARED = 300  # the most recently added members


@dataclass(frozen=True)
class Proposal:
    id: uuid.UUID
    thread: str
    memory_id: uuid.UUID
    similarity: float
    # So that whoever decides it needs not read the memory first.
    memory_topic: str


def _thread(
    owner: AbstractBaseUser, name: object, *, lock: bool = False, for_delete: bool = False
) -> Thread:
    """The owner's thread named `name`. With `lock`, locked FOR NO KEY UPDATE, which the KEY
    SHARE lock a revision or a proposal takes on a thread it adds a membership row to does not
    wait for: thread actions lock the thread, then the memories, then the membership rows, and a
    revision holding a memory never waits for a thread action. `for_delete`: FOR UPDATE, which
    waits for them (delete_thread)."""
    cleaned = bounds.clean_thread_name(name)
    threads = Thread.objects.named(owner.pk, cleaned)
    if lock or for_delete:
        threads = threads.select_for_update(no_key=not for_delete, of=("self",))
    thread = threads.first()
    if thread is None:
        raise Thread.objects.not_found(owner.pk, cleaned)
    return thread


class LockedMemory(NamedTuple):
    valid_to: datetime | None  # None: current
    status: str


def _owned_memories(
    owner: AbstractBaseUser, memory_ids: Sequence[object]
) -> dict[uuid.UUID, LockedMemory]:
    """The owner's current memories `memory_ids` names, each once, in the order given, locked
    (_locked_memories); NotFound or Conflict naming the first that are missing or superseded."""
    if not 1 <= len(memory_ids) <= MEMBERS_PER_CALL_MAX:
        raise InvalidInput(
            "memoryIds", f"give 1 to {MEMBERS_PER_CALL_MAX} ids; got {len(memory_ids)}"
        )
    parsed = [parse_memory_id(value) for value in memory_ids]
    found = _locked_memories(owner, [p for p in parsed if p])
    missing = [str(raw) for raw, p in zip(memory_ids, parsed, strict=True) if p not in found]
    if missing:
        raise services.memory_not_found(owner, missing)
    superseded = list(dict.fromkeys(p for p in parsed if found[p].valid_to is not None))
    if superseded:
        # Worded as every other tool words a superseded memory (services.superseded).
        newest = {old: Memory.objects.newest_revision_id(owner.pk, old) for old in superseded[:5]}
        if len(superseded) == 1:
            [(old, new)] = newest.items()
            raise Conflict(f"memory {old} is already superseded by {new}; send {new} instead")
        pairs = ", ".join(f"{old} by {new}" for old, new in newest.items())
        raise Conflict(f"memories already superseded: {pairs}; send the newer ids instead")
    return {p: found[p] for p in parsed if p is not None}


def _locked_memories(
    owner: AbstractBaseUser, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, LockedMemory]:
    """The owner's memories among `ids`, each with its `valid_to` and status, locked until
    the transaction ends: a revision of one waits, and then carries what this transaction did to
    its threads over to its successor (or, if it came first, this one finds it superseded).
    Locked in key order, the order the backfill, an erasure and another thread action lock
    memories in, whatever order a plan would read them in."""
    return {
        memory_id: LockedMemory(valid_to, status)
        for memory_id, valid_to, status in Memory.objects.select_for_update(no_key=True)
        .filter(owner=owner, id__in=ids)
        .order_by("id")
        .values_list("id", "valid_to", "status")
    }


def _new_thread_name(value: object, field: str) -> str:
    """A name a thread may be given: not the one erasure gives every thread of an account (the
    unique index on names leaves it out, so that an erased account's threads can share it), nor
    one holding a credential (memories.credentials)."""
    cleaned = bounds.clean_thread_name(value, field)
    if thread_name_key_text(cleaned) == ERASED:  # as thread names compare
        raise InvalidInput(field, f"'{ERASED}' is reserved")
    refuse_credential(field, cleaned)  # a name is stored and shown as a memory's text is
    return cleaned


def _counted(owner: AbstractBaseUser, thread: Thread) -> Thread:
    """`thread` with its member and open-proposal counts, as list_threads gives them: each
    action's answer shows what the thread holds after it."""
    return Thread.objects.owned_with_counts(owner.pk).get(pk=thread.pk)


def _name_taken(owner: AbstractBaseUser, name: str) -> Conflict:
    """The Conflict of a name another thread has, as that thread spells it ('Atlas Launch' is
    taken by 'Atlas launch': names compare regardless of case)."""
    taken = Thread.objects.named(owner.pk, name).values_list("name", flat=True).first() or name
    return Conflict(f"a thread named '{taken}' already exists")


def create_thread(*, owner: AbstractBaseUser, name: object, pinned: bool = False) -> Thread:
    cleaned = _new_thread_name(name, "name")
    with transaction.atomic():
        services.lock_live_owner(owner)  # serialize with erasure, as memory writes do
        # The account lock above is shared (memory writes take it too): the creations of one
        # account take turns on a lock of their own, so that two cannot both count
        # THREADS_MAX - 1 threads and both insert.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('threengram.thread-creation', %s))",
                [owner.pk],
            )
        if Thread.objects.filter(owner=owner).count() >= THREADS_MAX:
            raise Conflict(f"at most {THREADS_MAX} threads per account")
        try:
            with transaction.atomic():
                thread = Thread.objects.create(owner=owner, name=cleaned, pinned=pinned)
        except IntegrityError:
            raise _name_taken(owner, cleaned) from None
        thread.member_count = thread.proposal_count = 0  # as _counted would read them
        return thread


def rename_thread(*, owner: AbstractBaseUser, name: object, new_name: object) -> Thread:
    cleaned = _new_thread_name(new_name, "newName")
    with transaction.atomic():
        services.lock_live_owner(owner)  # a name written after an erasure would survive it
        thread = _thread(owner, name, lock=True)
        thread.name = cleaned
        try:
            with transaction.atomic():
                thread.save(update_fields=["name"])
        except IntegrityError:
            raise _name_taken(owner, cleaned) from None
        except OperationalError as error:
            # Two renames swapping two names each wait in the unique index for the other's old
            # name, and PostgreSQL ends one: its new name was still taken, as one after the other.
            if dbfaults.is_deadlock(error):
                raise _name_taken(owner, cleaned) from None
            raise
        return _counted(owner, thread)


def pin_thread(*, owner: AbstractBaseUser, name: object, pinned: bool) -> Thread:
    with transaction.atomic():
        services.lock_live_owner(owner)
        thread = _thread(owner, name, lock=True)
        if thread.pinned != pinned:
            thread.pinned = pinned
            thread.save(update_fields=["pinned"])
        return _counted(owner, thread)


def delete_thread(*, owner: AbstractBaseUser, name: object) -> Thread:
    """Delete a thread and every membership row of it (members, open proposals, rejections); the
    memories themselves stay. Returns the thread as it was, with its counts.

    Locked FOR UPDATE, which conflicts with the KEY SHARE lock every writer of a membership row
    takes on its thread before inserting (a revision copying its predecessor's memberships, a
    new memory's proposals; thread actions hold a stronger lock): a writer that came first
    commits before the delete reads the rows it deletes, and one that comes after finds the
    thread gone and adds nothing to it. The delete locks no memory, so a revision holding one
    never waits for it in a cycle."""
    with transaction.atomic():
        services.lock_live_owner(owner)  # serialize with erasure, as other thread actions do
        thread = _thread(owner, name, for_delete=True)
        counted = _counted(owner, thread)
        ThreadMembership.objects.filter(owner=owner, thread_id=thread.pk).delete()
        thread.delete()
        return counted


@dataclass(frozen=True)
class MembersChange:
    """A thread after add_thread_members or remove_thread_members, with its counts, and the
    memories given that the call changed nothing for (each once, in the order given): a retry,
    or an agent wrong about what the thread held, is told so rather than answered as a change."""

    thread: Thread
    unchanged: list[uuid.UUID]
    # Of add_thread_members: the members given that are archived. Members all the same (a search
    # of the thread with status "archived" or "any" lists them), but not in memberCount, which
    # counts what a default listing of the thread shows.
    archived: list[uuid.UUID] = field(default_factory=list)


def _states_in(thread: Thread, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The state of each of `ids` with a membership row in `thread` (a memory without one is
    not in the dict). Read with the thread and the memories locked (_thread, _owned_memory_ids),
    so no other thread action or revision changes them before this transaction ends."""
    rows = thread.memberships.filter(memory_id__in=ids).values_list("memory_id", "state")
    return dict(rows)


def add_thread_members(
    *, owner: AbstractBaseUser, name: object, memory_ids: Sequence[object]
) -> MembersChange:
    """Make memories members (accepting any open proposal for them, overriding a rejection).
    Idempotent: a memory that is a member already is left as it is, and named `unchanged`."""
    with transaction.atomic():
        services.lock_live_owner(owner)
        thread = _thread(owner, name, lock=True)
        owned = _owned_memories(owner, memory_ids)
        ids = list(owned)
        states = _states_in(thread, ids)
        unchanged = [i for i in ids if states.get(i) == MembershipState.MEMBER]
        now = timezone.now()
        for memory_id in ids:
            if memory_id not in unchanged:
                ThreadMembership.objects.update_or_create(
                    thread=thread,
                    memory_id=memory_id,
                    defaults={"state": MembershipState.MEMBER, "decided_at": now},
                )
        archived = [i for i in ids if owned[i].status == Status.ARCHIVED]
        return MembersChange(_counted(owner, thread), unchanged, archived)


def remove_thread_members(
    *, owner: AbstractBaseUser, name: object, memory_ids: Sequence[object]
) -> MembersChange:
    """Take memories out of a thread, members or proposed alike. The row is kept as `rejected`,
    so the server does not propose them again. A memory that was neither (never in the thread,
    or taken out already) is left as it is, and named `unchanged`."""
    with transaction.atomic():
        services.lock_live_owner(owner)
        thread = _thread(owner, name, lock=True)
        ids = list(_owned_memories(owner, memory_ids))
        states = _states_in(thread, ids)
        taken_out = [
            i for i in ids if states.get(i) in (MembershipState.MEMBER, MembershipState.PROPOSED)
        ]
        thread.memberships.filter(memory_id__in=taken_out).update(
            state=MembershipState.REJECTED, decided_at=timezone.now()
        )
        unchanged = [i for i in ids if i not in taken_out]
        return MembersChange(_counted(owner, thread), unchanged)


def decide_thread_proposal(
    *, owner: AbstractBaseUser, proposal_id: object, accept: bool
) -> ThreadMembership:
    """Accept or reject an open proposal. A proposal already decided as asked is answered as
    it was (a retry after a lost answer is no failure), one decided the other way is a
    Conflict, an unknown or foreign id NotFound."""
    parsed = parse_memory_id(proposal_id)
    open_proposals = ThreadMembership.objects.filter(
        owner=owner, id=parsed, state=MembershipState.PROPOSED
    )
    with transaction.atomic():
        services.lock_live_owner(owner)
        found = open_proposals.first() if parsed else None
        if found is None:
            return _decided(owner, parsed, proposal_id, accept)
        # Locked in the order of the other thread actions (see _thread): thread, memory, row.
        list(Thread.objects.select_for_update(no_key=True).filter(pk=found.thread_id).values("pk"))
        locked = _locked_memories(owner, [found.memory_id]).get(found.memory_id)
        superseded = locked.valid_to if locked is not None else None
        proposal = open_proposals.select_for_update(of=("self",)).select_related("thread").first()
        if proposal is None:  # decided meanwhile: answered as a decision made before this one
            return _decided(owner, parsed, proposal_id, accept)
        if superseded is not None:
            raise _moved_proposal(owner, proposal, accept)
        proposal.state = MembershipState.MEMBER if accept else MembershipState.REJECTED
        proposal.decided_at = timezone.now()
        proposal.save(update_fields=["state", "decided_at"])
        return proposal


def _moved_proposal(owner: AbstractBaseUser, proposal: ThreadMembership, accept: bool) -> Conflict:
    """The Conflict of deciding a proposal whose memory was revised: a revision of the same topic
    and project moves the proposal to the successor, under a new id, and one of another may have
    proposed it afresh; either is named (as a superseded memory's Conflict names the newest
    revision) so that the agent need not list proposals to find it."""
    newest = Memory.objects.newest_revision_id(owner.pk, proposal.memory_id)
    moved = ThreadMembership.objects.filter(
        owner=owner, thread_id=proposal.thread_id, memory_id=newest
    ).first()
    stale = f"memory {proposal.memory_id} of proposal {proposal.id} is superseded by {newest}"
    if moved is None:
        return Conflict(f"{stale}; it is not proposed for thread '{proposal.thread.name}'")
    if moved.state != MembershipState.PROPOSED:
        return Conflict(
            f"{stale}, whose proposal {moved.id} for thread '{proposal.thread.name}' is "
            f"decided already ({moved.state})"
        )
    action = "accept_proposal" if accept else "reject_proposal"
    return Conflict(f"{stale}, whose proposal is {moved.id}: {action} {moved.id}")


def _decided(
    owner: AbstractBaseUser, parsed: uuid.UUID | None, proposal_id: object, accept: bool
) -> ThreadMembership:
    """The row of a proposal already decided as `accept` asks; NotFound when there is none; a
    Conflict naming the way back when it was decided the other way."""
    row = (
        ThreadMembership.objects.filter(owner=owner, id=parsed)
        .exclude(state=MembershipState.PROPOSED)
        .select_related("thread")
        .first()
        if parsed
        else None
    )
    if row is None:
        raise NotFound(f"open proposal {proposal_id}{_memory_id_for_proposal(owner, parsed)}")
    if row.state == (MembershipState.MEMBER if accept else MembershipState.REJECTED):
        return row
    if row.state == MembershipState.MEMBER:
        raise Conflict(
            f"memory {row.memory_id} is a member of thread '{row.thread.name}' already; "
            "remove_members takes it out"
        )
    raise Conflict(
        f"proposal {row.id} was rejected; add_members makes memory {row.memory_id} a member of "
        f"thread '{row.thread.name}'"
    )


def _memory_id_for_proposal(owner: AbstractBaseUser, parsed: uuid.UUID | None) -> str:
    """What to send instead when a proposal id is the id of one of the owner's memories: `remember`
    answers both side by side, and a model takes one for the other. Names the memory's open
    proposals (with their threads), or how a memory joins a thread without one; '' otherwise."""
    if parsed is None:
        return ": a proposal's id is a UUID, as remember's proposals and list give it"
    proposals = list(
        ThreadMembership.objects.filter(
            owner=owner, memory_id=parsed, state=MembershipState.PROPOSED
        )
        .select_related("thread")
        .order_by(thread_name_key(F("thread__name")), "thread__name")[:PROPOSALS_PER_MEMORY_MAX]
    )
    if proposals:
        named = ", ".join(f"{p.id} (thread '{p.thread.name}')" for p in proposals)
        return (
            ": that is a memory's id; proposalId takes a proposal's, and this memory's open "
            f"proposals are {named}"
        )
    if not Memory.objects.filter(owner=owner, id=parsed).exists():
        return ""
    member_of = list(
        ThreadMembership.objects.filter(owner=owner, memory_id=parsed, state=MembershipState.MEMBER)
        .order_by(thread_name_key(F("thread__name")), "thread__name")
        .values_list("thread__name", flat=True)[:PROPOSALS_PER_MEMORY_MAX]
    )
    if member_of:
        named = ", ".join(f"'{name}'" for name in member_of)
        return f": that is a memory's id, with no open proposal; it is a member of {named}"
    return (
        ": that is a memory's id, with no open proposal; add_members makes a memory a member "
        "of a thread"
    )


def list_threads(*, owner: AbstractBaseUser) -> list[Thread]:
    """All the tenant's threads (at most THREADS_MAX exist; pinned first, then by name in any
    case) with their counts (Thread.objects.owned_with_counts)."""
    return list(Thread.objects.owned_with_counts(owner.pk).in_name_order("-pinned")[:THREADS_MAX])


def list_open_proposals(*, owner: AbstractBaseUser, limit: int = LIST_MAX) -> list[Proposal]:
    rows = (
        ThreadMembership.objects.filter(
            owner=owner,
            state=MembershipState.PROPOSED,
            memory__valid_to__isnull=True,
        )
        .order_by("-created_at")
        .values_list("id", "thread__name", "memory_id", "similarity", "memory__topic")[:limit]
    )
    return [Proposal(*row) for row in rows]


@dataclass(frozen=True)
class ThreadOverview:
    threads: list[Thread]
    proposals: list[Proposal]


def describe_threads(*, owner: AbstractBaseUser) -> ThreadOverview:
    """The tenant's threads (list_threads) and its open proposals (list_open_proposals), read in
    one snapshot (replica.one_snapshot): a proposal made or decided meanwhile is in both the
    threads' counts and the list, or in neither."""
    with replica.one_snapshot():
        return ThreadOverview(
            threads=list_threads(owner=owner), proposals=list_open_proposals(owner=owner)
        )


def propose_thread_memberships(*, memory: Memory) -> list[Proposal]:
    """Propose `memory` for the threads it plausibly belongs to: a thread with a current member
    in the same project whose topic is similar (pg_trgm), among the tenant's
    PROPOSAL_MEMBERS_COMPARED most recently added members. One statement, which also returns
    the threads' names; a thread that already has any membership row for this memory is skipped
    (so rejections stick), and so is one being deleted. Inside a caller's transaction it is part
    of that one (no savepoint of its own)."""
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            """
            WITH proposed AS (
                INSERT INTO memories_threadmembership
                    (id, owner_id, thread_id, memory_id, state, similarity, created_at)
                SELECT gen_random_uuid(), %(owner)s, best.thread_id, %(memory)s, 'proposed',
                       best.sim, now()
                FROM (
                    SELECT recent.thread_id, max(similarity(recent.topic, %(topic)s)) AS sim
                    FROM (
                        -- Bounded work per write: only the most recently added members are
                        -- compared, chosen from the small membership rows before any memory row
                        -- is read.
                        SELECT added.thread_id, m.topic
                        FROM (
                            SELECT ms.thread_id, ms.memory_id
                            FROM memories_threadmembership ms
                            WHERE ms.owner_id = %(owner)s AND ms.state = 'member'
                            ORDER BY ms.decided_at DESC
                            LIMIT %(members)s
                        ) added
                        JOIN memories_memory m
                          ON m.owner_id = %(owner)s AND m.id = added.memory_id
                        WHERE m.valid_to IS NULL AND m.project IS NOT DISTINCT FROM %(project)s
                    ) recent
                    WHERE similarity(recent.topic, %(topic)s) >= %(floor)s
                    GROUP BY recent.thread_id
                    -- Before the LIMIT: a revision already stands in its predecessor's threads
                    -- (as a member, most recently added, of its own topic), which would
                    -- otherwise take the places of the threads it could be proposed for.
                    HAVING NOT EXISTS (
                        SELECT 1 FROM memories_threadmembership done
                        WHERE done.owner_id = %(owner)s AND done.thread_id = recent.thread_id
                          AND done.memory_id = %(memory)s
                    )
                    ORDER BY sim DESC
                    LIMIT %(limit)s
                ) best
                -- A thread being deleted is waited for, then skipped (delete_thread).
                WHERE EXISTS (
                    SELECT 1 FROM memories_thread locked
                    WHERE locked.owner_id = %(owner)s AND locked.id = best.thread_id
                    FOR KEY SHARE
                )
                RETURNING id, thread_id, similarity
            )
            SELECT proposed.id, thread.name, proposed.similarity
            FROM proposed
            JOIN memories_thread thread
              ON thread.owner_id = %(owner)s AND thread.id = proposed.thread_id
            ORDER BY proposed.similarity DESC, thread.name
            """,
            {
                "memory": memory.id,
                "topic": memory.topic,
                "owner": memory.owner_id,
                "project": memory.project,
                "floor": PROPOSAL_TOPIC_SIMILARITY,
                "limit": PROPOSALS_PER_MEMORY_MAX,
                "members": PROPOSAL_MEMBERS_COMPARED,
            },
        )
        rows = cursor.fetchall()
    return [
        Proposal(
            id=row[0],
            thread=row[1],
            memory_id=memory.id,
            similarity=row[2],
            memory_topic=memory.topic,
        )
        for row in rows
    ]


def record_memory_with_proposals(
    *, owner: AbstractBaseUser, **fields
) -> tuple[Memory, list[Proposal]]:
    """`services.record_memory`, then membership proposals for the new memory, in the same
    transaction."""
    proposals: list[Proposal] = []

    def propose(memory: Memory) -> None:
        proposals.extend(propose_thread_memberships(memory=memory))

    memory = services.record_memory(owner=owner, and_then=propose, **fields)
    return memory, proposals


def revise_memory_with_proposals(
    *, owner: AbstractBaseUser, predecessor_id: object, **fields
) -> tuple[Memory, list[Proposal]]:
    """`services.revise_memory`, in the same transaction: the successor takes its predecessor's
    place in every thread (the same memory, revised, stays in its threads). When the revision
    changed its topic or project, what a proposal compares, its predecessor's open proposals
    compared the old ones: the successor is proposed afresh instead, as a new memory is, for the
    threads its new topic fits (those it is a member of, or was rejected from, left out), and
    the answer holds them."""
    proposals: list[Proposal] = []

    def join_and_propose(successor: Memory) -> None:
        predecessor = successor.predecessor
        moved = (successor.topic, successor.project) != (predecessor.topic, predecessor.project)
        _join_predecessors_threads(successor, open_proposals=not moved)
        if moved:
            proposals.extend(propose_thread_memberships(memory=successor))

    memory = services.revise_memory(
        owner=owner, predecessor_id=predecessor_id, and_then=join_and_propose, **fields
    )
    return memory, proposals


def _join_predecessors_threads(successor: Memory, *, open_proposals: bool = True) -> None:
    """A member stays a member, an open proposal stays open (now for the successor; with
    `open_proposals` false it is left to the predecessor, closed) and a rejection stays (the
    successor is not proposed to that thread again). Each thread is locked FOR KEY SHARE first,
    as its foreign key check would at COMMIT: a thread being deleted is waited for and then
    skipped, never a foreign key violation at COMMIT (delete_thread)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_threadmembership
                (id, owner_id, thread_id, memory_id, state, similarity, created_at, decided_at)
            SELECT gen_random_uuid(), ms.owner_id, ms.thread_id, %(successor)s, ms.state,
                   ms.similarity, %(now)s,
                   CASE WHEN ms.state = 'proposed' THEN NULL ELSE %(recorded_at)s END
            FROM memories_threadmembership ms
            WHERE ms.owner_id = %(owner)s AND ms.memory_id = %(predecessor)s
              AND (ms.state <> 'proposed' OR %(open_proposals)s)
              AND EXISTS (
                  SELECT 1 FROM memories_thread t
                  WHERE t.owner_id = ms.owner_id AND t.id = ms.thread_id
                  FOR KEY SHARE
              )
            """,
            {
                "successor": successor.id,
                "owner": successor.owner_id,
                "predecessor": successor.predecessor_id,
                "open_proposals": open_proposals,
                "now": timezone.now(),
                "recorded_at": successor.recorded_at,
            },
        )
