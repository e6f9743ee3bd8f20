"""The session briefing: what an agent needs at the start of a session, in one bounded read.

Each section reports the exact number of matching memories and at most a few items (excerpts,
never full bodies). All sections come from one UNION ALL statement, pinned threads from a second,
both (and the lookups around them) in one snapshot (replica.one_snapshot), so that the counts and
the items agree.
A selector narrows every section to its scope, project or thread, but a project's preferences
take in the account-wide ones too (SectionSpec.account_wide).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import connections
from django.utils import timezone

from memories import bounds, replica, thread_sql
from memories.environment import require_known_facet
from memories.errors import InvalidInput
from memories.excerpts import EXCERPT_COLUMNS, EXCERPT_MAX, MemoryExcerpt
from memories.models import Memory, Thread
from memories.thread_sql import THREAD_READ_BY_MEMBER_MAX, thread_members_sql

SELECTOR_KINDS = ("all", "scope", "project", "thread")
MODES = ("brief", "full")
ITEMS = {"brief": 3, "full": 10}
EXCERPT = {"brief": 200, "full": EXCERPT_MAX}
RECENT_DECISION_DAYS = 30
PINNED_THREADS_MAX = 10

LIVE = "m.owner_id = %(owner)s AND m.valid_to IS NULL AND m.status = 'active'"
# A project's selection of an account-wide section: the project's own and those of no project.
PROJECT_OR_NONE = " AND (m.project = %(selector)s OR m.project IS NULL)"
OPEN_COMMITMENT = "m.memory_type = 'commitment' AND m.commitment_status IN ('open', 'waiting')"
# What LIVE and the sections' conditions and orders read of a memory.
SECTION_COLUMNS = (
    "m.id, m.owner_id, m.valid_to, m.status, m.memory_type, m.commitment_status, m.due_at,"
    " m.recorded_at, m.resolved_at"
)


@dataclass(frozen=True)
class Selector:
    """Which part of the tenant's memories a briefing or handoff covers."""

    kind: str = "all"
    value: str | None = None

    @classmethod
    def clean(cls, kind: object = None, value: object = None, field: str = "value") -> Selector:
        """The selector `kind` names, its value checked as the field `field` (the tools send
        the value in `value`, the prompts in an argument named as the kind)."""
        kind = kind or "all"
        if kind not in SELECTOR_KINDS:
            raise InvalidInput("selector", f"must be one of: {', '.join(SELECTOR_KINDS)}")
        if kind == "all":
            if value is not None:
                *most, last = [f"'{k}'" for k in SELECTOR_KINDS if k != "all"]
                others = f"{', '.join(most)} or {last}"
                raise InvalidInput(
                    field,
                    f"must be omitted when selector is 'all' (the default); to select by it, "
                    f"give selector {others} with it",
                )
            return cls()
        if value is None:
            raise InvalidInput(field, f"is required when selector is '{kind}'")
        cleaned = {
            "scope": lambda v: bounds.clean_scope(v, field),
            "project": lambda v: bounds.clean_text(field, v, maximum=bounds.PROJECT_MAX),
            "thread": lambda v: bounds.clean_thread_name(v, field),
        }[kind](value)
        return cls(kind=kind, value=cleaned)

    def sql(self, owner_id: int, params: dict) -> str:
        """An extra WHERE clause on memories `m` (empty for 'all'). Of a thread, how many members
        it has, up to one past THREAD_READ_BY_MEMBER_MAX, goes into params["selector_members"]."""
        if self.kind == "all":
            return ""
        if self.kind == "thread":
            return " AND " + thread_sql.members_sql(
                owner_id,
                self.value,
                params,
                key="selector",
                counted_to=THREAD_READ_BY_MEMBER_MAX,
            )
        params["selector"] = self.value
        return f" AND m.{self.kind} = %(selector)s"


@dataclass(frozen=True)
class SectionSpec:
    name: str
    where: str
    order: str
    # Tighter bounds than the call's for a section meant to stay short: at most this many
    # items, and excerpts of at most this many code points.
    items_max: int | None = None
    excerpt_max: int | None = None
    # Its memories without a project apply in every project (a preference such as "rebase,
    # never merge"): a project's selection lists them too, after the project's own.
    account_wide: bool = False


@dataclass(frozen=True)
class SectionItem(MemoryExcerpt):
    """A memory as a section lists it: its excerpt, and when it was resolved (a commitment)."""

    resolved_at: datetime | None


@dataclass
class Section:
    count: int = 0
    items: list[SectionItem] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.count > len(self.items)


def unlisted_members(members: int | None, sections: dict[str, Section]) -> int:
    """How many of a selected thread's current memories no section lists (0 for any other
    selector). The sections are disjoint, so their counts add up to those they list."""
    if members is None:
        return 0
    return max(0, members - sum(section.count for section in sections.values()))


