"""A field's pairs of CJK characters stand where their run stands, among the field's other words,
and after a gap: a phrase then finds them in the order the text has them, and only there.

Migration 0021 appended each field's words without its runs and then all of its runs' pairs, so
the words after a run came before its pairs ("東京 retry" matched the phrase "retry 東京"), and
each field's part followed the vector's last word ("payments retry" matched a memory whose
project ended with "payments" and whose topic began with "retry"); the pairs of two runs apart
only by punctuation ("京都、大阪") were kept apart by a stop word, which words so apart are not.

Each field holding such characters now adds, under its weight, the field with each run replaced
by its pairs, in place ("PostgreSQLに決定した" as "PostgreSQL に決 決定 定し した"), after a stop
word; a question's phrase asks for its runs spelt the same way (memories.search.query). Only the
rows holding such characters are computed again.
"""

import importlib

from django.db import migrations

PREVIOUS = importlib.import_module("memories.migrations.0021_search_vector_cjk_bigrams")
CJK = PREVIOUS.CJK

# The text outside runs, each run's pairs, in the order of the field. The patterns are spelt as
# escapes, so that they do not depend on the database's locale.
FORWARD = rf"""
CREATE FUNCTION memories_cjk_paired(field text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(piece[1] || coalesce(' ' || pairs || ' ', ''), '' ORDER BY at), '')
    FROM regexp_matches(field, '([^{CJK[1:]}*)({CJK}*)', 'g') WITH ORDINALITY AS pieces(piece, at),
    LATERAL (
        -- Each character with the next (linear: substr() walks a multibyte text from its start).
        SELECT string_agg(pair, ' ' ORDER BY n)
        FROM (
            SELECT n, CASE WHEN count(*) OVER () = 1 THEN c ELSE c || lead(c) OVER (ORDER BY n) END
            FROM regexp_split_to_table(nullif(piece[2], ''), '') WITH ORDINALITY AS chars(c, n)
        ) AS paired(n, pair)
        WHERE pair IS NOT NULL
    ) AS runs_pairs(pairs)
$$;

CREATE OR REPLACE FUNCTION memories_cjk_vector(field text, weight "char") RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    -- The stop word first: the field's first word does not follow the vector's last.
    SELECT CASE WHEN field ~ '{CJK}' THEN setweight(
        to_tsvector('threengram_unaccented'::regconfig, 'the ' || memories_cjk_paired(field)),
        weight) ELSE ''::tsvector END
$$;

DROP FUNCTION memories_cjk_pairs(text);
"""  # noqa: S608 (constants only)

BACKWARD = (
    'DROP FUNCTION memories_cjk_vector(text, "char");'
    + "DROP FUNCTION memories_cjk_paired(text);"
    + PREVIOUS.FUNCTIONS
)


class Migration(migrations.Migration):
    dependencies = [("memories", "0021_search_vector_cjk_bigrams")]

    operations = [
        migrations.RunSQL(FORWARD + PREVIOUS.RECOMPUTE, BACKWARD + PREVIOUS.RECOMPUTE),
    ]
