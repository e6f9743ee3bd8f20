#!/usr/bin/env python
"""Foundation figures, printed as a table:

- record_memory and revise_memory latency (the services behind the `remember` and `revise` tools)
  with 1,000,000 memories in the table (target p95 < 5 ms each);
- erasing an account that holds 100,000 memories, in one transaction (target < 10 s).

Runs in a separate database (`threengram_bench`, created and migrated on first use, reused after)
on the embedded PostgreSQL, or on the server named by DATABASE_URL (the database name is replaced).
Usage: .venv/bin/python scripts/bench_foundation.py [--memories 1000000] [--samples 500]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = "threengram_bench"


def _bench_database_url() -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from threengram.embedded_db import _ensure_database, start

    base = os.environ.get("DATABASE_URL") or start()
    params = conninfo_to_dict(base)
    _ensure_database(make_conninfo(**{**params, "dbname": "postgres"}), BENCH_DB)
    return make_conninfo(**{**params, "dbname": BENCH_DB})


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def seed(total: int, big_tenant_rows: int, tenants: int) -> None:
    """1 tenant with `big_tenant_rows` memories; the rest spread over `tenants - 1` others."""
    from django.db import connection

    from accounts.models import User

    have = connection.cursor()
    have.execute("SELECT count(*) FROM memories_memory")
    existing = have.fetchone()[0]
    if existing >= total:
        print(f"reusing {existing:,} seeded memories")
        return
    print(f"seeding {total:,} memories over {tenants:,} tenants ...", flush=True)
    started = time.perf_counter()
    User.objects.bulk_create(
        [User(username=f"bench{i}", password="!") for i in range(tenants)], ignore_conflicts=True
    )
    ids = list(
        User.objects.filter(username__startswith="bench")
        .order_by("id")
        .values_list("id", flat=True)
    )
    big, others = ids[0], ids[1:]
    rest = total - big_tenant_rows
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, topic,
                scope, project, tags, recorded_at, status, commitment_status)
            SELECT uuidv7(), %s, c, char_length(c), 'note', 'topic ' || (g %% 500), 'personal',
                   NULL, ARRAY['bench'], now() - make_interval(secs => g), 'active', NULL
            FROM generate_series(1, %s) g,
                 LATERAL (SELECT 'big tenant memory ' || g || ' ' || repeat('x', 200)) t(c)
            """,
            [big, big_tenant_rows],
        )
        cursor.execute(
            """
            INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, topic,
                scope, project, tags, recorded_at, status, commitment_status)
            SELECT uuidv7(), (%s::bigint[])[1 + (g %% %s)], c, char_length(c),
                   (ARRAY['decision','fact','note','preference'])[1 + (g %% 4)],
                   'topic ' || (g %% 500), 'work', 'project ' || (g %% 7), ARRAY['bench'],
                   now() - make_interval(secs => g), 'active', NULL
            FROM generate_series(1, %s) g,
                 LATERAL (SELECT 'memory ' || g || ' ' || repeat('y', 200)) t(c)
            """,
            [others, len(others), rest],
        )
        cursor.execute("ANALYZE memories_memory")
    print(f"seeded in {time.perf_counter() - started:.1f} s", flush=True)


def time_calls(label: str, call, samples: int) -> dict:
    durations = []
    for i in range(samples):
        started = time.perf_counter()
        call(i)
        durations.append((time.perf_counter() - started) * 1000)
    return {
        "operation": label,
        "n": samples,
        "p50": statistics.median(durations),
        "p95": percentile(durations, 95),
        "p99": percentile(durations, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--big-tenant", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = _bench_database_url()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
    # The domain services are called directly, for no tenant: as the owner, past row-level security.
    os.environ.setdefault("DATABASE_APP_ROLE", "")
    # Seeding a million rows and erasing 100,000 in one statement outlast the servers' 5 s cut-off.
    os.environ.setdefault("DATABASE_STATEMENT_TIMEOUT_MS", "0")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from accounts.erasure import erase_account
    from accounts.models import User
    from memories.models import Memory
    from memories.services import record_memory, revise_memory

    call_command("migrate", verbosity=0)
    seed(args.memories, args.big_tenant, args.tenants)
    table_rows = Memory.objects.count()

    writer = User.objects.create(username=f"writer-{time.time_ns()}", password="!")
    run = time.time_ns()
    rows = [
        time_calls(
            "remember",
            lambda i: record_memory(
                owner=writer, memory_type="note", topic="bench", content=f"r {run} {i}"
            ),
            args.samples,
        )
    ]
    targets = list(Memory.objects.owned_by(writer).current().values_list("id", flat=True))
    rows.append(
        time_calls(
            "revise",
            lambda i: revise_memory(
                owner=writer, predecessor_id=targets[i], content=f"v {run} {i}"
            ),
            args.samples,
        )
    )

    # Erasure of a fresh 100,000-memory account (copied rows, so the seed stays reusable).
    victim = User.objects.create(username=f"victim-{time.time_ns()}", password="!")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, topic,
                scope, project, tags, recorded_at, status, commitment_status)
            SELECT uuidv7(), %s, c, char_length(c), 'decision', 'topic ' || g, 'work',
                   'project x', ARRAY['a', 'b'], now(), 'active', NULL
            FROM generate_series(1, %s) g,
                 LATERAL (SELECT 'victim memory ' || g || repeat('z', 200)) t(c)
            """,
            [victim.pk, args.big_tenant],
        )
    started = time.perf_counter()
    result = erase_account(user=victim)
    erase_seconds = time.perf_counter() - started
    assert result.counts["memories"] == args.big_tenant

    print()
    print(
        f"machine: {platform.node()} {os.cpu_count()} cores, {platform.python_version()}, "
        f"PostgreSQL {connection.cursor().connection.info.server_version}"
    )
    print(f"memories in table: {table_rows:,}")
    print(f"{'operation':<10} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  target")
    for row in rows:
        print(
            f"{row['operation']:<10} {row['n']:>5} {row['p50']:>8.2f} {row['p95']:>8.2f} "
            f"{row['p99']:>8.2f}  p95 < 5 ms: {'PASS' if row['p95'] < 5 else 'FAIL'}"
        )
    print(
        f"erase_account of {args.big_tenant:,} memories: {erase_seconds:.2f} s (one transaction)"
        f"  target < 10 s: {'PASS' if erase_seconds < 10 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
