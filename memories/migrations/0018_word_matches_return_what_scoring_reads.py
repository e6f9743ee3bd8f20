"""`memory_recent_word_matches` returns, with each match's id and time, what a search scores it
by: its content's length, its search vector and its embedding. The function reads each matching
row anyway; a search then read every match it kept again by key to score it.

The rest is as in migration 0013. A function's result type cannot be changed in place: the
function is dropped and created again (with its grants), in the migration's transaction.
"""

import importlib

from django.db import migrations

from memories.migrations._word_matches import signature, word_matches_function

# The version of migration 0013, which this one replaces (and restores when reversed).
PREVIOUS = importlib.import_module("memories.migrations.0013_word_matches_apply_the_filters")

ARGUMENTS = PREVIOUS.ARGUMENTS

FUNCTION = word_matches_function(
    arguments=ARGUMENTS,
    returns=(
        "TABLE (id uuid, recorded_at timestamptz, content_length integer, "
        "search_vector tsvector, embedding vector)"
    ),
    query="""
                'SELECT m.id, m.recorded_at, m.content_length, m.search_vector, m.embedding '
                'FROM ('
                '    SELECT * FROM %1$I.memories_memory m '
                '    WHERE (m.owner_id + 0) = %%s AND m.valid_to IS NULL '
                '      AND m.search_vector @@ $1 AND m.recorded_at <= $4 OFFSET 0) m '
                'WHERE ($2 IS NULL OR m.search_vector @@ $2) '
                '  AND ($3 IS NULL OR m.recorded_at >= $3) '
                '  AND ($5 IS NULL OR m.status = $5) '
                '  AND ($6 IS NULL OR m.memory_type = ANY($6)) '
                '  AND ($7 IS NULL OR m.scope = $7) AND ($8 IS NULL OR m.project = $8) '
                'ORDER BY m.recorded_at DESC, m.id DESC LIMIT $9'""",
    using=(
        "terms, required, recorded_from, recorded_until, wanted_status, wanted_types, "
        "wanted_scope, wanted_project, max_rows"
    ),
)

DROP = f"DROP FUNCTION IF EXISTS {signature(ARGUMENTS)};"


class Migration(migrations.Migration):
    dependencies = [("memories", "0017_thread_names_fold_canonically")]

    operations = [migrations.RunSQL(DROP + FUNCTION, DROP + PREVIOUS.FUNCTION)]
