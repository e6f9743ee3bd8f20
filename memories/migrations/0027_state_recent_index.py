"""An index of each account's current commitments of each state, newest first
(memory_owner_state_recent): a search filtered to commitment states walks those commitments
instead of every commitment of the account.

Built CONCURRENTLY (hence not atomic): reads and writes go on meanwhile. If the build fails part
way, PostgreSQL leaves an invalid index: drop it (`DROP INDEX CONCURRENTLY
memory_owner_state_recent`) and migrate again."""

import django.db.models.functions.text
import django.db.models.lookups
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0026_project_recent_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                condition=models.Q(
                    django.db.models.lookups.IsNull(
                        django.db.models.functions.text.Lower("commitment_status"), False
                    ),
                    ("valid_to__isnull", True),
                ),
                fields=["owner", "commitment_status", "-recorded_at"],
                name="memory_owner_state_recent",
            ),
        ),
    ]
