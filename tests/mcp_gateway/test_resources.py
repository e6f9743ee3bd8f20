"""The memory resource, in-process: the real ASGI application over httpx2's ASGI transport,
driven by the official SDK client on both wires."""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_gateway import auth, serializers
from mcp_gateway.auth import current_principal
from mcp_gateway.principal import Principal
from mcp_gateway.server import build_server
from memories import access
from memories.access import MemoryRow
from memories.bounds import shown_key
from memories.services import archive_memory, revise_memory
from tests.factories import MemoryFactory
from tests.mcp_gateway.conftest import (
    IMMUTABLE_BODY_KEYS,
    IN_PROCESS_URL,
    Recorder,
    asgi_transport,
    mcp_client,
    run_sync,
)

pytestmark = pytest.mark.anyio


async def test_body_is_exactly_the_immutable_fields(asgi_app, seeded):
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        result = await c.read_resource(seeded.memory.resource_uri)
    (content,) = result.contents
    assert content.uri == seeded.memory.resource_uri
    assert content.mime_type == "application/json"
    body = json.loads(content.text)
    assert set(body) == IMMUTABLE_BODY_KEYS
    memory = seeded.memory
    assert body == {
        "id": str(memory.id),
        "content": "Décision: ship the resource ✓",
        "contentLength": len("Décision: ship the resource ✓"),
        "memoryType": "note",
        "topic": "gateway",
        "scope": memory.scope,
        "project": "threengram",
        "recordedAt": memory.recorded_at.isoformat().replace("+00:00", "Z"),
    }
    # Tags, status, validTo, commitmentStatus never appear, not even as values.
    assert "cache" not in content.text and "active" not in content.text


async def test_body_never_carries_the_memorys_vector(asgi_app, seeded):
    memory = await run_sync(MemoryFactory, owner=seeded.tenant, embedded=True)
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        result = await c.read_resource(memory.resource_uri)
    body = json.loads(result.contents[0].text)
    assert set(body) == IMMUTABLE_BODY_KEYS and "embedding" not in body


def test_serializer_ignores_lifecycle_fields():
    """Two rows differing only in lifecycle state serialize to the same bytes."""
    from django.utils import timezone

    common = dict(
        id=uuid.uuid4(),
        content="c",
        content_length=1,
        memory_type="commitment",
        topic="t",
        scope="personal",
        project=None,
        recorded_at=timezone.now(),
        tags=("a",),
        predecessor_id=None,
        due_at=None,
    )
    open_row = MemoryRow(**common, status="active", valid_to=None, commitment_status="open")
    closed_row = MemoryRow(
        **common, status="archived", valid_to=timezone.now(), commitment_status="resolved"
    )
    body = serializers.memory_resource_body(open_row)
    assert body == serializers.memory_resource_body(closed_row)
    assert json.loads(body)["project"] is None


async def test_read_carries_private_long_lived_hint(asgi_app, seeded):
    recorder = Recorder()
    transport = asgi_transport(asgi_app)
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, transport=transport, recorder=recorder
    ) as c:
        assert c.protocol_version == "2026-07-28"
        result = await c.read_resource(seeded.memory.resource_uri)
    assert result.ttl_ms == settings.MEMORY_RESOURCE_CACHE_TTL_MS == 24 * 3600 * 1000
    assert result.cache_scope == "private"
    wire = recorder.results[-1]
    assert wire["ttlMs"] == settings.MEMORY_RESOURCE_CACHE_TTL_MS
    assert wire["cacheScope"] == "private"


async def test_legacy_wire_gets_no_cache_fields(asgi_app, seeded):
    recorder = Recorder()
    transport = asgi_transport(asgi_app)
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode="legacy", transport=transport, recorder=recorder
    ) as c:
        assert c.protocol_version == "2025-11-25"
        await c.read_resource(seeded.memory.resource_uri)
        await c.list_resource_templates()
        await c.list_resources()
    read, templates, listing = recorder.results[-3:]
    assert read["contents"][0]["uri"] == seeded.memory.resource_uri
    assert templates["resourceTemplates"][0]["uriTemplate"] == "threengram://memory/{id}"
    assert listing == {"resources": []}
    for wire in (read, templates, listing):
        assert "ttlMs" not in wire and "cacheScope" not in wire


