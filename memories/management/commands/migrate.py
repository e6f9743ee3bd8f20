"""`manage.py migrate`, always as the database owner.

The server's connections act as the row-level-security role (DATABASE_APP_ROLE, on by default;
memories/tenancy.py), which may not change the schema, and which migration memories/0007
creates in the first place. Django's own command, run inside `tenancy.as_owner()`; then the
role's privileges on the schema, granted again (tenancy.APP_ROLE_PRIVILEGES_SQL), so that a role a
DBA created after the migrations that grant them gets them too. Before anything, the owner takes
the role (or the command stops, naming the GRANT a DBA runs) rather than let migration 0007 fail
with a traceback after the migrations before it."""

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as DjangoMigrateCommand
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder

from memories import tenancy


class Command(DjangoMigrateCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        # --plan and --check only tell what would be migrated: they grant nothing either.
        changes = not (options.get("plan") or options.get("check_unapplied"))
        using = options["database"]
        with tenancy.as_owner():
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
