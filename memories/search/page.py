"""One page of a search (search_memories): the filters and the cursor checked, the tenant
counted, the candidates ranked (candidates.py) or listed (listing.py), the page's hits read with
their excerpts, and on an empty first page why it is empty (empty.py). See the package's
docstring for how a search ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import connections
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from memories import account_indexes, bounds, replica
from memories.errors import InvalidInput
from memories.excerpts import EXCERPT_MAX, MemoryExcerpt, excerpt_showing
from memories.models import Memory
from memories.search.candidates import (
    COUNTED_SOURCES,
    LEXICAL_CANDIDATES,
    ranked_candidates,
    source_size_sql,
    topic_matches,
)
from memories.search.cursor import CURSOR_MAX, Position
from memories.search.empty import EmptyBecause, KindAsked, kind_asked, kind_named, why_empty
from memories.search.filters import SearchFilters, Where, filter_clauses
from memories.search.listing import listed_candidates
from memories.search.matches import HEADLINE_OPTIONS, first_match, shows_a_word, windowed
from memories.search.meaning import SEMANTIC_CANDIDATES
from memories.search.query import Query, parse
from memories.search.scoring import TENANT_SIZE_COUNTED_MAX, Candidate, WordStatistics
from memories.search.sql import MATCHES_SQL, PAGE_SQL, TENANT_SIZE_SQL, WALK, fetch_rows

DEFAULT_LIMIT = 5
MAX_LIMIT = 25
QUERY_MAX = 500
# The topic fallback compares the query with the topics of this many most recent memories (all
# of them for most tenants; a filter narrows those), so its cost does not grow with the tenant
# or the table.
TOPIC_FALLBACK_RECENT = 3_000
# A topic's name is a few words; a query of more is a question (see the package's docstring).
TOPIC_FALLBACK_WORDS_MAX = 6
TOPIC_SIMILARITY_MIN = 0.3


@dataclass(frozen=True)
class SearchHit(MemoryExcerpt):
    score: float | None  # None: listed without a query, nothing to rank by
    matched_by: tuple[str, ...] = ()
    lacking: tuple[str, ...] = ()  # the query's most distinctive words it does not hold
    resolved_at: datetime | None = None  # a resolved commitment's
    # Where the excerpt's text starts in the content: 0, or the start of a window shown instead
    # of the leading excerpt, which did not show the query's words (_with_windows).
    excerpt_start: int = 0


# What a query sent empty or as a wildcard ('*') meant, and how it is asked for.
OMIT_QUERY = "omit query to list the memories the filters select, newest first"


@dataclass
class SearchPage:
    hits: list[SearchHit] = field(default_factory=list)
    next_cursor: str | None = None
    empty_because: EmptyBecause | None = None  # a first page without hits (see EmptyBecause)
    # A listing page that holds fewer hits than asked for because it read all the memories a
    # page may read (listing.LISTED_WINDOW) and more follow: how many it read.
    window_read: int | None = None
    # A first page with hits of a query made only of type or state words (see kind_asked), or
    # naming a type or a commitment's state among other words whose first hit is of another type
    # or state (kind_named): its hits hold those words in their text, which is seldom what was
    # asked for.
    kind_asked: KindAsked | None = None


def search_memories(
    *,
    owner_id: int,
    query: object,
    filters: SearchFilters,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> SearchPage:
    """One page of the tenant's memories matching `query`, best first (see the package's
    docstring); without a query (None), of the memories the filters select, newest first."""
    text = _query_text(query)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}; got {limit}")
    params: dict = {}
    alias = replica.read_alias()
    filters = _in_account_spelling(owner_id, filters, alias)
    # The filters first: a cursor is bound to the thread its name named then (its id), and a
    # thread that is gone is not_found whatever the cursor.
    where = filter_clauses(filters, owner_id, params)
    fingerprint = filters.fingerprint(owner_id, text, thread_id=where.thread_id)
    position = _position(cursor, fingerprint)
    params |= _search_params(owner_id, position)
    with replica.one_snapshot(), connections[alias].cursor() as db:
        _count_tenant(db, params, where)
        resume_after = None  # a listing's last memory read, when its window ended the page
        parsed: Query | None = None
        under_floor = 0
        if text is None:
            mode, statistics = "listed", None
            ranked, resume_after = listed_candidates(db, where, params, position, most=limit + 1)
        else:
            parsed = parse(db, text)
            mode, ranked, statistics, under_floor = _page_candidates(
                db, parsed, where, params, position
            )
        ranked.sort(key=lambda c: (c.score, c.recorded_at, c.id), reverse=True)
        if position is not None:
            ranked = [c for c in ranked if position.follows(c)]
        shown = ranked[:limit]
        hits, empty_because = [], None
        if shown:
            db.execute(PAGE_SQL, params | {"ids": [c.id for c in shown]})
            rows = {row[0]: row for row in db.fetchall()}
            hits = _hits(shown, rows, ranked=mode != "listed")
            if parsed is not None:
                hits = _with_windows(db, hits, shown, parsed, params)
        else:
            empty_because = why_empty(
                db,
                owner_id=owner_id,
                filters=filters,
                where=where,
                position=position,
                parsed=parsed,
                under_floor=under_floor,
                tenant_size=params["tenant_size"],
                window_ended=resume_after is not None,
            )
    page = SearchPage(hits=hits, empty_because=empty_because)
    if resume_after is not None and len(shown) < limit:
        page.window_read = params["listed_window"]
    if page.hits and position is None and parsed is not None:
        page.kind_asked = kind_asked(parsed) or kind_named(parsed, filters, page.hits)
    last = ranked[limit - 1] if len(ranked) > limit else resume_after
    if last is not None:
        page.next_cursor = Position(
            mode=mode,
            score=last.score,
            recorded_at=last.recorded_at,
            id=last.id,
            snapshot=params["snapshot"],
            statistics=statistics if mode == "ranked" else None,
        ).encode(fingerprint)
    return page


def _query_text(query: object) -> str | None:
    """The query's text, checked (None: no query, a listing)."""
    if isinstance(query, str) and not query.strip():
        # Sent for "no query": the listing it meant is asked for by leaving the query out.
        raise InvalidInput("query", f"must be at least 1 character(s) after trimming; {OMIT_QUERY}")
    return None if query is None else bounds.clean_text("query", query, maximum=QUERY_MAX)


