"""How many memory versions each account holds (memories.models.AccountUsage), counted by the
database on every insert into memories_memory, and a cap on it: a tenant that could add rows
without end would fill the disk every tenant writes to.

The count is a trigger's, not the application's: an insert made any way (a benchmark's seed, an
operator's SQL) is counted, and the application role may only read the counts. The cap is the
writing transaction's: services.lock_live_owner declares MEMORY_VERSIONS_PER_ACCOUNT_MAX in the
setting `threengram.memory_versions_max` (transaction-local), and an insert that would take an
account past it is refused (check_violation, constraint `memory_versions_per_account`). An
insert that declares none (the owner's own SQL) is counted and never refused.

The counter row is updated under its row lock, held to the end of the writing transaction: two
writers of one account take turns from their inserts to their commits, and the second reads the
first's count, so the cap is exact. One statement per INSERT statement, however many rows it
holds (a statement trigger over the inserted rows): a bulk seed updates each account's row once.

The backfill counts the rows there are, after the trigger is in place and under the lock that
creating it takes (SHARE ROW EXCLUSIVE: inserts wait, reads go on), so no insert is missed or
counted twice."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

ROLE = "threengram_app"
TENANT = "NULLIF(current_setting('threengram.tenant_id', true), '')::bigint"

FORWARD = rf"""
ALTER TABLE memories_accountusage ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories_accountusage
    USING (owner_id = {TENANT}) WITH CHECK (owner_id = {TENANT});

DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON memories_accountusage FROM {ROLE};
    END IF;
    -- The owner's rights (the application role may not write the counts), with a search path
    -- of this schema alone: a temporary table of the caller's cannot stand in for the counts.
    EXECUTE format($create$
        CREATE FUNCTION memories_count_versions() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp AS $body$
        DECLARE
            cap bigint := NULLIF(current_setting('threengram.memory_versions_max', true), '')::bigint;
            counted record;
        BEGIN
            -- In owner order: two bulk inserts spanning the same accounts lock their rows in
            -- one order.
            FOR counted IN
                INSERT INTO memories_accountusage AS usage (owner_id, versions)
                SELECT owner_id, count(*) FROM inserted GROUP BY owner_id ORDER BY owner_id
                ON CONFLICT (owner_id) DO UPDATE SET versions = usage.versions + EXCLUDED.versions
                RETURNING usage.owner_id, usage.versions
            LOOP
                IF counted.versions > cap THEN
                    -- %% for format(): RAISE's own placeholders.
                    RAISE EXCEPTION 'account %% would hold %% memory versions, past its cap of %%',
                        counted.owner_id, counted.versions, cap
                        USING ERRCODE = 'check_violation',
                              CONSTRAINT = 'memory_versions_per_account';
                END IF;
            END LOOP;
            RETURN NULL;
        END;
        $body$
    $create$, current_schema());
END
$$;

CREATE TRIGGER memories_memory_count_versions
    AFTER INSERT ON memories_memory
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION memories_count_versions();

INSERT INTO memories_accountusage (owner_id, versions)
SELECT owner_id, count(*) FROM memories_memory GROUP BY owner_id;
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS memories_memory_count_versions ON memories_memory;
DROP FUNCTION IF EXISTS memories_count_versions();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_log_in_by_name_in_any_case"),
        ("memories", "0026_filter_recent_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="AccountUsage",
            fields=[
                (
                    "owner",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="memory_usage",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("versions", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
