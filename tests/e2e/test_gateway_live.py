"""The gateway end to end: a real daphne process (as the README's run command starts it), one
uvicorn process, and the official MCP SDK client on both protocol wires."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx2
import pytest
from django.conf import settings
from mcp.shared.exceptions import MCPError

from accounts.erasure import erase_account
from tests.mcp_gateway.conftest import (
    IMMUTABLE_BODY_KEYS,
    Recorder,
    free_port,
    mcp_client,
    run_sync,
    running_daphne,
)

pytestmark = [pytest.mark.anyio, pytest.mark.live]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_read_and_catalogs_on_both_wires(live_daphne, seeded, mode):
    recorder = Recorder()
    async with mcp_client(live_daphne.mcp_url, seeded.token, mode=mode, recorder=recorder) as c:
        templates = await c.list_resource_templates()
        listing = await c.list_resources()
        await c.list_tools()
        await c.list_prompts()
        read = await c.read_resource(seeded.memory.resource_uri)
        version = c.protocol_version
    assert [t.uri_template for t in templates.resource_templates] == ["threengram://memory/{id}"]
    assert listing.resources == []
    body = json.loads(read.contents[0].text)
    assert set(body) == IMMUTABLE_BODY_KEYS
    assert body["id"] == str(seeded.memory.id)
    assert body["content"] == seeded.memory.content
    wire_read = recorder.results[-1]
    catalogs = recorder.results[-5:-1]
    if mode == "auto":
        assert version == "2026-07-28"
        assert (wire_read["ttlMs"], wire_read["cacheScope"]) == (86_400_000, "private")
        for wire in catalogs:
            assert (wire["ttlMs"], wire["cacheScope"]) == (
                settings.MCP_CATALOG_CACHE_TTL_MS,
                "public",
            )
    else:
        assert version == "2025-11-25"
        for wire in [wire_read, *catalogs]:
            assert "ttlMs" not in wire and "cacheScope" not in wire


async def test_second_read_within_ttl_sends_no_request(live_daphne, seeded):
    recorder = Recorder()
    async with mcp_client(live_daphne.mcp_url, seeded.token, recorder=recorder) as c:
        first = await c.read_resource(seeded.memory.resource_uri)
        sent_after_first = list(recorder.methods)
        second = await c.read_resource(seeded.memory.resource_uri)
        sent_after_second = list(recorder.methods)
        bypass = await c.read_resource(seeded.memory.resource_uri, cache_mode="bypass")
    assert sent_after_first[-1] == "resources/read"
    assert sent_after_second == sent_after_first  # served from the client's cache
    assert recorder.methods[-1] == "resources/read"  # a bypass does go to the server
    assert first.contents[0].text == second.contents[0].text == bypass.contents[0].text


async def test_legacy_client_does_not_cache(live_daphne, seeded):
    recorder = Recorder()
    async with mcp_client(live_daphne.mcp_url, seeded.token, mode="legacy", recorder=recorder) as c:
        await c.read_resource(seeded.memory.resource_uri)
        await c.read_resource(seeded.memory.resource_uri)
    assert len(recorder.methods) == 4  # initialize, initialized, read, read


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_not_found_is_the_same_for_missing_and_foreign(live_daphne, seeded, mode):
    """A missing and another tenant's id get one bare error; an id of the wrong form is told
    the form, which says nothing of any memory."""
    uris = [f"threengram://memory/{uuid.uuid4()}", seeded.foreign_memory.resource_uri]
    malformed = "threengram://memory/0000"
    errors = []
    async with mcp_client(live_daphne.mcp_url, seeded.token, mode=mode) as c:
        for uri in [*uris, malformed]:
            with pytest.raises(MCPError) as caught:
                await c.read_resource(uri)
            errors.append(caught.value.error)
    *absent, told = errors
    assert {(e.code, e.message) for e in absent} == {(-32602, "Resource not found")}
    assert [e.data for e in absent] == [{"uri": u} for u in uris]
    assert (told.code, told.data) == (-32602, {"uri": malformed})
    assert told.message.startswith("Resource not found: the {id} of threengram://memory/{id} is")
    assert seeded.foreign_memory.content not in live_daphne.output()


def raw_requests(uri: str) -> list[tuple[dict, dict]]:
    """(headers, body) for every method the gateway serves, on both wires."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    calls = [
        ("server/discover", {}, None),
        ("tools/list", {}, None),
        ("prompts/list", {}, None),
        ("resources/list", {}, None),
        ("resources/templates/list", {}, None),
        ("resources/read", {"uri": uri}, uri),
        ("tools/call", {"name": "search", "arguments": {}}, "search"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"},
                                 "argument": {"name": "a", "value": ""}}, None),
    ]  # fmt: skip
    common = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    requests = []
    for method, params, name in calls:
        headers = {**common, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
        if name:
            headers["mcp-name"] = name
        requests.append((headers, {"jsonrpc": "2.0", "id": 1, "method": method,
                                   "params": {**params, "_meta": meta}}))  # fmt: skip
        if method != "server/discover":
            legacy = {**common, "mcp-protocol-version": "2025-11-25"}
            requests.append(
                (legacy, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            )
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {},
                  "clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    requests.append(
        (common, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
    )
    return requests


async def test_erased_account_gets_401_on_every_method(live_daphne, seeded):
    uri = seeded.memory.resource_uri
    async with mcp_client(live_daphne.mcp_url, seeded.token) as c:
        await c.read_resource(uri)
    await run_sync(erase_account, user=seeded.tenant)
    statuses = {}
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {seeded.token}"}) as http:
        for headers, body in raw_requests(uri):
            response = await http.post(live_daphne.mcp_url, headers=headers, json=body)
            statuses[(headers.get("mcp-protocol-version"), body["method"])] = response.status_code
            assert 'error="invalid_token"' in response.headers.get("www-authenticate", "")
    assert set(statuses.values()) == {401}, statuses
    assert len(statuses) == 16
    for mode in ("auto", "legacy"):
        # The SDK client cannot even connect (it reports the 401 as an error response).
        with pytest.raises((MCPError, ExceptionGroup)):
            async with mcp_client(live_daphne.mcp_url, seeded.token, mode=mode) as c:
                await c.read_resource(uri)
    # The other tenant is unaffected.
    async with mcp_client(live_daphne.mcp_url, seeded.other_token) as c:
        assert (await c.read_resource(seeded.foreign_memory.resource_uri)).contents


async def test_protected_resource_metadata_and_challenge(live_daphne):
    async with httpx2.AsyncClient() as http:
        metadata = (
            await http.get(f"{live_daphne.url}/.well-known/oauth-protected-resource/mcp")
        ).json()
        response = await http.post(live_daphne.mcp_url, json={})
    assert metadata["resource"] == settings.MCP_RESOURCE_URL
    assert response.status_code == 401
    assert metadata["resource"] and "resource_metadata=" in response.headers["www-authenticate"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_uvicorn_serves_the_same_application(live_uvicorn, seeded, mode):
    async with mcp_client(live_uvicorn.mcp_url, seeded.token, mode=mode) as c:
        read = await c.read_resource(seeded.memory.resource_uri)
        with pytest.raises(MCPError):
            await c.read_resource(seeded.foreign_memory.resource_uri)
    assert json.loads(read.contents[0].text)["id"] == str(seeded.memory.id)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_protocol_errors_over_http_on_both_wires(live_daphne, seeded, mode):
    """An unknown tool and a list cursor are JSON-RPC -32602, and a long URI is echoed cut, as
    the SDK client meets them through a real server."""
    long_uri = f"threengram://memory/{'a' * 5000}"
    async with mcp_client(live_daphne.mcp_url, seeded.token, mode=mode) as c:
        with pytest.raises(MCPError) as unknown_tool:
            await c.call_tool("serch", {})
        with pytest.raises(MCPError) as cursor:
            await c.list_tools(cursor="2")
        with pytest.raises(MCPError) as long_read:
            await c.read_resource(long_uri)
    assert (unknown_tool.value.error.code, unknown_tool.value.error.message) == (
        -32602,
        "Unknown tool: 'serch'; did you mean 'search'?",
    )
    assert cursor.value.error.code == -32602
    assert cursor.value.error.message.startswith("Invalid cursor")
    assert long_read.value.error.data == {"uri": f"{long_uri[:64]}…"}


@pytest.mark.parametrize("version", ["2025-99-99", "2023-01-01", "garbage"])
async def test_an_unsupported_protocol_version_over_http(live_daphne, seeded, version):
    headers = {
        "authorization": f"Bearer {seeded.token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": version,
    }
    request = {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with httpx2.AsyncClient(headers=headers) as http:
        for body, request_id in ((request, "a"), (notification, None)):
            response = await http.post(live_daphne.mcp_url, json=body)
            assert response.status_code == 400
            answer = response.json()
            assert answer["id"] == request_id
            assert answer["error"]["code"] == -32022
            assert answer["error"]["data"] == {
                "supported": ["2026-07-28"],
                "requested": version,
            }


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_params_that_are_no_object_are_named_over_http(live_daphne, seeded, version):
    headers = {
        "authorization": f"Bearer {seeded.token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": version,
        "mcp-method": "tools/list",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}
    async with httpx2.AsyncClient(headers=headers) as http:
        response = await http.post(live_daphne.mcp_url, json=body)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32600,
        "message": "params: must be an object, not an array; MCP passes parameters by name",
    }


async def test_one_accounts_requests_at_once_are_bounded_queued_and_others_still_served(seeded):
    """A daphne process bounding each account to one request at once, with at most four more
    waiting: of a burst of one account's searches, those past the bound wait their turn and are
    served, and those past the waiters get 429 at once, naming both bounds; another account's
    search meanwhile is served, and once the burst is answered the account is too."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    arguments = {"query": "ship the resource " * 20}
    search = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "search", "arguments": arguments}}  # fmt: skip
    bounds = {"MCP_ACCOUNT_CONCURRENCY_MAX": "1", "MCP_ACCOUNT_QUEUE_MAX": "4"}
    with running_daphne(free_port(), bounds) as server:
        async with (
            httpx2.AsyncClient(headers={**headers, **_bearer(seeded.token)}, timeout=30) as a,
            httpx2.AsyncClient(headers={**headers, **_bearer(seeded.other_token)}) as b,
        ):
            burst = [a.post(server.mcp_url, json=search) for _ in range(24)]
            *answers, other = await asyncio.gather(*burst, b.post(server.mcp_url, json=search))
            after = await a.post(server.mcp_url, json=search)
        assert "Traceback" not in server.output()
    statuses = sorted(answer.status_code for answer in answers)
    # One served and four waiting at least; the rest as the queue had room when they came.
    assert statuses.count(200) >= 5 and 429 in statuses and set(statuses) == {200, 429}, statuses
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["message"] == (
        "too_many_requests: at most 1 request of this account at once (concurrency limit) and "
        "4 more are waiting, as many as may; retry after 1 second"
    )
    assert other.status_code == 200 and after.status_code == 200


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
