"""Data generator for scripts/bench_tools.py: a separate benchmark database with 1,000 tenants and
1,000,000 memories (the largest tenant 100,000), written with set-based SQL (INSERT ... SELECT
generate_series), so it takes minutes, not hours.

    .venv/bin/python scripts/bench_data.py [--memories 1000000] [--tenants 1000]
        [--largest 100000] [--no-vectors] [--no-analyze]

Text is synthetic: words drawn from a 4,000-word pseudo vocabulary with a skewed distribution
(word rank = 4000 * u^1.3 for content, u^1.5 for topics, u uniform): the most common word is in
about 7 % of memories, like a frequent content word of real notes once stopwords are removed,
and most words are in well under 1 %. With `--vectors` (the default) every memory also gets
an `embedding`: the unit-length sum of three vectors drawn by a hash of its number from a pool
of 4,096 random unit vectors (numpy, fixed seed), so vectors are distinct, mildly correlated and,
for timing, as good as real ones. The large tenants' indexes (HNSW over vectors, GIN over words)
are built after the load (`manage.py index_accounts`). The database is `threengram_bench` on the
embedded server (or BENCH_DATABASE_URL); it is dropped and recreated on every run. Never point it
at a database you care about.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DATABASE = "threengram_bench_tools"  # not the foundation benchmark's database

# The types of the generated memories, in turn (a note in four, ...); scripts/bench_tools.py
# draws the memories it adds from the same mix.
MEMORY_TYPES = (
    *("note",) * 3,
    *("fact",) * 2,
    *("decision",) * 2,
    "commitment",
    "preference",
    "blocker",
    "pattern",
    "event",
)
# GENERATE cycles through them by g %% 12, and derives other columns from g / 12.
assert len(MEMORY_TYPES) == 12
GENERATE = """
-- Word k of a 4,000-word pseudo vocabulary: 5 to 8 letters from md5(k) over a 16-letter
-- alphabet, so words share trigrams about as unevenly as real ones do (a tiny syllable
-- alphabet would make every trigram common and every fuzzy match expensive).
CREATE FUNCTION pg_temp.bench_word(k int) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT translate(substr(md5(k::text), 1, 5 + k %% 4), '0123456789', 'ghijklmnop')
$$;

INSERT INTO accounts_user (password, is_superuser, username, first_name, last_name, email,
                           is_staff, is_active, date_joined)
SELECT '!', false, 'bench' || g, '', '', 'bench' || g || '@example.com', false, true, now()
FROM generate_series(1, %(tenants)s) g;

-- Tenant 1 holds %(largest)s memories, the rest share the remainder evenly.
INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, topic, scope,
                             project, tags, recorded_at, status, valid_to, commitment_status,
                             due_at, embedding)
SELECT uuidv7(), owner_id, content, char_length(content), memory_type, topic,
       (ARRAY['personal','work','home-lab','research'])[1 + (g %% 4)],
       CASE WHEN g %% 3 = 0 THEN NULL ELSE 'project-' || (g %% 25) END,
       ARRAY['t' || (g %% 50)], recorded_at,
       -- Divided by 12 first: independent of memory_type, which cycles with g %% 12.
       CASE WHEN (g / 12) %% 20 = 3 THEN 'archived' ELSE 'active' END,
       CASE WHEN (g / 12) %% 10 = 5 THEN recorded_at + interval '1 day' END,
       CASE WHEN memory_type = 'commitment'
            THEN (ARRAY['open','open','waiting','resolved','resolved','expired'])[1 + (g / 12) %% 6]
       END,
       CASE WHEN memory_type = 'commitment' AND (g / 12) %% 2 = 0
            THEN now() + ((g / 24) %% 60 - 30) * interval '1 day' END,
       /*embedding*/NULL
