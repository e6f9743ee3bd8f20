"""The candidates a search scores, found with bounded work however large the tenant:
- Words. A memory matching *any* of the query's terms is a candidate (the LEXICAL_CANDIDATES
  most recent such memories, which bounds the work, and a few of the most recent matches of each
  term rare among those, older ones too: RARE_TERM_HELD_MAX).
- Meaning (meaning.py). The embedding of the query without its exclusions
  (memories/embedding.py) against each memory's: up to the SEMANTIC_CANDIDATES nearest current
  memories join the candidates (a large account's own HNSW index keeps this bounded,
  memories/account_indexes.py; none through that index for a query with a phrase, whose
  memories are word matches), and every candidate gets its cosine similarity. Not while the
  stored vectors are another model's (after a change of SEARCH_EMBEDDER, until
  `embed_memories --reembed`): words only then.
- The topic fallback's: topics spelled like the query (see the package's docstring).
The plans the words' statements run under are chosen here too (meaning's in meaning.py, the
walk's, WALK, in sql.py); ranked_candidates scores the candidates (scoring.py). A search without
a query ranks nothing: listing.py reads its candidates.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.backends.utils import CursorWrapper

from memories import tenancy
from memories.embedding import comparable_with, embed_query
from memories.models import Status
from memories.search.filters import Where
from memories.search.meaning import SEMANTIC_SCAN_MAX, nearest_ids
from memories.search.query import Query
from memories.search.scoring import (
    TENANT_SIZE_COUNTED_MAX,
    Candidate,
    WordStatistics,
    fuse,
    relevance_floor,
    words_scores,
)
from memories.search.sql import (
    CANDIDATE_COLUMNS,
    LEXICAL_RECENT,
    RANKED_SQL,
    RARE_WORD_MATCHES,
    RECENT,
    RECENT_IN_THREAD,
    RECENT_OF_TYPE,
    RECENT_WITH,
    REQUIRED,
    REQUIRED_QUERY,
    TOPIC_SQL,
    WALK,
    WALK_AND_NEAREST,
    WALK_SOURCE_SIZE,
    WORD_MATCHES,
    Plan,
    fetch_rows,
    fields_held_sql,
)

# Bounded work per search, however large the tenant: the most recent memories matching any term
# (and a few more per rare term, see RARE_TERM_HELD_MAX), and the nearest by meaning
# (meaning.SEMANTIC_CANDIDATES).
LEXICAL_CANDIDATES = 300
# With a project, commitment state or scope filter that chooses what a walk reads (see _recent)
# in an account with its own HNSW index, a project, states or a scope of at most this many
# current memories have each compared with the query exactly, read through their own index (a
# thread that chooses it, always: thread_sql.THREAD_READ_BY_MEMBER_MAX is smaller): no more than a
# narrowed scan of the HNSW index reads (meaning.SEMANTIC_SCAN_MAX), and none of the nearest is
# missed. More are searched through the HNSW index.
COMPARED_EXACTLY_MAX = SEMANTIC_SCAN_MAX
# The walk (see sql.WALK) reads at most this many of the tenant's most recent memories: in a large
# tenant, older ones are found by words only through its words index, and by meaning always.
WALK_RECENT_MAX = 20_000
# In an account with a words index of its own, a query of at most this many terms may find its
# word candidates through that index (see WORD_MATCHES and below): the LEXICAL_CANDIDATES most
# recent current memories holding any of them that pass the filters (with a thread filter of a
# thread no walk reads whole, thread_sql.THREAD_READ_BY_MEMBER_MAX, those in the thread among the
# WORD_MATCHES_MAX most recent).
INDEXED_QUERY_TERMS_MAX = 3
WORD_MATCHES_MAX = 1_000
# The index reads every match of the terms to find the most recent (that is its order: by term,
# not by time), so its cost grows with the share of the account that holds them; a walk's
# shrinks with it (it stops at LEXICAL_CANDIDATES matches). So such a query first walks the
# WORDS_PROBE_MAX most recent memories: terms that LEXICAL_CANDIDATES of them hold are common, and
# those are their most recent matches; terms that one in WORDS_DENSE_SHARE of them holds at least
# are walked for (which then reads about LEXICAL_CANDIDATES * WORDS_DENSE_SHARE memories, fewer
# than the index would read in an account of 20,000 or more); rarer ones go through the index.
# (A walk costs more per memory read than the index does: a larger share walked for more.)
# Terms dense among the most recent memories may be rare among older ones: the walk for them
# reads at most WORDS_DENSE_WALK_MAX memories (twice what their density in the probe predicts),
# and when it finds fewer than LEXICAL_CANDIDATES there while more memories of the types and
# dates asked for remain unread, the index finds them instead.
WORDS_PROBE_MAX = 500
WORDS_DENSE_SHARE = 8
WORDS_DENSE_WALK_MAX = 2 * LEXICAL_CANDIDATES * WORDS_DENSE_SHARE
# A query that walks finds the tenant's most recent matches, which in a large account may all be
# newer than the memory it asks about. So its terms that at most RARE_TERM_HELD_MAX of those
# matches hold (rare among recent memories: what is distinctive in the question; the
# RARE_TERMS_MAX held by fewest) are looked up again, each on its own, so that no term's
# matches crowd out another's: in an account with a words index, the RARE_TERM_CANDIDATES most
# recent memories holding it, however old (with a thread filter of a larger thread, those in it
# among its WORD_MATCHES_MAX most recent); in any other (or a small thread, walked whole), when
# the walk stopped at LEXICAL_CANDIDATES before reading all it may, a walk for those terms alone
# (RARE_TERM_CANDIDATES per term, among the WALK_RECENT_MAX most recent). A term rare among
# recent memories but common among older ones gives its most recent among a sample of about
# RARE_TERM_SAMPLE_MAX of its matches (gin_fuzzy_search_limit, which samples a scan whose every
# term is that common: one term per scan here), so that its lookup stays bounded; such a term
# weighs little, and which of its matches are candidates may differ between calls (and so
# between a query's pages: a later page scores as the first did, so it repeats none of its
# hits, but it may miss one).
RARE_TERM_HELD_MAX = 3
RARE_TERMS_MAX = 4
# In an account of more than WALK_RECENT_MAX current memories (by its nearest-neighbour index's
# count: see scoring.TENANT_SIZE_COUNTED_MAX; an account without vectors is not told large), a walk
# for a query's words (one of more terms than INDEXED_QUERY_TERMS_MAX) reads at most SHORT_WALK_MAX
# memories unless a filter that the walk applies to what it read (Where.selective) or archived
# memories are asked for. The longer walk would read only part of the account anyway, the index
# finds the query's rare terms' older matches, and a question whose terms recent memories seldom
# hold (one about something never stored) would otherwise read WALK_RECENT_MAX. Held counts among
# fewer matches tell rare terms apart less well, so SHORT_WALK_RARE_TERMS_MAX are looked up. A
# smaller account keeps the walk that reads all of it. Dates and the filter that chooses which
# memories a walk reads (see _recent) cost it nothing; a filter applied to what it read, or the
# archived status, may pass a small share of it: those keep the longer walk.
SHORT_WALK_MAX = WORDS_DENSE_WALK_MAX
SHORT_WALK_RARE_TERMS_MAX = RARE_TERMS_MAX + 2
RARE_TERM_CANDIDATES = 20
RARE_TERM_SAMPLE_MAX = 5_000


# Plans are chosen here by the account's own indexes and the query's length, not left to table
# statistics, which are missing right after a bulk load and describe the whole table rather than
# one tenant: a plan chosen from them may read all of an account's memories, or sort them, where
# each plan below reads a bounded few, so a search's cost stays bounded however the table looks.
# - Words, in general: walk the tenant's memories newest first until LEXICAL_CANDIDATES match
#   (memory_owner_recent; with a project, commitment state, type or scope filter, those of the
#   one that chooses the walk, through its own index: see _recent), cheap when the query's
#   terms are common among them, as the terms of a question of many words together are; it
#   stops after WALK_RECENT_MAX memories when they are rare.
# - Words, a query of few terms in an account with its own words index (a large one,
#   memories/account_indexes.py): its terms may be rare, and the walk would then read most of
#   the account; the index reads as many entries as the account has matches, so it serves the
#   terms that a short walk finds rare (WORDS_PROBE_MAX). A question's many terms together
#   match much of the account, which the walk finds newest first at once; the index then serves
#   those of its terms that the walk's matches seldom hold (RARE_TERM_HELD_MAX).
# - Meaning: see meaning.py.
# The function's matches, and for a thread filter each one's membership by its key (not a scan
# of the memberships).
_BY_KEY: Plan = (("enable_seqscan", "off"), ("enable_bitmapscan", "off"))
_RARE_TERMS_BY_KEY = (*_BY_KEY, ("gin_fuzzy_search_limit", str(RARE_TERM_SAMPLE_MAX)))


def _walk(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    *,
    walk_max: int | None = None,
    terms: str = "any_term",
    most: int | None = None,
    bounded: bool = True,
    back_to: datetime | None = None,
) -> list[Candidate]:
    """The walk's `most` (by default LEXICAL_CANDIDATES) most recent matches; `terms` names the
    parameter with the terms' tsquery. Not `bounded` (a later page's walk, see
    WordStatistics.walked_to): every match, recorded since `back_to` if given."""
    walk = LEXICAL_RECENT.format(
        **_walk_parts(required, where, params, walk_max, most, bounded, back_to), terms=terms
    )
    return _candidates(fetch_rows(cursor, walk, params, WALK), params)


def _walk_with_nearest(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    *,
    walk_max: int,
    bounded: bool = True,
    back_to: datetime | None = None,
) -> tuple[list[Candidate], list[Candidate]]:
    """For a thread that a walk reads whole: the walk's matches (as _walk's), and the
    SEMANTIC_CANDIDATES nearest of its members by meaning, compared exactly, that are not among
    them, from one read of its members (sql.WALK_AND_NEAREST)."""
    statement = WALK_AND_NEAREST.format(
        **_walk_parts(required, where, params, walk_max, None, bounded, back_to)
    )
    rows = fetch_rows(cursor, statement, params, WALK)
    matches: list[Candidate] = []
    nearest: list[Candidate] = []
    for candidate, row in zip(_candidates(rows, params), rows, strict=True):
        (matches if row[-1] else nearest).append(candidate)
    return matches, nearest


def _walk_parts(
    required: str,
    where: Where,
    params: dict,
    walk_max: int | None,
    most: int | None,
    bounded: bool,
    back_to: datetime | None,
) -> dict[str, str]:
    """A walk's parameters set in `params`, and the parts of its statement."""
    params["walk_max"] = WALK_RECENT_MAX if walk_max is None else walk_max
    params["walk_limit"] = params["lexical_max"] if most is None else most
    since = ""
    if not bounded:
        params["walk_limit"] = None  # LIMIT NULL: all of them
        if back_to is not None:
            params["walk_since"] = back_to
            since = "AND m.recorded_at >= %(walk_since)s"
    return {
        "columns": params["candidate_columns"],
        "recent": _recent(where, params),
        "required": required,
        "selection": where.selection,
        "since": since,
    }


