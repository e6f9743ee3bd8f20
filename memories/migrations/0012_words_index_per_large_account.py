"""Words, like vectors, get an index per large account (memories/account_indexes.py) instead of
the GIN index over every account's rows, and a search reaches it through a function that row-level
security does not keep from that index.

Under row-level security PostgreSQL applies the policy's condition before any condition that is
not leakproof, so the full-text match (`@@`, not leakproof) cannot be an index condition: a search
would read the account's rows one by one. `memory_recent_word_matches` runs as the owner of the
tables (SECURITY DEFINER), past the policy, and applies the policy's own condition itself: the
rows of the tenant named by the `threengram.tenant_id` setting, none when it is unset. It sees
nothing a statement of the application role could not see, and it returns ids only. The owner's
id goes into its statement as a literal, and as the same expression as in the account's partial
index (memories/account_indexes.py), so that the planner matches that index and has no other plan
(no sequential or plain index scan either), whatever the table's statistics say. Its search path names the catalog and this schema only.

The GIN index over every account is dropped CONCURRENTLY (hence not atomic): until
`manage.py index_accounts` has built a large account's words index, its searches walk its most
recent memories, as they did under row-level security.
"""

from django.db import migrations

from memories.migrations._word_matches import signature, word_matches_function

ARGUMENTS = "terms tsquery, recorded_until timestamptz, max_rows integer"

FUNCTION = word_matches_function(
    arguments=ARGUMENTS,
    returns="SETOF uuid",
    query="""
                'SELECT id FROM %1$I.memories_memory '
                'WHERE (owner_id + 0) = %%s AND valid_to IS NULL AND search_vector @@ $1 '
                '  AND recorded_at <= $2 '
                'ORDER BY recorded_at DESC LIMIT $3'""",
    using="terms, recorded_until, max_rows",
)

FUNCTION_BACKWARD = f"DROP FUNCTION IF EXISTS {signature(ARGUMENTS)};"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0011_nearest_index_per_large_account")]

    operations = [
        migrations.RunSQL(FUNCTION, FUNCTION_BACKWARD),
        migrations.RunSQL(
            "DROP INDEX CONCURRENTLY IF EXISTS memory_search",
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS memory_search "
            "ON memories_memory USING gin (search_vector)",
        ),
    ]
