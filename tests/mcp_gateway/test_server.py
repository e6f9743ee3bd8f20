"""The server's catalogs, cache hints, completion and error hiding, in-process over HTTP."""

from __future__ import annotations

import logging
import re

import mcp_types as types
import pytest
from django.conf import settings
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.shared.exceptions import MCPError
from opentelemetry import trace as trace_api

from infra.observability import VERSION
from mcp_gateway import prompts, server, tools
from tests.mcp_gateway.conftest import IN_PROCESS_URL, Recorder, asgi_transport, mcp_client

pytestmark = pytest.mark.anyio


async def test_catalogs_are_public_with_the_catalog_ttl(asgi_app, seeded):
    recorder = Recorder()
    transport = asgi_transport(asgi_app)
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, transport=transport, recorder=recorder
    ) as c:
        await c.list_tools()
        await c.list_prompts()
        await c.list_resource_templates()
        await c.list_resources()
    discover, tools_list, prompts_list, templates, resources_list = recorder.results
    assert discover["supportedVersions"] == ["2026-07-28"]
    caps = discover["capabilities"]
    assert caps["completions"] == {} and "resources" in caps
    assert not caps["resources"].get("subscribe") and not caps["resources"].get("listChanged")
    for wire in (discover, tools_list, prompts_list, templates, resources_list):
        assert wire["ttlMs"] == settings.MCP_CATALOG_CACHE_TTL_MS == 3_600_000
        assert wire["cacheScope"] == "public"


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026-07-28 wire, then 2025-11-25
async def test_the_server_tells_the_model_how_to_keep_memory_in_its_tools_names(
    asgi_app, seeded, mode
):
    """A client puts the server's instructions before its model: they name the habits (brief
    first, search before asking, remember, revise, resolve) by tools that exist, on both wires,
    beside the release's version."""
    recorder = Recorder()
    async with mcp_client(
        IN_PROCESS_URL,
        seeded.token,
        transport=asgi_transport(asgi_app),
        recorder=recorder,
        mode=mode,
    ) as client:
        await client.list_tools()
    greeting = recorder.results[0]  # server/discover's result, or initialize's
    identity = greeting.get("serverInfo") or greeting["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert identity["version"] == VERSION
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)*\b", greeting["instructions"]))
    habits = {"briefing", "handoff", "search", "remember", "revise", "resolve", "archive"}
    assert habits | {"get_memories"} <= named & {spec.name for spec in tools.TOOLS}


async def test_catalog_ttl_follows_its_own_setting(seeded, settings, anyio_backend):
    settings.MCP_CATALOG_CACHE_TTL_MS = 5_000
    from mcp_gateway.asgi import GatewayRouter
    from threengram.asgi import django_application

    router = GatewayRouter(django_application)
    recorder = Recorder()
    try:
        async with mcp_client(
            IN_PROCESS_URL, seeded.token, transport=asgi_transport(router), recorder=recorder
        ) as c:
            await c.list_resource_templates()
            read = await c.read_resource(f"threengram://memory/{seeded.memory.id}")
    finally:
        await router.shutdown()
    assert recorder.results[1]["ttlMs"] == 5_000
    assert read.ttl_ms == settings.MEMORY_RESOURCE_CACHE_TTL_MS  # not coupled


async def test_completion_of_the_memory_id_is_empty(asgi_app, seeded):
    recorder = Recorder()
    transport = asgi_transport(asgi_app)
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, transport=transport, recorder=recorder
    ) as c:
        resource_ref = types.ResourceTemplateReference(uri="threengram://memory/{id}")
        by_id = await c.complete(resource_ref, {"name": "id", "value": str(seeded.memory.id)[:4]})
    assert by_id.completion.values == []
    # Completion results are never cacheable: no hint on the wire.
    assert all("ttlMs" not in wire for wire in recorder.results[1:])


