"""`memory_recent_word_matches` applies a search's filters itself: the phrases and exclusions,
the recorded dates, the status, types, scope and project. It reads each matching row anyway (the
index gives row addresses, not the rows' times), so the filters cost it nothing, where a statement
of the caller's had to look every match up again by key, and, when the filters left too few of
the most recent matches, walk the account's most recent memories for older ones. It returns each
row's time with its id, most recent first, ties broken by id, so that a page of results is the
same on every call.

The rest is as in migration 0012: it runs as the owner of the tables, applies the row-level
security policy's own tenant condition (none when the tenant setting is unset), names the owner
as the same expression as the account's partial index does, and only the application role may
call it. The version with three arguments is dropped.
"""

import importlib

from django.db import migrations

from memories.migrations._word_matches import signature, word_matches_function

# The version of migration 0012, which this one replaces (and restores when reversed).
PREVIOUS = importlib.import_module("memories.migrations.0012_words_index_per_large_account")

ARGUMENTS = (
    "terms tsquery, required tsquery, recorded_from timestamptz, recorded_until timestamptz, "
    "wanted_status text, wanted_types text[], wanted_scope text, wanted_project text, "
    "max_rows integer"
)

# The filters apply to the rows the words index found: OFFSET 0 keeps the planner from taking
# them into that scan, where another index could serve them instead. A NULL `required`,
# `recorded_from`, `wanted_*` is no filter (EXECUTE plans with the values: those fall away);
# `recorded_until` and `max_rows` are always given.
FUNCTION = word_matches_function(
    arguments=ARGUMENTS,
    returns="TABLE (id uuid, recorded_at timestamptz)",
    query="""
                'SELECT m.id, m.recorded_at FROM ('
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


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_words_index_per_large_account")]

    operations = [
        migrations.RunSQL(FUNCTION, f"DROP FUNCTION IF EXISTS {signature(ARGUMENTS)};"),
        migrations.RunSQL(
            f"DROP FUNCTION IF EXISTS {signature(PREVIOUS.ARGUMENTS)};", PREVIOUS.FUNCTION
        ),
    ]
