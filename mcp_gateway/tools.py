"""MCP tools. Contract with the server module (mcp_gateway/server.py):

    tool_definitions() -> list[mcp_types.Tool]
    async call_tool(principal, name, arguments) -> mcp_types.CallToolResult

Each tool is a thin adapter over a `memories` service. (Filled in by the tools issue.)"""

from __future__ import annotations

import mcp_types as types

from mcp_gateway.principal import Principal


def tool_definitions() -> list[types.Tool]:
    return []


async def call_tool(
    principal: Principal, name: str, arguments: dict | None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"not_found: unknown tool {name!r}")],
        is_error=True,
    )