FROM (
    SELECT g,
           CASE WHEN g <= %(largest)s THEN u.first_id
                ELSE u.first_id + 1 + ((g - %(largest)s) %% (%(tenants)s - 1)) END AS owner_id,
           (%(memory_types)s::text[])[1 + (g %% 12)] AS memory_type,
           now() - (random() * 365) * interval '1 day' AS recorded_at,
           -- i.n keeps each aggregate at the inner level (so it runs per row).
           (SELECT string_agg(
                       pg_temp.bench_word(floor(4000 * power(random(), 1.5))::int + 0 * i.n), ' ')
              FROM generate_series(1, 3 + (g %% 3)) AS i(n)) AS topic,
           (SELECT string_agg(
                       pg_temp.bench_word(floor(4000 * power(random(), 1.3))::int + 0 * i.n), ' ')
              FROM generate_series(1, 15 + (g %% 60)) AS i(n)) || ' #' || g AS content
    FROM generate_series(%(first)s::int, %(last)s::int) g,
         (SELECT min(id) AS first_id FROM accounts_user WHERE username LIKE 'bench%%') u
) rows;
"""


# Three pool vectors per memory, picked by independent hashes of its number: 4,096^3 / 6
# combinations, so no two memories share a vector (duplicates would distort the HNSW graph).
EMBEDDING = """(SELECT l2_normalize(a.v + b.v + c.v) FROM pg_temp.bench_vector a,
        pg_temp.bench_vector b, pg_temp.bench_vector c
  WHERE a.k = hashint4extended(g, 1) & 4095 AND b.k = hashint4extended(g, 2) & 4095
    AND c.k = hashint4extended(g, 3) & 4095)"""
VECTOR_POOL = 4096


def bench_url() -> str:
    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url
    from threengram.embedded_db import start

    return make_conninfo(start(database="postgres"), dbname=BENCH_DATABASE)


def recreate(url: str) -> None:
    admin = make_conninfo(url, dbname="postgres")
    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--largest", type=int, default=100_000)
    parser.add_argument(
        "--vectors",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fill every memory's embedding (default: on)",
    )
    parser.add_argument(
        "--analyze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-analyze: leave the table as a bulk load leaves it, without column statistics "
        "(autovacuum stays off for it until scripts/bench_tools.py runs without --no-analyze)",
    )
    options = parser.parse_args()
    url = bench_url()
    recreate(url)
    env = os.environ | {"DATABASE_URL": url, "SECRET_KEY": "bench-only", "DEBUG": "0"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as connection:
        # No statistics from autovacuum half-way through the load (when the table holds only
        # the largest tenant): the table has none until the ANALYZE at the end, or, with
        # --no-analyze, until scripts/bench_tools.py runs.
        connection.execute("ALTER TABLE memories_memory SET (autovacuum_enabled = false)")
        # The large accounts' indexes are built once after the load, as index_accounts builds
        # them: far faster than maintaining them row by row.
        generate(
            connection,
            memories=options.memories,
            tenants=options.tenants,
            largest=options.largest,
            vectors=options.vectors,
        )
        loaded = time.monotonic()
        subprocess.run(
            [sys.executable, "manage.py", "index_accounts", "--maintenance-work-mem=2GB"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        indexed = time.monotonic()
        if options.analyze:
            connection.execute("ALTER TABLE memories_memory RESET (autovacuum_enabled)")
            connection.execute("VACUUM ANALYZE")
        else:
            connection.execute("VACUUM memories_memory")  # visibility map only, no statistics
        count = connection.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
    print(
        f"{count} memories for {options.tenants} tenants in {BENCH_DATABASE}: "
        f"load {loaded - started:.0f} s, indexes {indexed - loaded:.0f} s, "
        f"vacuum{' analyze' if options.analyze else ''} {time.monotonic() - indexed:.0f} s"
    )


def generate(
    connection: psycopg.Connection,
    *,
    memories: int,
    tenants: int,
    largest: int,
    vectors: bool = False,
    chunk: int = 20_000,
) -> None:
    """Insert the tenants and memories on `connection` (migrated, autocommit), `chunk` memories
    per statement, with a progress bar on stderr; with `vectors`, an embedding for each."""
    create_function, insert_tenants, insert_memories = GENERATE.split(";\n\n")
    params = {
        "memories": memories,
        "tenants": tenants,
        "largest": largest,
        "memory_types": list(MEMORY_TYPES),
    }
    connection.execute(create_function, params)
    if vectors:
        insert_memories = insert_memories.replace("/*embedding*/NULL", EMBEDDING)
        create_vector_pool(connection)
    connection.execute(insert_tenants, params)
    for first in range(1, memories + 1, chunk):
        last = min(first + chunk - 1, memories)
        connection.execute(insert_memories, params | {"first": first, "last": last})
        done = last / memories
        bar = "#" * int(done * 40)
        sys.stderr.write(f"\rcorpus [{bar:<40}] {last:,}/{memories:,} memories")
        sys.stderr.flush()
    sys.stderr.write("\n")


def create_vector_pool(connection: psycopg.Connection) -> None:
    """pg_temp.bench_vector: VECTOR_POOL random unit vectors (numpy, fixed seed) numbered from 0."""
    import numpy as np

    from memories.embedding import EMBEDDING_DIMENSIONS

    pool = np.random.default_rng(55).standard_normal((VECTOR_POOL, EMBEDDING_DIMENSIONS))
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    connection.execute("CREATE TEMP TABLE bench_vector (k int PRIMARY KEY, v vector)")
    with connection.cursor().copy("COPY pg_temp.bench_vector (k, v) FROM STDIN") as copy:
        for k, vector in enumerate(pool):
            copy.write_row((k, "[" + ",".join(f"{x:.6f}" for x in vector) + "]"))


if __name__ == "__main__":
    main()
