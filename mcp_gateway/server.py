"""The MCP server: the SDK's low-level `Server`, with thin handlers delegating to the resource,
tool and prompt modules. No business logic here.

The low-level `Server` is the layer that lets a `resources/read` result carry its own cache hint
(`MCPServer` only has per-method hints, and advertises subscriptions unless told not to).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server import CacheHint, Server, ServerRequestContext
from mcp.server._otel import OpenTelemetryMiddleware  # private module: mcp is pinned (2.3.0)
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware
from mcp.shared.exceptions import MCPError
from opentelemetry import trace
from pydantic import ValidationError

from infra import dbfaults
from infra.observability import VERSION, new_request_id, request_id_var
from mcp_gateway import prompts, resources, tools
from mcp_gateway.access_log import log_failure, method_called
from mcp_gateway.auth import require_principal
from mcp_gateway.orm import orm_request_context
from memories import bounds
from memories.environment import COMPLETION_MAX

logger = logging.getLogger(__name__)


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    require_principal(settings.MEMORY_READ_SCOPE)
    return types.ListToolsResult(tools=tools.tool_definitions())


def tool_input_schema(name: str) -> dict[str, Any] | None:
    """For the 2026 transport's `Mcp-Param-*` header check; without it the SDK would run the
    tools/list handler on every tools/call."""
    for tool in tools.tool_definitions():
        if tool.name == name:
            return tool.input_schema
    return None


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    principal = require_principal(settings.MEMORY_READ_SCOPE)
    async with orm_request_context():
        return await tools.call_tool(principal, params.name, params.arguments)


async def list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    require_principal(settings.MEMORY_READ_SCOPE)
    return types.ListPromptsResult(prompts=prompts.prompt_definitions())


async def get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    principal = require_principal(settings.MEMORY_READ_SCOPE)
    async with orm_request_context():
        return await prompts.get_prompt(principal, params.name, params.arguments)


async def complete(
    ctx: ServerRequestContext, params: types.CompleteRequestParams
) -> types.CompleteResult:
    principal = require_principal(settings.MEMORY_READ_SCOPE)
    values: list[str] = []
    if isinstance(params.ref, types.PromptReference):
        async with orm_request_context():
            values = await prompts.complete_prompt_argument(
                principal, params.ref.name, params.argument.name, params.argument.value
            )
    else:  # ref/resource: refused as a prompt's is, else nothing (resources.py says why)
        values = await resources.complete_template_argument(
            params.ref.uri, params.argument.name, params.argument.value
        )
    # MCP completion: hasMore when values were left out, whose number is then not known.
    if len(values) > COMPLETION_MAX:
        completion = types.Completion(values=values[:COMPLETION_MAX], has_more=True)
    else:
        completion = types.Completion(values=values, total=len(values), has_more=False)
    return types.CompleteResult(completion=completion)


# What a field must be, by pydantic's error type; any other reads "is not valid".
_MUST_BE = {
    "missing": "is required",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be an array",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
}


def _invalid_params(invalid: ValidationError, params: Mapping[str, Any] | None) -> str:
    """The first invalid field of a request's params (`params` as sent), named as the request
    wrote it, and what it must be."""
    first = invalid.errors()[0]
    location = list(first["loc"])
    if location[:1] == ["params"]:  # the request's surface check names the params themselves
        location = location[1:]
    must_be = _MUST_BE.get(first["type"], "is not valid")
    path: list[str] = []
    value: Any = params
    for depth, part in enumerate(location):
        in_request = (isinstance(value, Mapping) and part in value) or (
            isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        )
        if in_request:
            value = value[part]
        elif not (depth == len(location) - 1 and first["type"] == "missing"):
            # Not in the request: one of a union's alternatives, by its type's name
            # ("ref.PromptReference.name", "progressToken.str"). The value matched none of them,
            # and what the first one expects is not what the field must be.
            must_be = "is not valid"
            break
        path.append(bounds.shown_key(str(part)))
    field = ".".join(path) or "params"
    return f"Invalid request parameters: {field}: {must_be}"


async def note_method_called(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
    called = method_called.get()
    if called is not None:
        called.method = ctx.method[: bounds.SHOWN_KEY_MAX]
        name = ctx.params.get("name") if isinstance(ctx.params, Mapping) else None
        # Only the name of one of our tools: anything else is text the client sent (an object,
        # a list, a made-up name), which the log never holds; the call is refused anyway.
        if ctx.method == "tools/call":
            called.tool = (
                name if isinstance(name, str) and name in tools.TOOL_NAMES else "(unknown)"
            )
    return await call_next(ctx)


# The paginated methods this server serves: each answers its whole list in one page.
PAGINATED_METHODS = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
INVALID_CURSOR = (
    "Invalid cursor: this server answers every list in one page and issues no nextCursor; "
    "list again without a cursor"
)


async def refuse_cursors(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
    """A cursor this server never issued is invalid (MCP pagination: -32602), and so is every
    cursor: answering the first page instead would hand a client that pages a list it takes for
    another, under the first page's public cache hint."""
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    if ctx.method in PAGINATED_METHODS and params.get("cursor") is not None:
        raise MCPError(code=types.INVALID_PARAMS, message=INVALID_CURSOR)
    return await call_next(ctx)


