"""Search over one tenant's memories: PostgreSQL full-text search blended with trigram
similarity on the topic, recency as the tiebreak, keyset paging with a signed cursor.

Ranking (one statement, see `_SQL`):
- Candidates are the memories matching the full-text query (`websearch_to_tsquery` on the
  unaccented configuration of migration 0003: every word must match; "quoted phrases", `or` and
  `-exclusions` work as in a web search engine). Only when no memory matches the words does the
  search fall back to topics that are trigram-similar to the query (pg_trgm similarity >= 0.3),
  among the TOPIC_FALLBACK_RECENT most recent memories; this catches typos and near-miss topic
  names. A trigram *index* scan was measured and rejected: for a short query it reads posting
  lists shared by every tenant, so its cost grows with the whole table, not the tenant.
- score = 0.5 for a full-text match + 0.5 * ts_rank_cd normalised to 0..1 (rank / (rank + 1))
  + 0.5 * similarity(topic, query). Rounded to 6 places so paging compares exact values.
- Score floor (SCORE_FLOOR = 0.15): a full-text match always clears it; a topic-only match needs
  similarity >= 0.3. A query that matches nothing this way returns no hits rather than the
  "closest" noise.
- Order: score desc, then recorded_at desc (recency breaks ties), then id.
- Bounded work: when more than CANDIDATES_MAX memories match, only the most recent
  CANDIDATES_MAX (500) of them are ranked.
- Paging: the cursor is signed (django.core.signing, SECRET_KEY) and carries the position, the
  candidate mode and a fingerprint of the query and filters; it is refused for any other query.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.core import signing
from django.db import connections, transaction
from django.utils import timezone

from memories import bounds, replica
from memories.errors import InvalidInput, NotFound
from memories.excerpts import SEARCH_EXCERPT_MAX, excerpt
from memories.fields import readable_instant_sql
from memories.models import MemoryResource, MemoryType, Status, Thread, is_overdue

DEFAULT_LIMIT = 5
MAX_LIMIT = 25
QUERY_MAX = 500
SCORE_FLOOR = 0.15
CURSOR_MAX = 512
# When more memories match than this, the most recent ones are ranked: a term that common says
# little, and the cost of a search stays bounded however large the tenant grows.
CANDIDATES_MAX = 500
# The topic fallback compares the query with the topics of this many most recent memories (all
# of them for most tenants), so its cost does not grow with the tenant or the table.
TOPIC_FALLBACK_RECENT = 3_000
TOPIC_SIMILARITY_MIN = 0.3
_CURSOR_SALT = "threengram.memories.search-cursor"
STATUS_FILTERS = ("active", "archived", "any")


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

    def fingerprint(self, query: str) -> str:
        """What a cursor is bound to: the query and every filter, canonically."""
        canonical = json.dumps(
            {
                "q": query,
                "t": sorted(self.memory_types),
                "s": self.scope,
                "p": self.project,
                "th": self.thread.casefold() if self.thread else None,
                "st": self.status,
                "ra": self.recorded_after.isoformat() if self.recorded_after else None,
                "rb": self.recorded_before.isoformat() if self.recorded_before else None,
                "ao": self.as_of.isoformat() if self.as_of else None,
            },
            sort_keys=True,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SearchHit(MemoryResource):
    id: uuid.UUID
    memory_type: str
    topic: str
    excerpt: str
    truncated: bool
    content_length: int
    scope: str
    project: str | None
    status: str
    commitment_status: str | None
    recorded_at: datetime
    valid_to: datetime | None
    score: float
    due_at: datetime | None
    overdue: bool


@dataclass
class SearchPage:
    hits: list[SearchHit] = field(default_factory=list)
    next_cursor: str | None = None


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
    after = bounds.clean_datetime("recordedAfter", recorded_after) if recorded_after else None
    before = bounds.clean_datetime("recordedBefore", recorded_before) if recorded_before else None
    if after and before and after > before:
        raise InvalidInput("recordedAfter", "must not be later than recordedBefore")
    return SearchFilters(
        memory_types=types,
        scope=bounds.clean_scope(scope) if scope is not None else None,
        project=bounds.clean_project(project),
        thread=bounds.clean_thread_name(thread, "thread") if thread is not None else None,
        status=status,  # type: ignore[arg-type]
        recorded_after=after,
        recorded_before=before,
        as_of=bounds.clean_datetime("asOf", as_of) if as_of is not None else None,
    )


# Written inline rather than in a CTE: the planner folds it to a constant and can then estimate
# how many rows a term matches (and pick a plan for common terms that stops early).
_TSQUERY = "websearch_to_tsquery('threengram_unaccented', %(query)s)"
# How a memory qualifies as a candidate. "topic" is the fallback when no memory matches the words
# (a typo, a near-miss on a topic name).
_MATCH = {
    "words": "m.search_vector @@ {tsq}",
    "topic": """m.id IN (
            SELECT recent.id FROM (
                SELECT m.id, m.topic FROM memories_memory m
                WHERE m.owner_id = %(owner)s {filters}
                ORDER BY m.recorded_at DESC
                LIMIT %(recent)s
            ) recent
            WHERE similarity(recent.topic, %(query)s) >= %(topic_min)s
          )""",
}
# Read clamped: a due date stored before inputs were bounded must not fail the search.
_DUE_AT = readable_instant_sql("m.due_at")
_SQL = """
SELECT id, memory_type, topic, excerpt, content_length, scope, project, status,
       commitment_status, recorded_at, valid_to, score, due_at