def _recent(where: Where, params: dict, most: str = "walk_max") -> str:
    """The walk's source, at most `most` (the parameter's name) memories: the tenant's most
    recent, or those of the filter that chooses them (Where.walks): the thread's members, or on
    current memories those of the project, in the commitment states, of the types or in the
    scope asked for (see LEXICAL_RECENT)."""
    if where.walks == "thread":
        return RECENT_IN_THREAD.format(reach=where.reach, most=most)
    if where.walks in ("project", "scope"):
        column = where.walks
        return RECENT_WITH.format(column=column, value=column, reach=where.reach, most=most)
    if where.walks == "commitment_states":
        states = params["commitment_states"]
        return _merged(RECENT_WITH, "walk_state", states, where, params, most, "commitment_status")
    if where.walks == "memory_types":
        return _merged(RECENT_OF_TYPE, "walk_type", params["types"], where, params, most)
    return RECENT.format(reach=where.reach, most=most)


def _merged(
    branch: str,
    name: str,
    values: list[str],
    where: Where,
    params: dict,
    most: str,
    column: str = "",
) -> str:
    """`branch` (of `column`) for each of `values` (the parameters `name`_0, `name`_1, ...),
    their memories merged by recency, at most `most` in all."""
    params |= {f"{name}_{n}": value for n, value in enumerate(values)}
    branches = [
        branch.format(value=f"{name}_{n}", column=column, reach=where.reach, most=most)
        for n in range(len(values))
    ]
    if len(branches) == 1:
        return branches[0]
    return f"{' UNION ALL '.join(branches)}\n        ORDER BY recorded_at DESC LIMIT %({most})s"


