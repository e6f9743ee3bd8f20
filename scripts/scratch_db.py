"""A scratch database on the embedded PostgreSQL for a script: dropped and made afresh, migrated,
with Django set up against it. Never point it at a database you care about."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def set_up_scratch_database(name: str, **environment: str) -> str:
    """Recreate database `name`, set Django up on it with `environment` (production settings
    otherwise), migrate it, and return its URL."""
    sys.path.insert(0, str(ROOT))
    import psycopg
    from psycopg.conninfo import make_conninfo

    from threengram.embedded_db import start

    admin_url = start(database="postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(admin_url, dbname=name)
    os.environ.update(DATABASE_URL=url, DEBUG="0", **environment)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url
