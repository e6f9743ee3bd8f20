"""An index of each account's current projects by their lower case (memory_owner_project_key):
a write naming a project looks up the spelling the account already gives it in two probes of
it, rather than reading the account's memories.

Built CONCURRENTLY (hence not atomic): reads and writes go on meanwhile. If the build fails part
way, PostgreSQL leaves an invalid index: drop it (`DROP INDEX CONCURRENTLY
memory_owner_project_key`) and migrate again."""

import django.db.models.functions.text
import django.db.models.lookups
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0024_word_matches_filter_commitment_states"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                models.F("owner"),
                django.db.models.functions.text.Lower("project"),
                models.F("project"),
                condition=models.Q(
                    django.db.models.lookups.IsNull(
                        django.db.models.functions.text.Lower("project"), False
                    ),
                    ("valid_to__isnull", True),
                ),
                name="memory_owner_project_key",
            ),
        ),
    ]
