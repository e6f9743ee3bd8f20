"""`manage.py migrate`, always as the database owner.

The server's connections act as the row-level-security role (DATABASE_APP_ROLE, on by default;
memories/tenancy.py), which may not change the schema, and which migration memories/0007
creates in the first place. Django's own command, run inside `tenancy.as_owner()`; then the
role's privileges on the schema, granted again (tenancy.APP_ROLE_PRIVILEGES_SQL), so that a role a
DBA created after the migrations that grant them gets them too. Before anything, the owner takes
the role (or the command stops, naming the GRANT a DBA runs) rather than let migration 0007 fail
with a traceback after the migrations before it; and a server the schema cannot live on (before
PostgreSQL 18, or without the `vector` extension that only a DBA may create) stops it the same
way, before the first migration, rather than halfway."""

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as DjangoMigrateCommand
from django.db import DatabaseError, connections, transaction
from django.db.migrations.recorder import MigrationRecorder

from memories import tenancy


class Command(DjangoMigrateCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        # --plan and --check only tell what would be migrated: they grant nothing either.
        changes = not (options.get("plan") or options.get("check_unapplied"))
        using = options["database"]
        with tenancy.as_owner():
            if changes:
                _refuse_an_unfit_server(using)
            role_needed = changes and _role_needed(using)
            if role_needed:
                _take_app_role(using)
            super().handle(*args, **options)
            if changes:
                if role_needed:
                    # Again: a role migration 0007 has just created, as a user with CREATEROLE,
                    # is one its creator may grant but not yet act as.
                    _take_app_role(using)
                tenancy.grant_app_role_privileges(using)


# The oldest server the migrations run on: memories/0017 folds thread names with casefold() under
# the pg_unicode_fast collation (both 18), as the memory browser's filter folds its words;
# memories/0020 changes a generated column's expression (ALTER COLUMN ... SET EXPRESSION, 17); the
# owner's grant of the role is checked with pg_has_role(..., 'SET') (16).
MINIMUM_SERVER_VERSION = 180000


def _refuse_an_unfit_server(using: str) -> None:
    """Stop, naming what is missing and who provides it, on a server the migrations would fail on
    partway: older than PostgreSQL 18, or without the `vector` extension in this database while
    the owner may not create it."""
    connection = connections[using]
    version = connection.pg_version
    if version < MINIMUM_SERVER_VERSION:
        # server_version_num: major * 10000 + minor from PostgreSQL 10, before it 9.x * 100 + y.
        major, minor = divmod(version, 10000) if version >= 100000 else divmod(version // 100, 100)
        raise CommandError(
            f"Nothing migrated: threengram needs PostgreSQL 18 or later; the server of "
            f"DATABASE_URL runs PostgreSQL {major}.{minor}."
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_database(), current_user,"
            " EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector')"
        )
        database, user, available = cursor.fetchone()
    if not available:
        raise CommandError(
            "Nothing migrated: the vector extension (pgvector) is not installed on the PostgreSQL "
            f"server of DATABASE_URL. Install it there, then a DBA runs once, in database "
            f"{database}: CREATE EXTENSION vector; then run migrate again."
        )
    if not _may_have_vector(using):
        raise CommandError(
            f"Nothing migrated: the vector extension is not created in database {database}, and "
            f"{user} may not create it. A DBA runs once, in database {database}: "
            "CREATE EXTENSION vector; then run migrate again."
        )


def _may_have_vector(using: str) -> bool:
    """Whether the database has the vector extension or the owner may create it: tried, and
    rolled back (memories/0009 creates it). Asked of the server rather than read from
    pg_roles.rolsuper: a managed service's admin role (rds_superuser, cloudsqlsuperuser) may
    create it without being a superuser."""
    try:
        with transaction.atomic(using=using), connections[using].cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
            transaction.set_rollback(True, using=using)
    except DatabaseError:
        return False
    return True


def _take_app_role(using: str) -> None:
    try:
        tenancy.take_app_role(using)
    except tenancy.AppRoleOutOfReach as refusal:
        raise CommandError(f"Nothing migrated: {refusal}") from None


def _role_needed(using: str) -> bool:
    """Whether this database needs the owner to act as the role: its servers switch to it
    (DATABASE_APP_ROLE set), or migration 0007, which grants it to the owner, is still to run.
    Otherwise a role made for another database of the server is none of this one's business."""
    if settings.DATABASE_APP_ROLE:
        return True
    applied = MigrationRecorder(connections[using]).applied_migrations()
    return ("memories", "0007_row_level_security") not in applied