async def test_superseded_and_archived_bodies_stay_byte_identical(asgi_app, seeded):
    memory = seeded.memory
    transport = asgi_transport(asgi_app)
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=transport) as c:
        before = (await c.read_resource(memory.resource_uri)).contents[0].text
        successor = await run_sync(
            revise_memory, owner=seeded.tenant, predecessor_id=memory.id, content="newer decision"
        )
        superseded = (
            (await c.read_resource(memory.resource_uri, cache_mode="bypass")).contents[0].text
        )
        live = (await c.read_resource(successor.resource_uri)).contents[0].text
        await run_sync(archive_memory, owner=seeded.tenant, memory_id=successor.id)
        archived = (
            (await c.read_resource(successor.resource_uri, cache_mode="bypass")).contents[0].text
        )
    assert superseded == before
    assert archived == live
    assert json.loads(archived)["content"] == "newer decision"


async def test_templates_and_empty_list(asgi_app, seeded):
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        templates = await c.list_resource_templates()
        listing = await c.list_resources()
    (template,) = templates.resource_templates
    assert template.uri_template == "threengram://memory/{id}"
    assert template.name == "memory"
    assert template.title and template.description
    assert template.mime_type == "application/json"
    assert listing.resources == [] and listing.next_cursor is None
    assert (listing.ttl_ms, listing.cache_scope) == (settings.MCP_CATALOG_CACHE_TTL_MS, "public")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_missing_and_foreign_ids_are_indistinguishable(
    asgi_app, seeded, sent_statements, mode
):
    """Same error, same code path, same SQL: the URI is no existence oracle."""
    uris = [
        f"threengram://memory/{uuid.uuid4()}",  # missing
        seeded.foreign_memory.resource_uri,  # another tenant's
    ]
    errors = []
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        sent_statements.clear()  # the client's discovery or handshake: a token check of its own
        for uri in uris:
            with pytest.raises(MCPError) as caught:
                await c.read_resource(uri)
            errors.append(caught.value.error)
    assert {(e.code, e.message) for e in errors} == {(-32602, "Resource not found")}
    assert [e.data for e in errors] == [{"uri": uri} for uri in uris]
    # The gate's statement, with parameters of the same shapes, reads for each of them.
    reads = [
        tuple((type(p).__name__, len(p) if isinstance(p, list) else 0) for p in params)
        for sql, params in sent_statements
        if sql == f"EXECUTE {access.READ_OWNED}"
    ]
    assert len(reads) == 2 and len(set(reads)) == 1


