"""Bearer-token authentication of MCP requests against django-oauth-toolkit's tokens.

Every request is checked here, whatever a client cache holds (docs/design.md, "Authorization":
`cacheScope` is not access control). Nothing is cached between requests: a revoked token, or an
erased account (erasure deletes its tokens in the same transaction), fails on its very next request.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import mcp_types as types
from django.conf import settings
from django.contrib.auth import get_user_model
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import get_access_token_model, get_application_model

from infra import asyncdb
from mcp_gateway.principal import Principal
from memories import access, tenancy
from memories.access import MemoryRow

# The token by its checksum (DOT 3 stores sha256(token) in the unique `token_checksum` column and
# may blank the plaintext column, RFC 9700 token storage), unexpired, of an active, non-erased
# user, and issued for this resource server: RFC 8707 §2 audience — `resource` must name
# MCP_RESOURCE_URL. An empty `resource` means "unrestricted" to DOT; here it fails closed (MCP
# authorization spec: servers MUST validate the token's intended audience).
#
_TOKEN_TABLES = (
    f"{get_access_token_model()._meta.db_table} t "
    f"JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id "
)


def _valid_token(audience: str) -> str:
    return (
        "t.expires > now() AND u.is_active AND u.erased_at IS NULL "
        f"AND t.resource @> jsonb_build_array({audience}::text)"
    )


# One statement checks the tokens of every request that reached this point in the same turn of
# the event loop (`_TokenChecks`), each row of `q` being one request (`n`) and at most one memory
# id it reads along: the access gate's own statement joined in with owner = that request's token
# user, so a `resources/read` costs no second round trip (docs/performance.md). A request with
# no row was refused; otherwise it has one row per memory found, or one row of NULL memory.
# Parameters: request numbers, checksums, memory ids (`_TokenChecks._arrays`), audience.
CHECK_TOKENS = asyncdb.prepared_statement(
    "threengram_check_tokens",
    "SELECT q.n, t.user_id, t.scope, a.client_id, gate.* "  # noqa: S608 (constants)
    "FROM unnest(string_to_array($1, ',')::int[], string_to_array($2, ',')::text[], "
    "string_to_array($3, ',', '-')::uuid[]) AS q(n, checksum, memory_id) "
    f"JOIN {_TOKEN_TABLES} ON t.token_checksum = q.checksum "
    f"LEFT JOIN {get_application_model()._meta.db_table} a ON a.id = t.application_id "
    "LEFT JOIN LATERAL ("
    + access.owned_memories_sql("t.user_id", ids="ARRAY[q.memory_id]")
    + f") gate ON true WHERE {_valid_token('$4')}",
)
# With row-level security (memories/tenancy.py) one statement cannot read for several tenants:
# each token's check runs after this one, which sets the tenant from the same token, inside
# PostgreSQL (no verified token: no tenant, no rows). The whole batch is one message, one
# implicit transaction (`asyncdb.execute_prepared`), so each `set_config(..., true)` holds for
# the statement after it and nothing outlives the batch; still one round trip.
# Parameters: checksum, audience.
SET_TENANT_FROM_TOKEN = asyncdb.prepared_statement(
    "threengram_set_tenant_from_token",
    f"SELECT set_config('{asyncdb.TENANT_SETTING}', coalesce(("  # noqa: S608 (constants)
    f"SELECT t.user_id::text FROM {_TOKEN_TABLES} "
    f"WHERE t.token_checksum = $1 AND {_valid_token('$2')}), ''), true)",
)


@dataclass(slots=True)
class _Check:
    checksum: str
    memory_ids: list[uuid.UUID]


class _TokenChecks(asyncdb.LoopTurnBatch[_Check, list[tuple]]):
    """The token checks of the requests that arrive in the same turn of the event loop, as one
    statement (`asyncdb.LoopTurnBatch`: a round trip costs the sender far more CPU than the
    lookup costs the server), or under row-level security a tenant setting and a check per
    token, all in one message. Each request still gets its own verdict from its own token, in
    its own rows. Nothing is cached: every request is checked against the table."""

    async def check(self, checksum: str, memory_ids: list[uuid.UUID]) -> list[tuple]:
        return await self.submit(_Check(checksum, memory_ids))

    async def run(self, items: list[_Check]) -> list[list[tuple]]:
        statements = self._statements(items, settings.MCP_RESOURCE_URL)
        async with asyncdb.connection() as conn:
            results = await asyncdb.execute_prepared(conn, statements)
        verdicts: list[list[tuple]] = [[] for _ in items]
        for (statement, _), rows in zip(statements, results, strict=True):
            if statement == CHECK_TOKENS:
                for row in rows:
                    verdicts[row[0]].append(row[1:])
        return verdicts

    @staticmethod
    def _arrays(numbered: list[tuple[int, _Check]]) -> tuple[str, str, str]:
        """`q` of CHECK_TOKENS: request numbers, checksums and memory ids, one row per id.

        Each column goes as one comma-separated text: psycopg dumps a list parameter element by
        element in Python, costly per batch (docs/performance.md). No value can
        hold a comma: numbers, hex digests, and UUIDs already parsed; '-' is NULL (no memory), so
        the three columns always have as many elements."""
        numbers, checksums, memory_ids = [], [], []
        for number, check in numbered:
            for memory_id in check.memory_ids or [None]:
                numbers.append(str(number))
                checksums.append(check.checksum)
                memory_ids.append("-" if memory_id is None else str(memory_id))
        return ",".join(numbers), ",".join(checksums), ",".join(memory_ids)

    @classmethod
    def _statements(cls, batch: list[_Check], audience: str) -> list[tuple[str, tuple[str, ...]]]:
        """One check for the whole batch; under row-level security one tenant setting and one
        check per token instead, the requests of one token (an agent reading several memories
        at once) sharing its pair."""
        if not tenancy.enabled():
            return [(CHECK_TOKENS, (*cls._arrays(list(enumerate(batch))), audience))]
        by_token: dict[str, list[tuple[int, _Check]]] = {}
        for number, check in enumerate(batch):
            by_token.setdefault(check.checksum, []).append((number, check))
        statements = []
        for checksum, numbered in by_token.items():
            statements.append((SET_TENANT_FROM_TOKEN, (checksum, audience)))
            statements.append((CHECK_TOKENS, (*cls._arrays(numbered), audience)))
        return statements


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
    Flow"). The handler's own error result stays the body, for clients that do not step up."""
    shortfall = scope_shortfall.get()
    if shortfall is not None:
        shortfall.scope = scope


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _principal(row: tuple) -> Principal:
    user_id, scope, client_id = row[:3]
    return Principal(user_id=user_id, scopes=frozenset(scope.split()), client_id=client_id or "")


async def authenticate(token: str) -> Principal | None:
    """The principal of a valid bearer token, or None (unknown, expired, revoked, wrong audience,
    inactive or erased user)."""
    rows = await _token_checks.check(_checksum(token), [])
    return _principal(rows[0]) if rows else None


async def authenticate_and_read(
    token: str, ids: Sequence[object]
) -> tuple[Principal | None, dict[uuid.UUID, MemoryRow]]:
    """`authenticate`, and the token owner's memories among `ids` read by the access gate's
    statement, in the same round trip. The memories are only for the same request's gate call
    (`access.prefetched_for_request`), and only once the token has been accepted."""
    rows = await _token_checks.check(_checksum(token), access.parse_ids(ids))
    if not rows:
        return None, {}
    return _principal(rows[0]), access.memories_from_rows([row[3:] for row in rows])


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
