"""A memory's row keeps its search vector and embedding in the table's own pages.

PostgreSQL moves a row's long values out of line (TOAST) once the row passes about 2 kB, as a
memory with its embedding and search vector often does. A search then fetches them from the
TOAST table for every row it walks and every match it scores (each full-text match fetches the
vector again). `toast_tuple_target` 8160, the most a page allows, keeps any row that fits a page
whole; a memory's content is bounded (memories.bounds.CONTENT_MAX), so nearly every memory's
does. Rows written before this migration keep their layout until they are rewritten
(docs/operations.md).

Changing the setting takes a SHARE UPDATE EXCLUSIVE lock only: reads and writes go on."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0013_word_matches_apply_the_filters"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (toast_tuple_target = 8160)",
            "ALTER TABLE memories_memory RESET (toast_tuple_target)",
        ),
    ]
