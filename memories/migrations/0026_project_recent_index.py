"""An index of each account's current memories of a project, newest first
(memory_owner_project_recent): a search filtered to a project walks the project's own memories
instead of the account's newest, and a project's existence is one probe of it.

Built CONCURRENTLY (hence not atomic): reads and writes go on meanwhile. If the build fails part
way, PostgreSQL leaves an invalid index: drop it (`DROP INDEX CONCURRENTLY
memory_owner_project_recent`) and migrate again."""

import django.db.models.functions.text
import django.db.models.lookups
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0025_project_spelling_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=models.Q(
                    django.db.models.lookups.IsNull(
                        django.db.models.functions.text.Lower("project"), False
                    ),
                    ("valid_to__isnull", True),
                ),
                fields=["owner", "project", "-recorded_at"],
                name="memory_owner_project_recent",
            ),
        ),
    ]