FROM (
    SELECT m.id, m.memory_type, m.topic, left(m.content, %(excerpt_fetch)s) AS excerpt,
           m.content_length, m.scope, m.project, m.status, m.commitment_status,
           m.recorded_at, m.valid_to, {due_at} AS due_at,
           round((
               CASE WHEN m.search_vector @@ {tsq}
                    THEN 0.5 + 0.5 * ts_rank_cd(m.search_vector, {tsq}, 32) ELSE 0 END
               + 0.5 * similarity(m.topic, %(query)s)
           )::numeric, 6) AS score
    FROM (
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s
          AND {match}
          {filters}
        ORDER BY m.recorded_at DESC
        LIMIT %(candidates)s
    ) m
) ranked
WHERE score >= %(floor)s {keyset}
ORDER BY score DESC, recorded_at DESC, id DESC
LIMIT %(fetch)s
"""


def _where(filters: SearchFilters, owner_id: int, params: dict) -> str:
    clauses: list[str] = []
    if filters.as_of is not None:
        clauses.append(
            "m.recorded_at <= %(as_of)s AND (m.valid_to IS NULL OR m.valid_to > %(as_of)s)"
        )
        params["as_of"] = filters.as_of
    else:
        clauses.append("m.valid_to IS NULL")
    status = filters.status or ("any" if filters.as_of else Status.ACTIVE)
    if status != "any":
        clauses.append("m.status = %(status)s")
        params["status"] = status
    if filters.memory_types:
        clauses.append("m.memory_type = ANY(%(types)s)")
        params["types"] = list(filters.memory_types)
    if filters.scope is not None:
        clauses.append("m.scope = %(scope)s")
        params["scope"] = filters.scope
    if filters.project is not None:
        clauses.append("m.project = %(project)s")
        params["project"] = filters.project
    if filters.recorded_after is not None:
        clauses.append("m.recorded_at >= %(after)s")
        params["after"] = filters.recorded_after
    if filters.recorded_before is not None:
        clauses.append("m.recorded_at <= %(before)s")
        params["before"] = filters.recorded_before
    if filters.thread is not None:
        thread_id = (
            Thread.objects.filter(owner_id=owner_id, name__iexact=filters.thread)
            .values_list("id", flat=True)
            .first()
        )
        if thread_id is None:
            raise NotFound(f"thread '{filters.thread}'")
        clauses.append(
            "EXISTS (SELECT 1 FROM memories_threadmembership ms"
            " WHERE ms.owner_id = m.owner_id AND ms.memory_id = m.id"
            " AND ms.thread_id = %(thread)s AND ms.state = 'member')"
        )
        params["thread"] = thread_id
    return "".join(f"\n      AND {clause}" for clause in clauses)


def _decode_cursor(cursor: str, fingerprint: str) -> tuple[str, str, datetime, uuid.UUID]:
    try:
        payload = signing.loads(cursor, salt=_CURSOR_SALT)
        if payload["m"] not in _MATCH:
            raise ValueError(payload["m"])
        position = (
            payload["m"],
            payload["s"],
            datetime.fromisoformat(payload["r"]),
            uuid.UUID(payload["i"]),
        )
        bound_to = payload["f"]
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise InvalidInput(
            "cursor", "is not a cursor this server issued; omit it to start a new search"
        ) from None
    if bound_to != fingerprint:
        raise InvalidInput(
            "cursor",
            "was issued for a different query or filters; omit it to start a new search",
        )
    return position


def search(
    *,
    owner_id: int,
    query: object,
    filters: SearchFilters,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> SearchPage:
    """One page of the tenant's memories matching `query`, best first (see module docstring)."""
    text = bounds.clean_text("query", query, maximum=QUERY_MAX)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}; got {limit}")
    fingerprint = filters.fingerprint(text)
    params: dict = {
        "query": text,
        "owner": owner_id,
        "floor": SCORE_FLOOR,
        "fetch": limit + 1,
        "excerpt_fetch": SEARCH_EXCERPT_MAX + 1,
        "candidates": CANDIDATES_MAX,
        "recent": TOPIC_FALLBACK_RECENT,
        "topic_min": TOPIC_SIMILARITY_MIN,
    }
    keyset, mode = "", "words"
    if cursor is not None:
        if len(cursor) > CURSOR_MAX:
            raise InvalidInput("cursor", f"must be at most {CURSOR_MAX} characters")
        mode, params["k_score"], params["k_recorded"], params["k_id"] = _decode_cursor(
            cursor, fingerprint
        )
        keyset = "AND (score, recorded_at, id) < (%(k_score)s::numeric, %(k_recorded)s, %(k_id)s)"
    where = _where(filters, owner_id, params)

    def ranked(mode: str) -> list[tuple]:
        match = _MATCH[mode].format(tsq=_TSQUERY, filters=where)
        sql = _SQL.format(filters=where, keyset=keyset, tsq=_TSQUERY, match=match, due_at=_DUE_AT)
        alias = replica.read_alias()
        with transaction.atomic(using=alias), connections[alias].cursor() as db:
            # Enough memory for the bitmap of a common term's matches to stay exact (not lossy),
            # so PostgreSQL need not recheck every row of the pages it touches.
            db.execute("SET LOCAL work_mem = '32MB'")
            db.execute(sql, params)
            return db.fetchall()

    rows = ranked(mode)
    if not rows and cursor is None and mode == "words":
        mode = "topic"
        rows = ranked(mode)
    page = SearchPage()
    now = timezone.now()
    for row in rows[:limit]:
        cut = excerpt(row[3])  # at most 601 code points fetched: enough to know it was cut
        page.hits.append(
            SearchHit(
                id=row[0],
                memory_type=row[1],
                topic=row[2],
                excerpt=cut.text,
                truncated=cut.truncated,
                content_length=row[4],
                scope=row[5],
                project=row[6],
                status=row[7],
                commitment_status=row[8],
                recorded_at=row[9],
                valid_to=row[10],
                score=float(row[11]),
                due_at=row[12],
                overdue=is_overdue(due_at=row[12], commitment_status=row[8], now=now),
            )
        )
    if len(rows) > limit:
        last = rows[limit - 1]
        page.next_cursor = signing.dumps(
            {
                "f": fingerprint,
                "m": mode,
                "s": str(last[11]),
                "r": last[9].isoformat(),
                "i": str(last[0]),
            },
            salt=_CURSOR_SALT,
        )
    return page
