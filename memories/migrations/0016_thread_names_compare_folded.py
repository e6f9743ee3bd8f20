"""Thread names compare case-folded beyond lower(): the final sigma and the sharp s fold too
(memories.models.thread_name_key), so a Greek name in capitals finds it in lower case, and
"STRASSE" is "Strasse" written with a sharp s. Two threads of an account that the new comparison
finds alike first get the later one's name marked with the start of its id (its owner can rename
it), so that the new unique index can be built."""

import django.db.models.functions.text
from django.conf import settings
from django.db import migrations, models

KEY = "replace(replace(lower({name}), '\u03c2', '\u03c3'), '\u00df', 'ss')"

# The later of two alike names: 89 characters of it and " (" + 8 of its id + ")", at most 100.
MARK_ALIKE = f"""
UPDATE memories_thread t
SET name = left(t.name, 89) || ' (' || left(t.id::text, 8) || ')'
WHERE t.name <> '[erased]' AND EXISTS (
    SELECT 1 FROM memories_thread o
    WHERE o.owner_id = t.owner_id AND o.name <> '[erased]'
      AND {KEY.format(name="o.name")} = {KEY.format(name="t.name")}
      AND (o.created_at, o.id) < (t.created_at, t.id)
)
"""  # noqa: S608 (constants only)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0015_thread_names_nfc"),
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
                django.db.models.functions.text.Replace(
                    django.db.models.functions.text.Replace(
                        django.db.models.functions.text.Lower(models.F("name")),
                        models.Value("\u03c2"),
                        models.Value("\u03c3"),
                    ),
                    models.Value("\u00df"),
                    models.Value("ss"),
                ),
                condition=models.Q(("name", "[erased]"), _negated=True),
                name="thread_unique_name",
            ),
        ),
    ]
