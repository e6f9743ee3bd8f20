"""`manage.py index_accounts`: the nearest-neighbour and words indexes of every large account
(memories/account_indexes.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memories import account_indexes
from memories.management.maintenance import (
    add_maintenance_work_mem,
    check_memory_size,
    exclusive_maintenance,
    report_index_sync,
)


class Command(BaseCommand):
    help = (
        "Build the HNSW index (over vectors) and the GIN index (over words) of every account "
        f"with at least {account_indexes.LARGE_ACCOUNT_MIN:,} current memories (with a vector, "
        "for the HNSW index) that has none; rebuild one left invalid by a build that did not "
        "finish or built with other parameters, beside it, then swap the two (the old one "
        "serves searches meanwhile); and drop those of every account under half of that "
        "(an erased account counts as empty). CONCURRENTLY: reads and writes go on "
        "meanwhile. Run it from cron (hourly, say): until an account that has grown large has "
        "its indexes, its searches read its rows directly, with the same results, more "
        "slowly. Like migrate, it acts as the owner of the tables (memories.tenancy.as_owner): "
        "run it with DATABASE_URL naming the owner and the database directly (not through "
        "PgBouncer)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_maintenance_work_mem(parser)

    def handle(self, *args: Any, maintenance_work_mem: str, **options: Any) -> None:
        check_memory_size(maintenance_work_mem)
        # The lock embed_memories holds too: it drops and rebuilds these indexes.
        with exclusive_maintenance(maintenance_work_mem):
            report_index_sync(self.stdout)
