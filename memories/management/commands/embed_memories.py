"""`manage.py embed_memories [--batch-size N] [--reembed] [--keep-index]`: vectors for the
memories without one (memories/backfill.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import closing
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories import account_indexes, backfill
from memories.embedding import Embedder, get_embedder
from memories.management.maintenance import (
    add_maintenance_work_mem,
    check_memory_size,
    count,
    exclusive_maintenance,
    indexes_of,
    report_index_sync,
)
from memories.models import StoredVectors

# A batch is one model call and one transaction: past this, memory grows and nothing speeds up.
BATCH_MAX = 100_000
# Progress lines at most this often: a line per batch floods a terminal on a large table.
PROGRESS_EVERY_SECONDS = 2.0


class Command(BaseCommand):
    help = (
        "Embed the memories that have no vector (stored before semantic search, or while "
        "SEARCH_EMBEDDER was none) with the model SEARCH_EMBEDDER names; erased memories are "
        "skipped. Resumable: batches commit one by one in (owner, id) order, and a re-run "
        "continues with what is still missing. Safe while the server serves traffic: each batch "
        "is a short transaction, and a vector the server wrote meanwhile is kept. A large "
        "account's HNSW index that the fill would at least double (at least as many of its "
        "memories lack a vector as have one) is dropped first and built again at the end "
        "(CONCURRENTLY, which blocks neither reads nor writes; meanwhile semantic search scans "
        "exactly), which "
        "is many times faster than growing it row by row; so is one that is not current (left "
        "invalid, or built with other parameters) that the fill writes into. --keep-index "
        "drops only an invalid one the fill writes into (it serves no search). Either way, "
        f"only in an account that will count {account_indexes.LARGE_ACCOUNT_MIN:,} current "
        "memories or more after the fill: the end builds no index for a smaller one, which "
        "keeps its own unless it is under half that size (the end drops that one; but for "
        "--keep-index, it goes before the fill). Every "
        "run ends as index_accounts does: an account that has grown large gets its index. A run "
        "that stops leaves the indexes to the next run. "
        "--reembed clears every vector first, then fills them all: run it after changing "
        "SEARCH_EMBEDDER (and restarting the server with the new value); if it stops while "
        "clearing, run it again; if it stops while filling, run it without --reembed. "
        "Row-level security: like migrate, the command acts as the owner of the tables by "
        "itself (memories.tenancy.as_owner), whatever DATABASE_APP_ROLE says, to reach every "
        "tenant and rebuild the indexes: run it with the server's settings, with DATABASE_URL "
        "naming the owner and the database directly (not through PgBouncer)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=500,
            help=f"memories per model call and per transaction (default 500, at most {BATCH_MAX})",
        )
        parser.add_argument(
            "--reembed",
            action="store_true",
            help="clear every vector first, then embed every memory: after a change of model",
        )
        add_maintenance_work_mem(parser)
        parser.add_argument(
            "--keep-index",
            action="store_true",
            help="drop no HNSW index that serves searches: slower, but semantic search stays "
            "indexed",
        )

    def handle(
        self,
        *args: Any,
        batch_size: int,
        reembed: bool,
        keep_index: bool,
        maintenance_work_mem: str,
        **options: Any,
    ) -> None:
        if not 1 <= batch_size <= BATCH_MAX:
            raise CommandError(f"--batch-size must be between 1 and {BATCH_MAX}; got {batch_size}")
        check_memory_size(maintenance_work_mem)
        embedder = get_embedder()
        if embedder is None:
            # Checked before --reembed clears anything: with no model, nothing would refill.
            raise CommandError(
                f"SEARCH_EMBEDDER is {settings.SEARCH_EMBEDDER!r}: there is no model to embed "
                "with, and search ranks by words only. Set SEARCH_EMBEDDER (e.g. wordllama) and "
                "run this again."
            )
        with exclusive_maintenance(maintenance_work_mem):
            self._embed(embedder, batch_size=batch_size, reembed=reembed, keep_index=keep_index)

    def _embed(
        self, embedder: Embedder, *, batch_size: int, reembed: bool, keep_index: bool
    ) -> None:
        stored_by = StoredVectors.embedder_in_use()
        if not reembed and stored_by not in (None, embedder.name):
            raise CommandError(
                f"the stored vectors were made by {stored_by}, and SEARCH_EMBEDDER is "
                f"{embedder.name}: vectors of two models are not comparable. Run this with "
                "--reembed (or set SEARCH_EMBEDDER back)."
            )
        dropped = self._indexes_to_drop(reembed=reembed, keep_index=keep_index)
        for owner_id in dropped:
            account_indexes.NEAREST.drop(owner_id)
        if dropped:
            self.stdout.write(
                f"dropped {indexes_of(account_indexes.NEAREST, len(dropped))} for the fill"
            )
        if reembed:
            with closing(backfill.clear(size=batch_size)) as batches:
                _, cleared, _ = self._run(batches, total=None, verb="cleared")
            self.stdout.write(f"cleared {count(cleared, 'vector')}; embedding every memory again")
        if stored_by != embedder.name:
            # Every vector left is this model's (a cleared table's, or one not known before):
            # searches compare with them again.
            StoredVectors.record(embedder.name)
        missing = backfill.count_missing()
        if missing:
            self._fill(embedder, missing, batch_size)
        else:
            self.stdout.write("nothing to embed: every memory that is not erased has a vector")
        report_index_sync(self.stdout)

    def _indexes_to_drop(self, *, reembed: bool, keep_index: bool) -> list[int]:
        """Unless --keep-index, the accounts whose nearest-neighbour index goes before the fill,
        to be built again after it: building afresh takes a fraction of the time that growing
        an index row by row does. One the fill would at least double, and one the fill writes
        into that is not current (left invalid, or built with other graph parameters), since it
        is rebuilt after the fill anyway. Any other index that is not current is rebuilt beside
        itself at the end (`Kind.sync`), serving searches until then. With --keep-index, only an
        invalid index the fill writes into: it serves no search, and is rebuilt anyway. Either way,
        only the index of an account large enough for the end to build it again: one smaller
        (an account keeps its index down to half that size) would go without one until it grew
        large again. And unless --keep-index, the index of an account under half that size, which
        the end drops: the fill would write into it for nothing."""
        existing = account_indexes.NEAREST.indexes()
        if not existing:
            return []
        invalid = account_indexes.NEAREST.invalid() if keep_index else set()
        dropped = []
        for owner_id, (missing, embedded) in backfill.counts_by_owner(sorted(existing)).items():
            if reembed:
                missing, embedded = missing + embedded, 0  # once cleared
            after = missing + embedded  # after the fill
            rebuilt = after >= account_indexes.LARGE_ACCOUNT_MIN
            if keep_index:
                goes = rebuilt and owner_id in invalid
            else:
                dropped_at_the_end = after < account_indexes.LARGE_ACCOUNT_MIN // 2
                outgrown = missing >= embedded or not existing[owner_id]
                goes = dropped_at_the_end or (rebuilt and outgrown)
            if missing > 0 and goes:
                dropped.append(owner_id)
        return sorted(dropped)

    def _fill(self, embedder: Embedder, missing: int, batch_size: int) -> None:
        started = time.perf_counter()
        # Closed however the loop ends: the fill's worker thread ends with it.
        with closing(backfill.fill(embedder, size=batch_size)) as batches:
            visited, done, erased = self._run(batches, total=missing, verb="embedded")
        seconds = time.perf_counter() - started
        self.stdout.write(
            self.style.SUCCESS(
                f"embedded {count(done, 'memory')} with {embedder.name} in {seconds:.1f} s "
                f"({done / max(seconds, 1e-9):,.0f} memories/s)"
            )
        )
        if erased:
            # Accounts erased between our read and our write: an erased memory holds no vector.
            self.stdout.write(f"skipped {count(erased, 'memory')} erased meanwhile")
        if visited > done + erased:
            # Rows a server process embedded between our read and our write: theirs are kept.
            kept = count(visited - done - erased, "vector")
            self.stdout.write(f"kept {kept} the server wrote meanwhile")

    def _run(
        self, batches: Iterable[backfill.Batch], *, total: int | None, verb: str
    ) -> tuple[int, int, int]:
        """Run the batches, reporting progress; rows visited, changed and found erased."""
        visited, changed, erased, reported = 0, 0, 0, 0
        started = last_report = time.perf_counter()
        for batch in batches:
            visited += batch.visited
            changed += batch.changed
            erased += batch.erased
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_SECONDS:
                last_report, reported = now, visited
                self._progress(verb, visited, total, now - started)
        if visited != reported:
            self._progress(verb, visited, total, time.perf_counter() - started)
        return visited, changed, erased

    def _progress(self, verb: str, done: int, total: int | None, seconds: float) -> None:
        # Rows other writers leave without a vector meanwhile may push `done` past the count.
        of_total = f"/{max(total, done):,}" if total is not None else ""
        rate = done / max(seconds, 1e-9)
        # Plain text: stderr's default style is the error colour.
        self.stderr.write(f"{verb} {done:,}{of_total} ({rate:,.0f}/s)", style_func=str)
