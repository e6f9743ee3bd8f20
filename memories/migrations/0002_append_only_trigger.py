"""The database guards append-only itself, so neither a bug nor a raw SQL statement can rewrite
history. A memory row may only move its lifecycle columns (status, valid_to once,
commitment_status); DELETE is refused. The single exception is account erasure, which may rewrite
the tenant-written text to the erasure sentinels and nothing else."""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION memories_memory_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'memories are append-only: DELETE of memory % refused', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.predecessor_id IS DISTINCT FROM OLD.predecessor_id
       OR NEW.memory_type IS DISTINCT FROM OLD.memory_type
       OR NEW.recorded_at IS DISTINCT FROM OLD.recorded_at THEN
        RAISE EXCEPTION 'memories are append-only: id, owner, predecessor, memory_type and recorded_at of memory % are fixed', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.valid_to IS NOT NULL AND NEW.valid_to IS DISTINCT FROM OLD.valid_to THEN
        RAISE EXCEPTION 'memories are append-only: memory % is already superseded', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF (NEW.content, NEW.content_length, NEW.topic, NEW.tags, NEW.scope, NEW.project)
       IS DISTINCT FROM (OLD.content, OLD.content_length, OLD.topic, OLD.tags, OLD.scope, OLD.project) THEN
        -- Account erasure: the only rewrite of substance, and only to the sentinels.
        IF NOT (NEW.content = '[erased]' AND NEW.content_length = 8 AND NEW.topic = '[erased]'
                AND (NEW.tags = '{}' OR NEW.tags = '{[erased]}')
                AND NEW.scope = 'erased'
                AND (NEW.project IS NULL OR NEW.project = '[erased]')) THEN
            RAISE EXCEPTION 'memories are append-only: content, topic, tags, scope and project of memory % may only be erased', OLD.id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER memories_memory_append_only
    BEFORE UPDATE OR DELETE ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION memories_memory_guard();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS memories_memory_append_only ON memories_memory;
DROP FUNCTION IF EXISTS memories_memory_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