def read_sections(
    *,
    owner_id: int,
    selector: Selector,
    specs: list[SectionSpec],
    items: int,
    excerpt_max: int,
    now: datetime,
) -> tuple[Selector, dict[str, Section], int | None]:
    """The selector as found (a thread by its name as stored, however it was typed), exact
    counts and the first `items` rows of each section, in one statement, and for a thread its
    current, active members: a thread gathers an investigation's notes, which no section lists,
    and a briefing of it without a word of them reads as a thread with nothing in it."""
    params: dict = {
        "owner": owner_id,
        "now": now,
        "items": items,
        "excerpt_fetch": excerpt_max + 1,
    }
    selector = _in_account_spelling(owner_id, selector)
    selected = selector.sql(owner_id, params)
    statement, members_read_first = _sections_sql(specs, selector, selected, params)
    # A lag-tolerant read, on the replica inside `replica.tolerant_read`, as search's are.
    with connections[replica.read_alias()].cursor() as cursor:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
        sections = _sections(specs, rows, excerpt_max=excerpt_max, now=now)
        _require_known_facet_when_empty(cursor, owner_id, selector, sections)
        members = None
        if selector.kind == "thread":
            members = (
                rows[0][-1] if rows and members_read_first else _current_members(cursor, params)
            )
    if selector.kind == "thread":
        selector = replace(selector, value=params["selector_name"])
    return selector, sections, members


def _in_account_spelling(owner_id: int, selector: Selector) -> Selector:
    """The selector, a project's in the account's spelling."""
    if selector.kind == "project":
        # A project in the account's spelling, however it was typed ('Atlas' for 'atlas'), as a
        # write takes it; and the selector answered says that spelling.
        spelling = Memory.objects.in_account_spelling(
            owner_id, selector.value, using=replica.read_alias()
        )
        selector = replace(selector, value=spelling)
    return selector


def _sections_sql(
    specs: list[SectionSpec], selector: Selector, selected: str, params: dict
) -> tuple[str, bool]:
    """The one UNION ALL statement of every section of `specs` under the selector, whose clause
    (Selector.sql) is `selected`, and whether it reads a small thread's current members first
    (each of its rows then says how many there are)."""
    # Only module constants are formatted in; every value is a bound parameter. Both the count
    # and the choice of the first items read only a covering index (index-only scans):
    # memory_owner_type_current (which holds each memory's project and scope, so a project or
    # scope selector is tested there too), or memory_owner_resolved for what was resolved lately;
    # content is fetched for the chosen items alone. A small thread's current members are read
    # once instead, by key, and every section counted and chosen from them: a section's type may
    # hold most of a large account, and each of its memories would be tested for membership.
    source, read_first, members_column = "memories_memory", "", "NULL"
    if selector.kind == "thread" and params["selector_members"] <= THREAD_READ_BY_MEMBER_MAX:
        source, selected = "members", ""
        member_rows = thread_members_sql("selector", columns=SECTION_COLUMNS)
        read_first = f"WITH members AS MATERIALIZED ({member_rows} WHERE {LIVE})\n"
        members_column = "(SELECT count(*) FROM members)"
    parts = [
        _section_sql(spec, selector, selected, source=source, members_column=members_column)
        for spec in specs
    ]
    return read_first + "\nUNION ALL\n".join(parts), bool(read_first)


def _section_sql(
    spec: SectionSpec, selector: Selector, selected: str, *, source: str, members_column: str
) -> str:
    """One section's part of the statement: its first items, each row with the section's exact
    count (of the memories of `source`) and `members_column`."""
    limit = _limit(spec)
    counted, order = f"{LIVE}{selected} AND {spec.where}", spec.order
    top = _first(counted, order, limit, source)
    if spec.account_wide and selector.kind == "project":
        # The project's own first: where one of them and an account-wide one differ, the
        # project's is the more specific and prevails, and it is the one a short briefing
        # must not leave out. The first items of each are picked apart, each walk in the
        # section's order stopping at the limit: one walk of both in this order would read
        # every memory of the type to sort them.
        counted = f"{LIVE}{PROJECT_OR_NONE} AND {spec.where}"
        order = f"m.project IS NULL, {spec.order}"
        top = " UNION ALL ".join(
            f"({_first(f'{LIVE}{narrow} AND {spec.where}', spec.order, limit)})"
            for narrow in (selected, " AND m.project IS NULL")
        )
    return f"""(SELECT '{spec.name}' AS section, {EXCERPT_COLUMNS}, m.resolved_at,
                       (SELECT count(*) FROM {source} m WHERE {counted}) AS total,
                       {members_column} AS members
                FROM memories_memory m
                JOIN ({top}) top ON m.owner_id = %(owner)s AND m.id = top.id
                ORDER BY {order}
                LIMIT {limit})"""  # noqa: S608


def _require_known_facet_when_empty(
    cursor, owner_id: int, selector: Selector, sections: dict[str, Section]
) -> None:
    """NotFound when the sections list none of the selected scope's or project's own memories
    and the owner has none in it at all."""
    # Of a project, only its own memories say that it exists: an account-wide preference is
    # listed in any project's briefing, a misspelt one's too.
    listed = [item for section in sections.values() for item in section.items]
    own = [item for item in listed if selector.kind != "project" or item.project is not None]
    if not own and selector.kind in ("scope", "project"):
        # Nothing to show: say so when the scope or project is not the owner's at all (an
        # unknown thread is NotFound already, in `selector.sql`).
        require_known_facet(cursor, owner_id=owner_id, facet=selector.kind, value=selector.value)


