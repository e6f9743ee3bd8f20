"""PostgreSQL row-level security: the second wall of tenant isolation.

The first wall is the application: every query filters on the verified principal. The second is
PostgreSQL itself: the tenant tables (memories_memory, memories_thread,
memories_threadmembership, memories_accountusage) carry a policy that shows and accepts only the
rows of the tenant named by the `threengram.tenant_id` setting, and nothing when it is unset
(fail closed). It binds only a role subject to it: with `DATABASE_APP_ROLE` on (`APP_ROLE`, the
default and the only role it may name, threengram/checks.py: the role `threengram_app` that
migration memories/0007 creates: no superuser, not the owner, no BYPASSRLS, no DELETE or
TRUNCATE on memories_memory), every connection switches to that role
(`SET ROLE`), the ORM's through `enter_app_role` below, the gateway's async pool through
`infra.asyncdb`.

Where the tenant comes from: `current_tenant`, a context variable set from the verified principal
only (the MCP router after the token check, `TenantMiddleware` after Django's authentication,
`acting_for` in services that act for a given account such as erasure). Before every ORM
statement an execute wrapper makes the connection's `threengram.tenant_id` equal to it (a
`set_config` when it changed, sent in the statement's own message so it costs no round trip;
inside a transaction it is re-applied until a statement outside one has committed it, so a
rolled-back change can never leave a stale tenant in force). The gateway's own statements set it
transaction-locally (`set_config(..., true)`).

The paths past the wall are explicit and narrow: `memory_recent_word_matches` (migrations
memories/0012, 0013, 0018: rows of the setting's tenant only, the policy's condition applied by the
function); `all_tenants()`, `SET LOCAL ROLE NONE` in a transaction, i.e. the session's own
(owner) role until that transaction ends, used by the staff admin; and `as_owner()`, used by
`manage.py migrate` (schema changes need the owner) and by `embed_memories` and `index_accounts`
(memories/management/maintenance.py: they reach every tenant and build indexes). The benchmarks
seed their corpora as the owner.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import NO_DB_ALIAS, BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.urls import get_script_prefix, reverse
from psycopg.sql import quote

from infra import asyncdb
from infra.observability import tenant_id_var
from memories import replica

APP_ROLE = "threengram_app"
SET_TENANT_SQL = f"SELECT set_config('{asyncdb.TENANT_SETTING}', %s, %s)"

SET_LOCAL_ROLE_AND_TENANT_SQL = (
    f"SELECT set_config('role', %s, true), set_config('{asyncdb.TENANT_SETTING}', %s, true)"
)

# What the application role may do, granted by the schema's owner whenever `manage.py migrate`
# runs and the role exists (memories/management/commands/migrate.py): a role a DBA created after
# the migrations that would have granted this gets it then. Rows of every table and sequence of
# the schema, and of the tables the owner creates later, but no DELETE or TRUNCATE of memories
# (append-only), no write of the stored vectors' model (embed_memories writes it, as the
# owner) nor of the accounts' memory counts (a trigger keeps them, migration memories/0027); the
# words function of large accounts, which PUBLIC may not call.
APP_ROLE_PRIVILEGES_SQL = f"""
DO $$
DECLARE
    schema text := current_schema();
    words_function regprocedure;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        RETURN;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO {APP_ROLE}', schema);
    EXECUTE format(
        'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO {APP_ROLE}', schema);
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO {APP_ROLE}', schema);
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE '
        'ON TABLES TO {APP_ROLE}', schema);
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO {APP_ROLE}',
        schema);
    IF to_regclass('memories_memory') IS NOT NULL THEN
        REVOKE DELETE, TRUNCATE ON memories_memory FROM {APP_ROLE};
    END IF;
    IF to_regclass('memories_storedvectors') IS NOT NULL THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON memories_storedvectors FROM {APP_ROLE};
    END IF;
    IF to_regclass('memories_accountusage') IS NOT NULL THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON memories_accountusage FROM {APP_ROLE};
    END IF;
    FOR words_function IN
        SELECT oid::regprocedure FROM pg_proc
        WHERE proname = 'memory_recent_word_matches' AND pronamespace = schema::regnamespace
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO {APP_ROLE}', words_function);
    END LOOP;
