"""Tools, prompts and completion through a live daphne process and the official MCP SDK client,
on both protocol wires: what an agent sees on the network."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp_gateway.server", reason="needs the MCP endpoint (gateway issue)")

import mcp_types as types
from mcp.shared.exceptions import MCPError

from tests.mcp_gateway.conftest import make_token, mcp_client, run_sync

pytestmark = [pytest.mark.anyio, pytest.mark.live]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_remember_search_get_memories_round_trip(live_daphne, seeded, mode):
    async with mcp_client(live_daphne.mcp_url, seeded.token, mode=mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["search"].input_schema["additionalProperties"] is False
        assert listed["search"].output_schema is not None
        stored = await client.call_tool(
            "remember",
            {
                "memoryType": "decision",
                "topic": f"Cache layer {mode}",
                "content": f"Use Redis ({mode})",
            },
        )
        assert not stored.is_error
        memory = stored.structured_content["memory"]
        found = await client.call_tool("search", {"query": f"redis {mode}"})
        assert [hit["id"] for hit in found.structured_content["hits"]] == [memory["id"]]
        assert memory["uri"] == f"threengram://memory/{memory['id']}"
        # As clients that fill every field, and write lists as JSON text, send the same search.
        as_sent = {"limit": "5", "project": None, "memoryTypes": '["decision"]', "cursor": None}
        also_found = await client.call_tool("search", {"query": f"redis {mode}"} | as_sent)
        assert also_found.structured_content["hits"] == found.structured_content["hits"]
        read = await client.call_tool(
            "get_memories", {"ids": [memory["id"], str(seeded.foreign_memory.id)]}
        )
    body = read.structured_content
    assert [m["content"] for m in body["memories"]] == [f"Use Redis ({mode})"]
    assert body["notFound"] == [str(seeded.foreign_memory.id)]
    assert isinstance(read.content[0], types.TextContent)


async def test_tool_errors_reach_the_client_as_tool_results(live_daphne, seeded):
    reader = await run_sync(make_token, seeded.tenant, scope="memory:read")
    async with mcp_client(live_daphne.mcp_url, reader) as client:
        # A write with a read-only token is HTTP 403 insufficient_scope (the step-up challenge,
        # docs/oauth.md): a client without an OAuth provider to step up, or whose person kept
        # the grant read-only, gets an error that says which scope the call needs.
        with pytest.raises(MCPError) as refused:
            await client.call_tool("remember", {"memoryType": "note", "topic": "t", "content": "c"})
        unknown = await client.call_tool("briefing", {"mode": "brief", "verbose": True})
        briefing = await client.call_tool("briefing", {})
    assert refused.value.message == "insufficient_scope: this tool needs the memory:write scope"
    assert unknown.is_error
    assert "verbose: unknown field" in unknown.content[0].text
    assert not briefing.is_error
    assert briefing.structured_content["sections"]["openCommitments"]["count"] == 0


async def test_prompt_and_completion_over_the_wire(live_daphne, seeded):
    async with mcp_client(live_daphne.mcp_url, seeded.token) as client:
        prompt = await client.get_prompt("briefing", {"project": "threengram"})
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="debrief"),
            {"name": "project", "value": "three"},
        )
    assert '"selector": "project"' in prompt.messages[0].content.text
    assert completion.completion.values == ["threengram"]