# The walk sources whose size a search counts (see source_size_sql): those of at most
# COMPARED_EXACTLY_MAX memories are compared with the query exactly.
COUNTED_SOURCES = ("project", "commitment_states", "scope")


def source_size_sql(where: Where, params: dict) -> str:
    """An SQL expression: how many current memories at the search's instant the project, the
    commitment states or the scope that choose what a walk reads (Where.walks) hold, up to one
    past COMPARED_EXACTLY_MAX, read as the walk reads them (newest first through their own
    index, under WALK: so without statistics too); a thread's members when a walk reads it
    whole (thread_sql.THREAD_READ_BY_MEMBER_MAX); NULL for any other walk. Counted on every
    page: one whose count crosses the bound (memories revised since the first page are no longer
    current) finds its candidates by meaning the other way, which may miss a hit, never repeat
    one (see WordStatistics)."""
    params["source_size_max"] = COMPARED_EXACTLY_MAX + 1
    if where.walks == "thread":
        # Counted with its name's lookup (filters.filter_clauses).
        return "%(thread_members)s::bigint"
    if where.walks not in COUNTED_SOURCES:
        return "NULL::bigint"
    return f"({WALK_SOURCE_SIZE.format(recent=_recent(where, params, most='source_size_max'))})"


def _rare_term_matches(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    walk_matches: list[Candidate],
    statistics: WordStatistics | None = None,
    rare_max: int = RARE_TERMS_MAX,
) -> tuple[list[Candidate], tuple[str, ...], datetime | None]:
    """After a walk that found `walk_matches`: matches of the query's terms that few of them
    hold, older ones too (see RARE_TERM_HELD_MAX; with the words index, the phrase's holders
    too), those terms, and the oldest match their walk reached when it stopped at its bound.
    A later page (`statistics`, its first page's) looks up
    the terms the first page chose, and walks for them as far back (a later page's walk may find
    other matches: see WordStatistics)."""
    rare = statistics.rare_terms(params["terms"]) if statistics else None
    # The account's words index holds its current memories only: asOf walks. A thread's
    # members are walked for the rare terms too: the index would read the account's matches.
    indexed = params["words_indexed"] and where.current and where.walks != "thread"
    if rare is None:
        if len(walk_matches) < params["lexical_max"] and not indexed:
            # The walk read all it may read: a rare term's lookup would find no match it did not.
            return [], (), None
        held = Counter(term for candidate in walk_matches for term in candidate.fields_held)
        rare = tuple(
            sorted(
                (term for term in params["terms"] if held[term] <= RARE_TERM_HELD_MAX),
                key=lambda term: held[term],
            )[:rare_max]
        )
    parsed: Query = params["parsed"]
    # Every candidate holds the query's phrase, so the walk's matches hold its words as often as
    # any term and they are the last taken for rare: the phrase's own most recent holders,
    # however old, unless the walk found as many as it keeps (then those are the most recent).
    if statistics is not None:
        walk_filled = statistics.walked_to is not None
    else:
        walk_filled = len(walk_matches) >= params["lexical_max"]
    by_phrase = parsed.phrased and indexed and not walk_filled
    if not rare and not by_phrase:
        return [], (), None
    if not indexed:
        params["rare_any_term"] = parsed.any_term(rare)
        most = RARE_TERM_CANDIDATES * len(rare)
        walked = _walk(
            cursor,
            required,
            where,
            params,
            terms="rare_any_term",
            most=most,
            bounded=statistics is None,
            back_to=statistics.rare_walked_to if statistics else None,
        )
        reached = None
        if statistics is None and len(walked) >= most:
            reached = min(candidate.recorded_at for candidate in walked)
        return walked, rare, reached
    _word_filters(cursor, where, params, RARE_TERM_CANDIDATES)
    params["rare_terms"] = [parsed.any_term((term,)) for term in rare]
    if by_phrase:
        params["rare_terms"].append(params["required"])
    params["rare_limit"] = RARE_TERM_CANDIDATES * len(params["rare_terms"])
    matches = RARE_WORD_MATCHES.format(required=_required_query(required), thread=where.thread)
    [(ids,)] = fetch_rows(cursor, matches, params, _RARE_TERMS_BY_KEY)
    return _read_candidates(cursor, ids, params, known=walk_matches), rare, None


