"""The SQL of the reads filtered to a thread (search, briefing and handoff): its members as a
condition on memories (members_sql), or a small thread read member by member
(thread_members_sql), and the check that a thread looked up by name is still there when such a
read found nothing (require_still_there). Threads themselves are written and named through the
Thread model and memories/threads.py.
"""

from __future__ import annotations

import uuid

from django.db import models

from memories.models import MembershipState, RowCount, Thread, ThreadMembership

# A thread of at most this many members (of any version: a revision joins its predecessor's
# threads, which keep the predecessor) is read member by member (thread_members_sql) where a read
# filtered to it would otherwise walk the account's memories and test each for membership:
# however old or scattered its members, it is then the narrowest source there is. A memory read
# by its key costs several times what a walk through an index that leads to memories in order
# pays for one, so a larger thread stays a condition (members_sql) on such a walk.
THREAD_READ_BY_MEMBER_MAX = 1_000


def members_sql(
    owner_id: int, name: str, params: dict, *, key: str, counted_to: int | None = None
) -> str:
    """A condition on memories `m`: a member of the owner's thread named `name` (any case).
    The thread's id goes into `params[key]`, its name as stored into `params[key + "_name"]`,
    and with `counted_to` how many members it has, up to one past that, into
    `params[key + "_members"]` (read in the same statement); an unknown name is NotFound."""
    threads, read = Thread.objects.named(owner_id, name), ["id", "name"]
    if counted_to is not None:
        threads = threads.annotate(members=_members_up_to(owner_id, counted_to + 1))
        read.append("members")
    found = threads.values_list(*read).first()
    if found is None:
        raise Thread.objects.not_found(owner_id, name)
    params[key], params[f"{key}_name"] = found[:2]
    if counted_to is not None:
        params[f"{key}_members"] = found[2]
    # `key` is a constant of the caller's, never caller text.
    return (
        "EXISTS (SELECT 1 FROM memories_threadmembership ms"  # noqa: S608
        " WHERE ms.owner_id = m.owner_id AND ms.memory_id = m.id"
        f" AND ms.thread_id = %({key})s AND ms.state = 'member')"
    )


def require_still_there(owner_id: int, thread_id: uuid.UUID, name: str) -> None:
    """NotFound, as for an unknown name, unless the thread `name` resolved to (members_sql)
    still exists. For a read by members_sql that found nothing: a delete committing between
    the name's lookup and the read leaves the read no members, which is the thread being
    gone, not a thread without matches. Checked only then, so a read that finds something
    costs nothing more."""
    if not Thread.objects.filter(owner_id=owner_id, pk=thread_id).exists():
        raise Thread.objects.not_found(owner_id, name)


def thread_members_sql(key: str, columns: str = "m.*") -> str:
    """The `columns` of the memories `m` (of every version) that are members of the thread whose
    id is %(`key`)s, each read by its key, for the owner %(owner)s; a WHERE clause may follow. A
    lateral read with a LIMIT, which the planner may neither turn into a join nor serve by
    another index: with `m.id = ANY(members)`, a table without statistics had the planner read
    all of the account's current memories through memory_owner_type_current to find the
    members, and without a sort after it, its recency index. The memberships in
    membership_unique's order, which only that index gives: without statistics the planner
    otherwise read them through membership_recent_members, every member row of the owner's.
    `key` and `columns` are constants of the caller's, never caller text."""
    return f"""
        SELECT {columns} FROM unnest(ARRAY(
                 SELECT ms.memory_id FROM memories_threadmembership ms
                 WHERE ms.owner_id = %(owner)s AND ms.thread_id = %({key})s
                   AND ms.state = 'member' ORDER BY ms.memory_id)) AS member(id)
        CROSS JOIN LATERAL (
                 SELECT m.* FROM memories_memory m
                 WHERE m.owner_id = %(owner)s AND m.id = member.id LIMIT 1) m"""  # noqa: S608


def _members_up_to(owner_id: int, most: int) -> RowCount:
    """A thread's members (of any version), up to `most`: through membership_unique, which
    leads with the owner and the thread."""
    return RowCount(
        ThreadMembership.objects.filter(
            owner_id=owner_id, thread_id=models.OuterRef("id"), state=MembershipState.MEMBER
        )
        .order_by("memory_id")  # membership_unique's order (see thread_members_sql)
        .values("id")[:most]
    )
