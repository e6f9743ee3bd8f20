"""A backup restores as docs/operations.md says: pg_dump of the database, pg_restore into a new
one. The restore loads the rows under an empty search path, computing each memory's generated
search vector as it goes, so whatever that column calls must not depend on the search path."""

import subprocess
import uuid

from psycopg import connect, sql
from psycopg.conninfo import make_conninfo

from infra import asyncdb
from memories.services import record_memory
from scripts.scale_out import postgres_bin
from tests.factories import UserFactory
from tests.memories.conftest import server_admin


def test_a_dump_restores_into_a_new_database_and_is_found_by_its_words(transactional_db, tmp_path):
    owner = UserFactory()
    stored = record_memory(
        owner=owner, memory_type="fact", topic="Team", content="Daily stand-ups are written."
    )
    # Its pairs of characters are computed by functions the search vector's function calls.
    office = record_memory(
        owner=owner, memory_type="fact", topic="Office", content="東京都渋谷区の事務所。"
    )
    params = asyncdb.connection_kwargs()
    params.pop("autocommit")
    dump = tmp_path / "threengram.dump"
    subprocess.run(
        [postgres_bin("pg_dump"), "--format=custom", f"--file={dump}", make_conninfo(**params)],
        check=True,
        capture_output=True,
    )
    restored = f"threengram_restore_{uuid.uuid4().hex[:8]}"
    with server_admin() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(restored)))
    try:
        into = make_conninfo(**params | {"dbname": restored})
        run = subprocess.run(
            [
                postgres_bin("pg_restore"),
                "--no-comments",
                "--exit-on-error",
                f"--dbname={into}",
                str(dump),
            ],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        with connect(into) as db:
            found = db.execute(
                "SELECT id FROM memories_memory WHERE search_vector @@ 'standup'::tsquery"
            ).fetchall()
            paired = db.execute(
                "SELECT id FROM memories_memory WHERE search_vector @@ '渋谷 <-> 谷区'::tsquery"
            ).fetchall()
        assert found == [(stored.id,)]
        assert paired == [(office.id,)]
    finally:
        with server_admin() as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(restored)))
