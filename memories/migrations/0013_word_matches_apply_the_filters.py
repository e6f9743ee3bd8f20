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

ROLE = "threengram_app"
SIGNATURE = (
    "memory_recent_word_matches(tsquery, tsquery, timestamptz, timestamptz, text, text[], text, "
    "text, integer)"
)

FUNCTION = rf"""
DO $$
BEGIN
    EXECUTE format($function$
        CREATE OR REPLACE FUNCTION memory_recent_word_matches(
            terms tsquery, required tsquery, recorded_from timestamptz,
            recorded_until timestamptz, wanted_status text, wanted_types text[],
            wanted_scope text, wanted_project text, max_rows integer)
        RETURNS TABLE (id uuid, recorded_at timestamptz)
        LANGUAGE plpgsql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, %1$I, pg_temp
        SET enable_seqscan = off
        SET enable_indexscan = off
        SET enable_bitmapscan = on
        AS $body$
        DECLARE
            -- The tenant the row-level security policies read (migration 0007).
            tenant bigint := NULLIF(current_setting('threengram.tenant_id', true), '')::bigint;
        BEGIN
            IF tenant IS NULL THEN
                RETURN;
            END IF;
            -- The filters apply to the rows the words index found: OFFSET 0 keeps the planner
            -- from taking them into that scan, where another index could serve them instead.
            -- A NULL filter is no filter (EXECUTE plans with the values: those fall away).
            RETURN QUERY EXECUTE format(
                'SELECT m.id, m.recorded_at FROM ('
                '    SELECT * FROM %1$I.memories_memory m '
                '    WHERE (m.owner_id + 0) = %%s AND m.valid_to IS NULL '
                '      AND m.search_vector @@ $1 AND m.recorded_at <= $4 OFFSET 0) m '
                'WHERE ($2 IS NULL OR m.search_vector @@ $2) '
                '  AND ($3 IS NULL OR m.recorded_at >= $3) '
                '  AND ($5 IS NULL OR m.status = $5) '
                '  AND ($6 IS NULL OR m.memory_type = ANY($6)) '
                '  AND ($7 IS NULL OR m.scope = $7) AND ($8 IS NULL OR m.project = $8) '
                'ORDER BY m.recorded_at DESC, m.id DESC LIMIT $9', tenant)
            USING terms, required, recorded_from, recorded_until, wanted_status, wanted_types,
                  wanted_scope, wanted_project, max_rows;
        END
        $body$
    $function$, current_schema());
    REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT EXECUTE ON FUNCTION {SIGNATURE} TO {ROLE};
    END IF;
    DROP FUNCTION IF EXISTS memory_recent_word_matches(tsquery, timestamptz, integer);
END
$$;
"""

# Back: the version of migration 0012, without this one.
_PREVIOUS = importlib.import_module("memories.migrations.0012_words_index_per_large_account")
FUNCTION_BACKWARD = f"{_PREVIOUS.FUNCTION}\nDROP FUNCTION IF EXISTS {SIGNATURE};"


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_words_index_per_large_account")]

    operations = [migrations.RunSQL(FUNCTION, FUNCTION_BACKWARD)]