def _question_walk_max(where: Where, params: dict) -> int:
    """How many of the most recent memories a query's walk reads (see SHORT_WALK_MAX)."""
    shortened = (
        params["words_indexed"]
        and params["nearest_index_rows"] > WALK_RECENT_MAX
        and where.current
        and not where.selective
        and where.walks != "thread"  # read whole: no more than the shorter walk
        and params.get("status") != Status.ARCHIVED
    )
    return min(SHORT_WALK_MAX, WALK_RECENT_MAX) if shortened else WALK_RECENT_MAX


def _few_terms(cursor: CursorWrapper, required: str, where: Where, params: dict) -> list[Candidate]:
    """Word candidates of a query of few terms in an account with a words index: by a walk when
    its terms are common among the most recent memories, else through the index (see
    WORDS_PROBE_MAX)."""
    probed = _walk(cursor, required, where, params, walk_max=WORDS_PROBE_MAX)
    if len(probed) >= LEXICAL_CANDIDATES:
        return probed
    if len(probed) * WORDS_DENSE_SHARE >= WORDS_PROBE_MAX:
        walked = _walk(cursor, required, where, params, walk_max=WORDS_DENSE_WALK_MAX)
        if len(walked) >= LEXICAL_CANDIDATES or _walked_whole(
            cursor, where, params, WORDS_DENSE_WALK_MAX
        ):
            return walked  # the most recent matches, or every match there is
    return _indexed_words(cursor, required, where, params)