def _in_account_spelling(owner_id: int, filters: SearchFilters, alias: str) -> SearchFilters:
    """The filters, a project's in the account's spelling (read on `alias`)."""
    if filters.project is not None and filters.as_of is None:
        # 'Atlas' asks for the account's 'atlas', as a write of 'Atlas' joins it (and a cursor
        # is bound to that spelling, however a page spells it). Not as of an instant: the
        # spelling of today's memories may not be the one of that instant's.
        spelling = Memory.objects.in_account_spelling(owner_id, filters.project, using=alias)
        filters = replace(filters, project=spelling)
    return filters


def _position(cursor: str | None, fingerprint: str) -> Position | None:
    """Where the previous page ended (None for a first page), from a cursor bound to this
    account, query and filters."""
    if cursor is None:
        return None
    if len(cursor) > CURSOR_MAX:
        raise InvalidInput("cursor", f"must be at most {CURSOR_MAX} characters")
    return Position.decode(cursor, fingerprint)


def _search_params(owner_id: int, position: Position | None) -> dict:
    """The named parameters any statement of the search may name. The steps that follow add
    theirs to this dict (the filters' values, the tenant's size and indexes, the query's terms,
    each statement's bounds) and read back what earlier steps put there: one search's statements
    share one set of parameter names, and each is sent the whole dict."""
    return {
        "owner": owner_id,
        "excerpt_fetch": EXCERPT_MAX + 1,
        "lexical_max": LEXICAL_CANDIDATES,
        "semantic_max": SEMANTIC_CANDIDATES,
        "tenant_size_max": TENANT_SIZE_COUNTED_MAX,
        "recent": TOPIC_FALLBACK_RECENT,
        "topic_min": TOPIC_SIMILARITY_MIN,
        # Later pages rank what the first one saw: a memory written since does not appear, and
        # the first page's word statistics score the rest (see Position).
        "snapshot": position.snapshot if position else timezone.now(),
        "first_page": position is None,
    }