def refuse_unserved_methods(server: Server) -> ServerMiddleware[Any]:
    """-32601 for a method of the MCP spec this server does not serve (logging/setLevel: no
    logging capability is declared), whatever its params: the SDK checks the params of a spec
    method before finding that nothing serves it, so a valid request was "Method not found" and
    an invalid one "Invalid request parameters", as if the method were served."""

    async def refuse(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        if ctx.method != "initialize" and server.get_request_handler(ctx.method) is None:
            raise MCPError(
                code=types.METHOD_NOT_FOUND,
                message="Method not found",
                data=bounds.shown_key(ctx.method),
            )
        return await call_next(ctx)

    return refuse


def unavailable_error(request_id: str) -> MCPError:
    """-32603 for a request the database could not answer now (infra.dbfaults): retryable, and
    when, in its data; the HTTP answer is 503 with Retry-After (the router sets it)."""
    return MCPError(
        code=types.INTERNAL_ERROR,
        message=f"{dbfaults.MESSAGE} (request id {request_id})",
        data={"retryable": True, "retryAfterSeconds": dbfaults.RETRY_AFTER_SECONDS},
    )


def internal_error(request_id: str) -> MCPError:
    """-32603 for an unexpected failure: nothing of it but the request id its log record
    carries (log_failure)."""
    return MCPError(code=types.INTERNAL_ERROR, message=f"Internal error (request id {request_id})")


async def hide_internal_errors(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
    """An unexpected exception becomes a generic -32603 on both wires. Without this the SDK sends
    `str(exc)` to 2025-era clients. Logged with a request id and the stack, never the exception
    message (which could quote memory content)."""
    try:
        return await call_next(ctx)
    except MCPError:
        raise
    except ValidationError as invalid:
        # The SDK answers the params' validation with a bare "Invalid request parameters":
        # this names the field and what it must be, never the value (no pydantic text).
        raise MCPError(
            code=types.INVALID_PARAMS, message=_invalid_params(invalid, ctx.params)
        ) from None
    except Exception as exc:
        request_id = request_id_var.get()  # set by the router (infra.observability)
        if request_id == "-":  # no router in front (in-process use)
            request_id = new_request_id()
        if dbfaults.is_unavailable(exc):
            # Retryable, not a bug: no stack in the log, the router answers 503 + Retry-After.
            logger.warning("MCP %s: database unavailable, request id %s", ctx.method, request_id)
            dbfaults.mark_unavailable(exc)
            raise unavailable_error(request_id) from None
        log_failure(f"MCP {ctx.method}", request_id, exc)
        raise internal_error(request_id) from None


def tracing_configured() -> bool:
    """Whether an OpenTelemetry tracer provider was installed before start-up (an SDK, or
    `opentelemetry-instrument`): without one, spans are created and dropped."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


# What a client puts before its model (MCP: InitializeResult.instructions): the habits that make
# memory useful across sessions, in the tools' own names.
INSTRUCTIONS = (
    "Long-term memory of this account's work, kept across sessions and agents. "
    "Start by calling briefing (handoff when taking over work) for open commitments, blockers, "
    "recent decisions and preferences. Before asking the user something that may have been "
    "settled, search in natural language. Store with remember as things happen: one decision, "
    "commitment (with dueAt), blocker, fact or preference per memory, a short topic and its "
    "project; never secrets. When one changes, revise it rather than remembering it again "
    "(its history stays); resolve a commitment once done; archive what no longer matters. Hits "
    "are excerpts: get_memories reads memories whole, and each is the cacheable resource "
    "threengram://memory/{id}."
)


def build_server() -> Server:
    catalog = CacheHint(ttl_ms=settings.MCP_CATALOG_CACHE_TTL_MS, scope="public")
    server = Server(
        "threengram",
        version=VERSION,
        title="threengram memory",
        instructions=INSTRUCTIONS,
        # Catalogs are identical for every caller: public (MCP caching spec). resources/list
        # and resources/read set their hints on the result itself (mcp_gateway.resources).
        # tools/call and completion/complete results are not cacheable types at all.
        cache_hints={
            "server/discover": catalog,
            "tools/list": catalog,
            "prompts/list": catalog,
            "resources/templates/list": catalog,
        },
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=resources.list_resources,
        on_list_resource_templates=resources.list_resource_templates,
        on_read_resource=resources.read_resource,
        on_completion=complete,
    )
    if not tracing_configured():
        # The SDK opens a span per message even when nothing records it, CPU on every request
        # for nothing (docs/performance.md). Its documented opt-out
        # is to drop the middleware; it stays whenever a tracer provider is installed.
        server.middleware[:] = [
            middleware
            for middleware in server.middleware
            if not isinstance(middleware, OpenTelemetryMiddleware)
        ]
    server.middleware.append(note_method_called)
    server.middleware.append(refuse_unserved_methods(server))
    server.middleware.append(refuse_cursors)
    server.middleware.append(hide_internal_errors)
    return server
