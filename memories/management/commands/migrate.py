"""`manage.py migrate`, always as the database owner.

The server's connections act as the row-level-security role (DATABASE_APP_ROLE, on by default;
memories/tenancy.py), which may not change the schema, and which migration memories/0007
creates in the first place. Django's own command, run inside `tenancy.as_owner()`; then the
role's privileges on the schema, granted again (tenancy.APP_ROLE_PRIVILEGES_SQL), so that a role a
DBA created after the migrations that grant them gets them too. Before anything, the owner takes
the role (or the command stops, naming the GRANT a DBA runs) rather than let migration 0007 fail
with a traceback after the migrations before it."""

from typing import Any

from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as DjangoMigrateCommand

from memories import tenancy


class Command(DjangoMigrateCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        # --plan and --check only tell what would be migrated: they grant nothing either.
        changes = not (options.get("plan") or options.get("check_unapplied"))
        with tenancy.as_owner():
            if changes:
                try:
                    tenancy.take_app_role(options["database"])
                except tenancy.AppRoleOutOfReach as refusal:
                    raise CommandError(f"Nothing migrated: {refusal}") from None
            super().handle(*args, **options)
            if changes:
                # Again: a role migration 0007 has just created, as a user with CREATEROLE,
                # is one its creator may grant but not yet act as.
                tenancy.take_app_role(options["database"])
                tenancy.grant_app_role_privileges(options["database"])