MEMORY_TEMPLATE_REF = types.ResourceTemplateReference(uri="threengram://memory/{id}")


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026-07-28 wire, then 2025-11-25
@pytest.mark.parametrize(
    ("ref", "argument", "message"),
    [
        (
            types.PromptReference(name="no_such_prompt"),
            {"name": "arg1", "value": "a"},
            "Unknown prompt: 'no_such_prompt'",
        ),
        (
            types.PromptReference(name="debrif"),
            {"name": "scope", "value": ""},
            "Unknown prompt: 'debrif'; did you mean 'debrief'?",
        ),
        (
            types.ResourceTemplateReference(uri="other://x/{y}"),
            {"name": "y", "value": ""},
            "Unknown resource template: 'other://x/{y}'",
        ),
        (
            MEMORY_TEMPLATE_REF,
            {"name": "uuid", "value": ""},
            "invalid_input: uuid: unknown argument",
        ),
        # A value longer than any completed, on either reference, naming the limit (a lone
        # surrogate, which this client cannot send, is in test_asgi.py).
        *(
            (
                ref,
                {"name": name, "value": "x" * 100_000},
                "invalid_input: argument.value: must be at most 256 characters (no value "
                "completed is longer); got 100000",
            )
            for ref, name in [
                (types.PromptReference(name="briefing"), "project"),
                (MEMORY_TEMPLATE_REF, "id"),
            ]
        ),
    ],
    ids=[
        "unknown prompt",
        "misspelt prompt",
        "unknown template",
        "unknown template argument",
        "long value, prompt",
        "long value, resource",
    ],
)
async def test_a_completion_no_value_could_answer_is_invalid_params_on_either_reference(
    asgi_app, seeded, mode, ref, argument, message
):
    """As prompts/get answers an unknown prompt: -32602 naming it, not an empty completion a
    client cannot tell from 'no such values'."""
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        with pytest.raises(MCPError) as caught:
            await c.complete(ref, argument)
    assert (caught.value.error.code, caught.value.error.message) == (-32602, message)


async def test_prompt_completion_delegates_and_is_capped(asgi_app, seeded, monkeypatch):
    calls = []

    async def complete_prompt_argument(principal, prompt, argument, prefix):
        calls.append((principal.user_id, prompt, argument, prefix))
        return [f"{prefix}{n}" for n in range(150)]

    monkeypatch.setattr(prompts, "complete_prompt_argument", complete_prompt_argument)
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        result = await c.complete(
            types.PromptReference(name="briefing"), {"name": "topic", "value": "ga"}
        )
    assert calls == [(seeded.tenant.pk, "briefing", "topic", "ga")]
    assert len(result.completion.values) == 100  # spec: at most 100 per response
    assert result.completion.values[0] == "ga0"
    assert result.completion.has_more is True  # and it says that it left some out


async def test_a_completion_of_every_value_says_so(asgi_app, seeded):
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        result = await c.complete(
            types.PromptReference(name="briefing"), {"name": "mode", "value": ""}
        )
    completion = result.completion
    assert completion.values == ["brief", "full"]
    assert (completion.total, completion.has_more) == (2, False)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026-07-28 wire, then 2025-11-25
@pytest.mark.parametrize(
    "listing", ["list_tools", "list_prompts", "list_resources", "list_resource_templates"]
)
@pytest.mark.parametrize("cursor", ["2", "", "eyJwYWdlIjogMn0="])
async def test_every_cursor_is_invalid_params_never_the_first_page_again(
    asgi_app, seeded, mode, listing, cursor
):
    """Every list is one page and no nextCursor is ever issued, so any cursor is one this
    server did not give (MCP pagination: -32602). It reaches the server, whose answer is no page
    at all: not the first one, which the client holds under a public cache hint."""
    recorder = Recorder()
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, recorder=recorder,
        transport=asgi_transport(asgi_app),
    ) as client:  # fmt: skip
        first = await getattr(client, listing)()
        assert first.next_cursor is None
        pages = len(recorder.results)
        with pytest.raises(MCPError) as refused:
            await getattr(client, listing)(cursor=cursor)
    assert (refused.value.error.code, refused.value.error.message) == (
        -32602, server.INVALID_CURSOR
    )  # fmt: skip
    assert refused.value.error.message.startswith("Invalid cursor")
    assert len(recorder.results) == pages  # no result came back for it


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_unexpected_errors_are_generic_and_logged_with_an_id(
    asgi_app, seeded, monkeypatch, caplog, mode
):
    secret = seeded.memory.content

    async def explode(principal, name, arguments):
        raise RuntimeError(secret)  # e.g. a failure message quoting memory content

    monkeypatch.setattr(tools, "call_tool", explode)
    caplog.set_level(logging.ERROR, logger="mcp_gateway")
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as c:
        with pytest.raises(MCPError) as caught:
            await c.session.call_tool("anything", {})
    error = caught.value.error
    assert error.code == -32603
    assert error.message.startswith("Internal error (request id ")
    assert secret not in str(error)
    request_id = error.message.removeprefix("Internal error (request id ").rstrip(")")
    assert request_id in caplog.text
    assert "RuntimeError" in caplog.text and secret not in caplog.text


