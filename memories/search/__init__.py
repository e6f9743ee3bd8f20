"""Search over one tenant's memories: words and meaning fused into one score, a relevance floor
so that a question about something never stored finds nothing, and keyset paging with a signed
cursor.

This module runs one page (search_memories); the package, by concern:
- query.py: the query's terms, phrases and exclusions.
- filters.py: the filters, cleaned, and as SQL clauses.
- candidates.py: which memories are scored (words, meaning, the topic fallback's), within
  bounded work, and the plans their statements run under; meaning.py: those found by meaning.
- listing.py: the memories a search without a query lists, newest first (nothing ranked).
- scoring.py: the words score (BM25F), its fusion with meaning, the relevance floor.
- cursor.py: the signed cursor.
- sql.py: the statements, and how one is sent with its plan settings.

Ranking, past what those modules' docstrings say:
- Topic fallback: when a query of at most TOPIC_FALLBACK_WORDS_MAX words abstains, topics
  trigram-similar to the query without its exclusions (pg_trgm similarity >=
  TOPIC_SIMILARITY_MIN) among the TOPIC_FALLBACK_RECENT most recent memories that hold its
  phrases and none of its exclusions: this catches typos and near-miss topic names. A
  query of more words is a question, not a topic name: when neither its words nor its meaning
  matched, a topic that shares letters with it is noise, not an answer (and comparing every
  recent topic with a long query costs more than the rest of the search).
- Order: score desc, then recorded_at desc (recency breaks ties), then id. Only current
  memories are searched unless asOf names another instant, so a superseded memory and its
  successor are never both hits.
- Why nothing came back: an empty first page of a query says why (EmptyBecause), so that an
  agent can tell "nothing stored" from "ask otherwise", from what the search found anyway (it
  runs no other statement for it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import connections
from django.utils import timezone

from memories import account_indexes, bounds, replica
from memories.environment import require_known_facet
from memories.errors import InvalidInput
from memories.excerpts import EXCERPT_MAX, MemoryExcerpt, excerpt_showing
from memories.models import Memory, MemoryType, Status, Thread
from memories.search.candidates import (
    COUNTED_SOURCES,
    LEXICAL_CANDIDATES,
    ranked_candidates,
    source_size_sql,
    topic_matches,
)
from memories.search.cursor import CURSOR_MAX, Position
from memories.search.filters import (
    COMMITMENT_STATUS_FILTERS,
    STATUS_FILTERS,
    SearchFilters,
    Where,
    clean_filters,
    filter_clauses,
)
from memories.search.listing import listed_candidates
from memories.search.matches import HEADLINE_OPTIONS, first_match, shows_a_word, windowed
from memories.search.meaning import SEMANTIC_CANDIDATES
from memories.search.query import KIND_WORDS, Query, parse
from memories.search.scoring import TENANT_SIZE_COUNTED_MAX, Candidate, WordStatistics
from memories.search.sql import MATCHES_SQL, PAGE_SQL, TENANT_SIZE_SQL, WALK, fetch_rows

__all__ = [
    "COMMITMENT_STATUS_FILTERS",
    "CURSOR_MAX",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "NOTHING_LISTED",
    "NOTHING_RECORDED_BY",
    "NOTHING_STORED",
    "NOTHING_TO_SEARCH_BY",
    "NO_MATCH",
    "OMIT_QUERY",
    "QUERY_MAX",
    "STATUS_FILTERS",
    "TOPIC_FALLBACK_WORDS_MAX",
    "TOPIC_SIMILARITY_MIN",
    "UNDER_FLOOR",
    "EmptyBecause",
    "KindAsked",
    "SearchFilters",
    "SearchHit",
    "SearchPage",
    "clean_filters",
    "search_memories",
]

DEFAULT_LIMIT = 5
MAX_LIMIT = 25
QUERY_MAX = 500
# The topic fallback compares the query with the topics of this many most recent memories (all
# of them for most tenants; a filter narrows those), so its cost does not grow with the tenant
# or the table.
TOPIC_FALLBACK_RECENT = 3_000
# A topic's name is a few words; a query of more is a question (see the module docstring).
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


# Why a first page of a query has no hits (EmptyBecause.reason), in the order they are checked.
NOTHING_STORED = "nothing_stored"
NOTHING_RECORDED_BY = "nothing_recorded_by"
NOTHING_TO_SEARCH_BY = "nothing_to_search_by"
UNDER_FLOOR = "under_floor"
NO_MATCH = "no_match"
NOTHING_LISTED = "nothing_listed"


_OTHER_STATUS = {
    Status.ACTIVE.value: Status.ARCHIVED.value,
    Status.ARCHIVED.value: Status.ACTIVE.value,
}


# What a query sent empty or as a wildcard ('*') meant, and how it is asked for.
OMIT_QUERY = "omit query to list the memories the filters select, newest first"


@dataclass(frozen=True)
class KindAsked:
    """The words of a query naming a kind of memory or a commitment's state (`words`, as
    written), and the filters that select it: `memory_types` (other than commitment when
    `commitment_states` are named, which select commitments) and `commitment_states`."""

    words: tuple[str, ...]
    memory_types: tuple[str, ...] = ()
    commitment_states: tuple[str, ...] = ()
    # The query holds other words too (_kind_named): the filter goes beside them.
    among_other_words: bool = False


# Types whose plural beside other words asks for memories of the type as a rule ("open blockers
# in atlas", "decisions about the API"); not "notes", "facts", "events" or "patterns", which
# name other things as often ("release notes", "design patterns").
_TYPES_ASKED_BY_NAME = {
    MemoryType.BLOCKER,
    MemoryType.COMMITMENT,
    MemoryType.DECISION,
    MemoryType.PREFERENCE,
}
# States that beside other words ask for commitments in them ("what is overdue in infra"): words
# a memory's text seldom holds of itself; not "open", "waiting" or "resolved", which as a rule are
# words of the text ("waiting for store review").
_STATES_ASKED_BY_NAME = {"overdue", "pending", "unresolved"}
_KINDS_NAMED_AMONG_WORDS = {
    word: named
    for word, named in KIND_WORDS.items()
    if (word.endswith("s") and set(named[0]) & _TYPES_ASKED_BY_NAME)
    or word in _STATES_ASKED_BY_NAME
}


def _kind_named(parsed: Query, filters: SearchFilters, hits: list[SearchHit]) -> KindAsked | None:
    """The types a query names in the plural beside other words ("open blockers in atlas"), or
    the commitment states it names by a word a text seldom holds ("what is overdue in infra"),
    when no type or state filter is given and the page is empty or its first hit is not of that
    type or state: search matched those words in the text, whatever a memory's type or state,
    and a filter selects it."""
    if filters.memory_types or filters.commitment_states:
        return None
    words = [parsed.as_written(t) for t in parsed.terms if t not in parsed.parts]
    named = [w for w in words if w.lower() in _KINDS_NAMED_AMONG_WORDS]
    kinds = [_KINDS_NAMED_AMONG_WORDS[w.lower()] for w in named]
    types, states = _filterable(
        tuple(dict.fromkeys(t for kind_types, _ in kinds for t in kind_types)),
        tuple(dict.fromkeys(s for _, kind_states in kinds for s in kind_states)),
    )
    if not states:
        # "overdue blockers": the state word names nothing a filter selects.
        named = [w for w, (kind_types, _) in zip(named, kinds, strict=True) if kind_types]
    if not types and not states:
        return None
    if hits and (
        hits[0].memory_type in types
        or (
            hits[0].memory_type == MemoryType.COMMITMENT.value
            and hits[0].commitment_status in states
        )
    ):
        return None
    return KindAsked(_in_query_order(parsed, named), types, states, among_other_words=True)


def _kind_asked(parsed: Query) -> KindAsked | None:
    """What a query made only of words naming a kind of memory or a commitment's state asks
    for ("overdue commitments", "what is pending"), or None: a query with any other significant
    word ("when does the office open") is about that word."""
    words: list[str] = []
    types: list[str] = []
    states: list[str] = []
    for term in parsed.terms:
        if term in parsed.parts:
            continue
        word = parsed.as_written(term)
        named = KIND_WORDS.get(word.lower())
        if named is None:
            return None
        if word in words:
            continue
        words.append(word)
        types += [t for t in named[0] if t not in types]
        states += [s for s in named[1] if s not in states]
    if not words:
        return None
    return KindAsked(_in_query_order(parsed, words), *_filterable(tuple(types), tuple(states)))


def _filterable(types: tuple[str, ...], states: tuple[str, ...]) -> tuple[tuple, tuple]:
    """The types and commitment states named, as filters select them: a state beside a type
    that has none ("open blockers") qualifies nothing a filter selects (a commitment state
    filter keeps commitments only), and commitments are selected by their states alone."""
    if any(t != MemoryType.COMMITMENT.value for t in types):
        return types, ()
    return ((), states) if states else (types, ())


def _in_query_order(parsed: Query, words: list[str]) -> tuple[str, ...]:
    """`words`, each once, in the order the query has them."""
    asked = parsed.wanted.lower()
    return tuple(sorted(dict.fromkeys(words), key=lambda word: asked.find(word.lower())))


@dataclass(frozen=True)
class EmptyBecause:
    """The likeliest reason a first page of a query has no hits, checked in this order:
    - NOTHING_STORED: the account holds no memory at all, of any status (of a listing too).
    - NOTHING_RECORDED_BY: none had been recorded by `as_of` (of a listing too).
    - NOTHING_TO_SEARCH_BY: the query holds only stop words or punctuation, or only exclusions
      (`exclusions_only`): nothing was looked for.
    - UNDER_FLOOR: `count` memories matched it by words or meaning, none closely enough (the
      relevance floor, scoring.py).
    - NO_MATCH: none of the memories searched shares a word with it or is close in meaning,
      under the `filters` given (SearchFilters.given).
    Of a listing (no query) whose first page is empty and the last: NOTHING_LISTED, no memory
    passes the `filters` given.
    `unsearched`: the status the status filter left out ('archived' by default), whose memories
    were not looked at: whether one of them would match is not known, and finding out would
    cost a second search on every empty page. `kind`: of a query made only of words naming a
    type or a commitment's state (_kind_asked), or naming one among other words without a type
    or state filter (_kind_named), those words (UNDER_FLOOR and NO_MATCH): a memory's type and
    state are not among the words search matches. `phrased`, `excluding` (NO_MATCH): the query
    holds a quoted phrase (every memory searched held it), an exclusion (none held it): memories
    that share its words otherwise were not looked at.
    Counts, names of filters and the query's own words only: never a memory's content."""

    reason: str
    count: int = 0
    exclusions_only: bool = False
    filters: tuple[str, ...] = ()
    unsearched: str | None = None
    kind: KindAsked | None = None
    phrased: bool = False
    excluding: bool = False
    as_of: datetime | None = None

    @property
    def searched(self) -> str | None:
        """The one status searched, when the filter left the other out."""
        return _OTHER_STATUS.get(self.unsearched) if self.unsearched else None


@dataclass
class SearchPage:
    hits: list[SearchHit] = field(default_factory=list)
    next_cursor: str | None = None
    empty_because: EmptyBecause | None = None  # a first page without hits (see EmptyBecause)
    # A listing page that holds fewer hits than asked for because it read all the memories a
    # page may read (listing.LISTED_WINDOW) and more follow: how many it read.
    window_read: int | None = None
    # A first page with hits of a query made only of type or state words (see _kind_asked), or
    # naming a type or a commitment's state among other words whose first hit is of another type
    # or state (_kind_named): its hits hold those words in their text, which is seldom what was
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
    """One page of the tenant's memories matching `query`, best first (see module docstring);
    without a query (None), of the memories the filters select, newest first."""
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
            empty_because = _why_empty(
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
        page.kind_asked = _kind_asked(parsed) or _kind_named(parsed, filters, page.hits)
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
    db, parsed: Query, where: Where, params: dict, position: Position | None
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


def _why_empty(
    db,
    *,
    owner_id: int,
    filters: SearchFilters,
    where: Where,
    position: Position | None,
    parsed: Query | None,
    under_floor: int,
    tenant_size: int,
    window_ended: bool,
) -> EmptyBecause | None:
    """Of a page without hits: NotFound when the thread it reads is gone, or (a first page, not
    as of an instant) when the scope or project it names holds none of the owner's memories;
    otherwise why a first page is empty (EmptyBecause), None for a later page or a listing whose
    window ended before any memory passed the filters (a cursor goes on past it). `parsed` is
    the query (None: a listing), `under_floor` how many candidates its ranking dropped under the
    floor, `tenant_size` how many current memories the account holds (counted up to a bound)."""
    if where.thread_id is not None:
        # Nothing in the thread: in this read's snapshot, because the thread is gone (deleted
        # since its name was looked up) or because none of its members matched.
        Thread.objects.require_still_there(owner_id, where.thread_id, filters.thread)
    if position is not None:
        return None
    if filters.as_of is None:
        # No hits: a scope or project the owner has no memory in is named as the reason,
        # rather than left for the agent to rephrase its query against.
        for facet, value in (("scope", filters.scope), ("project", filters.project)):
            if value is not None:
                require_known_facet(db, owner_id=owner_id, facet=facet, value=value)
    # Nothing could have matched: advice to ask otherwise, widen the status or go back in time
    # would lead to more empty pages.
    if tenant_size == 0:
        return EmptyBecause(NOTHING_STORED)
    if filters.as_of is not None:
        db.execute(_RECORDED_BY_SQL, {"owner": owner_id, "as_of": filters.as_of})
        if not db.fetchone()[0]:
            return EmptyBecause(NOTHING_RECORDED_BY, as_of=filters.as_of)
    if parsed is not None:
        return _empty_because(parsed, filters, under_floor)
    if window_ended:
        return None
    return EmptyBecause(NOTHING_LISTED, filters=filters.given(), unsearched=_unsearched(filters))


# Whether the account had recorded any memory by an instant: one probe of its newest-first index.
_RECORDED_BY_SQL = """
SELECT EXISTS (SELECT 1 FROM memories_memory m
               WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(as_of)s)