def _page_candidates(
    db: CursorWrapper, parsed: Query, where: Where, params: dict, position: Position | None
) -> tuple[str, list[Candidate], WordStatistics | None, int]:
    """The candidate mode ("ranked": by words and meaning; "topic": the topic fallback), the
    page's candidates, scored, the word statistics of a ranked search, and how many candidates
    matched under the relevance floor when a first page abstained. A later page keeps its first
    page's mode."""
    mode = position.mode if position else "ranked"
    ranked: list[Candidate] = []
    statistics = None
    under_floor = 0
    earlier = position.statistics if position else None
    if earlier is not None and len(earlier.held_by) != len(parsed.terms):
        # Issued by a server that read the query's terms otherwise: its word statistics count
        # other terms than these.
        raise InvalidInput(
            "cursor",
            "was issued by an earlier version of this server; omit it to start a new search",
        )
    if mode == "ranked":
        ranked, statistics, under_floor = ranked_candidates(
            db, parsed, where, params, position.statistics if position else None
        )
    # Not for a query of stop words only, which asks for nothing (a topic sharing its letters is
    # no answer).
    if (
        not ranked
        and position is None
        and parsed.terms
        and len(parsed.wanted.split()) <= TOPIC_FALLBACK_WORDS_MAX
    ):
        mode = "topic"
    if mode == "topic":
        ranked = topic_matches(db, parsed, where, params)
    return mode, ranked, statistics, under_floor


def _hits(shown: list[Candidate], rows: dict, *, ranked: bool) -> list[SearchHit]:
    """The page's hits: each candidate shown with its row of EXCERPT_COLUMNS and resolution
    time (sql.PAGE_SQL), and its score when it was `ranked`."""
    now = timezone.now()
    return [
        SearchHit(
            **MemoryExcerpt.row_fields(rows[c.id][:-1], excerpt_max=EXCERPT_MAX, now=now),
            score=c.score if ranked else None,
            matched_by=c.matched_by,
            lacking=c.lacking,
            resolved_at=rows[c.id][-1],
        )
        for c in shown
    ]


def _with_windows(
    db: CursorWrapper, hits: list[SearchHit], shown: list[Candidate], parsed: Query, params: dict
) -> list[SearchHit]:
    """The hits, each cut one whose leading excerpt shows none of the query's words (as written,
    or else in any form search matches) while its content holds one, with a window around the
    first instead (excerpts.excerpt_showing). A statement reads the content of those whose
    excerpt does not show a word as written (matches.shows_a_word), and only if there are any:
    the common hit's excerpt shows the word asked for."""
    asked = [
        hit.id
        for hit, candidate in zip(hits, shown, strict=True)
        if windowed(candidate, EXCERPT_MAX) and not shows_a_word(hit.excerpt, parsed)
    ]
    if not asked:
        return hits
    db.execute(
        MATCHES_SQL,
        params
        | {
            "windowed": asked,
            "matched_terms": parsed.any_term(),
            "headline": HEADLINE_OPTIONS,
            "content_max": bounds.CONTENT_MAX,
        },
    )
    windows = {}
    for memory_id, content, highlighted in db.fetchall():
        if match := first_match(content, highlighted, parsed):
            windows[memory_id] = excerpt_showing(content, match, EXCERPT_MAX)
    return [
        replace(hit, excerpt=cut.text, truncated=cut.truncated, excerpt_start=cut.start)
        if (cut := windows.get(hit.id))
        else hit
        for hit in hits
    ]


def _count_tenant(db: CursorWrapper, params: dict, where: Where) -> None:
    params["nearest_index"] = account_indexes.NEAREST.index_name(params["owner"])
    params["words_index"] = account_indexes.WORDS.index_name(params["owner"])
    sized = TENANT_SIZE_SQL.format(source_size=source_size_sql(where, params))
    [
        (
            params["snapshot"],
            params["tenant_size"],
            params["nearest_indexed"],
            params["words_indexed"],
            params["nearest_index_rows"],
            params["vectors_by"],
            params["source_size"],
        )
    ] = fetch_rows(db, sized, params, WALK if where.walks in COUNTED_SOURCES else ())
