"""Semantic search and a richer word index.

- The `vector` extension (pgvector, shipped with the embedded server) and `embedding
  vector(256)` on memories: the meaning of a memory (memories/embedding.py), written in the
  same INSERT as the row, or later by `manage.py embed_memories`.
- An HNSW index (cosine) over the embeddings of current memories.
- The append-only guard of 0005, plus: an embedding may be written into an empty column or
  cleared (erasure, a change of model), never replaced by another vector in place, and an
  erased memory holds none.
- `search_vector` now also holds the tags and the project (weight C), so a question naming a
  tag or the project matches; topic A and content B as before.
"""

import importlib

import pgvector.django
from django.db import migrations
from django.db.models import Q

GUARD = r"""
CREATE OR REPLACE FUNCTION memories_memory_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'memories are append-only: DELETE of memory % refused', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.predecessor_id IS DISTINCT FROM OLD.predecessor_id
       OR NEW.memory_type IS DISTINCT FROM OLD.memory_type
       OR NEW.recorded_at IS DISTINCT FROM OLD.recorded_at
       OR NEW.due_at IS DISTINCT FROM OLD.due_at THEN
        RAISE EXCEPTION 'memories are append-only: id, owner, predecessor, memory_type, recorded_at and due_at of memory % are fixed', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.valid_to IS NOT NULL AND NEW.valid_to IS DISTINCT FROM OLD.valid_to THEN
        RAISE EXCEPTION 'memories are append-only: memory % is already superseded', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.embedding IS NOT NULL AND NEW.embedding IS NOT NULL
       AND NEW.embedding IS DISTINCT FROM OLD.embedding THEN
        RAISE EXCEPTION 'memories are append-only: the embedding of memory % may be filled or cleared, not replaced', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.content = '[erased]' AND NEW.embedding IS NOT NULL
       AND NEW.embedding IS DISTINCT FROM OLD.embedding THEN
        RAISE EXCEPTION 'memories are append-only: erased memory % holds no embedding', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF (NEW.content, NEW.content_length, NEW.topic, NEW.tags, NEW.scope, NEW.project)
       IS DISTINCT FROM (OLD.content, OLD.content_length, OLD.topic, OLD.tags, OLD.scope, OLD.project) THEN
        -- Account erasure: the only rewrite of substance, and only to the sentinels.
        IF NOT (NEW.content = '[erased]' AND NEW.content_length = 8 AND NEW.topic = '[erased]'
                AND (NEW.tags = '{}' OR NEW.tags = '{[erased]}')
                AND NEW.scope = 'erased'
                AND (NEW.project IS NULL OR NEW.project = '[erased]')
                AND NEW.embedding IS NULL) THEN
            RAISE EXCEPTION 'memories are append-only: content, topic, tags, scope and project of memory % may only be erased', OLD.id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
"""

# Backward: the guard function as 0005 defined it (its SQL also made a membership trigger that
# 0008 replaced, which is left out).
GUARD_BEFORE = (
    importlib.import_module("memories.migrations.0005_guard_due_at_and_membership_owner")
    .GUARD.split("CREATE FUNCTION memories_membership_same_owner")[0]
)

# array_to_string is only STABLE in general (it calls element output functions); for text[] it
# is immutable, which a generated column requires.
SEARCH_VECTOR = r"""
CREATE FUNCTION memories_tags_text(text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$ SELECT array_to_string($1, ' ') $$;

DROP INDEX IF EXISTS memory_search;
ALTER TABLE memories_memory DROP COLUMN search_vector;
ALTER TABLE memories_memory ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
    || setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(content, '')), 'B')
    || setweight(to_tsvector('threengram_unaccented'::regconfig,
                             coalesce(memories_tags_text(tags::text[]), '') || ' '
                             || coalesce(project, '')), 'C')
) STORED;
CREATE INDEX memory_search ON memories_memory USING gin (search_vector);
"""

SEARCH_VECTOR_BACKWARD = r"""
DROP INDEX IF EXISTS memory_search;
ALTER TABLE memories_memory DROP COLUMN search_vector;
ALTER TABLE memories_memory ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(topic, '')), 'A')
    || setweight(to_tsvector('threengram_unaccented'::regconfig, coalesce(content, '')), 'B')
) STORED;
CREATE INDEX memory_search ON memories_memory USING gin (search_vector);
DROP FUNCTION memories_tags_text(text[]);
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_tenant_in_every_key")]

    operations = [
        pgvector.django.VectorExtension(),
        migrations.AddField(
            model_name="memory",
            name="embedding",
            field=pgvector.django.VectorField(
                blank=True, dimensions=256, editable=False, null=True
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=pgvector.django.HnswIndex(
                condition=Q(valid_to__isnull=True),
                fields=["embedding"],
                name="memory_embedding_current",
                opclasses=["vector_cosine_ops"],
            ),
        ),
        migrations.RunSQL(GUARD, GUARD_BEFORE),
        migrations.RunSQL(SEARCH_VECTOR, SEARCH_VECTOR_BACKWARD),
    ]
