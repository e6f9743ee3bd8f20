"""What the maintenance commands that span every tenant (`embed_memories`, `index_accounts`)
share: the maintenance_work_mem option, the session they run in, and the report of the
account index sync both end with."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.management.base import CommandError, CommandParser, OutputWrapper

from memories import account_indexes, backfill, tenancy

# PostgreSQL's spelling of a memory size (postgresql.conf units; a bare number is kB), and
# the range it accepts for maintenance_work_mem, in kB.
MEMORY_SIZE = re.compile(r"([1-9][0-9]{0,9})(kB|MB|GB|TB)?")
KILOBYTES_PER_UNIT = {"kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}
MAINTENANCE_WORK_MEM_KB = (64, 2_147_483_647)


def add_maintenance_work_mem(parser: CommandParser) -> None:
    parser.add_argument(
        "--maintenance-work-mem",
        default="512MB",
        help="PostgreSQL's maintenance_work_mem for the index builds (default 512MB); an "
        "HNSW graph builds many times faster when it fits",
    )


def check_memory_size(value: str) -> None:
    """Refuse, before any lock or session is taken, a size PostgreSQL would refuse."""
    size = MEMORY_SIZE.fullmatch(value)
    if not size:
        raise CommandError(
            "--maintenance-work-mem must be a PostgreSQL memory size such as 512MB or 2GB; "
            f"got {value!r}"
        )
    kilobytes = int(size[1]) * KILOBYTES_PER_UNIT[size[2] or "kB"]
    low, high = MAINTENANCE_WORK_MEM_KB
    if not low <= kilobytes <= high:
        raise CommandError(
            f"--maintenance-work-mem must be from {low}kB to {high}kB (about 2TB); got {value!r}"
        )


@contextmanager
def exclusive_maintenance(work_mem: str) -> Iterator[None]:
    """As the owner of the tables (past row-level security, to reach every tenant and change
    the schema), holding the database-wide backfill lock, with `work_mem` as
    maintenance_work_mem and no timeouts (`backfill.maintenance_session`). Another run holding
    the lock is a CommandError, and so is a run configured for a transaction pooler: the lock
    and the settings belong to the session, which such a pooler hands to other clients between
    transactions (and CREATE INDEX CONCURRENTLY runs outside any transaction)."""
    if settings.DATABASE_TRANSACTION_POOLER:
        raise CommandError(
            "embed_memories and index_accounts need a session of their own: run them with "
            "DATABASE_URL naming PostgreSQL directly (the primary, as the owner of the tables) "
            "and DATABASE_TRANSACTION_POOLER=0, not through PgBouncer"
        )
    with tenancy.as_owner():
        try:
            with backfill.single_run(), backfill.maintenance_session(work_mem=work_mem):
                yield
        except backfill.AlreadyRunning:
            raise CommandError(
                "embed_memories or index_accounts is running on this database; wait for it to end"
            ) from None


def report_index_sync(out: OutputWrapper) -> None:
    """`Kind.sync` of every kind of account index, and a line for each change it made."""
    for kind in account_indexes.KINDS:
        done = kind.sync()
        if done.built:
            seconds = done.seconds["built"]
            out.write(f"built {indexes_of(kind, len(done.built))} in {seconds:.1f} s")
        if done.rebuilt:
            out.write(
                f"rebuilt {indexes_of(kind, len(done.rebuilt))} (left invalid or built with "
                f"other options) in {done.seconds['rebuilt']:.1f} s"
            )
        if done.dropped:
            out.write(f"dropped {indexes_of(kind, len(done.dropped))} no longer large")


def indexes_of(kind: account_indexes.Kind, accounts: int) -> str:
    return f"the {kind.label} index of {count(accounts, 'account')}"


def count(n: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n:,} {noun if n == 1 else plural}"