async def test_tools_and_prompts_delegate_to_their_modules(asgi_app, seeded, monkeypatch):
    seen = []
    tool = types.Tool(
        name="echo_owner",
        description="test tool",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
    )

    async def call_tool(principal, name, arguments):
        seen.append((principal.user_id, name, arguments))
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    monkeypatch.setattr(tools, "tool_definitions", lambda: [tool])
    monkeypatch.setattr(tools, "call_tool", call_tool)
    assert server.tool_input_schema("echo_owner") == tool.input_schema
    assert server.tool_input_schema("nope") is None
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        listed = await c.list_tools()
        result = await c.call_tool("echo_owner", {"x": "1"})
        with pytest.raises(MCPError):
            await c.get_prompt("no_such_prompt", {})
    assert [t.name for t in listed.tools] == ["echo_owner"]
    assert result.content[0].text == "ok"
    assert seen == [(seeded.tenant.pk, "echo_owner", {"x": "1"})]


async def test_orm_using_handlers_get_a_django_request_context(asgi_app, seeded, monkeypatch):
    """Tools use the async ORM; the router skipped Django's handler, so the tool handler must
    provide its per-request thread context (else every ORM call in the process shares one
    thread) and close its connection at the end, as Django does for a view."""
    import threading

    from asgiref.sync import SyncToAsync, sync_to_async
    from django.db import connection

    from accounts.models import User

    seen = {}

    async def call_tool(principal, name, arguments):
        seen["exists"] = await User.objects.filter(pk=principal.user_id).aexists()
        seen["thread"] = await sync_to_async(threading.get_ident)()
        seen["connection_open"] = await sync_to_async(lambda: connection.connection is not None)()
        seen["context"] = SyncToAsync.thread_sensitive_context.get(None)
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    monkeypatch.setattr(tools, "call_tool", call_tool)
    async with mcp_client(IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)) as c:
        await c.call_tool("any", {})
        first_context = seen["context"]
        await c.call_tool("any", {})
    assert seen["exists"] is True and seen["connection_open"] is True
    assert seen["thread"] != threading.get_ident()
    # A fresh ThreadSensitiveContext (own worker thread) per request, like Django's handler.
    assert first_context is not None and seen["context"] is not None
    assert first_context is not seen["context"]


class _InstalledTracerProvider(trace_api.TracerProvider):
    """What an OpenTelemetry SDK (or `opentelemetry-instrument`) installs."""

    def get_tracer(self, *args, **kwargs) -> trace_api.Tracer:
        return trace_api.NoOpTracer()


def test_spans_cost_nothing_until_a_tracer_provider_is_installed(monkeypatch):
    # No OpenTelemetry SDK here: the SDK's span-per-message middleware would only burn CPU.
    assert not server.tracing_configured()
    assert not any(isinstance(m, OpenTelemetryMiddleware) for m in server.build_server().middleware)

    monkeypatch.setattr(trace_api, "get_tracer_provider", _InstalledTracerProvider)
    assert server.tracing_configured()
    middleware = server.build_server().middleware
    assert any(isinstance(m, OpenTelemetryMiddleware) for m in middleware)
    assert middleware[-1] is server.hide_internal_errors  # still the innermost


@pytest.mark.parametrize(
    ("argument", "named"),
    [
        ({"name": "project", "value": "th\u0000"}, "argument.value: must not contain NUL"),
        ({"name": "project", "value": "\ud83d"}, "argument.value: must not contain lone"),
        ({"name": "pro\udc00ject", "value": ""}, "argument.name: must not contain lone"),
    ],
)
async def test_completion_text_postgresql_cannot_store_is_invalid_params(
    asgi_app, seeded, argument, named
):
    import httpx2

    from tests.mcp_gateway.test_asgi import auth_header, modern

    headers, body = modern(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "briefing"}, "argument": argument},
        **auth_header(seeded.token),
    )
    async with httpx2.AsyncClient(
        transport=asgi_transport(asgi_app), base_url="http://localhost"
    ) as http:
        response = await http.post("/mcp", headers=headers, content=body)
    error = response.json()["error"]
    assert error["code"] == types.INVALID_PARAMS, error
    assert error["message"].startswith(f"invalid_input: {named}"), error
