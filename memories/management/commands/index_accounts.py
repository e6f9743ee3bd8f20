"""`manage.py index_accounts`: the nearest-neighbour index of every large account
(memories/nearest.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories import backfill, nearest, tenancy
from memories.management.commands.embed_memories import MEMORY_SIZE, report_index_sync


class Command(BaseCommand):
    help = (
        "Build the HNSW index of every account with at least "
        f"{nearest.LARGE_ACCOUNT_MIN:,} current memories that has none (or only an invalid one, "
        "left by a build that did not finish), and drop the index of every account under half "
        "of that. CONCURRENTLY: reads and writes go on meanwhile. Run it from cron (hourly, "
        "say): until an account that has grown large has its index, its semantic searches scan "
        "its vectors exactly, with the same results, more slowly. Like migrate, it acts as the "
        "owner of the tables (memories.tenancy.as_owner): run it with DATABASE_URL naming the "
        "owner and the database directly (not through PgBouncer)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--maintenance-work-mem",
            default="512MB",
            help="PostgreSQL's maintenance_work_mem for the index builds (default 512MB); an "
            "HNSW graph builds many times faster when it fits",
        )

    def handle(self, *args: Any, maintenance_work_mem: str, **options: Any) -> None:
        if not MEMORY_SIZE.fullmatch(maintenance_work_mem):
            raise CommandError(
                "--maintenance-work-mem must be a PostgreSQL memory size such as 512MB or 2GB; "
                f"got {maintenance_work_mem!r}"
            )
        with tenancy.as_owner():
            try:
                # The lock embed_memories holds: it drops and rebuilds these indexes.
                with (
                    backfill.single_run(),
                    backfill.maintenance_session(work_mem=maintenance_work_mem),
                ):
                    report_index_sync(self.stdout)
            except backfill.AlreadyRunning:
                raise CommandError(
                    "embed_memories or index_accounts is running on this database; wait for it "
                    "to end"
                ) from None
