"""`memory_recent_word_matches` also applies a search's commitment filters: the commitment
states asked for (`wanted_commitment_states`) and the earliest resolution time
(`resolved_from`). A large account's search of few words finds its matches through the function,
and a filter applied to the matches it returned, rather than by it, would leave fewer than it
was asked for.

The two arguments come last and default to NULL (no filter): a process of the earlier release
calls the function with the nine arguments it knows, and this one answers it as the function it
replaces did. An argument cannot be added in place: the function is dropped and created again
(with its grants), in the migration's transaction. The rest is as in migration 0018.
"""

import importlib

from django.db import migrations

from memories.migrations._word_matches import signature, word_matches_function

# The version of migration 0018, which this one replaces (and restores when reversed).
PREVIOUS = importlib.import_module(
    "memories.migrations.0018_word_matches_return_what_scoring_reads"
)

ARGUMENTS = (
    PREVIOUS.ARGUMENTS
    + ", wanted_commitment_states text[] DEFAULT NULL, resolved_from timestamptz DEFAULT NULL"
)

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
                '  AND ($10 IS NULL OR m.commitment_status = ANY($10)) '
                '  AND ($11 IS NULL OR m.resolved_at >= $11) '
                'ORDER BY m.recorded_at DESC, m.id DESC LIMIT $9'""",
    using=(
        "terms, required, recorded_from, recorded_until, wanted_status, wanted_types, "
        "wanted_scope, wanted_project, max_rows, wanted_commitment_states, resolved_from"
    ),
)


class Migration(migrations.Migration):
    dependencies = [("memories", "0023_type_index_holds_project_and_scope")]

    operations = [
        migrations.RunSQL(
            f"DROP FUNCTION IF EXISTS {signature(PREVIOUS.ARGUMENTS)};" + FUNCTION,
            f"DROP FUNCTION IF EXISTS {signature(ARGUMENTS)};" + PREVIOUS.FUNCTION,
        )
    ]
