"""The search's SQL statements, and how one is sent with the planner settings it runs under
(fetch_rows). WALK, the plan of every read of memories newest first, is here beside the walk's
statements; the other plans are beside the code that runs their statements (candidates.py,
meaning.py, listing.py).
"""

from __future__ import annotations

import uuid

from django.db.backends.utils import CursorWrapper

from memories.excerpts import EXCERPT_COLUMNS
from memories.search.query import Query
from memories.thread_sql import thread_members_sql

Plan = tuple[tuple[str, str], ...]  # planner settings (name, value) for one statement

# What scoring reads of a candidate: where it holds each query term (see fields_held_sql), and its
# cosine similarity to the query. The walk and the words function select them as they find
# their candidates (the rows are in hand); those found otherwise (by meaning, a rare term's
# lookup) are read by key. The page's excerpts are read afterwards, for the page alone
# (PAGE_SQL).
CANDIDATE_COLUMNS = "m.id, m.recorded_at, m.content_length, {fields_held}, {cosine}"
RANKED_SQL = """
SELECT {columns}
FROM memories_memory m
WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s::uuid[])
"""
# The labels of the search vector's parts (migration memories/0009): the topic, the content (D:
# rows from before tags were indexed) and the tags and project.
_FIELDS = (("A", "A"), ("B", "BD"), ("C", "C"))
# The most recent memories matching any term through the account's words index, as the
# function gives them (migrations memories/0018 and 0024: it applies every filter but the
# thread's, and returns what scoring reads), those of them in the thread if one is asked for, and
# how many the function gave (on every row; on a row of NULLs when none is in the thread).
WORD_MATCHES = """WITH matches AS MATERIALIZED (
        SELECT w.*, %(owner)s::bigint AS owner_id
        FROM memory_recent_word_matches(
            %(any_term)s::tsquery, {required}, %(word_from)s::timestamptz,
            %(word_until)s::timestamptz, %(word_status)s::text, %(word_types)s::text[],
            %(word_scope)s::text, %(word_project)s::text, %(word_matches_max)s,
            %(word_commitment_states)s::text[], %(word_resolved_from)s::timestamptz) w)
    SELECT (SELECT count(*) FROM matches), kept.*
    FROM (SELECT) one LEFT JOIN LATERAL (
        SELECT {columns} FROM matches m WHERE TRUE {thread}
        ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(lexical_max)s) kept ON TRUE"""
# The most recent memories matching any term among the WALK_RECENT_MAX most recent memories (the
# walk's bound when the query's terms are rare in a large tenant: a subquery with a LIMIT is planned
# on its own, so the walk stops there whatever the terms). The selection (status, type, scope,
# project, commitment state, thread) is applied to what the walk has read, not while it reads: a
# selective filter would otherwise make it read far past WALK_RECENT_MAX memories to find that many
# that pass. A small thread's members are what it reads (RECENT_IN_THREAD); else on current
# memories, the walk reads only what the narrowest index it may take leads to, and its bound
# counts those (filters.WALK_SOURCES): a project's memories
# (memory_owner_project_recent), else the commitments of the states asked for
# (memory_owner_state_recent), else the memories of the types asked for
# (memory_owner_type_current), else those of the scope (memory_owner_scope_recent); a state's or
# a type's newest first, merged by recency (candidates._merged).
LEXICAL_RECENT = """(SELECT {columns} FROM ({recent}) m
      WHERE TRUE {selection} {since}
      AND m.search_vector @@ %({terms})s::tsquery {required}
      ORDER BY m.recorded_at DESC LIMIT %(walk_limit)s)"""
# The sources a walk reads, each at most %({most})s memories, newest first. Those of a project,
# commitment states or a scope state the lower case's test, their index's condition (see its
# comment in memories/models.py).
RECENT = """
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(snapshot)s {reach}
        ORDER BY m.recorded_at DESC LIMIT %({most})s"""
# A walk reads its source newest first through an index that gives that order, whatever the
# table's statistics say (see candidates.py on how plans are chosen): no bitmap scan, and no
# sort either, since an index that does not give the order, scanned whole and sorted, is the
# plan the walk replaces.
WALK: Plan = (("enable_bitmapscan", "off"), ("enable_sort", "off"))
# Of a project, a scope or a commitment state: `column` = %(`value`)s.
RECENT_WITH = """(
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.{column} = %({value})s
          AND lower(m.{column}) IS NOT NULL AND m.recorded_at <= %(snapshot)s {reach}
        ORDER BY m.recorded_at DESC LIMIT %({most})s)"""
