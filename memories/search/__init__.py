"""Search over one tenant's memories: words and meaning fused into one score, a relevance floor
so that a question about something never stored finds nothing, and keyset paging with a signed
cursor.

The package, by concern (this module only names what the rest of the code imports):
- page.py: one page (search_memories), the orchestrator; empty.py: why a page is empty
  (EmptyBecause), and the kind of memory a query names (KindAsked).
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
- Why nothing came back: an empty first page of a query says why (EmptyBecause, empty.py), so
  that an agent can tell "nothing stored" from "ask otherwise", from what the search found
  anyway (it runs no other statement for it).
"""

from __future__ import annotations

from memories.search.cursor import CURSOR_MAX
from memories.search.empty import (
    NO_MATCH,
    NOTHING_LISTED,
    NOTHING_RECORDED_BY,
    NOTHING_STORED,
    NOTHING_TO_SEARCH_BY,
    UNDER_FLOOR,
    EmptyBecause,
    KindAsked,
)
from memories.search.filters import (
    COMMITMENT_STATUS_FILTERS,
    STATUS_FILTERS,
    SearchFilters,
    clean_filters,
)
from memories.search.page import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    OMIT_QUERY,
    QUERY_MAX,
    TOPIC_FALLBACK_WORDS_MAX,
    TOPIC_SIMILARITY_MIN,
    SearchHit,
    SearchPage,
    search_memories,
)

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