"""


def _empty_because(parsed: Query, filters: SearchFilters, under_floor: int) -> EmptyBecause:
    """Why the first page of `parsed` under `filters` has no hits (see EmptyBecause), given how
    many candidates its ranking dropped under the floor."""
    if not parsed.terms:
        # Without terms nothing was looked up; what the query requires is then its exclusions
        # (a phrase of other than stop words would have given terms).
        return EmptyBecause(NOTHING_TO_SEARCH_BY, exclusions_only=bool(parsed.required))
    unsearched = _unsearched(filters)
    kind = _kind_asked(parsed) or _kind_named(parsed, filters, [])
    if under_floor:
        return EmptyBecause(UNDER_FLOOR, count=under_floor, unsearched=unsearched, kind=kind)
    return EmptyBecause(
        NO_MATCH,
        filters=filters.given(),
        unsearched=unsearched,
        kind=kind,
        phrased=parsed.phrased,
        excluding=parsed.excluding,
    )


def _unsearched(filters: SearchFilters) -> str | None:
    """The status whose memories the status filter (or its default) leaves out, if one."""
    return _OTHER_STATUS.get(filters.status or filters.default_status)


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
    db, hits: list[SearchHit], shown: list[Candidate], parsed: Query, params: dict
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


def _count_tenant(db, params: dict, where: Where) -> None:
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