RECENT_OF_TYPE = """(
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.memory_type = %({value})s
          AND m.recorded_at <= %(snapshot)s {reach}
        ORDER BY m.recorded_at DESC LIMIT %({most})s)"""
# Of a thread (thread_sql.THREAD_READ_BY_MEMBER_MAX members at most): its members, each read by
# its key (thread_members_sql, which says why so), then sorted.
_IN_THREAD = (
    thread_members_sql("thread")
    + """
        WHERE m.recorded_at <= %(snapshot)s {reach}"""
)
RECENT_IN_THREAD = f"""({_IN_THREAD}
        ORDER BY m.recorded_at DESC LIMIT %({{most}})s)"""
# A thread that a walk reads whole: its walk (LEXICAL_RECENT's matches) and its nearest by meaning
# (SEMANTIC_OF_SOURCE's, compared exactly) from one read of its members, which by key costs as
# much as either statement apart; the last column tells the walk's matches.
WALK_AND_NEAREST = """(SELECT {columns},
           m.matched AND m.newest <= coalesce(%(walk_limit)s, m.newest)
    FROM (SELECT m.*,
                 row_number() OVER (PARTITION BY m.matched ORDER BY m.recorded_at DESC) AS newest,
                 row_number() OVER (ORDER BY m.distance) AS nearest
          FROM (SELECT m.*, (m.search_vector @@ %(any_term)s::tsquery {since}) AS matched,
                       m.embedding <=> %(vector)s::vector AS distance
                FROM ({recent}) m
                WHERE TRUE {selection} {required}) m) m
    WHERE (m.matched AND m.newest <= coalesce(%(walk_limit)s, m.newest))
       OR (m.distance IS NOT NULL AND m.nearest <= %(semantic_max)s))"""
# How many memories a walk may read, up to one past its bound (its source's LIMIT).
WALK_SOURCE_SIZE = "SELECT count(*) FROM ({recent}) m"
# Each of the rare terms' most recent matches through the account's words index (see
# candidates.RARE_TERM_HELD_MAX), one call of the function per term; those in the thread if one
# is asked for, the most recent RARE_TERM_CANDIDATES per term of them.
RARE_WORD_MATCHES = """SELECT array(
    SELECT m.id FROM (
        SELECT DISTINCT w.id, w.recorded_at, %(owner)s::bigint AS owner_id
        FROM unnest(%(rare_terms)s::tsquery[]) AS t(term),
             memory_recent_word_matches(
                t.term, {required}, %(word_from)s::timestamptz, %(word_until)s::timestamptz,
                %(word_status)s::text, %(word_types)s::text[], %(word_scope)s::text,
                %(word_project)s::text, %(word_matches_max)s,
                %(word_commitment_states)s::text[], %(word_resolved_from)s::timestamptz) w) m
    WHERE TRUE {thread}
    ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(rare_limit)s)"""
# Served by the account's own HNSW index when it has one (memories/account_indexes.py), else an
# exact scan of its vectors; see meaning.py.
SEMANTIC = """(SELECT m.id FROM memories_memory m
      WHERE m.owner_id = %(owner)s AND m.embedding IS NOT NULL
        AND m.recorded_at <= %(snapshot)s {required} {filters}
      ORDER BY m.embedding <=> %(vector)s::vector LIMIT %(semantic_max)s)"""
# The nearest of the memories of a project, commitment states or a scope, each compared exactly, in
# an account with its own HNSW index (candidates.COMPARED_EXACTLY_MAX): read through their own index
# ({recent}), in a subquery with a LIMIT, which keeps the HNSW index from serving its ORDER BY.
SEMANTIC_OF_SOURCE = """(SELECT m.id FROM ({recent}) m
      WHERE m.embedding IS NOT NULL {required} {filters}
      ORDER BY m.embedding <=> %(vector)s::vector LIMIT %(semantic_max)s)"""
