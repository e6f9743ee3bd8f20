"""Nearest-neighbour indexes by meaning: one HNSW index per large account.

A semantic search ranks one tenant's current memories by the cosine distance of their vectors to
the question's (memories/search.py). A small account is scanned exactly: its few thousand vectors
cost less to compare than an index walk. An account with LARGE_ACCOUNT_MIN current memories with
a vector or more gets an HNSW index of its own, partial on its owner and on current rows, because
one index over every account's vectors costs on both sides:
- every memory written, of any account, would join that graph, and an HNSW insert is the
  costliest part of writing a memory; with indexes per large account, a memory of an ordinary
  account joins no graph, and one of a large account joins its own account's only;
- a large account's search would walk a graph mostly made of other accounts' memories, each
  visited and then discarded by the owner filter.

`sync_indexes` builds the index of every account that has grown large and drops the index of an
account that has shrunk below half the bound (an erased account keeps no vectors; half, so that
an account hovering at the bound does not get its index built and dropped in turn). `manage.py
index_accounts` runs it (from cron: an account's growth past the bound is not noticed
otherwise), and so does `manage.py embed_memories` at the end of every run. Until an account's
index is built, its searches scan its vectors exactly: the same results, more slowly.

Index names carry the owner's id (`index_name`). Everything here changes the schema and spans
every tenant, so it runs as the owner of the tables (`tenancy.as_owner`); and outside any
transaction, which CREATE and DROP INDEX CONCURRENTLY require (in return they block neither reads
nor writes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import connection

LARGE_ACCOUNT_MIN = 5_000
INDEX_PREFIX = "memory_nearest_"
_INDEX_NAME = re.compile(rf"{INDEX_PREFIX}(\d+)")


def index_name(owner_id: int) -> str:
    return f"{INDEX_PREFIX}{int(owner_id)}"


# The graph's parameters (pgvector's HNSW options). Fewer links per node than pgvector's
# defaults (m 16, ef_construction 64): a memory joins the graph in about half the time, and its
# account's remember pays for that on every write; a search makes up for the sparser graph by
# keeping SEARCH_LIST_SIZE candidates as it walks (hnsw.ef_search, 40 by default, below the 50
# nearest a search asks for), and then finds the exact 50 nearest as often as before.
# docs/performance.md records both sides.
GRAPH_OPTIONS = {"m": 8, "ef_construction": 32}
SEARCH_LIST_SIZE = 200
# The operator class is the cosine distance's, which search orders by (`<=>`).
_CREATE = (
    "CREATE INDEX CONCURRENTLY {name} ON memories_memory "
    "USING hnsw (embedding vector_cosine_ops) WITH ({options}) "
    "WHERE owner_id = {owner} AND valid_to IS NULL"
)
_RELOPTIONS = sorted(f"{name}={value}" for name, value in GRAPH_OPTIONS.items())


@dataclass
class Sync:
    """What `sync_indexes` did: the owners whose index it built and whose it dropped."""

    built: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)


def indexes() -> dict[int, bool]:
    """Every account index: owner id -> whether it is current: valid (a CREATE INDEX
    CONCURRENTLY that did not finish leaves an invalid one, still written to, never read) and
    built with GRAPH_OPTIONS (one built with others still serves searches until it is
    rebuilt)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid, coalesce(c.reloptions, '{}') FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memories_memory'::regclass AND c.relname LIKE %s",
            [INDEX_PREFIX.replace("_", r"\_") + "%"],
        )
        rows = cursor.fetchall()
    found = {}
    for name, valid, options in rows:
        matched = _INDEX_NAME.fullmatch(name)
        if matched:
            found[int(matched[1])] = valid and sorted(options) == _RELOPTIONS
    return found


def vector_counts(*, at_least: int) -> dict[int, int]:
    """Owner id -> current memories with a vector (what an account's index holds), for the
    accounts with at least `at_least` of them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT owner_id, count(*) FROM memories_memory "
            "WHERE valid_to IS NULL AND embedding IS NOT NULL "
            "GROUP BY owner_id HAVING count(*) >= %s",
            [at_least],
        )
        return dict(cursor.fetchall())


def build_index(owner_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _CREATE.format(
                name=index_name(owner_id),
                options=", ".join(f"{name} = {value}" for name, value in GRAPH_OPTIONS.items()),
                owner=int(owner_id),
            )
        )


def drop_index(owner_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(owner_id)}")


def sync_indexes() -> Sync:
    """Build the index of every large account that has no current one (an invalid one, or one
    built with other graph parameters, is dropped first) and drop the index of every account
    under half of LARGE_ACCOUNT_MIN (counting current memories with a vector)."""
    done = Sync()
    existing = indexes()
    counts = vector_counts(at_least=LARGE_ACCOUNT_MIN // 2)
    for owner_id, current in sorted(existing.items()):
        if not current or counts.get(owner_id, 0) < LARGE_ACCOUNT_MIN // 2:
            drop_index(owner_id)
            if current:
                done.dropped.append(owner_id)
            del existing[owner_id]
    for owner_id, count in sorted(counts.items()):
        if count >= LARGE_ACCOUNT_MIN and owner_id not in existing:
            build_index(owner_id)
            done.built.append(owner_id)
    return done