def _current_members(cursor, params: dict) -> int:
    """How many current, active memories the thread params["selector"] holds, its members read
    by key: without statistics, a join of its memberships to the account's memories may loop
    over all of the account's current memories for each member."""
    cursor.execute(f"{thread_members_sql('selector', columns='count(*)')} WHERE {LIVE}", params)
    return cursor.fetchone()[0]


def _sections(
    specs: list[SectionSpec], rows: list[tuple], *, excerpt_max: int, now: datetime
) -> dict[str, Section]:
    """The sections of read_sections' rows: each row its section's name, EXCERPT_COLUMNS, the
    memory's resolved_at, the section's exact count and the selected thread's members."""
    sections = {spec.name: Section() for spec in specs}
    excerpt_max_of = {
        spec.name: min(excerpt_max, spec.excerpt_max or excerpt_max) for spec in specs
    }
    for row in rows:
        section = sections[row[0]]
        section.count = row[-2]
        fields = MemoryExcerpt.row_fields(row[1:-3], excerpt_max=excerpt_max_of[row[0]], now=now)
        section.items.append(SectionItem(**fields, resolved_at=row[-3]))
    return sections


def _first(where: str, order: str, limit: str, source: str = "memories_memory") -> str:
    """The ids of the first `limit` memories of `source` that `where` holds, in `order` (SQL of
    constants)."""
    return (
        f"SELECT m.id FROM {source} m WHERE {where}"  # noqa: S608 (constants)
        f" ORDER BY {order} LIMIT {limit}"
    )


def _limit(spec: SectionSpec) -> str:
    """The SQL limit of a section's items: the call's, or the section's own when tighter."""
    return "%(items)s" if spec.items_max is None else f"LEAST(%(items)s, {int(spec.items_max)})"


# Overdue first: what needs acting on before anything else. The two commitment sections are
# disjoint (an overdue one is not listed again among the open ones), so that brief mode's three
# items of each show what is late and what falls due next, not the same late ones twice.
BRIEFING_SECTIONS = [
    SectionSpec("overdue", f"{OPEN_COMMITMENT} AND m.due_at < %(now)s", "m.due_at ASC, m.id DESC"),
    SectionSpec(
        "openCommitments",
        f"{OPEN_COMMITMENT} AND (m.due_at IS NULL OR m.due_at >= %(now)s)",
        "m.due_at ASC NULLS LAST, m.recorded_at DESC, m.id DESC",
    ),
    SectionSpec("blockers", "m.memory_type = 'blocker'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec(
        "recentDecisions",
        f"m.memory_type = 'decision' AND m.recorded_at >= %(now)s - interval "
        f"'{RECENT_DECISION_DAYS} days'",
        "m.recorded_at DESC, m.id DESC",
    ),
    SectionSpec(
        "preferences",
        "m.memory_type = 'preference'",
        "m.recorded_at DESC, m.id DESC",
        account_wide=True,
    ),
]


@dataclass(frozen=True)
class PinnedThread:
    name: str
    member_count: int
    proposal_count: int


@dataclass
class PinnedThreads:
    """The owner's pinned threads: the exact count and the first PINNED_THREADS_MAX by name (in
    any case)."""

    count: int
    items: list[PinnedThread]

    @property
    def truncated(self) -> bool:
        return self.count > len(self.items)


def read_pinned_threads(owner_id: int) -> PinnedThreads:
    """Every pinned thread of the owner, with its member and open-proposal counts. A selector
    narrows the sections beside it, not this list."""
    # At most THREADS_MAX pinned threads exist, so all are read and counted here.
    pinned = list(
        Thread.objects.owned_with_counts(owner_id)
        .filter(pinned=True)
        .in_name_order()
        .values_list("name", "member_count", "proposal_count")
    )
    return PinnedThreads(
        count=len(pinned),
        items=[PinnedThread(*counted) for counted in pinned[:PINNED_THREADS_MAX]],
    )


@dataclass
class Briefing:
    selector: Selector
    mode: str
    generated_at: datetime
    sections: dict[str, Section]
    pinned_threads: PinnedThreads
    # Of a thread's current memories, how many no section lists (0 for another selector).
    unlisted: int = 0


def build_briefing(*, owner_id: int, selector: Selector, mode: str = "brief") -> Briefing:
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of: {', '.join(MODES)}")
    now = timezone.now()
    with replica.one_snapshot():
        selector, sections, members = read_sections(
            owner_id=owner_id,
            selector=selector,
            specs=BRIEFING_SECTIONS,
            items=ITEMS[mode],
            excerpt_max=EXCERPT[mode],
            now=now,
        )
        pinned_threads = read_pinned_threads(owner_id)
    return Briefing(
        selector=selector,
        mode=mode,
        generated_at=now,
        sections=sections,
        pinned_threads=pinned_threads,
        unlisted=unlisted_members(members, sections),
    )