REQUIRED_QUERY = "%(required)s::tsquery"  # memories.search.query._required
REQUIRED = f"AND m.search_vector @@ {REQUIRED_QUERY}"
# The instant the search ranks memories recorded by (see cursor.Position), the tenant's size (see
# scoring.TENANT_SIZE_COUNTED_MAX), whether it has valid nearest-neighbour and words indexes of its
# own, how many entries its nearest-neighbour index held when last counted (see
# TENANT_SIZE_COUNTED_MAX: no more than its current memories now), and how many memories the filter
# that chooses what a walk reads holds ({source_size}: see candidates.source_size_sql). A first
# page's instant is this process's clock, or the tenant's newest memory if later: a memory stamped
# by a host whose clock runs ahead of this one's (and its revision, stamped no earlier) is found at
# once, not once this clock has caught up.
TENANT_SIZE_SQL = """
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
       coalesce((SELECT c.reltuples FROM pg_class c
                 WHERE c.oid = to_regclass(%(nearest_index)s)), 0),
       (SELECT v.embedder FROM memories_storedvectors v WHERE v.id = 1),
       {source_size}
"""
# Of the account's %(recent)s most recent memories (RECENT), or of a thread's that a walk reads
# (RECENT_IN_THREAD).
TOPIC_SQL = """
SELECT m.id, m.recorded_at, m.content_length, similarity(m.topic, %(wanted)s)
FROM ({recent}) m
WHERE TRUE {selection} {required}
  AND similarity(m.topic, %(wanted)s) >= %(topic_min)s
"""
# A search without a query: the memories the filters select, newest first, from where the last
# page ended (`after`: empty on a first page), among the next %(listed_window)s memories of the
# account (the filters are applied to what that window read, as the walk's are, so that a filter
# few memories pass costs no more than the window); and the window's last memory, when there are
# more after it, where the next page starts.
LISTED_ACCOUNT_WINDOW = """
        SELECT m.* FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(snapshot)s {reach} {after}
        ORDER BY m.recorded_at DESC, m.id DESC"""
LISTED_SQL = """
SELECT m.id, m.recorded_at, m.content_length
FROM ({window} LIMIT %(listed_window)s) m
WHERE TRUE {selection}
ORDER BY m.recorded_at DESC, m.id DESC
LIMIT %(listed_max)s
"""
LISTED_WINDOW_END = """
SELECT m.id, m.recorded_at FROM ({window}
        OFFSET %(listed_window)s - 1 LIMIT 2) m
"""
# The recorded-at bound alone too: the index's key is (owner, [type,] recorded_at), and the row
# comparison's id is not in it.
LISTED_AFTER = (
    "AND m.recorded_at <= %(after_recorded_at)s"
    " AND (m.recorded_at, m.id) < (%(after_recorded_at)s, %(after_id)s::uuid)"
)
# A listing of some types, or else of a project or a scope (without asOf): the window is the
# account's memories of those types, or of that project or scope, current at the first page's
# instant, newest first, so a type, project or scope few of the account's memories have fills
# its pages as a common one does. Each type's current memories are read through
# memory_owner_type_current (`LISTED_CURRENT_OF_TYPE`), which holds every column the filters
# read but a resolution time (LISTED_COLUMNS; `resolved_at` is added, read from the table,
# only when resolvedAfter asks for it): an index-only read of at most %(listed_window)s entries
# of each type, merged by recency. A project's or a scope's, through its index
# (`LISTED_CURRENT_WITH`, rows read from the table). Those indexes hold current memories only;
# those current at the instant and revised since are the predecessors of the memories recorded
# after it, found first (`LISTED_RECORDED_SINCE`, through memory_owner_recent) and read by key
# (`LISTED_REVISED_SINCE`, of the types, the project or the scope): a revision closes its
# predecessor at its successor's recording time, whatever the clocks (services._revise).
LISTED_COLUMNS = (
    "m.owner_id, m.id, m.recorded_at, m.memory_type, m.status, m.commitment_status, m.scope,"
    " m.project"
)
LISTED_CURRENT_OF_TYPE = """(
        SELECT {columns} FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.memory_type = %({value})s
          AND m.valid_to IS NULL AND m.recorded_at <= %(snapshot)s {dates} {after}
        ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(listed_window)s + 1)"""
LISTED_CURRENT_WITH = """(
        SELECT {columns} FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.{column} = %({value})s
          AND lower(m.{column}) IS NOT NULL
          AND m.valid_to IS NULL AND m.recorded_at <= %(snapshot)s {dates} {after}
        ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(listed_window)s + 1)"""
# A listing of a thread (thread_sql.THREAD_READ_BY_MEMBER_MAX members at most), at any instant: its
# members; a memory revised since the first page's instant keeps its membership (its successor
# joins the thread beside it), so no memory revised since needs finding.
LISTED_IN_THREAD = f"""{_IN_THREAD} {{after}}
        ORDER BY m.recorded_at DESC, m.id DESC"""
LISTED_REVISED_SINCE = """(
        SELECT {columns} FROM memories_memory m
        WHERE m.owner_id = %(owner)s AND m.id = ANY(%(listed_revised)s::uuid[])
          AND m.{column} = ANY(%(listed_values)s) AND m.valid_to > %(snapshot)s
          AND m.recorded_at <= %(snapshot)s {dates} {after}
        ORDER BY m.recorded_at DESC, m.id DESC)"""
