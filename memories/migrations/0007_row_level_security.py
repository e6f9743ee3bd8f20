"""Row-level security on the tenant tables, and the role the application connects as
(memories/tenancy.py).

The policies bind only roles subject to them: the owner that runs migrations (and a superuser)
is not, so with DATABASE_APP_ROLE unset nothing changes. The role is created when the migrating
role may (superuser or CREATEROLE); otherwise a DBA creates it with the same statements. It gets
only what the application needs: no DELETE or TRUNCATE on memories_memory (append-only), and
nothing on the schema itself.
"""

from django.db import migrations

ROLE = "threengram_app"
TENANT = "NULLIF(current_setting('threengram.tenant_id', true), '')::bigint"

FORWARD = rf"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}')
       AND (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) THEN
        CREATE ROLE {ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        -- The migrating role switches to it (SET ROLE) in the server processes.
        IF NOT pg_has_role(current_user, '{ROLE}', 'MEMBER') THEN
            EXECUTE format('GRANT {ROLE} TO %I', current_user);
        END IF;
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO {ROLE}', current_schema());
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO {ROLE}',
            current_schema());
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO {ROLE}',
            current_schema());
        EXECUTE format(
            'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE '
            'ON TABLES TO {ROLE}', current_schema());
        EXECUTE format(
            'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO {ROLE}',
            current_schema());
        REVOKE DELETE, TRUNCATE ON memories_memory FROM {ROLE};
    END IF;
END
$$;

ALTER TABLE memories_memory ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories_memory
    USING (owner_id = {TENANT}) WITH CHECK (owner_id = {TENANT});

ALTER TABLE memories_thread ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories_thread
    USING (owner_id = {TENANT}) WITH CHECK (owner_id = {TENANT});

-- No owner column: a membership is visible when its thread is (the thread's own policy applies
-- inside the subquery); the 0005 trigger already keeps thread and memory of one owner.
ALTER TABLE memories_threadmembership ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories_threadmembership
    USING (thread_id IN (SELECT id FROM memories_thread))
    WITH CHECK (thread_id IN (SELECT id FROM memories_thread));
"""

BACKWARD = r"""
DROP POLICY IF EXISTS tenant_isolation ON memories_threadmembership;
ALTER TABLE memories_threadmembership DISABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant_isolation ON memories_thread;
ALTER TABLE memories_thread DISABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant_isolation ON memories_memory;
ALTER TABLE memories_memory DISABLE ROW LEVEL SECURITY;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_covering_type_index")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
