"""The index briefing and handoff read their sections through (memory_owner_type_current) also
holds each memory's project and scope: a briefing or handoff of a project or a scope then tests
them in the index, instead of reading the row of every current memory of the section's type.

Built CONCURRENTLY under another name, then the old one dropped CONCURRENTLY and the new one
renamed: reads and writes go on meanwhile, and briefings keep an index throughout (hence not
atomic). If the build fails part way, PostgreSQL leaves an invalid index of the new name: drop
it (`DROP INDEX CONCURRENTLY memory_owner_type_current_new`) and migrate again."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0022_commitment_resolved_at"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("valid_to__isnull", True)),
                fields=["owner", "memory_type", "-recorded_at"],
                include=("status", "commitment_status", "due_at", "id", "project", "scope"),
                name="memory_owner_type_current_new",
            ),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memory_owner_type_current"),
        migrations.RenameIndex(
            model_name="memory",
            new_name="memory_owner_type_current",
            old_name="memory_owner_type_current_new",
        ),
    ]
