"""Search over one tenant's memories: words and meaning fused into one score, a relevance floor
so that a question about something never stored finds nothing, and keyset paging with a signed
cursor.

Ranking:
- Words. The query's significant terms (stop words dropped, stemmed and unaccented by the
  `threengram_unaccented` configuration) are OR'ed: a memory matching *any* of them is a
  candidate (the LEXICAL_CANDIDATES most recent such memories, which bounds the work, and a few
  of the most recent matches of each term rare among those, older ones too: RARE_TERM_HELD_MAX).
  Each is scored BM25F-style on which of its fields hold each term (not how often: a memory is
  a few sentences, in which a repeated term says little): a term weighs more the fewer of the
  tenant's memories hold it (IDF), long content is length-normalised, a term in the topic
  counts TOPIC_WEIGHT times, in the tags or project TAGS_WEIGHT times, a term in the content,
  and the fields' sum saturates. The words score is that sum divided by the summed IDFs of the
  query's WORDS_SCALE_TERMS rarest terms: about 1 when a memory holds what is most distinctive
  in the question, near 0 when it shares only common words.
  `"quoted phrases"` and `-exclusions` (of words or `-"phrases"`) are required, as in a web
  search engine; one of stop words only requires nothing.
- Meaning. The embedding of the query without its exclusions (memories/embedding.py) against
  each memory's: up to the SEMANTIC_CANDIDATES nearest current memories join the candidates (a
  large account's own HNSW index keeps this bounded, memories/account_indexes.py), and every
  candidate gets its cosine similarity. Not while the stored vectors are another model's
  (after a change of SEARCH_EMBEDDER, until `embed_memories --reembed`): words only then.
- Fusion: score = words + MEANING_WEIGHT * max(0, cosine), rounded to 6 places so paging
  compares exact values. A hit matches by words or has a cosine of at least MEANING_MATCH_MIN.
- Abstention: when the best candidate scores under the relevance floor the search returns no
  hits: a question whose distinctive words match nothing and whose meaning is not close gets an
  empty answer rather than the closest noise. The floor is per query, not per hit, so a weaker
  second or third answer still shows. It rises with the account (relevance_floor): in a larger
  one, a partial match's words score more (its terms' IDF nears that of the terms it lacks) and
  the best of more unrelated memories scores higher. A hit holding all of the query's
  WORDS_SCALE_TERMS rarest terms is no partial match: RELEVANCE_FLOOR holds for it. The weights
  and the floor were set on the retrieval eval set, measured by scripts/eval_search.py (how:
  tests/memories/retrieval_eval/README.md).
- Topic fallback: when a query of at most TOPIC_FALLBACK_WORDS_MAX words abstains, topics
  trigram-similar to the query without its exclusions (pg_trgm similarity >=
  TOPIC_SIMILARITY_MIN) among the TOPIC_FALLBACK_RECENT most recent memories that hold its
  phrases and none of its exclusions: this catches typos and near-miss topic names. A
  query of more words is a question, not a topic name: when neither its words nor its meaning
  matched, a topic that shares letters with it is noise, not an answer (and comparing every
  recent topic with a long query costs more than the rest of the search).
- `matchedBy` of a hit: "words" when a query term (or, in the fallback, the topic's spelling)
  matched, "meaning" when its cosine reached MEANING_MATCH_MIN.
- Order: score desc, then recorded_at desc (recency breaks ties), then id. Only current
  memories are searched unless asOf names another instant, so a superseded memory and its
  successor are never both hits.
- Paging: the cursor is signed (django.core.signing, SECRET_KEY) and carries the position, the
  candidate mode, the first page's instant, word statistics and the reach of its words walk
  (_Position, _WordStatistics) and a fingerprint of
  the query and filters; it is refused for any other query. Later pages score with the first
  page's statistics, so a write between pages (a revision changes the account's size, an archive
  which candidates hold a term) does not shift the scores of the rest and so repeat or skip hits.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.core import signing
from django.db import connections, transaction
from django.utils import timezone

from memories import account_indexes, bounds, replica, tenancy
from memories.embedding import comparable_with, embed_query
from memories.errors import InvalidInput
from memories.excerpts import (
    EXCERPT_COLUMNS,
    EXCERPT_MAX,
    MemoryExcerpt,
)
from memories.models import MemoryType, Status, Thread, thread_name_key_text

DEFAULT_LIMIT = 5
MAX_LIMIT = 25
QUERY_MAX = 500
CURSOR_MAX = 2048
# A cursor pages through one result list, minutes after its first page; an older one would page
# by word statistics and an instant long stale, so it is refused and the search started anew.
CURSOR_MAX_AGE = 24 * 3600
# Bounded work per search, however large the tenant: the most recent memories matching any term
# (and a few more per rare term, see RARE_TERM_HELD_MAX), and the nearest by meaning.
LEXICAL_CANDIDATES = 300
SEMANTIC_CANDIDATES = 50
# A nearest-neighbour search with a narrowing filter (type, scope, project, thread, dates) stops
# after about this many entries of the account's HNSW index (nearest first) instead of pgvector's
# default 20,000: a search finds about (the share of the account that passes its filters) times
# this many candidates by meaning, so a filter that leaves a small share finds fewer by meaning
# (words still find theirs) rather than walking the graph far and long.
SEMANTIC_SCAN_MAX = 5_000
# The walk (see _WALK) reads at most this many of the tenant's most recent memories: in a large
# tenant, older ones are found by words only through its words index, and by meaning always.
WALK_RECENT_MAX = 20_000
# In an account with a words index of its own, a query of at most this many terms may find its
# word candidates through that index (see _WORD_MATCHES and below): the LEXICAL_CANDIDATES most
# recent current memories holding any of them that pass the filters (with a thread filter, those
# in the thread among the WORD_MATCHES_MAX most recent).
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
# recent memories holding it, however old (with a thread filter, those in the thread among its
# WORD_MATCHES_MAX most recent); in any other, when the walk stopped at LEXICAL_CANDIDATES
# before reading all it may, a walk for those terms alone (RARE_TERM_CANDIDATES per term, among
# the WALK_RECENT_MAX most recent). A term rare among recent memories but common among older
# ones gives its most recent among a sample of about RARE_TERM_SAMPLE_MAX of its matches
# (gin_fuzzy_search_limit, which samples a scan whose every term is that common: one term per
# scan here), so that its lookup stays bounded; such a term weighs little, and which of its
# matches are candidates may differ between calls (and so between a query's pages: a later page
# scores as the first did, so it repeats none of its hits, but it may miss one).
RARE_TERM_HELD_MAX = 3
RARE_TERMS_MAX = 4
RARE_TERM_CANDIDATES = 20
RARE_TERM_SAMPLE_MAX = 5_000
# A tenant's current memories are counted up to this many (for the IDF); a larger
# tenant counts as this large. An account whose own nearest-neighbour index held at least this
# many entries when PostgreSQL last counted them (pg_class.reltuples: set by the index's build
# and by VACUUM, estimated by ANALYZE) is not counted again: an account's current memories never
# become fewer (a revision closes one and adds its successor), and counting reads a table page
# per row written since the last VACUUM (the visibility map does not cover them yet), as many
# as this right after a bulk load.
TENANT_SIZE_COUNTED_MAX = 10_000
# BM25F (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 3.3).
# A new account's handful of memories says little about how rare a word is: below this many, the
# IDF is computed as if the tenant had this many memories, so a word the question asks about that
# matches nothing still weighs against the match.
IDF_TENANT_SIZE_MIN = 100
BM25_K1 = 0.9
BM25_B = 0.75
TOPIC_WEIGHT = 2.0
TAGS_WEIGHT = 2.0
# Fusion and the relevance floor (see the module docstring).
MEANING_WEIGHT = 0.4
MEANING_MATCH_MIN = 0.5
# The floor for an account of up to RELEVANCE_FLOOR_SIZE memories, and how much it rises for each
# tenfold growth beyond (counted up to TENANT_SIZE_COUNTED_MAX, as the IDF is): set on the eval
# set's memories alone and behind crowds of others (scripts/eval_search.py --crowd).
RELEVANCE_FLOOR = 0.28
RELEVANCE_FLOOR_SIZE = 200
RELEVANCE_FLOOR_PER_DECADE = 0.07
WORDS_SCALE_TERMS = 3
# The topic fallback compares the query with the topics of this many most recent memories (all
# of them for most tenants; a filter narrows those), so its cost does not grow with the tenant
# or the table.
TOPIC_FALLBACK_RECENT = 3_000
# A topic's name is a few words; a query of more is a question (see the module docstring).
TOPIC_FALLBACK_WORDS_MAX = 6
TOPIC_SIMILARITY_MIN = 0.3
_CURSOR_SALT = "threengram.memories.search-cursor"
STATUS_FILTERS = ("active", "archived", "any")
MODES = ("ranked", "topic")


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

    def narrows(self) -> bool:
        """Whether a filter beyond lifecycle (status, asOf) narrows the tenant's memories."""
        return bool(
            self.memory_types
            or self.scope is not None
            or self.project is not None
            or self.thread is not None
            or self.recorded_after is not None
            or self.recorded_before is not None
        )

    def fingerprint(self, owner_id: int, query: str) -> str:
        """What a cursor is bound to: the account, the query and every filter, canonically.
        (Another account's cursor would bring that account's instant and word statistics.)"""
        canonical = json.dumps(
            {
                "o": owner_id,
                "q": query,
                "t": sorted(self.memory_types),
                "s": self.scope,
                "p": self.project,
                "th": thread_name_key_text(self.thread) if self.thread else None,
                "st": self.status,
                "ra": self.recorded_after.isoformat() if self.recorded_after else None,
                "rb": self.recorded_before.isoformat() if self.recorded_before else None,
                "ao": self.as_of.isoformat() if self.as_of else None,
            },
            sort_keys=True,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SearchHit(MemoryExcerpt):
    score: float
    matched_by: tuple[str, ...] = ()


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
    after = before = None
    if recorded_after is not None:
        after = bounds.clean_datetime("recordedAfter", recorded_after)
    if recorded_before is not None:
        before = bounds.clean_datetime("recordedBefore", recorded_before)
    if after and before and after > before:
        raise InvalidInput("recordedAfter", "must not be later than recordedBefore")
    return SearchFilters(
        memory_types=types,
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
        as_of=bounds.clean_datetime("asOf", as_of) if as_of is not None else None,
    )


_CONFIG = "'threengram_unaccented'"
# A quoted phrase, excluded when a minus sign precedes it.
_PHRASE = re.compile(r'((?:^|(?<=\s))-)?"([^"]*)"?')
_EXCLUSION = re.compile(r"(?:^|\s)-(\w[^\s]*)")
# What scoring reads of a candidate: where it holds each query term (see _fields_held), and its
# cosine similarity to the query. The walk and the words function select them as they find
# their candidates (the rows are in hand); those found otherwise (by meaning, a rare term's
# lookup) are read by key. The page's excerpts are read afterwards, for the page alone
# (_PAGE_SQL).
_CANDIDATE_COLUMNS = "m.id, m.recorded_at, m.content_length, {fields_held}, {cosine}"
_RANKED_SQL = """
SELECT {columns}
FROM memories_memory m
WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s::uuid[])
"""
# The labels of the search vector's parts (migration memories/0009): the topic, the content (D:
# rows from before tags were indexed) and the tags and project.
_FIELDS = (("A", "A"), ("B", "BD"), ("C", "C"))
# The most recent memories matching any term through the account's words index, as the
# function gives them (migration memories/0018: it applies every filter but the thread's, and
# returns what scoring reads), those of them in the thread if one is asked for, and how many the
# function gave (on every row; on a row of NULLs when none is in the thread).
_WORD_MATCHES = """WITH matches AS MATERIALIZED (
        SELECT w.*, %(owner)s::bigint AS owner_id
        FROM memory_recent_word_matches(
            %(any_term)s::tsquery, {required}, %(word_from)s::timestamptz,
            %(word_until)s::timestamptz, %(word_status)s::text, %(word_types)s::text[],
            %(word_scope)s::text, %(word_project)s::text, %(word_matches_max)s) w)
    SELECT (SELECT count(*) FROM matches), kept.*
    FROM (SELECT) one LEFT JOIN LATERAL (
        SELECT {columns} FROM matches m WHERE TRUE {thread}
        ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(lexical_max)s) kept ON TRUE"""
# The most recent memories matching any term among the WALK_RECENT_MAX most recent memories
# (the walk's bound when the query's terms are rare in a large tenant: a subquery with a LIMIT is
# planned on its own, so the walk stops there whatever the terms). The selection (status, type,
# scope, project, thread) is applied to what the walk has read, not while it reads: a selective
# filter would otherwise make it read far past WALK_RECENT_MAX memories to find that many that
# pass. A type filter is the exception: the most recent memories of each type asked for are read
# through the index on owner, type and recency (memory_owner_type_current, current memories) and
# merged by recency, so the walk reads the memories of those types only, and its bound counts
# those.
_LEXICAL_RECENT = """(SELECT {columns} FROM ({recent}) m
      WHERE TRUE {selection} {since}
      AND m.search_vector @@ %({terms})s::tsquery {required}
      ORDER BY m.recorded_at DESC LIMIT %(walk_limit)s)"""
_RECENT = """
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(snapshot)s {reach}
        ORDER BY m.recorded_at DESC LIMIT %(walk_max)s"""
_RECENT_OF_TYPE = """(
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.memory_type = %(walk_type_{n})s
          AND m.recorded_at <= %(snapshot)s {reach}
        ORDER BY m.recorded_at DESC LIMIT %(walk_max)s)"""
# How many memories a walk may read, up to one past its bound (%(walk_max)s).
_WALK_SOURCE_SIZE = "SELECT count(*) FROM ({recent}) m"
# Each of the rare terms' most recent matches through the account's words index (see
# RARE_TERM_HELD_MAX), one call of the function per term; those in the thread if one is asked for,
# the most recent RARE_TERM_CANDIDATES per term of them.
_RARE_WORD_MATCHES = """SELECT array(
    SELECT m.id FROM (
        SELECT DISTINCT w.id, w.recorded_at, %(owner)s::bigint AS owner_id
        FROM unnest(%(rare_terms)s::tsquery[]) AS t(term),
             memory_recent_word_matches(
                t.term, {required}, %(word_from)s::timestamptz, %(word_until)s::timestamptz,
                %(word_status)s::text, %(word_types)s::text[], %(word_scope)s::text,
                %(word_project)s::text, %(word_matches_max)s) w) m
    WHERE TRUE {thread}
    ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(rare_limit)s)"""
# Served by the account's own HNSW index when it has one (memories/account_indexes.py), else an
# exact scan of its vectors; see _WALK and what follows.
_SEMANTIC = """(SELECT m.id FROM memories_memory m
      WHERE m.owner_id = %(owner)s AND m.embedding IS NOT NULL
        AND m.recorded_at <= %(snapshot)s {required} {filters}
      ORDER BY m.embedding <=> %(vector)s::vector LIMIT %(semantic_max)s)"""
_REQUIRED_QUERY = f"websearch_to_tsquery({_CONFIG}, %(required)s)"
_REQUIRED = f"AND m.search_vector @@ {_REQUIRED_QUERY}"
# The instant the search ranks memories recorded by (see _Position), the tenant's size (see
# TENANT_SIZE_COUNTED_MAX), and whether it has valid nearest-neighbour and words indexes of its
# own. A first page's instant is this process's clock, or the tenant's newest memory if later: a
# memory stamped by a host whose clock runs ahead of this one's (and its revision, stamped no
# earlier) is found at once, not once this clock has caught up.
_TENANT_SIZE_SQL = """
WITH instant AS (
    SELECT CASE WHEN %(first_page)s
                THEN greatest(%(snapshot)s::timestamptz,
                              (SELECT max(m.recorded_at) FROM memories_memory m
                               WHERE m.owner_id = %(owner)s))
                ELSE %(snapshot)s::timestamptz END AS snapshot)
SELECT (SELECT snapshot FROM instant),
       CASE WHEN coalesce((SELECT c.reltuples FROM pg_class c
                           WHERE c.oid = to_regclass(%(nearest_index)s)), 0)
                 >= %(tenant_size_max)s
            THEN %(tenant_size_max)s
            ELSE (SELECT count(*) FROM (
                      SELECT 1 FROM memories_memory m
                      WHERE m.owner_id = %(owner)s AND m.valid_to IS NULL
                        AND m.recorded_at <= (SELECT snapshot FROM instant)
                      LIMIT %(tenant_size_max)s) n) END,
       coalesce((SELECT i.indisvalid FROM pg_index i
                 WHERE i.indexrelid = to_regclass(%(nearest_index)s)), false),
       coalesce((SELECT i.indisvalid FROM pg_index i
                 WHERE i.indexrelid = to_regclass(%(words_index)s)), false),
       (SELECT v.embedder FROM memories_storedvectors v WHERE v.id = 1)
"""
_TOPIC_SQL = """
SELECT m.id, m.recorded_at, m.content_length, similarity(m.topic, %(wanted)s)
FROM (
    SELECT m.* FROM memories_memory m
    WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(snapshot)s {reach}
    ORDER BY m.recorded_at DESC
    LIMIT %(recent)s
) m
WHERE TRUE {selection} {required}
  AND similarity(m.topic, %(wanted)s) >= %(topic_min)s
"""
_PAGE_SQL = (
    f"SELECT {EXCERPT_COLUMNS} FROM memories_memory m "  # noqa: S608 (constants)
    "WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s::uuid[])"
)


@dataclass(frozen=True)
class _Query:
    terms: tuple[str, ...]  # significant lexemes, deduplicated
    required: str  # the phrases and exclusions, in web-search syntax ("" for none)
    wanted: str  # the text asked for: the query without its exclusions


def _parse(db, text: str) -> _Query:
    """The query's OR'ed terms and its required phrases and exclusions. A phrase or exclusion
    of stop words only requires nothing (PostgreSQL would make it a query that matches no row)."""
    quoted = [(minus, phrase) for minus, phrase in _PHRASE.findall(text) if phrase.strip()]
    phrases = [phrase for minus, phrase in quoted if not minus]
    rest = _PHRASE.sub(" ", text)
    exclusions = _EXCLUSION.findall(rest)
    rest = _EXCLUSION.sub(" ", rest)
    # An exclusion goes as a phrase: "-env:staging" excludes the two words together, where as a
    # bare word its punctuation would split it and leave "staging" required.
    required = " ".join(
        [f'{minus}"{phrase}"' for minus, phrase in quoted]
        + ['-"{}"'.format(x.replace('"', " ")) for x in exclusions]
    )
    wanted = " ".join(" ".join([rest, *phrases]).split())
    db.execute(
        f"SELECT (SELECT coalesce(array_agg(lexeme), '{{}}') "  # noqa: S608 (constant)
        f"FROM unnest(to_tsvector({_CONFIG}, %s))), "
        f"numnode(websearch_to_tsquery({_CONFIG}, %s))",
        [wanted, required],
    )
    terms, required_nodes = db.fetchone()
    return _Query(terms=tuple(terms), required=required if required_nodes else "", wanted=wanted)


def _any_term(terms: tuple[str, ...]) -> str:
    """A tsquery matching any of `terms`, given as lexemes (not normalised again)."""
    return " | ".join("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)


@dataclass
class _Candidate:
    id: uuid.UUID
    recorded_at: datetime
    content_length: int
    fields_held: dict[str, str]  # query term -> labels of the fields holding it (_fields_held)
    cosine: float | None
    score: float = 0.0
    matched_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class _WordStatistics:
    """What a words score depends on besides the memory: the account's size (as the IDF counts
    it), how many candidates hold each query term (in the query's term order) and their average
    length; and, of the words walk (_ranked), which terms were rare among its matches (`rare`,
    their positions in the query's term order) and the oldest match it reached when it stopped
    at its bound (`walked_to`; None: it read all it may), and the same of the rare terms' own
    walk (`rare_walked_to`). A cursor carries the first page's, so that later pages score as it
    did and rank every candidate it did that still passes the filters: a write between pages
    changes what a bounded walk finds (an archived memory, or one added to a thread, joins the
    matches of a `status: archived` or thread walk and would push the oldest one out; an archive
    lets an older match in, which may hold a rare term and make it common), so a later page walks
    back as far as the first did, without a bound, and looks up the same rare terms, which it
    walks for as far back as the first page did too."""

    total: int
    held_by: tuple[int, ...]
    average_length: float
    rare: tuple[int, ...] = ()
    walked_to: datetime | None = None
    rare_walked_to: datetime | None = None

    @classmethod
    def of(
        cls,
        candidates: list[_Candidate],
        terms: tuple[str, ...],
        tenant_size: int,
        rare: tuple[str, ...] = (),
        walked_to: datetime | None = None,
        rare_walked_to: datetime | None = None,
    ) -> _WordStatistics:
        held = Counter(term for candidate in candidates for term in candidate.fields_held)
        lengths = [candidate.content_length for candidate in candidates] or [1]
        return cls(
            total=max(tenant_size, len(candidates), IDF_TENANT_SIZE_MIN),
            held_by=tuple(held[term] for term in terms),
            average_length=sum(lengths) / len(lengths),
            rare=tuple(terms.index(term) for term in rare),
            walked_to=walked_to,
            rare_walked_to=rare_walked_to,
        )

    def rare_terms(self, terms: tuple[str, ...]) -> tuple[str, ...]:
        """The first page's rare terms among `terms` (the query's)."""
        return tuple(terms[n] for n in self.rare if 0 <= n < len(terms))


def _words_scores(
    candidates: list[_Candidate], terms: tuple[str, ...], statistics: _WordStatistics
) -> frozenset[str]:
    """BM25F over the candidates, each divided by the sum of the IDFs of the query's
    WORDS_SCALE_TERMS rarest terms; returns those terms."""
    if not terms or not candidates:
        return frozenset()
    total = statistics.total
    idf = {
        term: math.log(1 + (total - count + 0.5) / (count + 0.5))
        for term, count in zip(terms, statistics.held_by, strict=True)
    }
    # Normalised by the question's most distinctive terms, not all of them: a long question in
    # the asker's own words has many terms no memory holds, and should not sink the one that
    # holds what it is about.
    rarest = sorted(terms, key=lambda term: idf[term], reverse=True)[:WORDS_SCALE_TERMS]
    scale = sum(idf[term] for term in rarest)
    average_length = statistics.average_length
    for candidate in candidates:
        norm = 1 - BM25_B + BM25_B * candidate.content_length / average_length
        score = 0.0
        for term, held in candidate.fields_held.items():
            weighted = (
                TOPIC_WEIGHT * ("A" in held) + TAGS_WEIGHT * ("C" in held) + ("B" in held) / norm
            )
            score += idf[term] * weighted / (BM25_K1 + weighted)
        candidate.score = score / scale
    return frozenset(rarest)


def relevance_floor(tenant_size: int) -> float:
    """The score under which a search's best candidate means no answer, for an account of
    `tenant_size` current memories, whatever the filters leave of them (as the IDF is computed
    over the account); see the module docstring."""
    counted = min(tenant_size, TENANT_SIZE_COUNTED_MAX)
    growth = max(counted, RELEVANCE_FLOOR_SIZE) / RELEVANCE_FLOOR_SIZE
    return RELEVANCE_FLOOR + RELEVANCE_FLOOR_PER_DECADE * math.log10(growth)


def _fuse(candidate: _Candidate) -> None:
    cosine = candidate.cosine if candidate.cosine is not None else 0.0
    words = candidate.score
    candidate.score = round(words + MEANING_WEIGHT * max(0.0, cosine), 6)
    candidate.matched_by = tuple(
        label
        for label, matched in (("words", words > 0), ("meaning", cosine >= MEANING_MATCH_MIN))
        if matched
    )


def _fields_held(terms: tuple[str, ...], params: dict) -> str:
    """An SQL array with, for each term, the labels of the fields that hold it ("AB": topic and
    content; "" for none). Each a match of the search vector against a constant query, which
    PostgreSQL does in C, rather than unnesting every lexeme of every candidate to find the
    few asked for."""
    labels = []
    for n, term in enumerate(terms):
        params[f"term_{n}"] = _any_term((term,))
        checks = []
        for label, weights in _FIELDS:
            params[f"term_{n}_{label}"] = f"{params[f'term_{n}']}:{weights}"
            checks.append(
                f"CASE WHEN m.search_vector @@ %(term_{n}_{label})s::tsquery "
                f"THEN '{label}' ELSE '' END"
            )
        labels.append(
            f"CASE WHEN m.search_vector @@ %(term_{n})s::tsquery "
            f"THEN {' || '.join(checks)} ELSE '' END"
        )
    return f"ARRAY[{', '.join(labels)}]::text[]"


@dataclass(frozen=True)
class _Where:
    """The filters as SQL clauses on `m`. `reach`: which of the tenant's memories the search
    reads at all (current or as of an instant, recorded dates), conditions that the walks over
    the most recent memories (words, topic fallback) apply as they read; `selection`: status,
    type, scope, project and thread, applied to what a walk has read, so that its bound holds
    whatever the filters (see _LEXICAL_RECENT; without asOf, a walk reads only memories of the
    types asked for, see _recent). `thread`: the thread filter's clause alone ("" for
    none). `narrowed`: SearchFilters.narrows(). `current`: only current memories are read (no
    asOf), as an account's nearest-neighbour index holds."""

    reach: str
    selection: str
    thread: str
    narrowed: bool
    current: bool

    @property
    def sql(self) -> str:
        return self.reach + self.selection


def _where(filters: SearchFilters, owner_id: int, params: dict) -> _Where:
    reach: list[str] = []
    if filters.as_of is not None:
        reach.append(
            "m.recorded_at <= %(as_of)s AND (m.valid_to IS NULL OR m.valid_to > %(as_of)s)"
        )
        params["as_of"] = filters.as_of
    else:
        reach.append("m.valid_to IS NULL")
    if filters.recorded_after is not None:
        reach.append("m.recorded_at >= %(after)s")
        params["after"] = filters.recorded_after
    if filters.recorded_before is not None:
        reach.append("m.recorded_at <= %(before)s")
        params["before"] = filters.recorded_before
    selection: list[str] = []
    status = filters.status or ("any" if filters.as_of else Status.ACTIVE)
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
    thread = []
    if filters.thread is not None:
        thread.append(Thread.objects.members_sql(owner_id, filters.thread, params, key="thread"))
    return _Where(
        reach=_conjunction(reach),
        selection=_conjunction(selection + thread),
        thread=_conjunction(thread),
        narrowed=filters.narrows(),
        current=filters.as_of is None,
    )


def _conjunction(clauses: list[str]) -> str:
    return "".join(f"\n      AND {clause}" for clause in clauses)


@dataclass(frozen=True)
class _Position:
    """Where a page ends, as a cursor carries it: the candidate mode, the last hit's sort key,
    the first page's instant (`snapshot`) and word statistics (ranked mode). The instant is the
    clock's (see _TENANT_SIZE_SQL), and a memory's `recorded_at` is taken before its write
    commits: a write still committing while the first page ran (milliseconds) may show on a
    later page. Closing that would take the first page's database snapshot in the cursor and
    each row's inserting transaction id, which the rows do not keep."""

    mode: str
    score: float
    recorded_at: datetime
    id: uuid.UUID
    snapshot: datetime
    statistics: _WordStatistics | None

    def encode(self, fingerprint: str) -> str:
        # JSON writes a float as its repr, which reads back exactly: paging compares scores.
        payload = {
            "f": fingerprint,
            "m": self.mode,
            "s": self.score,
            "r": self.recorded_at.isoformat(),
            "i": str(self.id),
            "t": self.snapshot.isoformat(),
        }
        if self.statistics is not None:
            statistics = self.statistics
            payload["w"] = [
                statistics.total,
                statistics.held_by,
                statistics.average_length,
                statistics.rare,
                statistics.walked_to.isoformat() if statistics.walked_to else None,
                statistics.rare_walked_to.isoformat() if statistics.rare_walked_to else None,
            ]
        return signing.dumps(payload, salt=_CURSOR_SALT, compress=True)

    @classmethod
    def decode(cls, cursor: str, fingerprint: str) -> _Position:
        """The position `cursor` carries, if this server issued it for `fingerprint`."""
        try:
            payload = signing.loads(cursor, salt=_CURSOR_SALT, max_age=CURSOR_MAX_AGE)
            if payload["m"] not in MODES:
                raise ValueError(payload["m"])
            statistics = None
            if "w" in payload:
                total, held_by, average_length, rare, walked_to, rare_walked_to = payload["w"]
                statistics = _WordStatistics(
                    total=int(total),
                    held_by=tuple(int(count) for count in held_by),
                    average_length=float(average_length),
                    rare=tuple(int(n) for n in rare),
                    walked_to=datetime.fromisoformat(walked_to) if walked_to else None,
                    rare_walked_to=(
                        datetime.fromisoformat(rare_walked_to) if rare_walked_to else None
                    ),
                )
            position = cls(
                mode=payload["m"],
                score=float(payload["s"]),
                recorded_at=datetime.fromisoformat(payload["r"]),
                id=uuid.UUID(payload["i"]),
                snapshot=datetime.fromisoformat(payload["t"]),
                statistics=statistics,
            )
            bound_to = payload["f"]
        except signing.SignatureExpired:
            raise InvalidInput(
                "cursor",
                f"has expired (a cursor lasts {CURSOR_MAX_AGE // 3600} hours); omit it to start"
                " a new search",
            ) from None
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

    def follows(self, candidate: _Candidate) -> bool:
        """Whether `candidate` sorts after this position."""
        return (candidate.score, candidate.recorded_at, candidate.id) < (
            self.score,
            self.recorded_at,
            self.id,
        )


def search_memories(
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
    fingerprint = filters.fingerprint(owner_id, text)
    position = None
    if cursor is not None:
        if len(cursor) > CURSOR_MAX:
            raise InvalidInput("cursor", f"must be at most {CURSOR_MAX} characters")
        position = _Position.decode(cursor, fingerprint)
    params: dict = {
        "owner": owner_id,
        "excerpt_fetch": EXCERPT_MAX + 1,
        "lexical_max": LEXICAL_CANDIDATES,
        "semantic_max": SEMANTIC_CANDIDATES,
        "tenant_size_max": TENANT_SIZE_COUNTED_MAX,
        "recent": TOPIC_FALLBACK_RECENT,
        "topic_min": TOPIC_SIMILARITY_MIN,
        # Later pages rank what the first one saw: a memory written since does not appear, and
        # the first page's word statistics score the rest (see _Position).
        "snapshot": position.snapshot if position else timezone.now(),
        "first_page": position is None,
    }
    where = _where(filters, owner_id, params)
    alias = replica.read_alias()
    outermost = not connections[alias].in_atomic_block
    with transaction.atomic(using=alias), connections[alias].cursor() as db:
        if outermost:
            _one_snapshot(connections[alias])
        _count_tenant(db, params)
        parsed = _parse(db, text)
        mode = position.mode if position else "ranked"
        ranked: list[_Candidate] = []
        statistics = None
        if mode == "ranked":
            ranked, statistics = _ranked(
                db, parsed, where, params, position.statistics if position else None
            )
        # Not for a query of stop words only, which asks for nothing (a topic sharing its
        # letters is no answer).
        if (
            not ranked
            and position is None
            and parsed.terms
            and len(parsed.wanted.split()) <= TOPIC_FALLBACK_WORDS_MAX
        ):
            mode = "topic"
        if mode == "topic":
            ranked = _topic_matches(db, parsed, where, params)
        ranked.sort(key=lambda c: (c.score, c.recorded_at, c.id), reverse=True)
        if position is not None:
            ranked = [c for c in ranked if position.follows(c)]
        shown = ranked[:limit]
        rows = {}
        if shown:
            db.execute(_PAGE_SQL, params | {"ids": [c.id for c in shown]})
            rows = {row[0]: row for row in db.fetchall()}
    page = SearchPage()
    now = timezone.now()
    for candidate in shown:
        row = rows[candidate.id]
        fields = MemoryExcerpt.row_fields(row, excerpt_max=EXCERPT_MAX, now=now)
        page.hits.append(
            SearchHit(**fields, score=candidate.score, matched_by=candidate.matched_by)
        )
    if len(ranked) > limit:
        last = ranked[limit - 1]
        page.next_cursor = _Position(
            mode=mode,
            score=last.score,
            recorded_at=last.recorded_at,
            id=last.id,
            snapshot=params["snapshot"],
            statistics=statistics if mode == "ranked" else None,
        ).encode(fingerprint)
    return page


def _one_snapshot(connection) -> None:
    """Let every statement of the search see the database as of its first: under READ
    COMMITTED a revision committing between the words walk and the nearest-by-meaning statement
    would put a memory and its successor on one page. A read-only transaction at REPEATABLE READ
    never fails to serialize. Sent on the raw cursor (it sets no tenant and reads no rows), before
    any other statement of the transaction, as PostgreSQL requires."""
    with connection.connection.cursor() as raw:
        raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def _count_tenant(db, params: dict) -> None:
    params["nearest_index"] = account_indexes.NEAREST.index_name(params["owner"])
    params["words_index"] = account_indexes.WORDS.index_name(params["owner"])
    db.execute(_TENANT_SIZE_SQL, params)
    (
        params["snapshot"],
        params["tenant_size"],
        params["nearest_indexed"],
        params["words_indexed"],
        params["vectors_by"],
    ) = db.fetchone()


# Plans are chosen here by the account's own indexes and the query's length, not left to table
# statistics, which are missing right after a bulk load and describe the whole table rather than
# one tenant (a search then took seconds where it takes milliseconds with these plans).
# - Words, in general: walk the tenant's memories newest first until LEXICAL_CANDIDATES match
#   (memory_owner_recent; with a type filter, those of each type merged by recency,
#   memory_owner_type_current), cheap when the query's terms are common among them, as the
#   terms of a question of many words together are; it stops after WALK_RECENT_MAX memories
#   when they are rare.
# - Words, a query of few terms in an account with its own words index (a large one,
#   memories/account_indexes.py): its terms may be rare, and the walk would then read most of
#   the account; the index reads as many entries as the account has matches, so it serves the
#   terms that a short walk finds rare (WORDS_PROBE_MAX). A question's many terms together
#   match much of the account, which the walk finds newest first at once; the index then serves
#   those of its terms that the walk's matches seldom hold (RARE_TERM_HELD_MAX).
# - Meaning, an account with its own HNSW index (a large one): that index (a sort of its vectors
#   is the plan to avoid).
# - Meaning, any other account: an exact scan of its own vectors, a small account's few, or a
#   large one's until its index is built.
# (No sort either: an index that does not give the order, scanned whole and sorted, is the
# plan the walk replaces.)
_Plan = tuple[tuple[str, str], ...]  # planner settings (name, value) for one statement
_WALK: _Plan = (("enable_bitmapscan", "off"), ("enable_sort", "off"))
# The function's matches, and for a thread filter each one's membership by its key (not a scan
# of the memberships).
_BY_KEY: _Plan = (("enable_seqscan", "off"), ("enable_bitmapscan", "off"))
_RARE_TERMS_BY_KEY = (*_BY_KEY, ("gin_fuzzy_search_limit", str(RARE_TERM_SAMPLE_MAX)))
_NEAREST: _Plan = (
    ("enable_indexscan", "on"),
    ("enable_sort", "off"),
    # A filtered nearest-neighbour scan that keeps going until it has enough rows.
    ("hnsw.iterative_scan", "relaxed_order"),
    ("hnsw.ef_search", str(account_indexes.SEARCH_LIST_SIZE)),
)
_NEAREST_NARROWED = (*_NEAREST, ("hnsw.max_scan_tuples", str(SEMANTIC_SCAN_MAX)))


def _rows(db, sql: str, params: dict, plan: _Plan) -> list[tuple]:
    """The rows of `sql` run under `plan` (settings for this statement only). The settings, the
    statement and the settings' reset go as one message: a round trip costs about as much as
    a setting's statement takes, and a search runs several statements with their own plans.
    The message starts with a SELECT so that row-level security's tenant setting goes in front
    of it (memories/tenancy.py); the cursor is then on the settings' result."""
    if not plan:
        db.execute(sql, params)
        return db.fetchall()
    settings = ", ".join(f"set_config('{name}', '{value}', true)" for name, value in plan)
    # Back to the defaults for the next statement. (The `hnsw.` settings end with the
    # transaction: no later statement of a search scans that index.)
    resets = "".join(f"; RESET {name}" for name, _ in plan if not name.startswith("hnsw."))
    db.execute(f"SELECT {settings}; {sql}{resets}", params)
    db.nextset()
    return db.fetchall()


def _ids(db, sql: str, params: dict, plan: _Plan) -> list[uuid.UUID]:
    return [row[0] for row in _rows(db, sql, params, plan)]


def _walk(
    db,
    required: str,
    where: _Where,
    params: dict,
    *,
    walk_max: int | None = None,
    terms: str = "any_term",
    most: int | None = None,
    bounded: bool = True,
    back_to: datetime | None = None,
) -> list[_Candidate]:
    """The walk's `most` (by default LEXICAL_CANDIDATES) most recent matches; `terms` names the
    parameter with the terms' tsquery. Not `bounded` (a later page's walk, see
    _WordStatistics.walked_to): every match, recorded since `back_to` if given."""
    params["walk_max"] = WALK_RECENT_MAX if walk_max is None else walk_max
    params["walk_limit"] = params["lexical_max"] if most is None else most
    since = ""
    if not bounded:
        params["walk_limit"] = None  # LIMIT NULL: all of them
        if back_to is not None:
            params["walk_since"] = back_to
            since = "AND m.recorded_at >= %(walk_since)s"
    walk = _LEXICAL_RECENT.format(
        columns=params["candidate_columns"],
        recent=_recent(where, params),
        required=required,
        selection=where.selection,
        since=since,
        terms=terms,
    )
    return _candidates(_rows(db, walk, params, _WALK), params)


def _recent(where: _Where, params: dict) -> str:
    """The walk's source: the tenant's most recent memories, or with a type filter on current
    memories, those of each type merged by recency (see _LEXICAL_RECENT)."""
    types = params.get("types")
    if not types or not where.current:
        return _RECENT.format(reach=where.reach)
    for n, memory_type in enumerate(types):
        params[f"walk_type_{n}"] = memory_type
    if len(types) == 1:
        return _RECENT_OF_TYPE.format(n=0, reach=where.reach)
    merged = " UNION ALL ".join(
        _RECENT_OF_TYPE.format(n=n, reach=where.reach) for n in range(len(types))
    )
    return f"{merged}\n        ORDER BY recorded_at DESC LIMIT %(walk_max)s"


def _rare_term_matches(
    db,
    required: str,
    where: _Where,
    params: dict,
    walk_matches: list[_Candidate],
    statistics: _WordStatistics | None = None,
) -> tuple[list[_Candidate], tuple[str, ...], datetime | None]:
    """After a walk that found `walk_matches`: matches of the query's terms that few of them
    hold, older ones too (see RARE_TERM_HELD_MAX), those terms, and the oldest match their walk
    reached when it stopped at its bound. A later page (`statistics`, its first page's) looks up
    the terms the first page chose, and walks for them as far back (a later page's walk may find
    other matches: see _WordStatistics)."""
    rare = statistics.rare_terms(params["terms"]) if statistics else None
    # The account's words index holds its current memories only: asOf walks.
    indexed = params["words_indexed"] and where.current
    if rare is None:
        if len(walk_matches) < params["lexical_max"] and not indexed:
            # The walk read all it may read: a rare term's lookup would find no match it did not.
            return [], (), None
        held = Counter(term for candidate in walk_matches for term in candidate.fields_held)
        rare = tuple(
            sorted(
                (term for term in params["terms"] if held[term] <= RARE_TERM_HELD_MAX),
                key=lambda term: held[term],
            )[:RARE_TERMS_MAX]
        )
    if not rare:
        return [], (), None
    if not indexed:
        params["rare_any_term"] = _any_term(rare)
        most = RARE_TERM_CANDIDATES * len(rare)
        walked = _walk(
            db,
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
    _word_filters(db, where, params, RARE_TERM_CANDIDATES)
    params["rare_terms"] = [_any_term((term,)) for term in rare]
    params["rare_limit"] = RARE_TERM_CANDIDATES * len(rare)
    matches = _RARE_WORD_MATCHES.format(required=_required_query(required), thread=where.thread)
    [(ids,)] = _rows(db, matches, params, _RARE_TERMS_BY_KEY)
    return _read_candidates(db, ids, params, known=walk_matches), rare, None


def _few_terms(db, required: str, where: _Where, params: dict) -> list[_Candidate]:
    """Word candidates of a query of few terms in an account with a words index: by a walk when
    its terms are common among the most recent memories, else through the index (see
    WORDS_PROBE_MAX)."""
    probed = _walk(db, required, where, params, walk_max=WORDS_PROBE_MAX)
    if len(probed) >= LEXICAL_CANDIDATES:
        return probed
    if len(probed) * WORDS_DENSE_SHARE >= WORDS_PROBE_MAX:
        walked = _walk(db, required, where, params, walk_max=WORDS_DENSE_WALK_MAX)
        if len(walked) >= LEXICAL_CANDIDATES or _walked_whole(
            db, where, params, WORDS_DENSE_WALK_MAX
        ):
            return walked  # the most recent matches, or every match there is
    return _indexed_words(db, required, where, params)


def _walked_whole(db, where: _Where, params: dict, bound: int) -> bool:
    """Whether a walk of at most `bound` memories read every memory it may read (those of the
    types and dates asked for): there are no more than that."""
    if params["tenant_size"] <= bound < TENANT_SIZE_COUNTED_MAX:
        return True  # the account holds no more (its count is exact under its cap)
    size = _WALK_SOURCE_SIZE.format(recent=_recent(where, params))
    [(readable,)] = _rows(db, size, params | {"walk_max": bound + 1}, _WALK)
    return readable <= bound


def _word_filters(db, where: _Where, params: dict, most: int) -> None:
    """_where's values as the words function takes them (it applies them itself; a missing one
    is no filter), and how many matches it gives per call: `most`, or with a thread to filter on
    too, enough of the most recent matches for some to be in it."""
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
        "word_matches_max": WORD_MATCHES_MAX if where.thread else most,
    }
    if not tenancy.enabled():
        # The function reads the tenant where row-level security does; without it, nothing else
        # has set it.
        db.execute(tenancy.SET_TENANT_SQL, [tenancy.tenant_text(params["owner"]), True])


def _required_query(required: str) -> str:
    """The words function's `required` argument: the phrases and exclusions, if any."""
    return _REQUIRED_QUERY if required else "NULL::tsquery"


def _indexed_words(db, required: str, where: _Where, params: dict) -> list[_Candidate]:
    """Word candidates through the account's words index (see _WORD_MATCHES)."""
    _word_filters(db, where, params, LEXICAL_CANDIDATES)
    matches = _WORD_MATCHES.format(
        columns=params["candidate_columns"],
        required=_required_query(required),
        thread=where.thread,
    )
    rows = _rows(db, matches, params, _BY_KEY)
    found = rows[0][0]
    candidates = _candidates([row[1:] for row in rows if row[1] is not None], params)
    if len(candidates) < LEXICAL_CANDIDATES and found == params["word_matches_max"]:
        # The thread narrowed the index's most recent matches only, and there are older ones:
        # the walk finds those among them in the thread, as without the index.
        candidates += _new(_walk(db, required, where, params), candidates)
    return candidates


def _ranked(
    db, parsed: _Query, where: _Where, params: dict, statistics: _WordStatistics | None
) -> tuple[list[_Candidate], _WordStatistics | None]:
    """Candidates by words and by meaning, fused, and the word statistics they were scored
    with. A first page (`statistics` None) computes those, and gets no candidates when the best
    is under the floor; a later page scores with its first page's, and does not abstain: the
    first page decided that the query has answers."""
    if not parsed.terms:
        return [], None  # only stop words or punctuation: nothing to look for
    # A question's vector is compared only with vectors of its own model (StoredVectors).
    vector = embed_query(parsed.wanted) if comparable_with(params["vectors_by"]) else None
    required = _REQUIRED if parsed.required else ""
    params |= {
        "terms": list(parsed.terms),
        "any_term": _any_term(parsed.terms),
        "required": parsed.required,
    }
    cosine = "NULL::float8"
    if vector is not None:
        params["vector"] = "[" + ",".join(f"{x:.6g}" for x in vector) + "]"
        cosine = "1 - (m.embedding <=> %(vector)s::vector)"
    params["candidate_columns"] = _CANDIDATE_COLUMNS.format(
        fields_held=_fields_held(parsed.terms, params), cosine=cosine
    )
    few_terms = len(parsed.terms) <= INDEXED_QUERY_TERMS_MAX
    # The account's words index holds its current memories only: asOf walks.
    by_walk = not (few_terms and params["words_indexed"] and where.current)
    # A later page walks back as far as the first page's walk reached (see _WordStatistics),
    # however many matches that is now.
    walked_to = None
    if by_walk and statistics is not None:
        candidates = _walk(db, required, where, params, bounded=False, back_to=statistics.walked_to)
    elif by_walk:
        candidates = _walk(db, required, where, params)
        if len(candidates) >= params["lexical_max"]:
            walked_to = min(candidate.recorded_at for candidate in candidates)
    else:
        candidates = _few_terms(db, required, where, params)
    word_matches = list(candidates)
    if vector is not None:
        plan: _Plan = ()
        # The account's index holds its current memories only: asOf scans exactly.
        if params["nearest_indexed"] and where.current:
            plan = _NEAREST_NARROWED if where.narrowed else _NEAREST
        meaning_ids = _ids(db, _SEMANTIC.format(required=required, filters=where.sql), params, plan)
        candidates += _read_candidates(db, meaning_ids, params, known=candidates)
    rare: tuple[str, ...] = ()
    rare_walked_to = None
    if by_walk:
        # Which terms are rare among the walk's matches is read from their candidates, on the
        # first page; a later page looks up the same ones.
        older, rare, rare_walked_to = _rare_term_matches(
            db, required, where, params, word_matches, statistics
        )
        candidates += _new(older, candidates)
    first_page = statistics is None
    if statistics is None:
        statistics = _WordStatistics.of(
            candidates, parsed.terms, params["tenant_size"], rare, walked_to, rare_walked_to
        )
    rarest = _words_scores(candidates, parsed.terms, statistics)
    for candidate in candidates:
        _fuse(candidate)
    hits = [c for c in candidates if c.matched_by]
    floor = relevance_floor(params["tenant_size"])
    # A hit that holds the query's rarest terms all is no partial match: its words score does not
    # grow with the account, and the floor it is held to does not either.
    if first_page and not any(
        c.score >= (RELEVANCE_FLOOR if rarest <= c.fields_held.keys() else floor) for c in hits
    ):
        return [], statistics
    return hits, statistics


def _read_candidates(
    db, ids: list[uuid.UUID], params: dict, known: Iterable[_Candidate] = ()
) -> list[_Candidate]:
    """The candidates `ids` but those `known` (already read), read by key (see
    _CANDIDATE_COLUMNS)."""
    read = {candidate.id for candidate in known}
    ids = [i for i in dict.fromkeys(ids) if i not in read]
    if not ids:
        return []
    params["ids"] = ids
    db.execute(_RANKED_SQL.format(columns=params["candidate_columns"]), params)
    return _candidates(db.fetchall(), params)


def _candidates(rows: list[tuple], params: dict) -> list[_Candidate]:
    """Rows of _CANDIDATE_COLUMNS as candidates."""
    terms = params["terms"]
    return [
        _Candidate(
            id=row[0],
            recorded_at=row[1],
            content_length=row[2],
            fields_held={t: held for t, held in zip(terms, row[3], strict=True) if held},
            cosine=row[4],
        )
        for row in rows
    ]


def _new(found: list[_Candidate], known: list[_Candidate]) -> list[_Candidate]:
    """Those of `found` that are not among `known`."""
    ids = {candidate.id for candidate in known}
    return [candidate for candidate in found if candidate.id not in ids]


def _topic_matches(db, parsed: _Query, where: _Where, params: dict) -> list[_Candidate]:
    """Topics spelled like the text asked for, that hold the query's phrases and none of its
    exclusions."""
    params |= {"wanted": parsed.wanted, "required": parsed.required}
    required = _REQUIRED if parsed.required else ""
    db.execute(
        _TOPIC_SQL.format(reach=where.reach, selection=where.selection, required=required), params
    )
    return [
        _Candidate(
            id=row[0],
            recorded_at=row[1],
            content_length=row[2],
            fields_held={},
            cosine=None,
            score=round(float(row[3]), 6),
            matched_by=("words",),
        )
        for row in db.fetchall()
    ]
