"""Two database guards for the columns added in 0004:

- `due_at` is substance (fixed at insert), so the append-only guard now refuses changing it. This
  replaces the function body of migration 0002 with the same checks plus due_at.
- A thread membership must join a thread and a memory of the same tenant; a service bug cannot
  put one tenant's memory into another tenant's thread.
"""

from django.db import migrations

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

CREATE FUNCTION memories_membership_same_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT owner_id FROM memories_thread WHERE id = NEW.thread_id)
       IS DISTINCT FROM (SELECT owner_id FROM memories_memory WHERE id = NEW.memory_id) THEN
        RAISE EXCEPTION 'a thread membership must join a thread and a memory of the same owner'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER memories_membership_same_owner
    BEFORE INSERT OR UPDATE OF thread_id, memory_id ON memories_threadmembership
    FOR EACH ROW EXECUTE FUNCTION memories_membership_same_owner();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS memories_membership_same_owner ON memories_threadmembership;
DROP FUNCTION IF EXISTS memories_membership_same_owner();
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0004_due_at_and_threads")]

    # Backward leaves the guard function as 0005 defined it: it is a superset of 0002's checks.
    operations = [migrations.RunSQL(GUARD, BACKWARD)]
