"""A ranked search's candidates by meaning: the nearest current memories to the query's embedding
(memories/embedding.py), SEMANTIC_CANDIDATES at most, and the plans they are read under:
- An account with its own HNSW index (a large one, memories/account_indexes.py): that index (a
  sort of its vectors is the plan to avoid), its scan cut short under a narrowing filter
  (SEMANTIC_SCAN_MAX); or, when the filter that chooses what a walk reads holds few enough
  memories (candidates.COMPARED_EXACTLY_MAX), each of those compared exactly.
- Any other account: an exact scan of its own vectors, a small account's few, or a large one's
  until its index is built.
candidates.py decides when meaning is read and reads the memories found by key.
"""

from __future__ import annotations

import uuid

from django.db.backends.utils import CursorWrapper

from memories import account_indexes
from memories.search.filters import Where
from memories.search.sql import SEMANTIC, SEMANTIC_OF_SOURCE, WALK, Plan, fetch_ids

SEMANTIC_CANDIDATES = 50
# A nearest-neighbour search with a narrowing filter (type, scope, project, thread, dates) stops
# after about this many entries of the account's HNSW index (nearest first) instead of pgvector's
# default 20,000: a search finds about (the share of the account that passes its filters) times
# this many candidates by meaning, so a filter that leaves a small share finds fewer by meaning
# (words still find theirs) rather than walking the graph far and long.
SEMANTIC_SCAN_MAX = 5_000
_NEAREST: Plan = (
    ("enable_indexscan", "on"),
    ("enable_sort", "off"),
    # A filtered nearest-neighbour scan that keeps going until it has enough rows.
    ("hnsw.iterative_scan", "relaxed_order"),
    ("hnsw.ef_search", str(account_indexes.SEARCH_LIST_SIZE)),
)
_NEAREST_NARROWED = (*_NEAREST, ("hnsw.max_scan_tuples", str(SEMANTIC_SCAN_MAX)))


def nearest_ids(
    cursor: CursorWrapper,
    required: str,
    where: Where,
    params: dict,
    *,
    through_index: bool,
    source: str | None,
) -> list[uuid.UUID]:
    """The nearest memories by meaning that pass the filters: of `source` (a walk's source, see
    candidates._recent), each compared exactly; else through the account's HNSW index
    (`through_index`), narrowed when a filter or a walk's source too large to compare exactly
    narrows the search, or by an exact scan of the account's vectors."""
    if source is not None:
        # Read as the walk reads its source (WALK), then sorted by distance: every plan sorts
        # once there, and one that sorted the source too would read all of it.
        semantic = SEMANTIC_OF_SOURCE.format(recent=source, required=required, filters=where.sql)
        return fetch_ids(cursor, semantic, params, WALK)
    plan: Plan = ()
    if through_index:
        narrowed = where.narrowed or params["source_size"] is not None
        plan = _NEAREST_NARROWED if narrowed else _NEAREST
    return fetch_ids(cursor, SEMANTIC.format(required=required, filters=where.sql), params, plan)