def _walked_whole(cursor: CursorWrapper, where: Where, params: dict, bound: int) -> bool:
    """Whether a walk of at most `bound` memories read every memory it may read (those of its
    source, _recent, and of the dates asked for): there are no more than that."""
    if params["tenant_size"] <= bound < TENANT_SIZE_COUNTED_MAX:
        return True  # the account holds no more (its count is exact under its cap)
    size = WALK_SOURCE_SIZE.format(recent=_recent(where, params))
    [(readable,)] = fetch_rows(cursor, size, params | {"walk_max": bound + 1}, WALK)
    return readable <= bound


def _word_filters(cursor: CursorWrapper, where: Where, params: dict, most: int) -> None:
    """The values of filters.filter_clauses as the words function takes them (it applies them
    itself; a missing one is no filter), and how many matches it gives per call: `most`, or with a
    thread to filter on too, enough of the most recent matches for some to be in it."""
    until = params["snapshot"]
    if params.get("before") is not None:
        until = min(params["before"], until)
    params |= {
        "word_from": params.get("after"),
        "word_until": until,
        "word_status": params.get("status"),
        "word_types": params.get("types"),
        "word_scope": params.get("scope"),
        "word_project": params.get("project"),
        "word_commitment_states": params.get("commitment_states"),
        "word_resolved_from": params.get("resolved_after"),
        "word_matches_max": WORD_MATCHES_MAX if where.thread else most,
    }
    if not tenancy.enabled():
        # The function reads the tenant where row-level security does; without it, nothing else
        # has set it.
        cursor.execute(tenancy.SET_TENANT_SQL, [tenancy.tenant_text(params["owner"]), True])


