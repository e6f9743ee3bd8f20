#!/usr/bin/env python3
"""Memory used by the JSON export of one account with many memories (accounts/export.py).

    .venv/bin/python scripts/bench_export.py [N]      # N memories, default 100000

Fills a throwaway database (`threengram_bench` on the embedded server, or DATABASE_URL's server
when set) with one account holding N memories, then measures, with tracemalloc (peak Python
allocations in every thread) and wall time:

1. streamed: the export as served, the async generator accounts.export.export_memories_json
   (server-side cursor, CHUNK_ROWS rows per fetch), each piece dropped once "sent";
2. baseline, buffered: the same pieces all held at once, which is what Django's ASGI handler does
   to a *synchronous* StreamingHttpResponse iterator (sync_to_async(list));
3. baseline, naive: json.dumps of the whole queryset's values() list.

The database is dropped at the end. Results go in docs/performance.md.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
# The domain services are called directly, for no tenant: as the owner, past row-level security.
os.environ.setdefault("DATABASE_APP_ROLE", "")
os.environ.setdefault("DEBUG", "1")
BENCH_DB = "threengram_bench"


def _database() -> None:
    if os.environ.get("DATABASE_URL"):
        return
    from threengram.embedded_db import start

    os.environ["DATABASE_URL"] = start(database=BENCH_DB)


def _fill(count: int):
    from django.core.management import call_command
    from django.utils import timezone

    from accounts.models import User
    from memories.models import Memory

    call_command("migrate", verbosity=0)
    owner, _ = User.objects.get_or_create(username="bench-export")
    existing = Memory.objects.filter(owner=owner).count()
    now = timezone.now()
    batch = []
    for number in range(existing, count):
        content = f"Memory {number}: " + "the team decided to keep the export streaming. " * 4
        batch.append(
            Memory(
                owner=owner,
                content=content,
                content_length=len(content),
                memory_type="decision",
                topic=f"topic {number % 100}",
                tags=["bench", f"t{number % 10}"],
                recorded_at=now - timezone.timedelta(seconds=count - number),
            )
        )
        if len(batch) == 5000:
            Memory.objects.bulk_create(batch)
            batch = []
    Memory.objects.bulk_create(batch)
    return owner


def _measure(label: str, run) -> tuple[str, float, float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    size = run()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return label, peak / 2**20, seconds, size


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", nargs="?", type=int, default=100_000, help="memories (100000)")
    count = parser.parse_args().count
    _database()
    import django

    django.setup()
    from django.db import connection

    from accounts.export import CHUNK_ROWS, FIELDS, export_memories_json
    from memories.models import Memory

    owner = _fill(count)
    connection.close()  # the async export opens its own connection in its worker thread

    def streamed() -> int:
        async def consume() -> int:
            size = 0
            async for piece in export_memories_json(owner_id=owner.pk, username="bench"):
                size += len(piece.encode())
            return size

        return asyncio.run(consume())

    def buffered() -> int:
        async def consume() -> list[str]:
            return [piece async for piece in export_memories_json(owner_id=owner.pk, username="b")]

        return sum(len(piece.encode()) for piece in asyncio.run(consume()))

    def naive() -> int:
        import json

        from django.core.serializers.json import DjangoJSONEncoder

        rows = list(Memory.objects.filter(owner=owner).values(*FIELDS))
        return len(json.dumps({"memories": rows}, cls=DjangoJSONEncoder).encode())

    print(f"export of {count} memories, CHUNK_ROWS={CHUNK_ROWS}")
    print(f"{'variant':<28}{'peak MiB':>10}{'seconds':>10}{'output MiB':>12}")
    for label, peak, seconds, size in (
        _measure("streamed (as served)", streamed),
        _measure("buffered (sync iterator)", buffered),
        _measure("naive json.dumps", naive),
    ):
        print(f"{label:<28}{peak:>10.1f}{seconds:>10.2f}{size / 2**20:>12.1f}")
    connection.close()
    if not os.environ.get("KEEP_BENCH_DB"):
        _drop()


def _drop() -> None:
    import psycopg
    from django.conf import settings

    from threengram.embedded_db import DATABASE_NAME

    params = settings.DATABASES["default"]
    if params["NAME"] != BENCH_DB:
        return  # never drop a database we did not create
    admin_url = os.environ["DATABASE_URL"].replace(BENCH_DB, "postgres")
    assert DATABASE_NAME != BENCH_DB
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


if __name__ == "__main__":
    main()