END
$$;
"""  # noqa: S608 (constants only)


def grant_app_role_privileges(using: str = DEFAULT_DB_ALIAS) -> None:
    """Grant the application role what it needs on the schema, as its owner; nothing when the
    role does not exist yet (a DBA creates it where the migrating user may not)."""
    with connections[using].cursor() as cursor:
        cursor.execute(APP_ROLE_PRIVILEGES_SQL)


class AppRoleOutOfReach(Exception):
    """The application role exists, the migrating user may not act as it and may not grant itself
    that: only a DBA can, and migration memories/0007 would stop half-way without it."""


def take_app_role(using: str = DEFAULT_DB_ALIAS) -> None:
    """Make the owner a member of the application role when it exists (so that migration 0007
    finds it one and the server can `SET ROLE`), or raise `AppRoleOutOfReach` naming the
    statement a DBA runs. One that may act as it already, or no role: nothing to do."""
    with connections[using].cursor() as cursor:
        # SET, not MEMBER: the creator of a role (a user with CREATEROLE, not a superuser) is a
        # member with ADMIN OPTION only, and may not SET ROLE to it until it grants itself that.
        cursor.execute(
            "SELECT quote_ident(current_user), pg_has_role(current_user, oid, 'SET') "
            "FROM pg_roles WHERE rolname = %s",
            [APP_ROLE],
        )
        found = cursor.fetchone()
        if found is None or found[1]:
            return
        user = found[0]
        try:
            with transaction.atomic(using=using):
                cursor.execute(f"GRANT {APP_ROLE} TO {user}")  # quoted by the server
        except DatabaseError as error:
            if not isinstance(error.__cause__, psycopg.errors.InsufficientPrivilege):
                raise
            raise AppRoleOutOfReach(
                f"the role {APP_ROLE} exists and {user} may neither act as it (SET ROLE) nor grant"
                f" it. A DBA runs once: GRANT {APP_ROLE} TO {user}; then run migrate again."
            ) from None


current_tenant: ContextVar[int | None] = ContextVar("current_tenant", default=None)
_as_owner: ContextVar[bool] = ContextVar("as_owner", default=False)
_past_wall: ContextVar[bool] = ContextVar("past_wall", default=False)


def enabled() -> bool:
    return bool(settings.DATABASE_APP_ROLE) and not _as_owner.get()


@contextmanager
def as_owner() -> Iterator[None]:
    """ORM connections opened in this block act as the configured (owner) role, past row-level
    security: for schema changes (`manage.py migrate`, memories/management/commands/migrate.py;
    the account indexes of `embed_memories` and `index_accounts`), which the application role
    may not make. Open connections are closed on the way in and out,
    so none carries the wrong role across the boundary."""
    connections.close_all()
    token = _as_owner.set(True)
    try:
        yield
    finally:
        connections.close_all()
        _as_owner.reset(token)


def tenant_text(tenant: int | None) -> str:
    return "" if tenant is None else str(int(tenant))


@contextmanager
def acting_for(user_id: int) -> Iterator[None]:
    """Statements in this block see and write only `user_id`'s rows of the tenant tables."""
    token = current_tenant.set(user_id)
    try:
        yield
    finally:
        current_tenant.reset(token)


