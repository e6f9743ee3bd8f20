"""The tenant in every key (docs/operations.md "Past one database").

A distributed PostgreSQL (Citus, distributing by `owner_id`) needs the distribution column in
every primary key, unique constraint and foreign key between distributed tables, and routes a
join to one shard only when the joined rows share it. Before this migration the memory and thread
primary keys were `(id)`, a memory's predecessor and a membership's thread and memory were
foreign keys on `id` alone, and a membership had no owner column at all (a trigger of 0005
compared the owners of its thread and memory). Now:

- primary keys `(owner_id, id)` on memories_memory, memories_thread, memories_threadmembership;
- memories_threadmembership gets `owner_id` (filled from its thread), unique
  `(owner_id, thread_id, memory_id)`, index `(owner_id, memory_id, state)`;
- composite foreign keys `(owner_id, predecessor_id)`, `(owner_id, thread_id)` and
  `(owner_id, memory_id)` -> `(owner_id, id)`: PostgreSQL itself refuses a link between two
  tenants, which replaces the 0005 trigger (a trigger reading other rows would not run on a
  shard);
- one successor per memory: unique `(owner_id, predecessor_id)`;
- the per-column owner indexes go: each primary key leads with the owner;
- the membership row-level-security policy compares its own owner column, like the other two.

Django keeps knowing rows by `id` (see memories/models.py); the operations below bring its state
to the models, the SQL does the database.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import memories.fields

FORWARD = r"""
ALTER TABLE memories_threadmembership ADD COLUMN owner_id bigint;
UPDATE memories_threadmembership ms SET owner_id = t.owner_id
    FROM memories_thread t WHERE t.id = ms.thread_id;
ALTER TABLE memories_threadmembership ALTER COLUMN owner_id SET NOT NULL;

DROP TRIGGER memories_membership_same_owner ON memories_threadmembership;
DROP FUNCTION memories_membership_same_owner();

-- Every constraint and index built on the single-column keys goes first.
ALTER TABLE memories_threadmembership
    DROP CONSTRAINT memories_threadmembe_memory_id_8d6e4479_fk_memories_,
    DROP CONSTRAINT memories_threadmembe_thread_id_6d6fbb3d_fk_memories_,
    DROP CONSTRAINT membership_unique,
    DROP CONSTRAINT memories_threadmembership_pkey;
DROP INDEX membership_memory_state;
DROP INDEX memories_threadmembership_memory_id_8d6e4479;
DROP INDEX memories_threadmembership_thread_id_6d6fbb3d;
ALTER TABLE memories_memory
    DROP CONSTRAINT memories_memory_predecessor_id_8f8065c8_fk_memories_memory_id,
    DROP CONSTRAINT memories_memory_predecessor_id_key,
    DROP CONSTRAINT memories_memory_pkey;
DROP INDEX memories_memory_owner_id_89003f1d;
ALTER TABLE memories_thread DROP CONSTRAINT memories_thread_pkey;
DROP INDEX memories_thread_owner_id_a3f0f441;

