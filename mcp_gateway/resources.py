"""The `threengram://memory/{id}` resource (docs/design.md).

One template, no enumeration: `resources/list` is always empty (no firehose of a tenant's corpus,
no pagination, no subscriptions), and the template's `{id}` is not completable for the same
reason. A read is authorized on every request and goes through the same access gate as the
`get_memories` tool.
"""

from __future__ import annotations

import mcp_types as types
from django.conf import settings
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate

from mcp_gateway import completion
from mcp_gateway.auth import require_principal
from mcp_gateway.names import unknown_name
from mcp_gateway.serializers import memory_resource_body
from memories.access import read_owned_memories
from memories.bounds import shown_key
from memories.models import (
    MEMORY_URI_PREFIX,
    MEMORY_URI_TEMPLATE,
    memory_resource_uri,
    parse_memory_id,
)

_TEMPLATE = UriTemplate.parse(MEMORY_URI_TEMPLATE)
MIME_TYPE = "application/json"

MEMORY_TEMPLATE = types.ResourceTemplate(
    uri_template=MEMORY_URI_TEMPLATE,
    name="memory",
    title="Memory",
    description=(
        "One stored memory by id: its content and the facts fixed when it was recorded. "
        "The body never changes, so clients may cache it; whether the memory is still current "
        "is answered by the tools (search, get_memories), never by this resource."
    ),
    mime_type=MIME_TYPE,
)


def memory_id_in(uri: str) -> str | None:
    """The `{id}` of a URI matching the memory template (not yet validated), else None."""
    match = _TEMPLATE.match(uri)
    memory_id = match.get("id") if match else None
    if not isinstance(memory_id, str) or memory_id.startswith(MEMORY_URI_PREFIX):
        # A memory's URI names it where a tool takes an id (parse_memory_id); inside its own
        # URI again it would be a second name for one cacheable resource.
        return None
    return memory_id


# Why a URI names no resource, when its form alone says so: what a client can correct.
NOT_A_MEMORY_URI = (
    f"not a memory's URI; a memory is read as {MEMORY_URI_TEMPLATE}, {{id}} its id (a UUID)"
)
NOT_A_MEMORY_ID = (
    f"the {{id}} of {MEMORY_URI_TEMPLATE} is a memory's id as remember and search give it: a "
    "UUID, in lower case with hyphens, not percent-encoded"
)


def _not_found(uri: str, why: str | None = None) -> MCPError:
    # MCP 2026-07-28 server/resources: an unknown resource is -32602 (Invalid Params). A
    # well-formed id that is missing and another tenant's get this one error, bare, alike; only
    # the echoed URI differs. A URI or id of the wrong form is told what the form is: the form
    # alone says it names no memory, so that tells nothing of any memory. The URI is echoed cut
    # as every name a caller made up (a memory's own is shorter): not a body's worth of it back.
    message = f"Resource not found: {why}" if why else "Resource not found"
    return MCPError(code=types.INVALID_PARAMS, message=message, data={"uri": shown_key(uri)})


async def read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    principal = require_principal(settings.MEMORY_READ_SCOPE)
    uri = params.uri
    memory_id = memory_id_in(uri)
    if memory_id is None:
        # Another scheme or shape: not one of ours. No id to look up, so no oracle either.
        raise _not_found(uri, NOT_A_MEMORY_URI)
    parsed = parse_memory_id(memory_id)
    if parsed is None or uri != memory_resource_uri(parsed):
        # Only the URI the server gives, character for character: a tool takes an id in other
        # spellings too (parse_memory_id), and the template's match decodes percent-encoding,
        # but each would be another name, another cache key, for one cacheable resource.
        raise _not_found(uri, NOT_A_MEMORY_ID)
    # The tenant is the verified token's user, never anything in the URI.
    found = await read_owned_memories(owner_id=principal.user_id, ids=[memory_id])
    if len(found) != 1:
        raise _not_found(uri)
    (memory,) = found.values()
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(
                uri=uri, mime_type=MIME_TYPE, text=memory_resource_body(memory)
            )
        ],
        # Private (tenant data: MCP caching spec, a public result may be shared across
        # authorization contexts) and long-lived (the body cannot go stale). Its own setting,
        # not the catalog TTL: the catalogs go stale on a deployment, a body essentially never.
        ttl_ms=settings.MEMORY_RESOURCE_CACHE_TTL_MS,
        cache_scope="private",
    )


async def complete_template_argument(uri: str, argument: str, value: str) -> list[str]:
    """Completion of a resource template's argument: none. The memory template's `{id}` is
    deliberately not completable (an id completer would enumerate the tenant's corpus); what
    a completion of another template or argument, or of text no id could be, is refused as a
    prompt's is (mcp_gateway.completion)."""
    completion.refuse_unreadable({"ref.uri": uri}, argument, value)
    if uri != MEMORY_URI_TEMPLATE:
        raise completion.invalid_params(
            unknown_name("resource template", uri, [MEMORY_URI_TEMPLATE])
        )
    if argument != "id":
        completion.refuse_unknown_argument(argument)
    return []


async def list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    # Registered so the `resources` capability is advertised (the SDK derives it from this
    # handler). Always empty, the same for every caller: hence public, with the catalog TTL.
    require_principal(settings.MEMORY_READ_SCOPE)
    return types.ListResourcesResult(
        resources=[], ttl_ms=settings.MCP_CATALOG_CACHE_TTL_MS, cache_scope="public"
    )


async def list_resource_templates(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    require_principal(settings.MEMORY_READ_SCOPE)
    return types.ListResourceTemplatesResult(resource_templates=[MEMORY_TEMPLATE])
