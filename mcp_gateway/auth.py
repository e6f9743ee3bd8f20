"""Bearer-token authentication of MCP requests against django-oauth-toolkit's tokens.

Every request is checked here, whatever a client cache holds (docs/design.md, "Authorization":
`cacheScope` is not access control). Nothing is cached between requests: a revoked token, or an
erased account (erasure deletes its tokens in the same transaction), fails on its very next request.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from dataclasses import dataclass

import mcp_types as types
from django.conf import settings
from django.contrib.auth import get_user_model
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import get_access_token_model

from infra import asyncdb
from mcp_gateway.principal import Principal

# One statement checks the tokens of every request that reached this point in the same turn of
# the event loop (`_TokenChecks`), each row of `q` being one request (`n`). A request with no row
# was refused. The token tables carry no row-level security (memories/tenancy.py): the check
# reads the same under the application role, for every tenant of the batch at once.
# A token is found by its checksum (DOT 3 stores sha256(token) in the unique `token_checksum`
# column and may blank the plaintext column, RFC 9700 token storage), and valid when unexpired,
# of an active, non-erased user, and issued for this resource server: RFC 8707 §2 audience,
# `resource` must name MCP_RESOURCE_URL. An empty `resource` means "unrestricted" to DOT; here it
# fails closed (MCP authorization spec: servers MUST validate the token's intended audience).
# Parameters: request numbers, checksums (`_TokenChecks._arrays`), audience.
CHECK_TOKENS = asyncdb.prepared_statement(
    "threengram_check_tokens",
    "SELECT q.n, t.user_id, t.scope "  # noqa: S608 (constants)
    "FROM unnest(string_to_array($1, ',')::int[], string_to_array($2, ',')::text[]) "
    "AS q(n, checksum) "
    f"JOIN {get_access_token_model()._meta.db_table} t ON t.token_checksum = q.checksum "
    f"JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id "
    "WHERE t.expires > now() AND u.is_active AND u.erased_at IS NULL "
    "AND t.resource @> jsonb_build_array($3::text)",
)


class _TokenChecks(asyncdb.LoopTurnBatch[str, tuple | None]):
    """The token checks of the requests that arrive in the same turn of the event loop, as one
    statement (`asyncdb.LoopTurnBatch`: a round trip costs the sender far more CPU than the
    lookup costs the server). Each request still gets its own verdict from its own token, in
    its own row. Nothing is cached: every request is checked against the table."""

    async def check(self, checksum: str) -> tuple | None:
        return await self.submit(checksum)

    async def run(self, items: list[str]) -> list[tuple | None]:
        statement = (CHECK_TOKENS, (*self._arrays(items), settings.MCP_RESOURCE_URL))
        async with asyncdb.connection() as conn:
            (rows,) = await asyncdb.execute_prepared(conn, [statement])
        verdicts: list[tuple | None] = [None] * len(items)
        for row in rows:
            verdicts[row[0]] = row[1:]
        return verdicts

    @staticmethod
    def _arrays(checksums: list[str]) -> tuple[str, str]:
        """`q` of CHECK_TOKENS: request numbers and checksums.

        Each column goes as one comma-separated text: psycopg dumps a list parameter element by
        element in Python, costly per batch (docs/performance.md). No value can hold a comma:
        numbers and hex digests."""
        return ",".join(map(str, range(len(checksums)))), ",".join(checksums)


_token_checks = _TokenChecks()

# Set by the router (mcp_gateway.asgi) for the duration of one request; read by the handlers.
current_principal: ContextVar[Principal | None] = ContextVar("current_principal", default=None)


@dataclass(slots=True)
class ScopeShortfall:
    """Per request: the scope a handler found the token lacking, for the router to answer
    HTTP 403 `insufficient_scope` (handlers run in tasks that copy the request's context, so
    this is a shared mutable object, not a value)."""

    scope: str | None = None


scope_shortfall: ContextVar[ScopeShortfall | None] = ContextVar("scope_shortfall", default=None)


def note_insufficient_scope(scope: str) -> None:
    """The call needs `scope`, which the token lacks: the reply becomes HTTP 403 with an
    `insufficient_scope` challenge (RFC 6750 §3.1), which MCP clients answer by asking the
    person for the wider scope and retrying (MCP authorization spec, "Step-Up Authorization
    Flow"). The handler's own JSON-RPC error stays the body, for clients that do not step up."""
    shortfall = scope_shortfall.get()
    if shortfall is not None:
        shortfall.scope = scope


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _principal(row: tuple) -> Principal:
    user_id, scope = row
    return Principal(user_id=user_id, scopes=frozenset(scope.split()))


async def authenticate(token: str) -> Principal | None:
    """The principal of a valid bearer token, or None (unknown, expired, revoked, wrong audience,
    inactive or erased user)."""
    row = await _token_checks.check(_checksum(token))
    return None if row is None else _principal(row)


def require_principal(scope: str) -> Principal:
    """The verified caller, holding `scope`, or an error: fail closed even if the router in
    front was misconfigured or bypassed (the SDK's `auth=` without a verifier fails open)."""
    principal = current_principal.get()
    if principal is None:
        raise MCPError(code=types.INVALID_REQUEST, message="Authentication required")
    if not principal.can(scope):
        raise MCPError(code=types.INVALID_REQUEST, message=f"Insufficient scope: needs {scope}")
    return principal


# RFC 9728 §3.1: where a protected resource's metadata is served, before the resource's path.
METADATA_PREFIX = "/.well-known/oauth-protected-resource"


def resource_metadata_url() -> str:
    """RFC 9728 §3.1: the metadata URL for resource MCP_RESOURCE_URL (PUBLIC_BASE_URL and
    MCP_PATH) inserts the well-known segment before the resource's path."""
    return f"{settings.PUBLIC_BASE_URL}{METADATA_PREFIX}{settings.MCP_PATH}"


def challenged_scopes() -> str:
    """The scopes every challenge names: those of the whole tool surface. MCP clients request
    exactly the challenged scope (MCP authorization spec, "Scope Selection Strategy"), so naming
    only memory:read would leave every client unable to write; the consent page still lets the
    person grant read-only."""
    return f"{settings.MEMORY_READ_SCOPE} {settings.MEMORY_WRITE_SCOPE}"


def challenge(error: str | None = None, description: str | None = None) -> str:
    """A `WWW-Authenticate` value (RFC 6750 §3, RFC 9728 §5.1, MCP authorization spec: `scope`
    SHOULD be included). With no credentials at all, RFC 6750 §3.1 says to omit `error`."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    parts.append(f'resource_metadata="{resource_metadata_url()}"')
    parts.append(f'scope="{challenged_scopes()}"')
    return "Bearer " + ", ".join(parts)
