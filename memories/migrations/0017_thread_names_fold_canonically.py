"""Thread names compare by Unicode's canonical caseless match under a collation named in the
expression (memories.models.ThreadNameKey), not lower() under the database's locale: under a C
locale lower() folds ASCII only ("Équipe" and "équipe" were two threads), and a capital whose
lower case decomposes ("ΠΡΟΪ́ΣΤΟΡΊΑ") never found its thread. Two threads of an account that the
new comparison finds alike first get the later one's name marked with the start of its id (its
owner can rename it), so that the new unique index can be built."""

from django.conf import settings
from django.db import migrations, models

import memories.models

KEY = (
    "normalize(casefold(normalize(({name})::text, NFD) COLLATE pg_unicode_fast), NFD)"
)

# Every later one of names alike: 61 characters of it and " (" + its id + ")", at most 100 and
# unlike any other (the start of an id is its creation time, shared by threads made together).
MARK_ALIKE = f"""
UPDATE memories_thread t
SET name = left(t.name, 61) || ' (' || t.id::text || ')'
WHERE t.name <> '[erased]' AND EXISTS (
    SELECT 1 FROM memories_thread o
    WHERE o.owner_id = t.owner_id AND o.name <> '[erased]'
      AND {KEY.format(name="o.name")} = {KEY.format(name="t.name")}
      AND (o.created_at, o.id) < (t.created_at, t.id)
)
"""  # noqa: S608 (constants only)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0016_thread_names_compare_folded"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(MARK_ALIKE, migrations.RunSQL.noop),
        migrations.RemoveConstraint(
            model_name="thread",
            name="thread_unique_name",
        ),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(
                models.F("owner"),
                memories.models.ThreadNameKey(models.F("name")),
                condition=models.Q(("name", "[erased]"), _negated=True),
                name="thread_unique_name",
            ),
        ),
    ]