def _required_query(required: str) -> str:
    """The words function's `required` argument: the phrases and exclusions, if any."""
    return REQUIRED_QUERY if required else "NULL::tsquery"


def _indexed_words(
    cursor: CursorWrapper, required: str, where: Where, params: dict
) -> list[Candidate]:
    """Word candidates through the account's words index (see WORD_MATCHES)."""
    _word_filters(cursor, where, params, LEXICAL_CANDIDATES)
    matches = WORD_MATCHES.format(
        columns=params["candidate_columns"],
        required=_required_query(required),
        thread=where.thread,
    )
    rows = fetch_rows(cursor, matches, params, _BY_KEY)
    found = rows[0][0]
    candidates = _candidates([row[1:] for row in rows if row[1] is not None], params)
    if len(candidates) < LEXICAL_CANDIDATES and found == params["word_matches_max"]:
        # The thread narrowed the index's most recent matches only, and there are older ones:
        # the walk finds those among them in the thread, as without the index.
        candidates += _new(_walk(cursor, required, where, params), candidates)
    return candidates


def ranked_candidates(
    cursor: CursorWrapper,
    parsed: Query,
    where: Where,
    params: dict,
    statistics: WordStatistics | None,
) -> tuple[list[Candidate], WordStatistics | None, int]:
    """Candidates by words and by meaning, fused, the word statistics they were scored with,
    and how many matched (by words or meaning) but were dropped under the relevance floor. A
    first page (`statistics` None) computes those, and gets no candidates when the best is under
    the floor; a later page scores with its first page's, and does not abstain: the first page
    decided that the query has answers."""
    if not parsed.terms:
        return [], None, 0  # only stop words or punctuation: nothing to look for
    first_page = statistics is None
    required = REQUIRED if parsed.required else ""
    has_vector = _query_params(parsed, params)
    reads = _reads(parsed, where, params, statistics, has_vector=has_vector)
    word_matches, nearest, walked_to = _word_candidates(
        cursor, required, where, params, reads, statistics
    )
    candidates = word_matches + nearest
    if reads.by_meaning and not reads.read_once:
        candidates += _meaning_candidates(cursor, required, where, params, reads, known=candidates)
    rare: tuple[str, ...] = ()
    rare_walked_to = None
    if reads.by_walk:
        # Which terms are rare among the walk's matches is read from their candidates, on the
        # first page; a later page looks up the same ones.
        older, rare, rare_walked_to = _rare_term_matches(
            cursor,
            required,
            where,
            params,
            word_matches,
            statistics,
            rare_max=(
                RARE_TERMS_MAX if reads.walk_max == WALK_RECENT_MAX else SHORT_WALK_RARE_TERMS_MAX
            ),
        )
        candidates += _new(older, candidates)
    if first_page:
        statistics = WordStatistics.of(
            candidates,
            parsed.terms,
            params["tenant_size"],
            rare,
            walked_to,
            rare_walked_to,
            walk_max=reads.walk_max if reads.by_walk else None,
        )
    hits = _scored(candidates, parsed, statistics)
    floor = _floor(params)
    if first_page and not any(c.score >= floor for c in hits):
        return [], statistics, len(hits)
    return hits, statistics, 0


def _query_params(parsed: Query, params: dict) -> bool:
    """The query's terms, its vector and the columns its candidates are read with
    (CANDIDATE_COLUMNS), set in `params`; whether it has a vector to compare."""
    # A question's vector is compared only with vectors of its own model (StoredVectors).
    vector = embed_query(parsed.wanted) if comparable_with(params["vectors_by"]) else None
    params |= {
        "terms": list(parsed.terms),
        "parsed": parsed,  # read by the steps that spell its terms, not by a statement
        "any_term": parsed.any_term(),
        "required": parsed.required,
    }
    cosine = "NULL::float8"
    if vector is not None:
        params["vector"] = "[" + ",".join(f"{x:.6g}" for x in vector) + "]"
        cosine = "1 - (m.embedding <=> %(vector)s::vector)"
    params["candidate_columns"] = CANDIDATE_COLUMNS.format(
        fields_held=fields_held_sql(parsed, params), cosine=cosine
    )
    return vector is not None


