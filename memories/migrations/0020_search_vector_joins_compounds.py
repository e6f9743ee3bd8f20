"""A word written with hyphens or dots is also indexed as one word, and a dotted one by its parts:
"stand-ups" as `standup` beside `stand-up`, `stand` and `up`; "Next.js" as `next`, `js` and `nextj`
beside `next.js` (the parser keeps a dotted name whole, as a host or file name). A question that
writes "standups", "frontend", "oncall", "Next" or "moment" then finds the memory that wrote
"stand-ups", "front-end", "on-call", "Next.js" or "moment.js" (a question's own hyphenated words ask
for both spellings: memories.search.query). Technical writing spells these names several ways.

The search vector is built by one function, `memories_search_vector`, which the generated column
calls. Changing a generated column's expression rewrites the table and rebuilds its indexes
(PostgreSQL 17 or later: ALTER COLUMN ... SET EXPRESSION), under an exclusive lock; the per-account
words indexes are rebuilt with the rest.
"""

from django.db import migrations

# The same text as migration 0009's generated column, weights A (topic), B (content) and C (tags
# and project), and the lexemes each hyphenated or dotted one adds, at its positions and weights
# (written out as text and read back: a tsvector's concatenation would move the added lexemes past
# the end, and the phrase "daily standups" would not find "daily stand-ups"); a memory without
# such a word is not written out at all. The patterns are spelt in ASCII so that they do not
# depend on the database's locale (a lexeme is unaccented); a version number ("v1.2") is no name.
# The function keeps the search path it was made under: its body names are looked up when it
# runs, and a restore (pg_restore, under an empty search path) computes the column as it loads
# the rows.
FUNCTION = r"""
CREATE FUNCTION memories_search_vector(topic text, content text, tags text[], project text)
    RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    WITH words AS (
        SELECT setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
            || setweight(to_tsvector('threengram_unaccented'::regconfig,
                                     coalesce(content, '')), 'B')
            || setweight(to_tsvector('threengram_unaccented'::regconfig,
                                     coalesce(memories_tags_text(tags), '') || ' '
                                     || coalesce(project, '')), 'C') AS vector
    ), joined AS (
        SELECT string_agg(
            ' ''' || added.lexeme || ''':' || (
                SELECT string_agg(at::text || weight, ',')
                FROM unnest(written.positions, written.weights) AS p(at, weight)),
            '') AS lexemes
        FROM words, unnest(vector) AS written,
        LATERAL unnest(CASE
            WHEN written.lexeme ~ '^[a-z0-9]+(-[a-z0-9]+)+$'
                THEN ARRAY[replace(written.lexeme, '-', '')]
            WHEN written.lexeme ~ '^[a-z][a-z0-9]*(\.[a-z][a-z0-9]*)+$'
                THEN tsvector_to_array(to_tsvector('threengram_unaccented'::regconfig,
                    replace(written.lexeme, '.', ' ') || ' ' || replace(written.lexeme, '.', '')))
        END) AS added(lexeme)
        WHERE written.lexeme LIKE '%-%' OR written.lexeme LIKE '%.%'
    )
    SELECT CASE WHEN joined.lexemes IS NULL THEN vector
                ELSE (vector::text || joined.lexemes)::tsvector END
    FROM words, joined
$$;
"""

SEARCH_VECTOR = (
    FUNCTION
    + """
ALTER TABLE memories_memory ALTER COLUMN search_vector
    SET EXPRESSION AS (memories_search_vector(topic, content, tags::text[], project));
"""
)

SEARCH_VECTOR_BACKWARD = r"""
ALTER TABLE memories_memory ALTER COLUMN search_vector SET EXPRESSION AS (
    setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
    || setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(content, '')), 'B')
    || setweight(to_tsvector('threengram_unaccented'::regconfig,
                             coalesce(memories_tags_text(tags::text[]), '') || ' '
                             || coalesce(project, '')), 'C')
);
DROP FUNCTION memories_search_vector(text, text, text[], text);
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0019_stored_vectors")]

    operations = [migrations.RunSQL(SEARCH_VECTOR, SEARCH_VECTOR_BACKWARD)]
