"""Full-text and trigram search over a tenant's memories.

- `threengram_unaccented`: a text search configuration that is `english` with the `unaccent`
  dictionary in front, so "café" and "cafe" meet. This is the standard way (PostgreSQL docs,
  F.48 unaccent): `unaccent()` the function is only STABLE, but a configuration given as a
  regconfig constant makes `to_tsvector` IMMUTABLE, which a generated column needs.
- `search_vector`: a STORED generated column (topic weighted A, content B). Generated columns
  are recomputed by PostgreSQL on every write, so account erasure also erases the index terms.
  The append-only trigger compares named columns only, so it is unaffected.
- GIN indexes lead with owner_id (btree_gin), so one index scan finds a tenant's matches.
"""

from django.contrib.postgres.operations import BtreeGinExtension, TrigramExtension, UnaccentExtension
from django.db import migrations

FORWARD = r"""
CREATE TEXT SEARCH CONFIGURATION threengram_unaccented ( COPY = english );
ALTER TEXT SEARCH CONFIGURATION threengram_unaccented
    ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;

ALTER TABLE memories_memory ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
    || setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(content, '')), 'B')
) STORED;

CREATE INDEX memory_owner_search ON memories_memory USING gin (owner_id, search_vector);
CREATE INDEX memory_owner_topic_trgm ON memories_memory USING gin (owner_id, topic gin_trgm_ops);
"""

BACKWARD = r"""
DROP INDEX IF EXISTS memory_owner_topic_trgm;
DROP INDEX IF EXISTS memory_owner_search;
ALTER TABLE memories_memory DROP COLUMN IF EXISTS search_vector;
DROP TEXT SEARCH CONFIGURATION IF EXISTS threengram_unaccented;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_append_only_trigger")]

    operations = [
        UnaccentExtension(),
        TrigramExtension(),
        BtreeGinExtension(),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