@contextmanager
def all_tenants(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """A transaction past row-level security, for legitimate cross-tenant work (staff admin).
    The application's own checks (staff only) stay in force; only the second wall is lifted.
    Never inside another transaction (durable: a RuntimeError there): its `SET LOCAL ROLE` would
    outlast the block, to the end of the outer transaction, and the statements after it would
    run past the wall too."""
    with transaction.atomic(using=using, durable=True):
        token = _past_wall.set(True)
        try:
            if enabled():
                with connections[using].cursor() as cursor:
                    cursor.execute("SET LOCAL ROLE NONE")
            yield
        finally:
            _past_wall.reset(token)


# Statements that read or write rows: the tenant setting goes in front of them in the same
# message (one round trip, see `_in_one_message`). Anything else that needs it (DDL, a
# maintenance command that may refuse a multi-statement message) gets its own statement first.
_ROW_STATEMENT = re.compile(r"\s*(\(|(SELECT|INSERT|UPDATE|DELETE|WITH|VALUES)\b)", re.IGNORECASE)
# Statements that touch no rows of any table: no tenant needed.
_NO_ROWS = re.compile(r"\s*(SAVEPOINT|RELEASE|ROLLBACK|SET|RESET)\b", re.IGNORECASE)


def _in_one_message(
    execute: Callable, setting: str, sql: Any, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Run `setting` (a statement with its values inlined) and `sql` as one simple-query message:
    one round trip, and one transaction (the implicit one of the message, or the one open),
    so a failure of `sql` undoes `setting` too. Django's cursors bind parameters client-side
    and send a simple query, which may hold several statements; the cursor is then moved to the
    result of `sql`, the one its caller reads."""
    if params is not None:
        setting = setting.replace("%", "%%")
    result = execute(f"{setting}; {sql}", params, many, context)
    context["cursor"].cursor.nextset()
    return result


def _fits_one_message(sql: Any, many: bool, context: dict[str, Any]) -> bool:
    # Not a named cursor (QuerySet.iterator): PostgreSQL declares it for one statement only.
    return (
        not many
        and isinstance(sql, str)
        and _ROW_STATEMENT.match(sql) is not None
        and not isinstance(context["cursor"].cursor, psycopg.ServerCursor)
        and not context["connection"].settings_dict["OPTIONS"].get("server_side_binding")
    )


def behind_transaction_pooler(connection: BaseDatabaseWrapper) -> bool:
    """Whether `connection`'s sessions are a transaction pooler's, shared with other clients
    between transactions. The read replica has a setting of its own: it may be reached through
    PgBouncer while the primary is not, and a session-wide role or tenant left there would serve
    the pooler's next client, another tenant's request."""
    if connection.alias == replica.REPLICA:
        return settings.DATABASE_REPLICA_TRANSACTION_POOLER
    return settings.DATABASE_TRANSACTION_POOLER


def _apply_tenant(
    execute: Callable, sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    if isinstance(sql, str) and _NO_ROWS.match(sql):
        return execute(sql, params, many, context)
    connection = context["connection"]
    if behind_transaction_pooler(connection):
        return _apply_in_transaction(execute, sql, params, many, context)
    # What the session holds is tracked on the psycopg connection itself: with Django's
    # connection pool one physical session serves many Django connections in turn.
    session = connection.connection
    wanted = tenant_text(current_tenant.get())
    if getattr(session, "threengram_tenant", None) == wanted:
        return execute(sql, params, many, context)
    session.threengram_tenant = None  # unknown until the setting is known to have held
    if _fits_one_message(sql, many, context):
        setting = f"SELECT set_config('{asyncdb.TENANT_SETTING}', {quote(wanted)}, false)"
        result = _in_one_message(execute, setting, sql, params, many, context)
    else:
        with session.cursor() as cursor:  # the raw cursor: no wrapper recursion
            cursor.execute(SET_TENANT_SQL, (wanted, False))
        result = execute(sql, params, many, context)
    # Outside a transaction the change is committed; inside one a rollback would undo it.
    if not connection.in_atomic_block:
        session.threengram_tenant = wanted
    return result


def _apply_in_transaction(
    execute: Callable, sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Behind a transaction pooler the session is not ours from one transaction to the next:
    each statement runs in a transaction that sets the role and the tenant for itself
    (`set_config(…, true)`, undone when it ends). A statement that reads or writes rows carries
    the setting in its own message, whose implicit transaction (outside an atomic block) is the
    statement's; any other statement outside one runs in a transaction of its own, after the
    setting. Nothing is left on the shared connection."""
    connection = context["connection"]
    role = "none" if _past_wall.get() else settings.DATABASE_APP_ROLE
    tenant = tenant_text(current_tenant.get())
    if _fits_one_message(sql, many, context):
        setting = (
            f"SELECT set_config('role', {quote(role)}, true), "
            f"set_config('{asyncdb.TENANT_SETTING}', {quote(tenant)}, true)"
        )
        return _in_one_message(execute, setting, sql, params, many, context)
    if not connection.in_atomic_block:
        with transaction.atomic(using=connection.alias):
            return _apply_in_transaction(execute, sql, params, many, context)
    with connection.connection.cursor() as cursor:  # the raw cursor: no wrapper recursion
        cursor.execute(SET_LOCAL_ROLE_AND_TENANT_SQL, (role, tenant))
    return execute(sql, params, many, context)


@receiver(connection_created)
def enter_app_role(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """Each ORM connection of a server process acts as the app role (not the nodb connection
    Django uses to create databases). Runs on every checkout from Django's pool; the SET ROLE
    only once per physical session."""
    if connection.alias == NO_DB_ALIAS or connection.vendor != "postgresql":
        return
    session = connection.connection
    role = settings.DATABASE_APP_ROLE if enabled() else ""
    if behind_transaction_pooler(connection):
        pass  # no session state: the role is set in each transaction (_apply_in_transaction)
    elif getattr(session, "threengram_role", "") != role:
        with session.cursor() as cursor:
            cursor.execute(f'SET ROLE "{role}"' if role else "RESET ROLE")
        session.threengram_role = role
        session.threengram_tenant = None
    if role and _apply_tenant not in connection.execute_wrappers:
        connection.execute_wrappers.append(_apply_tenant)
    elif not role and _apply_tenant in connection.execute_wrappers:
        connection.execute_wrappers.remove(_apply_tenant)


@functools.cache
def _admin_path() -> str:
    """Where the URLconf mounts the admin, as a path without the script prefix: taken from it
    (on first use, once the URLconf is loaded) so that moving the admin moves staff access
    too."""
    return "/" + reverse("admin:index").removeprefix(get_script_prefix())


class TenantMiddleware:
    """The site's tenant is the logged-in user (after AuthenticationMiddleware); a staff member
    in the admin works across tenants through `all_tenants`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        tenant = user.pk if user.is_authenticated else None
        # Lines logged while the request runs (a failure's) name its tenant, as /mcp's do.
        logged_as = tenant_id_var.set(str(tenant) if tenant is not None else "-")
        try:
            if not enabled():
                return self.get_response(request)
            with acting_for(tenant):
                in_admin = request.path_info.startswith(_admin_path())
                if tenant is not None and user.is_staff and in_admin:
                    with all_tenants():
                        return self.get_response(request)
                return self.get_response(request)
        finally:
            tenant_id_var.reset(logged_as)
