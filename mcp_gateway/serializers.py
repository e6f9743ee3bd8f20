"""The wire shapes of tool results: one function per shape, from a `memories` result to the JSON
the tool's output schema (mcp_gateway.schemas) declares.

Key order is what clients see in the JSON text block, so it is kept as it is. Date-times are
RFC 3339 in UTC (`utc_datetime`), ids are strings. Lifecycle state (status, validTo,
commitmentStatus) belongs here, in tool results, and never in the cacheable resource body
(`memory_resource_body`, docs/design.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from django.utils import timezone

from infra.observability import VERSION
from memories.access import MemoryRow
from memories.bounds import DEFAULT_SCOPE
from memories.briefing import (
    Briefing,
    PinnedThread,
    PinnedThreads,
    Section,
    SectionItem,
    Selector,
)
from memories.environment import EnvironmentStats
from memories.excerpts import MemoryExcerpt
from memories.handoff import RECENTLY_RESOLVED, Handoff
from memories.models import Memory, Thread, ThreadMembership
from memories.reading import MemoryBatch, ReadMemory
from memories.search import (
    NO_MATCH,
    NOTHING_LISTED,
    NOTHING_RECORDED_BY,
    NOTHING_STORED,
    NOTHING_TO_SEARCH_BY,
    UNDER_FLOOR,
    EmptyBecause,
    KindAsked,
    SearchHit,
    SearchPage,
)
from memories.threads import MembersChange, Proposal


def utc_datetime(value: datetime | None) -> str | None:
    """A date-time as every result on the wire carries it: RFC 3339 in UTC, with `Z`, and the
    instant exactly as stored, to the microsecond. The search filters compare stored instants:
    one cut to the second and sent back as asOf, recordedAfter or resolvedAfter could select the
    version before it, or miss the memory it came from."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def memory_resource_body(memory: MemoryRow) -> str:
    """The resource body: a whitelist of the immutable fields, and nothing else.

    LOAD-BEARING INVARIANT (docs/design.md, "Why a long-lived cache is correct"): the long private
    TTL is sound only because nothing in this body can go stale. Supersession, archiving and
    commitment resolution move `status`, `valid_to`, `commitment_status`, `resolved_at` (and
    tags are out too); adding any of them here silently turns a correct cache into one that
    serves wrong answers. Wanting lifecycle state in the resource is choosing a different design:
    revisit docs/design.md, do not edit this dict. tests/mcp_gateway/test_resources.py pins the
    exact key set.
    """
    return json.dumps(
        {
            "id": str(memory.id),
            "content": memory.content,
            "contentLength": memory.content_length,
            "memoryType": memory.memory_type,
            "topic": memory.topic,
            "scope": memory.scope,
            "project": memory.project,
            "recordedAt": utc_datetime(memory.recorded_at),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def memory_ref(item: Memory) -> dict:
    """A memory just written or moved, without its content: its id, URI, type and topic, where
    it is filed (its project, as the account already spells it; its scope unless the default),
    its lifecycle state, and where they apply its commitment state, due date (as stored, in UTC:
    a revision carries it over unasked), whether it is overdue as search and get_memories tell
    it (a commitment written or revised with a past due date already is), when it was resolved
    and a superseded version's end. What does not apply is left out, as in search hits."""
    data: dict = {
        "id": str(item.id),
        "uri": item.resource_uri,
        "memoryType": item.memory_type,
        "topic": item.topic,
    }
    if item.project is not None:
        data["project"] = item.project
    if item.scope != DEFAULT_SCOPE:
        data["scope"] = item.scope
    data["status"] = str(item.status)
    data |= _commitment_fields(item) | _resolution(item)
    if item.valid_to is not None:
        data["validTo"] = utc_datetime(item.valid_to)
    return data


def _excerpt_cut(item: MemoryExcerpt) -> dict:
    """`truncated` and the whole content's length, only when the excerpt was cut."""
    return {"truncated": True, "contentLength": item.content_length} if item.truncated else {}


def _commitment_fields(item: Memory | MemoryExcerpt) -> dict:
    """A commitment's state, and its due date and that it is overdue where they apply; nothing
    for another memory."""
    data: dict = {}
    if item.commitment_status:
        data["commitmentStatus"] = str(item.commitment_status)
    if item.due_at is not None:
        data["dueAt"] = utc_datetime(item.due_at)
    if item.overdue:
        data["overdue"] = True
    return data


def proposal(item: Proposal) -> dict:
    """A pending proposal that a memory belongs in a thread."""
    return {
        "proposalId": str(item.id),
        "thread": item.thread,
        "memoryId": str(item.memory_id),
        "memoryTopic": item.memory_topic,
        "similarity": _similarity(item.similarity),
    }


def decided_proposal(membership: ThreadMembership) -> dict:
    """A proposal once accepted or rejected: the proposal's fields plus the state it reached."""
    return {
        "proposalId": str(membership.id),
        "thread": membership.thread.name,
        "memoryId": str(membership.memory_id),
        "memoryTopic": membership.memory.topic,
        "similarity": _similarity(membership.similarity),
        "state": membership.state,
    }


def _similarity(value: float | None) -> float | None:
    """Three decimals, as it is compared (the column is a 4-byte float: 0.85 reads back as
    0.8500000238418579)."""
    return None if value is None else round(value, 3)


def thread(item: Thread) -> dict:
    """A thread; with its counts when the query that listed it annotated them."""
    data = {"name": item.name, "pinned": item.pinned}
    if hasattr(item, "member_count"):
        data |= {"memberCount": item.member_count, "proposalCount": item.proposal_count}
    return data


def members_change(change: MembersChange) -> dict:
    """add_members' or remove_members' answer: the thread after it, the ids it changed nothing
    for, and (only when there are some) the archived members given, which memberCount leaves
    out."""
    data = {
        "thread": thread(change.thread),
        "unchanged": [str(memory_id) for memory_id in change.unchanged],
    }
    if change.archived:
        data["archived"] = [str(memory_id) for memory_id in change.archived]
    return data


def pinned_thread(item: PinnedThread) -> dict:
    """A pinned thread as briefing lists it, with its counts as `configure_thread` lists them."""
    return {
        "name": item.name,
        "pinned": True,
        "memberCount": item.member_count,
        "proposalCount": item.proposal_count,
    }


def pinned_threads(item: PinnedThreads, *, compact: bool = False) -> dict:
    """The owner's pinned threads: the exact count and the first ones, as a section is shown.
    Compact: without `pinned` (every one is) and `truncated` only when true."""
    if compact:
        return _counted(
            item.count,
            item.truncated,
            [
                {"name": t.name, "memberCount": t.member_count, "proposalCount": t.proposal_count}
                for t in item.items
            ],
        )
    return {
        "count": item.count,
        "truncated": item.truncated,
        "items": [pinned_thread(t) for t in item.items],
    }


def excerpt_item(item: MemoryExcerpt) -> dict:
    """One memory in a list (briefing and handoff sections, search hits): a bounded excerpt,
    never the whole body; `truncated` says when get_memories or the resource has more."""
    return {
        "id": str(item.id),
        "uri": item.resource_uri,
        "memoryType": item.memory_type,
        "topic": item.topic,
        "excerpt": item.excerpt,
        "truncated": item.truncated,
        "contentLength": item.content_length,
        "scope": item.scope,
        "project": item.project,
        "recordedAt": utc_datetime(item.recorded_at),
        "commitmentStatus": item.commitment_status,
        "dueAt": utc_datetime(item.due_at),
        "overdue": item.overdue,
    }


def resolved_item(item: SectionItem) -> dict:
    """A commitment in the handoff's recently resolved: what tells what was finished, and when,
    in few characters (get_memories has the rest)."""
    return {
        "id": str(item.id),
        "topic": item.topic,
        "scope": item.scope,
        "project": item.project,
        "excerpt": item.excerpt,
        "truncated": item.truncated,
        "resolvedAt": utc_datetime(item.resolved_at),
    }


def compact_resolved_item(item: SectionItem, *, selected: str) -> dict:
    """A recently resolved commitment as the compact handoff shows it: as resolved_item, without
    the default scope, a project it has not, the scope or project the selector fixes, and
    `truncated` only when the excerpt was cut. The resolution time as stored, as every instant
    is: fed back as search's resolvedAfter, it selects this commitment."""
    data: dict = {"id": str(item.id), "topic": item.topic, "excerpt": item.excerpt}
    if item.truncated:
        data["truncated"] = True
    if selected != "scope" and item.scope != DEFAULT_SCOPE:
        data["scope"] = item.scope
    if item.project is not None and selected != "project":
        data["project"] = item.project
    data["resolvedAt"] = utc_datetime(item.resolved_at)
    return data


def search_hit(hit: SearchHit) -> dict:
    """An excerpt and how it ranked, without what does not apply or can be derived: the URI
    (threengram://memory/{id}), the default scope, a project, due date or state the memory has
    not, an excerpt not cut, the start of an excerpt that is the content's start, `status`
    while active and `current` while in force (each named only when it differs, as it changes
    what the hit means). The recording time as stored, not
    cut to the second: asOf that instant reads this version (cut, it could read its
    predecessor, or nothing)."""
    data: dict = {
        "id": str(hit.id),
        "memoryType": hit.memory_type,
        "topic": hit.topic,
        "excerpt": hit.excerpt,
    } | _excerpt_cut(hit)
    if hit.excerpt_start:
        data["excerptStart"] = hit.excerpt_start
    if hit.scope != DEFAULT_SCOPE:
        data["scope"] = hit.scope
    if hit.project is not None:
        data["project"] = hit.project
    data["recordedAt"] = utc_datetime(hit.recorded_at)
    data |= _commitment_fields(hit) | _resolution(hit)
    if hit.score is not None:
        data |= {"score": hit.score, "matchedBy": list(hit.matched_by)}
    if hit.lacking:
        data["lacks"] = list(hit.lacking)
    if hit.status != "active":
        data["status"] = hit.status
    if not hit.current:
        data |= {"current": False, "validTo": utc_datetime(hit.valid_to)}
    return data


def _resolution(item: Memory | SearchHit) -> dict:
    """When a resolved commitment was resolved ("what did I finish this week"); nothing for
    another memory, nor for one resolved before the server kept that time."""
    return {"resolvedAt": utc_datetime(item.resolved_at)} if item.resolved_at is not None else {}


def compact_search_hit(hit: SearchHit) -> dict:
    """A hit as the `compact` projection shows it: what tells it apart from the others. Its
    project, as a compact briefing item names it: a listing across projects ("what is still
    open") is read project by project. A commitment's state, and where they apply its due date
    and whether it is overdue, archived or superseded: "which are still open" is answered
    without the excerpts. Left out, and the recording time, as in search_hit."""
    data = {"id": str(hit.id), "memoryType": hit.memory_type, "topic": hit.topic}
    if hit.project is not None:
        data["project"] = hit.project
    data["recordedAt"] = utc_datetime(hit.recorded_at)
    data |= _commitment_fields(hit) | _resolution(hit)
    if hit.score is not None:
        data["score"] = hit.score
    if hit.status != "active":
        data["status"] = hit.status
    if hit.valid_to is not None:
        data["validTo"] = utc_datetime(hit.valid_to)
    return data


def search_page(page: SearchPage, *, compact: bool = False) -> dict:
    """The `search` result: one page of hits, whole or compact, the cursor of the next, and a
    note saying why an empty first page came back empty, or why a listing's page holds fewer
    hits than asked for while more follow."""
    shape = compact_search_hit if compact else search_hit
    hits = [shape(hit) for hit in page.hits]
    note = None
    if page.empty_because:
        note = empty_search_note(page.empty_because)
    elif page.kind_asked:
        note = (
            "These hits hold the query's words in their text, which may not be what was asked "
            f"for: {_kind_note(page.kind_asked, hits=True)}"
        )
    elif page.window_read:
        # A model reads a short or empty page as "that is all" unless told otherwise.
        note = (
            f"This page read the {page.window_read:,} memories that follow the previous page "
            f"(newest first), and {'only ' if hits else ''}{len(hits)} of them pass the filters; "
            "older memories remain: continue with nextCursor until hasMore is false."
        )
    return {
        "hits": hits,
        "count": len(hits),
        "hasMore": page.next_cursor is not None,
        "nextCursor": page.next_cursor,
        "note": note,
    }


# Filters after which no advice names asOf: given already, or refused beside it (a commitment's
# state is not versioned: search.filters).
_VERSIONED_AWAY = {"asOf", "commitmentStatus", "resolvedAfter"}


def empty_search_note(why: EmptyBecause) -> str:
    """The reason search found nothing, told to the model with how to ask instead: so that it
    does not take "ask otherwise" for "nothing stored"."""
    if why.reason == NOTHING_STORED:
        return (
            "This account holds no memories yet: nothing is stored to find (remember stores one)."
        )
    if why.reason == NOTHING_RECORDED_BY:
        return (
            f"No memory had been recorded in this account by asOf {utc_datetime(why.as_of)}: "
            "nothing could match. A later asOf, or none (current versions), reads what was "
            "recorded since."
        )
    if why.reason == NOTHING_TO_SEARCH_BY:
        if why.exclusions_only:
            return (
                "Nothing was searched: the query holds only exclusions (-word), which remove "
                "matches but find none. Add words naming what the memory is about, or omit the "
                "query to list the memories the filters select."
            )
        return (
            "Nothing was searched: the query holds only stop words, punctuation or symbols "
            "(such as 'the', 'which', '?', an emoji), which search drops. Ask with words naming "
            "what the memory is about: a name, a tool, a project, a topic; or omit the query to "
            "list the memories the filters select, newest first ('*' is no wildcard)."
        )
    # Under a status filter the memories searched are of that status alone: say so, so that "not
    # stored" is not read of the others.
    searched = f"{why.searched} " if why.searched else ""
    if why.reason == NOTHING_LISTED:
        note = (
            f"No {searched}memory passes the filters given ({', '.join(why.filters)}): widen or "
            "drop them to list more."
            if why.filters
            else f"No {searched}memory is stored in this account."
        )
    elif why.reason == UNDER_FLOOR:
        some = (
            f"1 {searched}memory shares"
            if why.count == 1
            else f"{why.count} {searched}memories share"
        )
        note = (
            f"{some} words or meaning with the query, but none closely enough to answer it. "
            "Ask with fewer, more specific words, the words the memory itself would use (a "
            'name, a tool, a project), or a "quoted phrase".'
        )
    elif why.kind is not None and not why.kind.among_other_words:
        # NO_MATCH of a query made only of type or state words
        under = f" under the filters given ({', '.join(why.filters)})" if why.filters else ""
        note = (
            f"No {searched}memory{under} shares a word with the query or is close to it in "
            f"meaning. {_kind_note(why.kind)}"
        )
    elif why.phrased or why.excluding:  # NO_MATCH of a query with phrases or exclusions
        note = _required_note(why, searched)
    elif why.filters:  # NO_MATCH
        note = (
            f"No {searched}memory under the filters given ({', '.join(why.filters)}) shares a "
            "word with the query or is close to it in meaning: widen or drop them to look further."
        )
    else:
        note = (
            f"No {searched}memory shares a word with the query or is close to it in meaning: it "
            "may not be stored, or be stored in other words, which meaning alone seldom finds. "
            "Asking with a word it would hold (a name, a tool, a project) can make sure."
        )
    if why.reason == NO_MATCH and "project" in why.filters:
        note += " Account-wide memories (of no project) are not searched with project."
    only_kind = why.kind is not None and not why.kind.among_other_words
    if why.reason == NO_MATCH and not only_kind and not _VERSIONED_AWAY & set(why.filters):
        # A question about what was decided before a revision asks in the old version's words
        # (a question of type or state words asks for a filter instead: _kind_note).
        note += (
            " Only current versions were searched: asOf (an instant when an earlier version "
            "was current) searches versions since revised."
        )
    if why.unsearched:
        read = "listed" if why.reason == NOTHING_LISTED else "searched"
        note += (
            f" {why.unsearched.capitalize()} memories were not {read}: status 'any' includes them."
        )
    if why.kind is not None and (why.reason == UNDER_FLOOR or why.kind.among_other_words):
        note += f" {_kind_note(why.kind)}"
    return note


def _required_note(why: EmptyBecause, searched: str) -> str:
    """No memory searched holds the query's phrases or lacks its exclusions: memories that share
    its words otherwise were not looked at, so "not stored" is not said."""
    under = f" under the filters given ({', '.join(why.filters)})" if why.filters else ""
    if why.phrased:
        without = " and none of its excluded words" if why.excluding else ""
        note = (
            f"No {searched}memory{under} holds what the query quotes (the quoted words together, "
            f"in that order){without}."
        )
    else:
        note = (
            f"No {searched}memory{under} without the query's excluded words shares a word with "
            "the query or is close to it in meaning."
        )
    dropped = " or ".join(
        name
        for name, given in (("the quotes", why.phrased), ("the exclusions", why.excluding))
        if given
    )
    return (
        f"{note} Memories that share its words otherwise were not looked at: drop {dropped} to "
        "look for them."
    )


def _kind_note(kind: KindAsked, *, hits: bool = False) -> str:
    """How to list what a query made only of type or state words asked for, or to search only
    what a type or state named among other words selects (on a page with `hits`, the query kept;
    on an empty page, its other words): a memory's type and state are not among the words search
    matches (a question "what is overdue" otherwise reads as "nothing stored")."""
    words = ", ".join(f"'{word}'" for word in kind.words)
    name = "names" if len(kind.words) == 1 else "name"
    if kind.among_other_words:
        # On an empty page the filter beside the same query narrows a search that found nothing
        # closely enough (it does not lower the relevance floor): the other words, or a listing.
        beside = "keep the query and add" if hits else "ask with the query's other words and add"
        listed = "" if hits else ", or omit the query to list them"
        if kind.commitment_states:
            note = (
                f"{words} {name} a commitment's state, and a "
                "memory's state is not among the words search matches: to search only "
                f"commitments in that state, {beside} commitmentStatus "
                f"{json.dumps(list(kind.commitment_states))}{listed} (each hit says whether it "
                "is overdue)"
            )
            if any(word.lower() == "overdue" for word in kind.words):
                note += (
                    "; briefing lists the overdue ones in its overdue section (selector "
                    "'project' and value a project's name for one project)"
                )
            return note + "."
        return (
            f"{words} {name} a type, and a memory's type is "
            f"not among the words search matches: to search only memories of that type, {beside} "
            f"memoryTypes {json.dumps(list(kind.memory_types))}{listed}."
        )
    filters = [
        f"{name} {json.dumps(list(values))}"
        for name, values in (
            ("memoryTypes", kind.memory_types),
            ("commitmentStatus", kind.commitment_states),
        )
        if values
    ]
    note = (
        f"{words} {name} a type or a commitment's state, "
        "and a memory's type and state are not among the words search matches: to list those "
        f"memories, omit the query and filter with {' and '.join(filters)}"
    )
    if kind.commitment_states:
        note += " (each hit says whether it is overdue); briefing lists overdue and open ones"
    return note + "."


def memory(item: ReadMemory) -> dict:
    """A whole memory with its lifecycle state and neighbours, as get_memories returns it; the
    content is null (and contentWithheld true) when the call's budget was spent. `current` beside
    `status`: a version since revised is still `active` (status is the archive state alone), and
    a model reading `"status": "active"` takes it for the memory in force."""
    return {
        "id": str(item.id),
        "uri": item.resource_uri,
        "memoryType": item.memory_type,
        "topic": item.topic,
        "content": item.content,
        "contentWithheld": item.content is None,
        "contentLength": item.content_length,
        "scope": item.scope,
        "project": item.project,
        "tags": item.tags,
        "recordedAt": utc_datetime(item.recorded_at),
        "status": item.status,
        "current": item.current,
        "validTo": utc_datetime(item.valid_to),
        "commitmentStatus": item.commitment_status,
        "dueAt": utc_datetime(item.due_at),
        "overdue": item.overdue,
        "resolvedAt": utc_datetime(item.resolved_at),
        "predecessorId": str(item.predecessor_id) if item.predecessor_id else None,
        "successorId": str(item.successor_id) if item.successor_id else None,
    }


def past_due(memory: Memory, args: dict) -> dict:
    """A `note` when the dueAt a write gave is already past: the commitment is overdue at once,
    which a model that takes its training year for today's does not intend."""
    if args.get("dueAt") is None or not memory.overdue:
        return {}
    return {
        "note": (
            f"dueAt {utc_datetime(memory.due_at)} is already past (it is now "
            f"{utc_datetime(timezone.now())}): the commitment is overdue at once. If another date "
            "was meant, revise its dueAt."
        )
    }


def memory_batch(batch: MemoryBatch) -> dict:
    """The `get_memories` result. A note tells the model how to fetch what the budget withheld,
    so it does not take a withheld body for a missing one."""
    memories = [memory(m) for m in batch.memories]
    note = None
    if batch.withheld:
        note = (
            f"{len(batch.withheld)} bod{'y' if len(batch.withheld) == 1 else 'ies'} withheld: "
            "the maxChars budget of this call was spent. Fetch them in another get_memories "
            "call or read their threengram://memory/{id} resource."
        )
    return {
        "memories": memories,
        "count": len(memories),
        "notFound": batch.not_found,
        "withheldForBudget": [str(memory_id) for memory_id in batch.withheld],
        "note": note,
    }


def selector(item: Selector, *, compact: bool = False) -> dict:
    """What a briefing or handoff covers: all, or one scope, project or thread."""
    if compact and item.value is None:
        return {"kind": item.kind}
    return {"kind": item.kind, "value": item.value}


def section(item: Section, shown: Callable[[SectionItem], dict] = excerpt_item) -> dict:
    """A briefing or handoff section: the exact count and the first items, each as `shown`."""
    return {
        "count": item.count,
        "truncated": item.truncated,
        "items": [shown(excerpt) for excerpt in item.items],
    }


def _counted(count: int, truncated: bool, items: list[dict]) -> dict:
    """A compact list: its exact count, `truncated` only when it shows fewer, and its items."""
    return {"count": count, **({"truncated": True} if truncated else {}), "items": items}


def compact_section_item(item: MemoryExcerpt, *, selected: str) -> dict:
    """A section item as the compact briefing and handoff show it: what an agent reads to act
    and the id it acts with. Left out, as the same for every item or derived: the type (a section
    holds one), the URI (threengram://memory/{id}), the scope or project the selector fixes
    (`selected`), the default scope (every memory has a scope, DEFAULT_SCOPE unless given: an
    account that never names one repeated it on every item), a commitment's state when it is
    open (sections list only open and waiting ones), and fields that do not apply (no project,
    no due date, not overdue, an excerpt not cut). The recording time as stored, as a search
    hit's: asOf that instant reads this version. Of a project, a memory of no project (an
    account-wide preference) says so: without `project` it would read as the project's own."""
    data: dict = {"id": str(item.id), "topic": item.topic, "excerpt": item.excerpt}
    data |= _excerpt_cut(item)
    if selected != "scope" and item.scope != DEFAULT_SCOPE:
        data["scope"] = item.scope
    if item.project is not None and selected != "project":
        data["project"] = item.project
    elif item.project is None and selected == "project":
        data["accountWide"] = True
    data["recordedAt"] = utc_datetime(item.recorded_at)
    commitment = _commitment_fields(item)
    if commitment.get("commitmentStatus") != "waiting":  # every other one listed is open
        commitment.pop("commitmentStatus", None)
    return data | commitment


def compact_section(
    item: Section, *, selected: str, shown: Callable[..., dict] = compact_section_item
) -> dict:
    return _counted(
        item.count,
        item.truncated,
        [shown(excerpt, selected=selected) for excerpt in item.items],
    )


def _sections(sections: dict[str, Section], *, selected: str, compact: bool) -> dict:
    """Each section, compact or full; the handoff's recently resolved commitments are items of
    their own shape (resolved_item)."""
    shown = {}
    for name, s in sections.items():
        resolved = name == RECENTLY_RESOLVED
        if compact:
            item = compact_resolved_item if resolved else compact_section_item
            shown[name] = compact_section(s, selected=selected, shown=item)
        else:
            shown[name] = section(s, resolved_item if resolved else excerpt_item)
    return shown


def unlisted_note(unlisted: int) -> str | None:
    """What a briefing or handoff of a thread says of the members its sections leave out."""
    if not unlisted:
        return None
    return (
        f"{unlisted} of this thread's current memories {'is' if unlisted == 1 else 'are'} in no "
        "section (each lists only the kind its name says, in the states and ages described): "
        "search with this thread as its thread filter and no query lists every member, newest "
        "first."
    )


def _with_note(data: dict, unlisted: int, *, compact: bool) -> dict:
    note = unlisted_note(unlisted)
    if note is not None or not compact:
        data["note"] = note
    return data


def briefing(result: Briefing, *, compact: bool = True) -> dict:
    """The `briefing` result, compact (the default) or full (every field of every item)."""
    data = {
        "selector": selector(result.selector, compact=compact),
        "mode": result.mode,
        "generatedAt": utc_datetime(result.generated_at),
        "sections": _sections(result.sections, selected=result.selector.kind, compact=compact),
        "pinnedThreads": pinned_threads(result.pinned_threads, compact=compact),
    }
    return _with_note(data, result.unlisted, compact=compact)


def handoff(result: Handoff, *, compact: bool = True) -> dict:
    """The `handoff` result, compact (the default) or full; compact leaves a null generatedFor
    out."""
    data = {
        "selector": selector(result.selector, compact=compact),
        "generatedFor": result.generated_for,
        "generatedAt": utc_datetime(result.generated_at),
        "sections": _sections(result.sections, selected=result.selector.kind, compact=compact),
        "pinnedThreads": pinned_threads(result.pinned_threads, compact=compact),
    }
    if compact and result.generated_for is None:
        del data["generatedFor"]
    return _with_note(data, result.unlisted, compact=compact)


def environment(
    *,
    tool_names: Sequence[str],
    scopes: Iterable[str],
    stats: EnvironmentStats,
    threads: Iterable[Thread],
) -> dict:
    """The `describe_environment` result: counts and names, never memory content."""
    return {
        "server": {"name": "threengram", "version": VERSION},
        "tools": list(tool_names),
        "scopes": sorted(scopes),
        "memoryScopes": stats.scopes,
        "projects": {"count": stats.projects_total, "names": stats.projects},
        "threads": [thread(t) for t in threads],
        "memoriesByType": stats.current_by_type,
        "memoriesByStatus": stats.by_status,
        "commitmentsByStatus": stats.commitments_by_status,
        "memoryVersions": {"count": stats.versions, "max": stats.versions_max},
    }
