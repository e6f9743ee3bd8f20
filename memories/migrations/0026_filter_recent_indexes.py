"""Three indexes a search filtered to a project, commitment states or a scope walks, instead of
the account's newest memories or every commitment: each account's current memories of a
project, newest first (memory_owner_project_recent; a project's existence is one probe of it
too), its current commitments of a state (memory_owner_state_recent) and its current memories
of a scope (memory_owner_scope_recent; a scope's existence likewise), newest first.

Built CONCURRENTLY (hence not atomic): reads and writes go on meanwhile. If a build fails part
way, PostgreSQL leaves an invalid index: drop it (`DROP INDEX CONCURRENTLY` and its name) and
migrate again."""

import django.db.models.functions.text
import django.db.models.lookups
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


def current_with(column: str) -> models.Q:
    """The indexes' condition: current memories whose `column`'s lower case is not null (see
    the indexes' comment in memories/models.py)."""
    return models.Q(
        django.db.models.lookups.IsNull(django.db.models.functions.text.Lower(column), False),
        ("valid_to__isnull", True),
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0025_project_spelling_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=current_with(column),
                fields=["owner", column, "-recorded_at"],
                name=name,
            ),
        )
        for column, name in (
            ("project", "memory_owner_project_recent"),
            ("commitment_status", "memory_owner_state_recent"),
            ("scope", "memory_owner_scope_recent"),
        )
    ]