@dataclass(frozen=True)
class _Reads:
    """How a ranked search finds its candidates (see _reads). `by_walk`: its word candidates by
    a walk (else _few_terms'); `walk_max`: how many of the most recent memories a walk reads;
    `through_index`: by meaning, through the account's HNSW index (else compared exactly);
    `by_meaning`: candidates by meaning join those by words; `read_once`: a thread's members
    read once for both."""

    by_walk: bool
    walk_max: int
    through_index: bool
    by_meaning: bool
    read_once: bool


def _reads(
    parsed: Query,
    where: Where,
    params: dict,
    statistics: WordStatistics | None,
    *,
    has_vector: bool,
) -> _Reads:
    """Which reads find the candidates of `parsed` (see the plans above WALK's definition)."""
    few_terms = len(parsed.terms) <= INDEXED_QUERY_TERMS_MAX
    # The account's words index holds its current memories only: asOf walks. So does a thread
    # that a walk reads whole (thread_sql.THREAD_READ_BY_MEMBER_MAX): no more than a walk for a
    # query's terms reads when they are common.
    by_walk = where.walks == "thread" or not (
        few_terms and params["words_indexed"] and where.current
    )
    # A later page walks back as far as the first page's walk reached, among as many memories
    # (see WordStatistics), however many matches that is now.
    if statistics is None:
        walk_max = _question_walk_max(where, params)
    else:
        walk_max = statistics.walk_max or WALK_RECENT_MAX
    # The account's nearest-neighbour index holds its current memories only: asOf scans exactly.
    through_index = params["nearest_indexed"] and where.current
    # A phrase's memories are all word matches: with the account's index, meaning ranks them (each
    # candidate's cosine) but finds none of its own, as a scan of the index filtered on a phrase
    # few memories hold would read it far and long for the few it passes. Without it (a smaller
    # account, one whose index is being built, asOf), the exact scan finds the holders of the
    # phrase older than the walk reaches, which no words index looks up.
    by_meaning = has_vector and not (parsed.phrased and through_index)
    # A thread's members are compared exactly at any instant, in an account of any size: they
    # are never more than the scan of the account's vectors would read. One that a walk reads
    # whole (every thread a walk reads) is read once for both.
    read_once = by_meaning and where.walks == "thread"
    return _Reads(
        by_walk=by_walk,
        walk_max=walk_max,
        through_index=through_index,
        by_meaning=by_meaning,
        read_once=read_once,
    )


def _word_candidates(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    reads: _Reads,
    statistics: WordStatistics | None,
) -> tuple[list[Candidate], list[Candidate], datetime | None]:
    """The candidates by words; the nearest by meaning of a thread's members read with them
    (`reads.read_once`); and on a first page, the oldest match of a walk that stopped at its
    bound (None otherwise)."""
    if not reads.by_walk:
        return _few_terms(cursor, required, where, params), [], None
    later = {} if statistics is None else {"bounded": False, "back_to": statistics.walked_to}
    nearest: list[Candidate] = []
    if reads.read_once:
        matches, nearest = _walk_with_nearest(
            cursor, required, where, params, walk_max=reads.walk_max, **later
        )
    else:
        matches = _walk(cursor, required, where, params, walk_max=reads.walk_max, **later)
    walked_to = None
    if statistics is None and len(matches) >= params["lexical_max"]:
        walked_to = min(candidate.recorded_at for candidate in matches)
    return matches, nearest, walked_to


