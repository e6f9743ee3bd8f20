"""What describe_environment reports about a tenant's own data: projects, threads and counts,
read in one snapshot (describe_account); every list is bounded."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connections
from django.db.models import F, Value

from memories import replica
from memories.errors import SUGGESTION_SIMILARITY, SUGGESTIONS_MAX, NotFound, did_you_mean
from memories.models import (
    ERASED,
    CommitmentStatus,
    Memory,
    MemoryType,
    Thread,
    thread_name_key,
)
from memories.threads import LIST_MAX, list_threads

PROJECTS_MAX = 100


@dataclass
class EnvironmentStats:
    current_by_type: dict[str, int]
    by_status: dict[str, int]  # active, archived (current), superseded
    commitments_by_status: dict[str, int]
    projects: list[str]
    projects_total: int
    scopes: list[str]

    @property
    def versions(self) -> int:
        """Every memory row the account holds, superseded ones too: what its cap counts."""
        return sum(self.by_status.values())

    @property
    def versions_max(self) -> int:
        """The cap on `versions` (services.versions_cap_reached), so an agent sees it coming."""
        return settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX


def environment_stats(*, owner_id: int) -> EnvironmentStats:
    # A lag-tolerant read (memories.replica): on the replica with the threads listed beside it,
    # in describe_account's snapshot.
    with connections[replica.read_alias()].cursor() as cursor:
        cursor.execute(
            """
            SELECT memory_type, status, commitment_status, valid_to IS NULL, count(*)
            FROM memories_memory WHERE owner_id = %s
            GROUP BY 1, 2, 3, 4
            """,
            [owner_id],
        )
        groups = cursor.fetchall()
        cursor.execute(
            """
            SELECT 'project', project, count(*) OVER () FROM (
                SELECT DISTINCT project FROM memories_memory
                WHERE owner_id = %(owner)s AND valid_to IS NULL AND project IS NOT NULL
            ) p
            UNION ALL
            SELECT 'scope', scope, 0 FROM (
                SELECT DISTINCT scope FROM memories_memory
                WHERE owner_id = %(owner)s AND valid_to IS NULL
            ) s
            ORDER BY 1, 2
            """,
            {"owner": owner_id},
        )
        facets = cursor.fetchall()
    # Every type and state counted, none left out for being 0: an agent reads a missing key as
    # a question, not as none.
    stats = EnvironmentStats(
        dict.fromkeys(MemoryType.values, 0),
        {"active": 0, "archived": 0, "superseded": 0},
        dict.fromkeys(CommitmentStatus.values, 0),
        [],
        0,
        [],
    )
    for memory_type, status, commitment_status, current, count in groups:
        if not current:
            stats.by_status["superseded"] += count
            continue
        stats.by_status[status] += count
        stats.current_by_type[memory_type] += count
        if commitment_status:
            stats.commitments_by_status[commitment_status] += count
    for kind, value, total in facets:
        if kind == "project":
            stats.projects_total = total
            if len(stats.projects) < PROJECTS_MAX:
                stats.projects.append(value)
        elif len(stats.scopes) < LIST_MAX:
            stats.scopes.append(value)
    return stats


@dataclass(frozen=True)
class AccountDescription:
    stats: EnvironmentStats
    threads: list[Thread]


def describe_account(*, owner: AbstractBaseUser) -> AccountDescription:
    """What describe_environment reports of the tenant's data: its counts and facets
    (environment_stats) and its threads (threads.list_threads), read in one snapshot
    (replica.one_snapshot), so a memory or thread written meanwhile is in every part or none."""
    with replica.one_snapshot():
        return AccountDescription(
            stats=environment_stats(owner_id=owner.pk), threads=list_threads(owner=owner)
        )


# MCP completion (2026-07-28, "completion/complete"): "Maximum 100 items per response". The
# gateway cuts every completion answer to it; the facet queries below never read more.
COMPLETION_MAX = 100
FACETS = ("scope", "project", "thread")
# The most recent current memories whose scopes or projects are suggested by the check below.
FACET_CHECK_MEMORIES_MAX = 5_000
# Whether a current memory of the owner's has the scope or project: a probe of
# memory_owner_scope_recent or memory_owner_project_recent, whose condition the lower case's test
# states. Its newest such memory (not an EXISTS, whose order PostgreSQL drops), with sorts off, as
# a search's walk reads them (see memories.search.sql.fetch_rows): whatever the table's statistics
# say, the planner takes that index rather than one that holds the column too but leads elsewhere
# (memory_owner_type_current, whose entries of the account it would read whole for a scope none
# has). ({facet} is one of the two column names, never caller text.)
_FACET_KNOWN_SQL = """SELECT set_config('enable_sort', 'off', true); SELECT m.id
    FROM memories_memory m
    WHERE m.owner_id = %(owner)s AND m.{facet} = %(value)s
      AND lower(m.{facet}) IS NOT NULL AND m.valid_to IS NULL
    ORDER BY m.recorded_at DESC LIMIT 1; RESET enable_sort"""


def require_known_facet(cursor, *, owner_id: int, facet: str, value: str) -> None:
    """NotFound when no current memory of the owner's has this scope or project, naming up to
    SUGGESTIONS_MAX of the owner's near ones (see unknown_facet). Asked by briefing, handoff and
    search when they found nothing with it: an agent that typed 'Atlas' for 'atlas' would
    otherwise read the empty answer as "nothing there"."""
    near = unknown_facet(cursor, owner_id=owner_id, facet=facet, value=value)
    if near is not None:
        hint = did_you_mean(near) or "describe_environment lists your projects and scopes"
        raise NotFound(f"{facet} '{value}': no current memory has it; {hint}")


def unknown_facet(cursor, *, owner_id: int, facet: str, value: str) -> list[str] | None:
    """None when a current memory of the owner's has this scope or project (one probe of an
    index, in an account of any size); otherwise up to SUGGESTIONS_MAX of the owner's near ones
    (any case, or trigram-similar), nearest first, among the scopes or projects of its
    FACET_CHECK_MEMORIES_MAX most recent current memories. `cursor` is the caller's (the
    replica's, inside its read)."""
    if facet not in ("scope", "project"):
        raise ValueError(facet)
    cursor.execute(_FACET_KNOWN_SQL.format(facet=facet), {"owner": owner_id, "value": value})
    cursor.nextset()
    if cursor.fetchone() is not None:
        return None
    # Only the owner's memories are read: another tenant's names are never suggested (and
    # row-level security holds it too).
    cursor.execute(
        f"""WITH recent AS (
                SELECT m.{facet} AS value FROM memories_memory m
                WHERE m.owner_id = %(owner)s AND m.valid_to IS NULL
                ORDER BY m.recorded_at DESC
                LIMIT %(read)s
            )
            SELECT value FROM (SELECT DISTINCT value FROM recent WHERE value IS NOT NULL) v
            WHERE lower(value) = lower(%(value)s) OR similarity(value, %(value)s) >= %(floor)s
            ORDER BY lower(value) = lower(%(value)s) DESC, similarity(value, %(value)s) DESC, value
            LIMIT %(most)s""",  # noqa: S608
        {
            "owner": owner_id,
            "value": value,
            "read": FACET_CHECK_MEMORIES_MAX,
            "floor": SUGGESTION_SIMILARITY,
            "most": SUGGESTIONS_MAX,
        },
    )
    return [row[0] for row in cursor.fetchall()]


def facet_values(*, owner_id: int, facet: str, prefix: str) -> list[str]:
    """The tenant's own scopes, projects (of current memories) or thread names starting with
    `prefix` (case-insensitive), sorted, at most COMPLETION_MAX + 1: one past the most a
    completion sends says that there are more."""
    if facet == "thread":
        return list(
            # Names compared as thread names compare, whatever the prefix's case or form.
            Thread.objects.alias(name_key=thread_name_key(F("name")))
            .filter(owner_id=owner_id, name_key__startswith=thread_name_key(Value(prefix)))
            .exclude(name=ERASED)
            .in_name_order()
            .values_list("name", flat=True)[: COMPLETION_MAX + 1]
        )
    if facet not in ("scope", "project"):
        raise ValueError(facet)
    # Stored text is NFC (memories.bounds): a prefix typed decomposed is the same text.
    prefix = unicodedata.normalize("NFC", prefix)
    return list(
        Memory.objects.filter(owner_id=owner_id, valid_to__isnull=True)
        .filter(**{f"{facet}__istartswith": prefix, f"{facet}__isnull": False})
        .order_by(facet)
        .values_list(facet, flat=True)
        .distinct()[: COMPLETION_MAX + 1]
    )
