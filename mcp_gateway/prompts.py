"""MCP prompts. Contract with the server module (mcp_gateway/server.py):

    prompt_definitions() -> list[mcp_types.Prompt]
    async get_prompt(principal, name, arguments) -> mcp_types.GetPromptResult
    async complete_prompt_argument(principal, prompt, argument, prefix) -> list[str]  (<= 100)

(Filled in by the tools issue.)"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_gateway.principal import Principal


def prompt_definitions() -> list[types.Prompt]:
    return []


async def get_prompt(
    principal: Principal, name: str, arguments: dict | None
) -> types.GetPromptResult:
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")


async def complete_prompt_argument(
    principal: Principal, prompt: str, argument: str, prefix: str
) -> list[str]:
    return []
