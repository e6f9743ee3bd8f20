"""The search's filters: cleaned from the tool's arguments, canonical in the fingerprint a
cursor is bound to, and as SQL clauses on the memories a search reads.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from memories import bounds, thread_sql
from memories.errors import InvalidInput
from memories.models import CommitmentStatus, MemoryType, Status
from memories.thread_sql import THREAD_READ_BY_MEMBER_MAX

STATUS_FILTERS = ("active", "archived", "any")
COMMITMENT_STATUS_FILTERS = tuple(CommitmentStatus.values)
# Why a commitment's state is no filter of a search as of an instant: the state is a lifecycle
# column, kept as it is now and not versioned, so the commitments that were open then cannot be
# told from those open now.
_STATE_IS_NOT_VERSIONED = (
    "cannot be combined with asOf: a commitment's state is kept as it is now, not as it was "
    "then; omit asOf, or omit {field} and read each hit's commitmentStatus (its state now)"
)


@dataclass(frozen=True)
class SearchFilters:
    memory_types: tuple[str, ...] = ()
    scope: str | None = None
    project: str | None = None
    thread: str | None = None
    status: str | None = None  # None: "active", or "any" with as_of
    recorded_after: datetime | None = None
    recorded_before: datetime | None = None
    as_of: datetime | None = None
    # Commitments only, in one of these states (memory_types is then ("commitment",)), and
    # resolved at or after resolved_after.
    commitment_states: tuple[str, ...] = ()
    resolved_after: datetime | None = None

    @property
    def default_status(self) -> str:
        """The status searched when none is given: every one as of an instant, else active."""
        return "any" if self.as_of is not None else Status.ACTIVE.value

    def narrows(self) -> bool:
        """Whether a filter beyond lifecycle (status, asOf) narrows the tenant's memories."""
        return bool(
            self.memory_types
            or self.scope is not None
            or self.project is not None
            or self.thread is not None
            or self.recorded_after is not None
            or self.recorded_before is not None
            or self.commitment_states
        )

    def given(self) -> tuple[str, ...]:
        """The filters given that narrow the search, as the search tool names its arguments
        (status 'any' narrows nothing; memoryTypes not beside commitmentStatus, which makes it
        commitments, nor commitmentStatus beside resolvedAfter, which makes it resolved)."""
        named = (
            ("memoryTypes", () if self.commitment_states else self.memory_types),
            ("scope", self.scope),
            ("project", self.project),
            ("thread", self.thread),
            ("status", None if self.status == "any" else self.status),
            ("recordedAfter", self.recorded_after),
            ("recordedBefore", self.recorded_before),
            ("asOf", self.as_of),
            ("commitmentStatus", () if self.resolved_after else self.commitment_states),
            ("resolvedAfter", self.resolved_after),
        )
        return tuple(name for name, value in named if value is not None and value != ())

    def fingerprint(self, owner_id: int, query: str | None, *, thread_id: uuid.UUID | None) -> str:
        """What a cursor is bound to: the account, the query and every filter, canonically, as
        a digest (which the cursor carries keyed with SECRET_KEY: see cursor.py). (Another
        account's cursor would bring that account's instant and word statistics.) The thread
        filter by the id of the thread its name resolved to (`Where.thread_id`), not by the
        name: a thread deleted and created anew under its name between two pages is
        another thread, whose members must not continue the first one's paging. The commitment
        filters are named only when given, so that a search without them keeps one fingerprint
        across releases that have them or not. A status given as its default ('active', or 'any'
        with asOf) is the status left out: the same search. The query as written, case too: the
        words half folds case, but the meaning half embeds the text as written, and a later page
        ranked by another vector would repeat or skip hits."""
        commitment = {}
        if self.commitment_states:
            commitment["cs"] = sorted(self.commitment_states)
        if self.resolved_after is not None:
            commitment["rs"] = self.resolved_after.isoformat()
        canonical = json.dumps(
            commitment
            | {
                "o": owner_id,
                "q": query,
                "t": sorted(self.memory_types),
                "s": self.scope,
                "p": self.project,
                "th": str(thread_id) if thread_id else None,
                "st": None if self.status == self.default_status else self.status,
                "ra": self.recorded_after.isoformat() if self.recorded_after else None,
                "rb": self.recorded_before.isoformat() if self.recorded_before else None,
                "ao": self.as_of.isoformat() if self.as_of else None,
            },
            sort_keys=True,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def clean_filters(
    *,
    memory_types: object = None,
    scope: object = None,
    project: object = None,
    thread: object = None,
    status: object = None,
    recorded_after: object = None,
    recorded_before: object = None,
    as_of: object = None,
    commitment_status: object = None,
    resolved_after: object = None,
) -> SearchFilters:
    types: tuple[str, ...] = ()
    if memory_types is not None:
        if not isinstance(memory_types, list | tuple) or not memory_types:
            raise InvalidInput("memoryTypes", "must be a non-empty list of memory types")
        unknown = [t for t in memory_types if t not in MemoryType.values]
        if unknown:
            raise InvalidInput("memoryTypes", f"must be among: {', '.join(MemoryType.values)}")
        types = tuple(dict.fromkeys(memory_types))
    if status is not None and status not in STATUS_FILTERS:
        raise InvalidInput("status", f"must be one of: {', '.join(STATUS_FILTERS)}")
    after = before = None
    if recorded_after is not None:
        after = bounds.clean_datetime("recordedAfter", recorded_after)
    if recorded_before is not None:
        before = bounds.clean_datetime("recordedBefore", recorded_before)
    if after and before and after > before:
        raise InvalidInput("recordedAfter", "must not be later than recordedBefore")
    when = bounds.clean_datetime("asOf", as_of) if as_of is not None else None
    states, resolved_from = _commitment_filters(commitment_status, resolved_after, types, when)
    return SearchFilters(
        memory_types=(MemoryType.COMMITMENT.value,) if states else types,
        scope=bounds.clean_scope(scope) if scope is not None else None,
        # A filter narrows: a blank project is refused, not taken for no filter.
        project=(
            None
            if project is None
            else bounds.clean_text("project", project, maximum=bounds.PROJECT_MAX)
        ),
        thread=bounds.clean_thread_name(thread, "thread") if thread is not None else None,
        status=status,  # type: ignore[arg-type]
        recorded_after=after,
        recorded_before=before,
        as_of=when,
        commitment_states=states,
        resolved_after=resolved_from,
    )


def _commitment_filters(
    commitment_status: object,
    resolved_after: object,
    types: tuple[str, ...],
    as_of: datetime | None,
) -> tuple[tuple[str, ...], datetime | None]:
    """The commitment states asked for and the earliest resolution time, cleaned: a state
    filter selects commitments, so a memoryTypes without them selects nothing; resolvedAfter
    selects resolved commitments (a commitment resolved before its resolution time was kept has
    none, and is not selected)."""
    states: tuple[str, ...] = ()
    if commitment_status is not None:
        if not isinstance(commitment_status, list | tuple) or not commitment_status:
            raise InvalidInput("commitmentStatus", "must be a non-empty list of commitment states")
        if any(state not in COMMITMENT_STATUS_FILTERS for state in commitment_status):
            raise InvalidInput(
                "commitmentStatus", f"must be among: {', '.join(COMMITMENT_STATUS_FILTERS)}"
            )
        states = tuple(dict.fromkeys(commitment_status))
    resolved_from = None
    if resolved_after is not None:
        resolved_from = bounds.clean_datetime("resolvedAfter", resolved_after)
        if states and states != (CommitmentStatus.RESOLVED.value,):
            raise InvalidInput(
                "resolvedAfter",
                "selects resolved commitments only; commitmentStatus must then be ['resolved'] "
                f"or omitted; got {list(states)}",
            )
        states = (CommitmentStatus.RESOLVED.value,)
    if not states:
        return (), None
    field = "resolvedAfter" if resolved_from is not None else "commitmentStatus"
    if types and MemoryType.COMMITMENT.value not in types:
        raise InvalidInput(
            field,
            f"selects commitments, which memoryTypes {list(types)} leaves out; add "
            "'commitment' to memoryTypes or omit memoryTypes",
        )
    if as_of is not None:
        raise InvalidInput(field, _STATE_IS_NOT_VERSIONED.format(field=field))
    return states, resolved_from


@dataclass(frozen=True)
class Where:
    """The filters as SQL clauses on `m`. `reach`: which of the tenant's memories the search reads
    at all (current or as of an instant, recorded dates), conditions that the walks over the
    most recent memories (words, topic fallback) apply as they read; `selection`: status, type,
    scope, project, commitment state and thread, applied to what a walk has read, so that its
    bound holds whatever the filters (see sql.LEXICAL_RECENT; without asOf, a walk reads only
    the memories of one of them, `walks`; a thread that a walk reads is not applied to it
    again). `thread`: the thread filter's clause alone ("" for none), `thread_id` the id of the
    thread it names (None for none). `narrowed`: SearchFilters.narrows(); `walks`: which filter
    chooses the memories a walk reads (a thread of at most THREAD_READ_BY_MEMBER_MAX members, else
    WALK_SOURCES; see candidates._recent), None for the account's newest; `selective`: a filter
    is asked for that a walk applies to what it read, and that may pass a small share of it (a
    thread it does not read, a resolution date, or one of WALK_SOURCES that did not choose it).
    `current`: only current memories are read (no asOf), as an account's nearest-neighbour index
    holds."""

    reach: str
    selection: str
    thread: str
    thread_id: uuid.UUID | None
    narrowed: bool
    selective: bool
    current: bool
    dates: str = ""
    walks: str | None = None

    @property
    def sql(self) -> str:
        return self.reach + self.selection

    @property
    def reach_at_snapshot(self) -> str:
        """`reach` with "current" meaning current at the search's instant (`snapshot`, the first
        page's): a memory revised since is read in the version that instant saw, and its
        successor, recorded later, is not, so a walk resumed on a later page neither drops it
        nor shows two versions. With asOf, `reach` already names one instant."""
        if not self.current:
            return self.reach
        return _conjunction([_CURRENT_AT_SNAPSHOT]) + self.dates


# The filters that may choose the memories a walk reads, on current memories, narrowest first:
# the first one asked for does, through an index that leads to its memories newest first (see
# candidates._recent); the others are applied to what it read. Types come before a scope: a
# scope holds a large share of an account, as a rule, and a type a smaller one.
WALK_SOURCES = ("project", "commitment_states", "memory_types", "scope")


def _walk_source(filters: SearchFilters, params: dict) -> str | None:
    # A thread of at most THREAD_READ_BY_MEMBER_MAX members is what a walk or a listing filtered
    # to it reads, whole, at any instant (asOf too); a larger one is applied to what another
    # source's walk read, as the filters after WALK_SOURCES[0] are.
    if filters.thread is not None and params["thread_members"] <= THREAD_READ_BY_MEMBER_MAX:
        return "thread"
    if filters.as_of is not None:
        return None  # those indexes hold current memories only
    return next((name for name in WALK_SOURCES if getattr(filters, name)), None)


def _applied_after(filters: SearchFilters, walks: str | None) -> list[str]:
    """The filters among WALK_SOURCES asked for that a walk applies to what it read: all but
    the one that chose it (and the commitment type that commitment states imply)."""
    implied = filters.commitment_states and walks == "commitment_states"
    return [
        name
        for name in WALK_SOURCES
        if getattr(filters, name) and name != walks and not (name == "memory_types" and implied)
    ]


_CURRENT = "m.valid_to IS NULL"
_CURRENT_AT_SNAPSHOT = "(m.valid_to IS NULL OR m.valid_to > %(snapshot)s)"


def filter_clauses(filters: SearchFilters, owner_id: int, params: dict) -> Where:
    lifecycle: list[str] = []
    if filters.as_of is not None:
        lifecycle.append(
            "m.recorded_at <= %(as_of)s AND (m.valid_to IS NULL OR m.valid_to > %(as_of)s)"
        )
        params["as_of"] = filters.as_of
    else:
        lifecycle.append(_CURRENT)
    dates: list[str] = []
    if filters.recorded_after is not None:
        dates.append("m.recorded_at >= %(after)s")
        params["after"] = filters.recorded_after
    if filters.recorded_before is not None:
        dates.append("m.recorded_at <= %(before)s")
        params["before"] = filters.recorded_before
    selection: list[str] = []
    status = filters.status or filters.default_status
    if status != "any":
        selection.append("m.status = %(status)s")
        params["status"] = status
    if filters.memory_types:
        selection.append("m.memory_type = ANY(%(types)s)")
        params["types"] = list(filters.memory_types)
    if filters.scope is not None:
        selection.append("m.scope = %(scope)s")
        params["scope"] = filters.scope
    if filters.project is not None:
        selection.append("m.project = %(project)s")
        params["project"] = filters.project
    if filters.commitment_states:
        selection.append("m.commitment_status = ANY(%(commitment_states)s)")
        params["commitment_states"] = list(filters.commitment_states)
    if filters.resolved_after is not None:
        selection.append("m.resolved_at >= %(resolved_after)s")
        params["resolved_after"] = filters.resolved_after
    thread = []
    if filters.thread is not None:
        thread.append(
            thread_sql.members_sql(
                owner_id, filters.thread, params, key="thread", counted_to=THREAD_READ_BY_MEMBER_MAX
            )
        )
    walks = _walk_source(filters, params)
    return Where(
        reach=_conjunction(lifecycle + dates),
        # A thread whose members a walk reads is no filter on what it read.
        selection=_conjunction(selection + (thread if walks != "thread" else [])),
        thread=_conjunction(thread),
        thread_id=params["thread"] if thread else None,
        narrowed=filters.narrows(),
        selective=bool(
            (thread and walks != "thread")
            or filters.resolved_after
            or _applied_after(filters, walks)
        ),
        current=filters.as_of is None,
        dates=_conjunction(dates),
        walks=walks,
    )


def _conjunction(clauses: list[str]) -> str:
    return "".join(f"\n      AND {clause}" for clause in clauses)
