"""Chinese and Japanese, written without spaces, and Korean, whose particles join the word before
them, are also indexed by overlapping pairs of characters (bigrams), as full-text engines index
these scripts: PostgreSQL's parser keeps a run of such characters whole ("東京都渋谷区の事務所" is
one word to it, and so is "PostgreSQLに決定した"), so a question asking for "渋谷区" or "決定" found
nothing by its words.

Each field holding such characters adds, under its weight and after a stop word (so that its
first word does not follow the vector's last), the field with each run replaced in place by its
pairs ("PostgreSQLに決定した" as "PostgreSQL に決 決定 定し した"; a run of one character, itself):
a phrase then finds the pairs and the words around them in the order the text has them, and only
there. A question asks for the same (memories.search.query), spelt by the same rule.

Only the function of the generated column changes, so only the rows holding such characters are
computed again (an UPDATE that leaves every column as it is, which the append-only trigger lets
through): no table rewrite.
"""

import importlib

from django.db import migrations

# The iteration and closing marks and the ideographic zero (々 〆 〇), Hiragana, Katakana (and its
# phonetic extensions, half-width forms), CJK ideographs (Extension A, the unified block,
# compatibility ideographs), Hangul syllables: spelt as escapes, so that the pattern does not
# depend on the database's locale. memories.search.query reads the same class.
CJK = r"[\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f]"

# A field with each run replaced, where it stands, by its pairs (the text between runs kept).
FUNCTIONS = rf"""
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

CREATE FUNCTION memories_cjk_vector(field text, weight "char") RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    SELECT CASE WHEN field ~ '{CJK}' THEN setweight(
        to_tsvector('threengram_unaccented'::regconfig, 'the ' || memories_cjk_paired(field)),
        weight) ELSE ''::tsvector END
$$;
"""

# Migration 0020's function (the same text, replacing it), with or without the vector of each
# field's CJK runs appended to what it returns.
PREVIOUS = importlib.import_module("memories.migrations.0020_search_vector_joins_compounds")
SEARCH_VECTOR = PREVIOUS.FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
RETURNED = "ELSE (vector::text || joined.lexemes)::tsvector END\n"
assert SEARCH_VECTOR.count(RETURNED) == 1

CJK_VECTORS = """
           || memories_cjk_vector(coalesce(topic, ''), 'A')
           || memories_cjk_vector(coalesce(content, ''), 'B')
           || memories_cjk_vector(coalesce(memories_tags_text(tags), '') || ' '
                                  || coalesce(project, ''), 'C')"""

# The rows whose search vector the new function computes otherwise: those holding a CJK
# character. A stored generated column is computed again on UPDATE.
RECOMPUTE = rf"""
UPDATE memories_memory SET topic = topic
WHERE topic || ' ' || content || ' ' || coalesce(project, '') || ' '
      || array_to_string(tags, ' ') ~ '{CJK}';
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0020_search_vector_joins_compounds")]

    operations = [
        migrations.RunSQL(
            FUNCTIONS
            + SEARCH_VECTOR.replace(RETURNED, RETURNED.rstrip("\n") + CJK_VECTORS + "\n")
            + RECOMPUTE,
            SEARCH_VECTOR
            + RECOMPUTE
            + 'DROP FUNCTION memories_cjk_vector(text, "char");'
            + "DROP FUNCTION memories_cjk_paired(text);",
        )
    ]