NOT_A_MEMORY_URI = (
    "Resource not found: not a memory's URI; a memory is read as threengram://memory/{id}, {id} "
    "its id (a UUID)"
)
NOT_A_MEMORY_ID = (
    "Resource not found: the {id} of threengram://memory/{id} is a memory's id as remember and "
    "search give it: a UUID, in lower case with hyphens, not percent-encoded"
)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_uri_of_the_wrong_form_is_told_the_memory_template(
    asgi_app, seeded, sent_statements, mode
):
    """A client that guessed the URI (a plural, a path after the id, no id, a name for an id)
    is told the form a memory's is, on either wire. Its form alone says it names no memory, so
    nothing is read for it, and the answer says nothing of any memory."""
    own = seeded.memory.id
    refusals = {
        "https://example.com/memory/1": NOT_A_MEMORY_URI,
        f"file://memory/{own}": NOT_A_MEMORY_URI,
        f"threengram://memories/{own}": NOT_A_MEMORY_URI,
        f"threengram://memory/{own}/extra": NOT_A_MEMORY_URI,
        f"threengram://memory/{own}?version=1": NOT_A_MEMORY_URI,
        # Its own URI inside its URI: no second name for one cacheable resource.
        f"threengram://memory/threengram:%2F%2Fmemory%2F{own}": NOT_A_MEMORY_URI,
        "threengram://memory/": NOT_A_MEMORY_ID,
        "threengram://memory/not-a-uuid": NOT_A_MEMORY_ID,
        f"threengram://memory/{str(own)[:-1]}": NOT_A_MEMORY_ID,
        # Spellings a tool takes, but each another name for one cacheable resource.
        f"threengram://memory/{str(own).upper()}": NOT_A_MEMORY_ID,
        f"threengram://memory/urn:uuid:{own}": NOT_A_MEMORY_ID,
        f"threengram://memory/%7B{own}%7D": NOT_A_MEMORY_ID,
        f"threengram://memory/%20{own}": NOT_A_MEMORY_ID,
        f"threengram://memory/{own.hex}": NOT_A_MEMORY_ID,
        # The memory's own id, percent-encoded in part: decoded, it is the id, but the URI is
        # another cache key for it.
        f"threengram://memory/%{ord(str(own)[0]):02X}{str(own)[1:]}": NOT_A_MEMORY_ID,
        f"threengram://memory/{str(own).replace('-', '%2d', 1)}": NOT_A_MEMORY_ID,
    }
    answered = {}
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        sent_statements.clear()  # the client's discovery or handshake
        for uri in refusals:
            with pytest.raises(MCPError) as caught:
                await c.read_resource(uri)
            error = caught.value.error
            assert (error.code, error.data) == (-32602, {"uri": shown_key(uri)})
            answered[uri] = error.message
    assert answered == refusals
    assert f"EXECUTE {access.READ_OWNED}" not in [sql for sql, _ in sent_statements]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (f"threengram://memory/{'a' * 50_000}", NOT_A_MEMORY_ID),
        (f"https://example.com/{'b' * 50_000}", NOT_A_MEMORY_URI),
    ],
)
async def test_a_long_uri_is_echoed_cut_as_every_name_a_caller_made_up(
    asgi_app, seeded, mode, uri, message
):
    """Not the request's size back: the URI is cut at 64 characters as other echoes are."""
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        with pytest.raises(MCPError) as caught:
            await c.read_resource(uri)
    error = caught.value.error
    assert (error.code, error.message, error.data) == (-32602, message, {"uri": f"{uri[:64]}…"})


@pytest.mark.parametrize(
    "principal",
    [None, Principal(user_id=1, scopes=frozenset({"memory:write"}))],
    ids=["no principal", "write scope only"],
)
async def test_read_scope_is_enforced_in_the_handler(seeded, principal):
    """Fail closed even without the HTTP layer in front (Client(server) runs no middleware)."""
    token = current_principal.set(principal)
    try:
        async with Client(build_server()) as c:
            with pytest.raises(MCPError) as caught:
                await c.read_resource(seeded.memory.resource_uri)
    finally:
        current_principal.reset(token)
    assert "content" not in str(caught.value.error)
    assert caught.value.error.code == -32600


async def test_read_with_read_scope_in_process(seeded):
    principal = Principal(user_id=seeded.tenant.pk, scopes=frozenset({"memory:read"}))
    token = current_principal.set(principal)
    try:
        async with Client(build_server()) as c:
            result = await c.read_resource(seeded.memory.resource_uri)
    finally:
        current_principal.reset(token)
    assert json.loads(result.contents[0].text)["id"] == str(seeded.memory.id)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_round_trips_per_read(asgi_app, seeded, sent_statements, mode):
    """The hot path's budget, on either wire: the token check, then the gate's read with the
    owner from the verified token."""
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        sent_statements.clear()  # the client's discovery or handshake
        result = await c.read_resource(seeded.memory.resource_uri, cache_mode="bypass")
        read_statements = list(sent_statements)
        # Every read is authorized anew: a foreign id reads nothing.
        with pytest.raises(MCPError):
            await c.read_resource(seeded.foreign_memory.resource_uri)
    assert json.loads(result.contents[0].text)["id"] == str(seeded.memory.id)
    check, gate = f"EXECUTE {auth.CHECK_TOKENS}", f"EXECUTE {access.READ_OWNED}"
    assert read_statements[0][0] == check  # the token check comes first, always
    checks = [sql for sql, _ in read_statements].count(check)
    assert [sql for sql, _ in sent_statements].count(check) == checks + 1
    assert [params for sql, params in read_statements if sql == gate] == [
        (seeded.tenant.pk, [seeded.memory.id])
    ]
