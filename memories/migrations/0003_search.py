"""Full-text and trigram search over a tenant's memories.

- `threengram_unaccented`: a text search configuration that is `english` with the `unaccent`
  dictionary in front, so "café" and "cafe" meet. This is the standard way (PostgreSQL docs,
  F.48 unaccent): `unaccent()` the function is only STABLE, but a configuration given as a
  regconfig constant makes `to_tsvector` IMMUTABLE, which a generated column needs.
- `search_vector`: a STORED generated column (topic weighted A, content B). Generated columns
  are recomputed by PostgreSQL on every write, so account erasure also erases the index terms.
  The append-only trigger compares named columns only, so it is unaffected.
- A GIN index on the vector. (A leading owner_id via btree_gin was measured: the planner
  intersects with the owner btree instead, so it only made the index bigger. The trigram topic
  fallback scans a tenant's recent rows; a trigram GIN index is not needed.)
"""

from django.contrib.postgres.operations import TrigramExtension, UnaccentExtension
from django.db import migrations

FORWARD = r"""
CREATE TEXT SEARCH CONFIGURATION threengram_unaccented ( COPY = english );
ALTER TEXT SEARCH CONFIGURATION threengram_unaccented
    ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;

ALTER TABLE memories_memory ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
    || setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(content, '')), 'B')
) STORED;

CREATE INDEX memory_search ON memories_memory USING gin (search_vector);
"""

BACKWARD = r"""
DROP INDEX IF EXISTS memory_search;
ALTER TABLE memories_memory DROP COLUMN IF EXISTS search_vector;
DROP TEXT SEARCH CONFIGURATION IF EXISTS threengram_unaccented;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_append_only_trigger")]

    operations = [
        UnaccentExtension(),
        TrigramExtension(),  # similarity() for the topic blend and fallback
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
