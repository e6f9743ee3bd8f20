"""Bearer-token authentication of MCP requests against django-oauth-toolkit's tokens.

Every request is checked here, whatever a client cache holds (seed design, "cacheScope is not
access control"). Nothing is cached between requests: a revoked token, or an erased account
(erasure deletes its tokens in the same transaction), fails on its very next request.
"""

from __future__ import annotations

import hashlib
import uuid
from contextvars import ContextVar

import mcp_types as types
from django.conf import settings
from django.contrib.auth import get_user_model
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_gateway.principal import Principal
from memories import access
from memories.access import MemoryRow
from threengram import asyncdb

# One statement per request: the token by its checksum (DOT 3 stores sha256(token) in the unique
# `token_checksum` column and may blank the plaintext column, RFC 9700 token storage), unexpired,
# of an active, non-erased user, and issued for this resource server: RFC 8707 §2 audience —
# `resource` must name MCP_RESOURCE_URL. An empty `resource` means "unrestricted" to DOT; here it
# fails closed (MCP authorization spec: servers MUST validate the token's intended audience).
_TOKEN_FROM = (
    f"FROM {get_access_token_model()._meta.db_table} t "
    f"JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id "
    f"LEFT JOIN {get_application_model()._meta.db_table} a ON a.id = t.application_id "
)
_TOKEN_WHERE = (
    "WHERE t.token_checksum = %s AND t.expires > now() "
    "AND u.is_active AND u.erased_at IS NULL "
    "AND t.resource @> jsonb_build_array(%s::text)"
)
_TOKEN_SQL = "SELECT t.user_id, t.scope, a.client_id " + _TOKEN_FROM + _TOKEN_WHERE
# The same check with the access gate's own statement joined in, owner = the token's user: a
# `resources/read` costs one round trip to PostgreSQL instead of two (docs/performance.md).
# No row: the token is refused. Otherwise one row per memory found (or one row of NULLs).
_TOKEN_AND_READ_SQL = (
    "SELECT t.user_id, t.scope, a.client_id, gate.* "
    + _TOKEN_FROM
    + f"LEFT JOIN LATERAL ({access.owned_memories_sql('t.user_id')}) gate ON true "
    + _TOKEN_WHERE
)

# Set by the router (mcp_gateway.asgi) for the duration of one request; read by the handlers.
current_principal: ContextVar[Principal | None] = ContextVar("current_principal", default=None)


async def authenticate(token: str) -> Principal | None:
    """The principal of a valid bearer token, or None (unknown, expired, revoked, wrong audience,
    inactive or erased user)."""
    checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
    async with asyncdb.connection() as conn:
        cursor = await conn.execute(_TOKEN_SQL, (checksum, settings.MCP_RESOURCE_URL))
        row = await cursor.fetchone()
    if row is None:
        return None
    user_id, scope, client_id = row
    return Principal(user_id=user_id, scopes=frozenset(scope.split()), client_id=client_id or "")


async def authenticate_and_read(
    token: str, ids: list[uuid.UUID]
) -> tuple[Principal | None, dict[uuid.UUID, MemoryRow]]:
    """`authenticate`, and the token owner's memories among `ids` read by the access gate's
    statement, in one round trip. The memories are only for the same request's gate call
    (`access.prefetched_for_request`), and only once the token has been accepted."""
    checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
    async with asyncdb.connection() as conn:
        cursor = await conn.execute(_TOKEN_AND_READ_SQL, (ids, checksum, settings.MCP_RESOURCE_URL))
        rows = await cursor.fetchall()
    if not rows:
        return None, {}
    user_id, scope, client_id = rows[0][:3]
    principal = Principal(
        user_id=user_id, scopes=frozenset(scope.split()), client_id=client_id or ""
    )
    return principal, access.memories_from_rows([row[3:] for row in rows])


def require_principal(scope: str) -> Principal:
    """The verified caller, holding `scope`, or an error: fail closed even if the router in
    front was misconfigured or bypassed (the SDK's `auth=` without a verifier fails open)."""
    principal = current_principal.get()
    if principal is None:
        raise MCPError(code=types.INVALID_REQUEST, message="Authentication required")
    if not principal.can(scope):
        raise MCPError(code=types.INVALID_REQUEST, message=f"Insufficient scope: needs {scope}")
    return principal


def resource_metadata_url() -> str:
    """RFC 9728 §3.1: the metadata URL for resource PUBLIC_BASE_URL/mcp inserts the well-known
    segment before the resource's path."""
    return f"{settings.PUBLIC_BASE_URL}/.well-known/oauth-protected-resource/mcp"


def challenge(error: str | None = None, description: str | None = None) -> str:
    """A `WWW-Authenticate` value (RFC 6750 §3, RFC 9728 §5.1, MCP authorization spec: `scope`
    SHOULD be included). With no credentials at all, RFC 6750 §3.1 says to omit `error`."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    parts.append(f'resource_metadata="{resource_metadata_url()}"')
    parts.append(f'scope="{settings.MEMORY_READ_SCOPE}"')
    return "Bearer " + ", ".join(parts)
