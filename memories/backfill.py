"""Vectors for the memories that lack one: rows stored before semantic search, or while
`SEARCH_EMBEDDER` was `none`, or cleared for a change of model (`manage.py embed_memories`).

Rows are visited in primary-key order, (owner_id, id), each batch written in a short
transaction of its own. A run may stop anywhere: every committed batch stays, and the next run
picks up what is still missing. The server keeps writing meanwhile: a vector is written only
where the column is still empty, so a row a server process embedded in between is left as it is
(the append-only trigger would refuse a replacement anyway).

The large accounts' HNSW indexes over the vectors (memories/account_indexes.py) are the slow
part of a fill: each vector written joins its account's graph one by one, which costs many times
what the model and the rest of the UPDATE cost together, whereas building an index over all
vectors at once is cheap. So a large fill may drop them first and build them again at the end, both
CONCURRENTLY (neither blocks reads or writes); meanwhile semantic search ranks the same memories
by an exact scan.

Everything here spans every tenant and changes the schema: the command runs it as the owner of
the tables (`tenancy.as_owner`), past row-level security.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from django.db import connection, connections, transaction

from memories.embedding import Embedder, memory_text
from memories.models import ERASED

Key = tuple[int, uuid.UUID]
# Sorts before every (owner_id, id): user ids start at 1.
FIRST_KEY: Key = (0, uuid.UUID(int=0))

# An erased memory keeps no vector: it would stand for the text erasure removed, or for the
# sentinel, which no question is about.
_MISSING = "embedding IS NULL AND content <> %s"

_NEXT_MISSING = f"""
SELECT owner_id, id, topic, content, tags, project FROM memories_memory
 WHERE {_MISSING} AND (owner_id, id) > (%s, %s)
 ORDER BY owner_id, id LIMIT %s"""  # noqa: S608 (constants)

# Only into an empty column: a concurrent writer's vector is kept, never replaced. One statement
# for the batch rather than one per row: it is parsed and planned once.
# Nor into a row an erasure overwrote after the batch was read: under READ COMMITTED the UPDATE
# re-checks its WHERE on the erased row (once the erasure commits) and skips it, where the
# append-only guard would otherwise fail the whole batch.
_FILL = """
UPDATE memories_memory m SET embedding = batch.embedding::vector
  FROM unnest(%s::bigint[], %s::uuid[], %s::text[]) AS batch(owner_id, id, embedding)
 WHERE m.owner_id = batch.owner_id AND m.id = batch.id AND m.embedding IS NULL
   AND m.content <> %s"""

# Of a batch's rows, those erased: why the fill left them (else, they had a vector by then).
_ERASED_OF_BATCH = """
SELECT count(*) FROM memories_memory m
  JOIN unnest(%s::bigint[], %s::uuid[]) AS batch(owner_id, id)
    ON m.owner_id = batch.owner_id AND m.id = batch.id
 WHERE m.content = %s"""

# The batch's rows are locked as they are read, in key order: the order an erasure locks an
# account's rows in (accounts/erasure.py). The UPDATE's join alone would lock them in the order
# it joins them, which may be the table's (a hash join, in a table of a few thousand rows), and
# the two would deadlock once lifecycle changes have moved rows. MATERIALIZED: the batch is a
# statement of its own, whose every row is locked before the UPDATE reaches it.
_CLEAR = """
WITH batch AS MATERIALIZED (
    SELECT owner_id, id FROM memories_memory
     WHERE embedding IS NOT NULL AND (owner_id, id) > (%s, %s)
     ORDER BY owner_id, id LIMIT %s FOR UPDATE)
UPDATE memories_memory m SET embedding = NULL FROM batch
 WHERE m.owner_id = batch.owner_id AND m.id = batch.id
RETURNING m.owner_id, m.id"""

# A vector's components go as integers times 10^-8: formatting integers is several times faster
# than formatting floats. Each component moves by at most half of 10^-8, about float32's own
# rounding for the components of a unit vector: no cosine notices.
_DECIMALS = 8


@dataclass(frozen=True)
class Batch:
    """One batch's outcome: rows visited, rows changed, and of the rows left as they were, those
    an erasure reached between the read and the write (the others had a vector by then)."""

    visited: int
    changed: int
    erased: int = 0


def count_missing() -> int:
    """Memories, of every tenant, that are not erased and have no vector."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM memories_memory WHERE {_MISSING}", [ERASED])  # noqa: S608
        return cursor.fetchone()[0]