def _meaning_candidates(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    reads: _Reads,
    known: list[Candidate],
) -> list[Candidate]:
    """The nearest memories by meaning (meaning.nearest_ids) but those `known`, each read by
    key: through the account's HNSW index, or of a walk's source of at most COMPARED_EXACTLY_MAX
    memories, each compared exactly."""
    source = None
    if (
        reads.through_index
        and params["source_size"] is not None
        and params["source_size"] <= COMPARED_EXACTLY_MAX
    ):
        source = _recent(where, params, most="source_size_max")
    meaning_ids = nearest_ids(
        cursor, required, where, params, through_index=reads.through_index, source=source
    )
    return _read_candidates(cursor, meaning_ids, params, known=known)


def _scored(
    candidates: list[Candidate], parsed: Query, statistics: WordStatistics
) -> list[Candidate]:
    """The candidates that matched by words or meaning, scored (scoring.py), each with the
    query's most distinctive words it lacks."""
    rarest = words_scores(candidates, parsed.terms, statistics, parsed.parts | parsed.type_terms)
    for candidate in candidates:
        fuse(candidate)
    hits = [c for c in candidates if c.matched_by]
    for hit in hits:
        # What is most distinctive in the question and not in this memory, as the asker wrote
        # it: a hit on the right topic that lacks the detail asked about may not answer it.
        # Named once: a hyphenated word's parts are terms of their own ("e-mail", "e", "mail").
        hit.lacking = tuple(
            dict.fromkeys(parsed.as_written(term) for term in rarest if term not in hit.fields_held)
        )
    return hits


def _floor(params: dict) -> float:
    """The relevance floor a first page's best hit must reach (scoring.relevance_floor)."""
    # The memories that compete for the best score: the account's, or those of the project, the
    # commitment states, the scope or the small thread that choose what the search reads (counted
    # up to one past COMPARED_EXACTLY_MAX: past it, no size is known but the account's).
    competing = params["tenant_size"]
    if params["source_size"] is not None and params["source_size"] <= COMPARED_EXACTLY_MAX:
        competing = min(competing, params["source_size"])
    return relevance_floor(competing)


def _read_candidates(
    cursor: CursorWrapper, ids: list[uuid.UUID], params: dict, known: Iterable[Candidate] = ()
) -> list[Candidate]:
    """The candidates `ids` but those `known` (already read), read by key (see
    CANDIDATE_COLUMNS)."""
    read = {candidate.id for candidate in known}
    ids = [i for i in dict.fromkeys(ids) if i not in read]
    if not ids:
        return []
    params["ids"] = ids
    cursor.execute(RANKED_SQL.format(columns=params["candidate_columns"]), params)
    return _candidates(cursor.fetchall(), params)


def _candidates(rows: list[tuple], params: dict) -> list[Candidate]:
    """Rows of CANDIDATE_COLUMNS as candidates."""
    terms = params["terms"]
    return [
        Candidate(
            id=row[0],
            recorded_at=row[1],
            content_length=row[2],
            fields_held={t: held for t, held in zip(terms, row[3], strict=True) if held},
            cosine=row[4],
        )
        for row in rows
    ]


def _new(found: list[Candidate], known: list[Candidate]) -> list[Candidate]:
    """Those of `found` that are not among `known`."""
    ids = {candidate.id for candidate in known}
    return [candidate for candidate in found if candidate.id not in ids]


def topic_matches(
    cursor: CursorWrapper, parsed: Query, where: Where, params: dict
) -> list[Candidate]:
    """Topics spelled like the text asked for, that hold the query's phrases and none of its
    exclusions."""
    params |= {"wanted": parsed.wanted, "required": parsed.required}
    required = REQUIRED if parsed.required else ""
    if where.walks == "thread":
        recent = _recent(where, params, most="recent")
    else:
        recent = RECENT.format(reach=where.reach, most="recent")
    cursor.execute(
        TOPIC_SQL.format(recent=recent, selection=where.selection, required=required), params
    )
    return [
        Candidate(
            id=row[0],
            recorded_at=row[1],
            content_length=row[2],
            fields_held={},
            cosine=None,
            score=round(float(row[3]), 6),
            matched_by=("words",),
        )
        for row in cursor.fetchall()
    ]