LISTED_SOURCE_WINDOW = """{branches}
        ORDER BY recorded_at DESC, id DESC"""
# The page of such a listing, with each hit's content length (not in the index) read by key.
LISTED_SOURCE_SQL = """
SELECT l.id, l.recorded_at, c.content_length
FROM (SELECT m.id, m.recorded_at FROM ({window} LIMIT %(listed_window)s) m
      WHERE TRUE {selection}
      ORDER BY m.recorded_at DESC, m.id DESC
      LIMIT %(listed_max)s) l
JOIN memories_memory c ON c.owner_id = %(owner)s AND c.id = l.id
ORDER BY l.recorded_at DESC, l.id DESC
"""
# How many memories were recorded after a listing's instant (up to one past %(listed_window)s),
# and the memories they revised. In recency order, so that under WALK (no sort) the
# recency index reads only those: the primary key (owner, id), which also serves the owner's
# condition, would read every memory of the account to test its recording time.
LISTED_RECORDED_SINCE = """
SELECT count(*),
       coalesce(array_agg(n.predecessor_id) FILTER (WHERE n.predecessor_id IS NOT NULL), '{}')
FROM (SELECT m.predecessor_id FROM memories_memory m
      WHERE m.owner_id = %(owner)s AND m.recorded_at > %(snapshot)s
      ORDER BY m.recorded_at DESC
      LIMIT %(listed_window)s + 1) n
"""
PAGE_SQL = (
    f"SELECT {EXCERPT_COLUMNS}, m.resolved_at FROM memories_memory m "  # noqa: S608 (constants)
    "WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s::uuid[])"
)
# Of the page's hits that may need a window (memories.search.matches): each one's content within
# its bound (the CHECK constraint's), and the same as ts_headline gives it whole (HighlightAll)
# with each word matching %(matched_terms)s (the query's terms, in the word forms the search
# vector holds them in) between two marks (%(headline)s: matches.HEADLINE_OPTIONS).
MATCHES_SQL = """
SELECT m.id, c.content,
       ts_headline('threengram_unaccented', c.content, %(matched_terms)s::tsquery, %(headline)s)
FROM memories_memory m, LATERAL (SELECT left(m.content, %(content_max)s) AS content) c
WHERE m.owner_id = %(owner)s AND m.id = ANY(%(windowed)s::uuid[])
"""


def fields_held_sql(parsed: Query, params: dict) -> str:
    """An SQL array with, for each of the query's terms, the labels of the fields that hold it
    ("AB": topic and content; "" for none). Each a match of the search vector against a
    constant query, which PostgreSQL does in C, rather than unnesting every lexeme of every
    candidate to find the few asked for."""
    labels = []
    for n, term in enumerate(parsed.terms):
        params[f"term_{n}"] = parsed.any_term((term,))
        checks = []
        for label, weights in _FIELDS:
            params[f"term_{n}_{label}"] = parsed.any_term((term,), weights)
            checks.append(
                f"CASE WHEN m.search_vector @@ %(term_{n}_{label})s::tsquery "
                f"THEN '{label}' ELSE '' END"
            )
        labels.append(
            f"CASE WHEN m.search_vector @@ %(term_{n})s::tsquery "
            f"THEN {' || '.join(checks)} ELSE '' END"
        )
    return f"ARRAY[{', '.join(labels)}]::text[]"


def fetch_rows(cursor: CursorWrapper, sql: str, params: dict, plan: Plan) -> list[tuple]:
    """The rows of `sql` run under `plan` (settings for this statement only). The settings, the
    statement and the settings' reset go as one message: a round trip costs about as much as
    a setting's statement takes, and a search runs several statements with their own plans.
    The message starts with a SELECT so that row-level security's tenant setting goes in front
    of it (memories/tenancy.py); the cursor is then on the settings' result."""
    if not plan:
        cursor.execute(sql, params)
        return cursor.fetchall()
    settings = ", ".join(f"set_config('{name}', '{value}', true)" for name, value in plan)
    # Back to the defaults for the next statement. (The `hnsw.` settings end with the
    # transaction: no later statement of a search scans that index.)
    resets = "".join(f"; RESET {name}" for name, _ in plan if not name.startswith("hnsw."))
    cursor.execute(f"SELECT {settings}; {sql}{resets}", params)
    cursor.nextset()
    return cursor.fetchall()


def fetch_ids(cursor: CursorWrapper, sql: str, params: dict, plan: Plan) -> list[uuid.UUID]:
    return [row[0] for row in fetch_rows(cursor, sql, params, plan)]
