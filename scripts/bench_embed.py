"""Throughput of the vector backfill, `manage.py embed_memories`.

    .venv/bin/python scripts/bench_embed.py [--memories 20000] [--owners 4] [--batch-size 500]
                                            [--embedder wordllama] [--reembed] [--keep-index]

On the embedded PostgreSQL, in a scratch database (`threengram_bench_embed`, made afresh each
run): N memories of a few tenants inserted with one INSERT and no vectors (as rows stored before
semantic search look), then the command, run as an operator runs it (with the production
settings, row-level security on), and timed from the outside, the build of each large account's
HNSW index included. `--reembed` times a second run with `--reembed` (clear every vector, then
fill them all again); with `--keep-index` that second run keeps the indexes the first one built
and grows them row by row. Prints memories/s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "threengram_bench_embed"

# Real words, so the model embeds tokens it knows, as with real memories.
VOCABULARY = """
deploy database backup postgres index query release staging payments invoice customer meeting
tuesday friday coffee editor theme keyboard laptop travel flight hotel budget review design api
token client server cache latency error timeout retry queue worker team alice bob carol decision
prefers blocked waiting ship migrate schema vector search memory project launch roadmap quarter
hiring contract lawyer doctor dentist birthday gift
"""
WORDS = VOCABULARY.split()


def _setup(embedder: str) -> str:
    sys.path.insert(0, str(ROOT))
    from scripts.scratch_db import set_up_scratch_database

    # The production settings: DATABASE_APP_ROLE stays at its default (row-level security on),
    # as where an operator runs the command.
    return set_up_scratch_database(
        BENCH_DATABASE, SECRET_KEY="bench-only", SEARCH_EMBEDDER=embedder
    )


def _memory_text(rng: random.Random) -> tuple[str, str]:
    topic = " ".join(rng.choices(WORDS, k=2))
    content = " ".join(rng.choices(WORDS, k=rng.randint(8, 40))).capitalize() + "."
    return topic, content


def insert_memories(url: str, *, memories: int, owners: int) -> None:
    """`memories` memories spread over `owners` new accounts, without vectors, in one INSERT."""
    import psycopg

    from accounts.models import User

    owner_ids = [User.objects.create_user(username=f"bench{n}").pk for n in range(owners)]
    rng = random.Random(7)  # noqa: S311 - reproducible text, not security
    # As the owner (the URL's user), past row-level security, like a restore of old data.
    with psycopg.connect(url, autocommit=True) as conn:
        texts = [_memory_text(rng) for _ in range(memories)]
        conn.execute(
            "INSERT INTO memories_memory (id, owner_id, topic, content, content_length, "
            "memory_type, scope, tags, recorded_at, status) "
            "SELECT uuidv7(), o, t, c, length(c), 'note', 'personal', '{}', now(), 'active' "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(o, t, c)",
            [
                [owner_ids[n % owners] for n in range(memories)],
                [topic for topic, _ in texts],
                [content for _, content in texts],
            ],
        )
        # As a table that has been in service: visibility settled, statistics known.
        conn.execute("VACUUM (ANALYZE) memories_memory")


def timed_command(*args: str) -> float:
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("embed_memories", *args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    # Accounts of 5,000 memories by default: each large enough for an HNSW index of its own.
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--embedder", default="wordllama", help="a SEARCH_EMBEDDER value")
    parser.add_argument("--reembed", action="store_true", help="also time a --reembed run")
    parser.add_argument(
        "--keep-index", action="store_true", help="run the command with --keep-index"
    )
    args = parser.parse_args()
    url = _setup(args.embedder)
    insert_memories(url, memories=args.memories, owners=args.owners)
    from memories.embedding import get_embedder

    get_embedder()  # loaded before the clock starts, as in a server process
    n = args.memories
    options = [f"--batch-size={args.batch_size}", *(["--keep-index"] if args.keep_index else [])]
    seconds = timed_command(*options)
    print(f"fill     {n} memories in {seconds:.1f} s: {n / seconds:,.0f} memories/s")
    if args.reembed:
        seconds = timed_command(*options, "--reembed")
        print(f"reembed  {n} memories in {seconds:.1f} s: {n / seconds:,.0f} memories/s")


if __name__ == "__main__":
    main()