ALTER TABLE memories_memory
    ADD CONSTRAINT memories_memory_pkey PRIMARY KEY (owner_id, id),
    ADD CONSTRAINT memory_one_successor UNIQUE (owner_id, predecessor_id),
    ADD CONSTRAINT memory_predecessor_same_owner FOREIGN KEY (owner_id, predecessor_id)
        REFERENCES memories_memory (owner_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE memories_thread ADD CONSTRAINT memories_thread_pkey PRIMARY KEY (owner_id, id);
ALTER TABLE memories_threadmembership
    ADD CONSTRAINT memories_threadmembership_pkey PRIMARY KEY (owner_id, id),
    ADD CONSTRAINT membership_unique UNIQUE (owner_id, thread_id, memory_id),
    ADD CONSTRAINT membership_owner_fk FOREIGN KEY (owner_id)
        REFERENCES accounts_user (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT membership_thread_same_owner FOREIGN KEY (owner_id, thread_id)
        REFERENCES memories_thread (owner_id, id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT membership_memory_same_owner FOREIGN KEY (owner_id, memory_id)
        REFERENCES memories_memory (owner_id, id) DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX membership_memory_state ON memories_threadmembership (owner_id, memory_id, state);

DROP POLICY tenant_isolation ON memories_threadmembership;
CREATE POLICY tenant_isolation ON memories_threadmembership
    USING (owner_id = NULLIF(current_setting('threengram.tenant_id', true), '')::bigint)
    WITH CHECK (owner_id = NULLIF(current_setting('threengram.tenant_id', true), '')::bigint);
"""

BACKWARD = r"""
DROP POLICY tenant_isolation ON memories_threadmembership;
CREATE POLICY tenant_isolation ON memories_threadmembership
    USING (thread_id IN (SELECT id FROM memories_thread))
    WITH CHECK (thread_id IN (SELECT id FROM memories_thread));

DROP INDEX membership_memory_state;
ALTER TABLE memories_threadmembership
    DROP CONSTRAINT membership_memory_same_owner,
    DROP CONSTRAINT membership_thread_same_owner,
    DROP CONSTRAINT membership_owner_fk,
    DROP CONSTRAINT membership_unique,
    DROP CONSTRAINT memories_threadmembership_pkey;
ALTER TABLE memories_thread DROP CONSTRAINT memories_thread_pkey;
ALTER TABLE memories_memory
    DROP CONSTRAINT memory_predecessor_same_owner,
    DROP CONSTRAINT memory_one_successor,
    DROP CONSTRAINT memories_memory_pkey;

ALTER TABLE memories_memory ADD CONSTRAINT memories_memory_pkey PRIMARY KEY (id),
    ADD CONSTRAINT memories_memory_predecessor_id_key UNIQUE (predecessor_id),
    ADD CONSTRAINT memories_memory_predecessor_id_8f8065c8_fk_memories_memory_id
        FOREIGN KEY (predecessor_id) REFERENCES memories_memory (id) DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX memories_memory_owner_id_89003f1d ON memories_memory (owner_id);
ALTER TABLE memories_thread ADD CONSTRAINT memories_thread_pkey PRIMARY KEY (id);
CREATE INDEX memories_thread_owner_id_a3f0f441 ON memories_thread (owner_id);
ALTER TABLE memories_threadmembership
    ADD CONSTRAINT memories_threadmembership_pkey PRIMARY KEY (id),
    ADD CONSTRAINT membership_unique UNIQUE (thread_id, memory_id),
    ADD CONSTRAINT memories_threadmembe_thread_id_6d6fbb3d_fk_memories_
        FOREIGN KEY (thread_id) REFERENCES memories_thread (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT memories_threadmembe_memory_id_8d6e4479_fk_memories_
        FOREIGN KEY (memory_id) REFERENCES memories_memory (id) DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX membership_memory_state ON memories_threadmembership (memory_id, state);
CREATE INDEX memories_threadmembership_memory_id_8d6e4479 ON memories_threadmembership (memory_id);
CREATE INDEX memories_threadmembership_thread_id_6d6fbb3d ON memories_threadmembership (thread_id);
ALTER TABLE memories_threadmembership DROP COLUMN owner_id;

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


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0007_row_level_security"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="memory",
                    name="memory_not_own_predecessor",
                ),
                migrations.RemoveConstraint(
                    model_name="threadmembership",
                    name="membership_unique",
                ),
                migrations.RemoveIndex(
                    model_name="threadmembership",
                    name="membership_memory_state",
                ),
                migrations.AddField(
                    model_name="memory",
                    name="predecessor_id",
                    field=models.UUIDField(
                        blank=True, editable=False, help_text="Set once, at insert.", null=True
                    ),
                ),
                migrations.AddField(
                    model_name="threadmembership",
                    name="memory_id",
                    field=models.UUIDField(default=0),
                    preserve_default=False,
                ),
                migrations.AddField(
                    model_name="threadmembership",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        default=0,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                    preserve_default=False,
                ),
                migrations.AddField(
                    model_name="threadmembership",
                    name="thread_id",
                    field=models.UUIDField(default=0),
                    preserve_default=False,
                ),
                migrations.AlterField(
                    model_name="memory",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="memories",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="memory",
                    name="predecessor",
                    field=memories.fields.SameOwnerLink(
                        serialize=False,
                        blank=True,
                        from_fields=("owner", "predecessor_id"),
                        help_text="The memory this one supersedes (same owner).",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="successors",
                        to="memories.memory",
                        to_fields=("owner", "id"),
                    ),
                ),
                migrations.AlterField(
                    model_name="thread",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="threads",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="threadmembership",
                    name="memory",
                    field=memories.fields.SameOwnerLink(
                        serialize=False,
                        from_fields=("owner", "memory_id"),
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="memberships",
                        to="memories.memory",
                        to_fields=("owner", "id"),
                    ),
                ),
                migrations.AlterField(
                    model_name="threadmembership",
                    name="thread",
                    field=memories.fields.SameOwnerLink(
                        serialize=False,
                        from_fields=("owner", "thread_id"),
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="memories.thread",
                        to_fields=("owner", "id"),
                    ),
                ),
                migrations.AddIndex(
                    model_name="threadmembership",
                    index=models.Index(
                        fields=["owner", "memory_id", "state"], name="membership_memory_state"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="memory",
                    constraint=models.UniqueConstraint(
                        fields=("owner", "predecessor_id"), name="memory_one_successor"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="memory",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("predecessor_id", models.F("id")), _negated=True),
                        name="memory_not_own_predecessor",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="threadmembership",
                    constraint=models.UniqueConstraint(
                        fields=("owner", "thread_id", "memory_id"), name="membership_unique"
                    ),
                ),
            ],
        ),
    ]
