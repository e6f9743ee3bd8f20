"""A row that once could not be read back (a commitment due in year 10000, stored through an
offset before inputs were bounded) troubles no request: its own tenant's reads, searches and
briefings answer, and so do the other tenants' requests checked in the same statements."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.factories import MemoryFactory, UserFactory, insert_commitment_due_at
from tests.mcp_gateway.conftest import IN_PROCESS_URL, asgi_transport, make_token, mcp_client

pytestmark = pytest.mark.anyio

LATEST = "9999-12-31T23:59:59.999999Z"


@pytest.fixture
def poisoned(transactional_db):
    tenant, neighbour = UserFactory(), UserFactory()
    return {
        "token": make_token(tenant),
        "memory_id": insert_commitment_due_at(
            tenant, "10000-01-01 09:59:59+00", content="pay the invoice eventually"
        ),
        "neighbour_token": make_token(neighbour),
        "neighbour_memory": MemoryFactory(owner=neighbour, content="the neighbour's note"),
    }


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_row_stored_out_of_range_fails_no_request(asgi_app, poisoned, mode, settings):
    # Five of the tenant's requests at once, past the default bound of requests at once.
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 5
    uri = f"threengram://memory/{poisoned['memory_id']}"

    async def tenant_requests():
        async with mcp_client(
            IN_PROCESS_URL, poisoned["token"], mode=mode, transport=asgi_transport(asgi_app)
        ) as client:
            return await asyncio.gather(
                client.read_resource(uri),
                client.call_tool("get_memories", {"ids": [str(poisoned["memory_id"])]}),
                client.call_tool("search", {"query": "invoice"}),
                client.call_tool("briefing", {}),
                client.list_tools(),
            )

    async def neighbour_requests():
        async with mcp_client(
            IN_PROCESS_URL,
            poisoned["neighbour_token"],
            mode=mode,
            transport=asgi_transport(asgi_app),
        ) as client:
            return await asyncio.gather(
                client.list_tools(),
                client.read_resource(poisoned["neighbour_memory"].resource_uri),
            )

    (read, got, found, briefing, tools), (neighbour_tools, neighbour_read) = await asyncio.gather(
        tenant_requests(), neighbour_requests()
    )

    assert json.loads(read.contents[0].text)["content"] == "pay the invoice eventually"
    for result in (got, found, briefing):
        assert not result.is_error, result.content[0].text
    (memory,) = got.structured_content["memories"]
    assert memory["dueAt"] == LATEST
    (hit,) = found.structured_content["hits"]
    assert hit["dueAt"] == LATEST and "overdue" not in hit
    commitments = briefing.structured_content["sections"]["openCommitments"]["items"]
    assert [item["dueAt"] for item in commitments] == [LATEST]
    assert tools.tools and neighbour_tools.tools
    assert json.loads(neighbour_read.contents[0].text)["content"] == "the neighbour's note"