def counts_by_owner(owners: list[int]) -> dict[int, tuple[int, int]]:
    """Owner id -> (current memories missing a vector, current memories with one), for
    `owners`: what a fill would add to each one's nearest-neighbour index, and what it holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT owner_id, count(*) FILTER (WHERE {_MISSING}),"  # noqa: S608 (constant)
            " count(*) FILTER (WHERE embedding IS NOT NULL)"
            " FROM memories_memory WHERE owner_id = ANY(%s) AND valid_to IS NULL"
            " GROUP BY owner_id",
            [ERASED, owners],
        )
        return {owner: (missing, embedded) for owner, missing, embedded in cursor.fetchall()}


def fill(embedder: Embedder, *, size: int) -> Iterator[Batch]:
    """Embed every memory missing a vector, `size` per model call and per write, in key order;
    yield each batch's outcome once its write has committed.

    The model embeds the next batch in a thread of its own while this one's UPDATE runs: the
    database's work and the model's then overlap on a machine with more than one core instead of
    taking turns. Each batch is still read, embedded and written in that order, so a vector the
    server writes, or an erasure that commits, between the read and the write is respected by
    the write (`_FILL`). The worker runs in the caller's context (row-level security's role and
    tenant are context variables); its database connections, if the model opened any, are
    closed with it. Close the iterator (`contextlib.closing`) if you stop before its end."""
    return _fill(embedder, size, contextvars.copy_context())


def _fill(embedder: Embedder, size: int, context: contextvars.Context) -> Iterator[Batch]:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as worker:

        def embedded(rows: list[tuple]) -> Future[list[str]]:
            return worker.submit(context.copy().run, _vector_literals_of, embedder, rows)

        try:
            rows = _missing_after(FIRST_KEY, size)
            pending = embedded(rows) if rows else None
            while rows and pending is not None:
                last = (rows[-1][0], rows[-1][1])
                following = _missing_after(last, size)
                literals = pending.result()
                pending = embedded(following) if following else None
                changed, erased = _write(rows, literals)
                yield Batch(visited=len(rows), changed=changed, erased=erased)
                rows = following
        finally:
            worker.submit(connections.close_all).result()


def _missing_after(after: Key, size: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(_NEXT_MISSING, [ERASED, *after, size])
        return cursor.fetchall()


def _vector_literals_of(embedder: Embedder, rows: list[tuple]) -> list[str]:
    texts = [
        memory_text(topic=topic, content=content, tags=tags, project=project)
        for _, _, topic, content, tags, project in rows
    ]
    return vector_literals(embedder.embed(texts))


def _write(rows: list[tuple], literals: list[str]) -> tuple[int, int]:
    """Write each row's vector where the column is still empty; the rows changed, and the rows
    left that an erasure reached first."""
    owners, ids = [row[0] for row in rows], [row[1] for row in rows]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_FILL, [owners, ids, literals, ERASED])
        changed = cursor.rowcount
        if changed == len(rows):
            return changed, 0
        # A statement of its own: its snapshot holds the erasure the UPDATE waited for.
        cursor.execute(_ERASED_OF_BATCH, [owners, ids, ERASED])
        return changed, cursor.fetchone()[0]


def clear(*, size: int) -> Iterator[Batch]:
    """Clear every vector, `size` per statement, in key order; yield each batch's outcome."""
    after = FIRST_KEY
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_CLEAR, [*after, size])
            keys = cursor.fetchall()
        if not keys:
            return
        after = max(keys)
        yield Batch(visited=len(keys), changed=len(keys))


def vector_literals(vectors: np.ndarray) -> list[str]:
    """pgvector's text form of each row of `vectors`."""
    scaled = np.rint(np.asarray(vectors, dtype=np.float64) * 10**_DECIMALS).astype(np.int64)
    exponent = f"e-{_DECIMALS}"
    return [
        str(row).replace(",", f"{exponent},").replace("]", f"{exponent}]")
        for row in scaled.tolist()
    ]


class AlreadyRunning(Exception):
    """Another backfill holds the database's lock."""


# pg_try_advisory_lock's key: one backfill or index sync per database at a time (two would embed
# the same rows twice and race over the indexes).
_RUN_LOCK = int.from_bytes(b"tg-embed", "big") >> 1


@contextmanager
def single_run() -> Iterator[None]:
    """Hold the database-wide backfill lock for the session, or raise AlreadyRunning."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_RUN_LOCK])
        if not cursor.fetchone()[0]:
            raise AlreadyRunning
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_RUN_LOCK])


@contextmanager
def maintenance_session(*, work_mem: str | None = None) -> Iterator[None]:
    """No statement or lock timeout for the session meanwhile, and `work_mem` (a PostgreSQL
    size, e.g. '1GB') as maintenance_work_mem. The server's timeouts are sized for requests,
    whereas a batch may walk far past rows that have a vector, wait for an erasure's row locks,
    and a concurrent index build waits for every transaction in flight, then reads the whole
    table. An HNSW build that outgrows maintenance_work_mem goes on many times slower."""
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        cursor.execute("SET lock_timeout = 0")
        if work_mem is not None:
            cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [work_mem])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            # Back to the connection's own values (its libpq startup options).
            cursor.execute("RESET statement_timeout")
            cursor.execute("RESET lock_timeout")
            cursor.execute("RESET maintenance_work_mem")
