"""The vector backfill (embed_memories, and the clearing of `--reembed`) and an account's erasure
at once: both finish. Each locks the account's rows in key order; an UPDATE that joins a batch to
the table would lock them in the order it reads the table, which differs once rows were rewritten
(by a lifecycle change)."""

from __future__ import annotations

import io
import threading
import time

import psycopg
from django.core.management import call_command
from django.db import connection, connections

from accounts.erasure import erase_account
from memories.embedding import get_embedder
from memories.models import new_memory_id
from tests.factories import UserFactory

ROWS = 400


def _dsn() -> str:
    s = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        dbname=s["NAME"], user=s["USER"], password=s["PASSWORD"], host=s["HOST"], port=s["PORT"]
    )


def _lock_waiters(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as c:
        return c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()[0]


def _wait_for_waiters(dsn: str, n: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _lock_waiters(dsn) < n:
        assert time.monotonic() < deadline, f"never {n} waiters"
        time.sleep(0.05)


# A unit vector, as if another model had written it.
OTHER_MODELS_VECTOR = "[" + ",".join(["0.0625"] * 256) + "]"


def _store(user, ids: list, *, vector: str | None = None) -> None:
    """Memories of `user` with these ids, stored in key order, with `vector` (or none)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memories_memory (id, content, content_length, memory_type, topic,"
            " scope, tags, recorded_at, status, owner_id, embedding)"
            " SELECT id, 'note number ' || lpad(n::text, 6, '0'), 18, 'note', 'hangar',"
            " 'global', '{}', now(), 'active', %s, %s::vector"
            " FROM unnest(%s::uuid[]) WITH ORDINALITY AS batch(id, n) ORDER BY id",
            [user.pk, vector, ids],
        )


def _archive_older_half(user, ids: list) -> None:
    """A lifecycle change writes a new version of each row, at the table's end: the table's
    order is no longer the key order."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memory SET status = 'archived' WHERE owner_id = %s AND id < %s",
            [user.pk, ids[len(ids) // 2]],
        )
        cursor.execute("ANALYZE memories_memory")


def test_embed_memories_and_an_account_erasure_at_once_both_finish(
    account_indexes_dropped,
):
    get_embedder()  # the model loaded before the race
    user = UserFactory()
    ids = sorted(new_memory_id() for _ in range(ROWS))
    # Stored without vectors (while SEARCH_EMBEDDER was none).
    _store(user, ids)
    _archive_older_half(user, ids)
    _race_with_erasure(user, blocked=ids[ROWS // 2], command=["--batch-size=1000"])


def test_reembed_clearing_and_an_account_erasure_at_once_both_finish(account_indexes_dropped):
    """The clearing reads a batch of keys, then updates those rows: in a table of a few
    thousand memories PostgreSQL joins the two by reading the table, in its order."""
    get_embedder()
    user = UserFactory()
    ids = sorted(new_memory_id() for _ in range(ROWS))
    _store(user, ids, vector=OTHER_MODELS_VECTOR)
    # Another account's memories, after the erased one's in key order, fill the table.
    _store(UserFactory(), [new_memory_id() for _ in range(5_000)], vector=OTHER_MODELS_VECTOR)
    _archive_older_half(user, ids)
    # The erasure waits for the account's first memory, holding none; the clearing takes the
    # newer half (first in the table), then queues behind it for the first one.
    _race_with_erasure(user, blocked=ids[0], command=["--reembed"])


def _race_with_erasure(user, *, blocked, command: list[str]) -> None:
    """The account erased while embed_memories runs: both finish."""
    connections.close_all()
    dsn = _dsn()
    errors: dict[str, BaseException] = {}

    def run(name, function):
        try:
            function()
        except BaseException as error:
            errors[name] = error
        finally:
            connections.close_all()

    # A server request holds one memory for a moment (e.g. a revise closing it): both writers
    # queue behind it, the erasure first. (Only to make the interleaving deterministic: two long
    # UPDATEs overlapping do the same by themselves.)
    blocker = psycopg.connect(dsn)
    blocker.execute(
        "SELECT 1 FROM memories_memory WHERE owner_id = %s AND id = %s FOR UPDATE",
        [user.pk, blocked],
    )
    eraser = threading.Thread(target=run, args=("erasure", lambda: erase_account(user=user)))
    filler = threading.Thread(
        target=run,
        args=(
            "embed_memories",
            lambda: call_command(
                "embed_memories", *command, stdout=io.StringIO(), stderr=io.StringIO()
            ),
        ),
    )
    try:
        eraser.start()
        _wait_for_waiters(dsn, 1)
        filler.start()
        _wait_for_waiters(dsn, 2)
    finally:
        blocker.commit()
        blocker.close()
    eraser.join(60)
    filler.join(60)
    assert errors == {}, {name: f"{type(e).__name__}: {e}" for name, e in errors.items()}
