"""The router: authentication challenges, protected resource metadata, transport errors, and
the hand-off to Django. Raw HTTP against the real ASGI application (in-process)."""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.shortcuts import resolve_url

from infra.observability import request_id_var
from mcp_gateway import auth, resources
from mcp_gateway.asgi import MAX_REQUEST_BODY_BYTES
from memories import tenancy
from memories.models import Memory
from tests.factories import UserFactory
from tests.mcp_gateway.conftest import asgi_transport, make_token

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
# RFC 9728 §3.1: the resource's URL with the well-known segment inserted before its path.
_RESOURCE = urlsplit(settings.MCP_RESOURCE_URL)
METADATA_URL = (
    f"{_RESOURCE.scheme}://{_RESOURCE.netloc}/.well-known/oauth-protected-resource{_RESOURCE.path}"
)


def modern(method: str, params: dict | None = None, name: str | None = None, **headers):
    """Headers and body of a 2026-07-28 request, as the SDK client sends them."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**(params or {}), "_meta": META},
    }
    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        base["mcp-name"] = name
    return {**base, **headers}, json.dumps(body)


@pytest.fixture
async def http(asgi_app):
    async with httpx2.AsyncClient(
        transport=asgi_transport(asgi_app), base_url="http://localhost"
    ) as c:
        yield c


def auth_header(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_no_credentials_get_a_challenge_without_error_code(http):
    headers, body = modern("resources/templates/list")
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{METADATA_URL}"' in challenge
    # Every scope of the tool surface: clients request exactly what the challenge names.
    assert 'scope="memory:read memory:write"' in challenge
    assert "error" not in challenge  # RFC 6750 §3.1: no error information without credentials


async def test_the_endpoint_url_with_a_trailing_slash_is_the_endpoint(http, seeded):
    # As people paste it: discovery starts there, and a token works there.
    for version in (modern, legacy):
        headers, body = version("tools/list")
        challenge = await http.post("/mcp/", headers=headers, content=body)
        assert challenge.status_code == 401
        assert f'resource_metadata="{METADATA_URL}"' in challenge.headers["www-authenticate"]
        headers, body = version("tools/list", **auth_header(seeded.token))
        listed = await http.post("/mcp/", headers=headers, content=body)
        assert listed.status_code == 200 and listed.json()["result"]["tools"]


ARGUMENT = {"name": "project", "value": ""}


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("prompts/get", {"name": "briefing", "arguments": {"scope": None}},
         "arguments.scope: must be a string"),
        ("prompts/get", {"name": "briefing", "arguments": {"mode": 2}},
         "arguments.mode: must be a string"),
        ("resources/read", {}, "uri: is required"),
        # A value that matches none of a field's alternatives (a prompt or a resource template
        # reference) is named as the request wrote it: pydantic's location for it goes on with
        # an alternative's type name ("ref.PromptReference.name"), no field of the request.
        ("completion/complete", {"ref": {"type": "ref/nope"}, "argument": ARGUMENT},
         "ref: is not valid"),
        ("completion/complete", {"ref": {"type": "ref/prompt"}, "argument": ARGUMENT},
         "ref: is not valid"),
        ("completion/complete", {"ref": "briefing", "argument": ARGUMENT}, "ref: is not valid"),
    ],
)  # fmt: skip
async def test_params_of_the_wrong_shape_are_refused_naming_the_field_on_both_wires(
    http, seeded, method, params, message
):
    token = auth_header(seeded.token)
    for headers, body in (modern(method, params, name=params.get("name"), **token),
                          legacy(method, params, **token)):  # fmt: skip
        error = (await http.post("/mcp", headers=headers, content=body)).json()["error"]
        assert error["code"] == -32602
        assert error["message"] == f"Invalid request parameters: {message}", error


@pytest.fixture
def refused_token(request, transactional_db) -> str:
    from django.utils import timezone

    from tests.factories import UserFactory

    kind = request.param
    if kind == "expired":
        return make_token(UserFactory(), expires=timezone.now() - timezone.timedelta(seconds=1))
    if kind == "other audience":
        return make_token(UserFactory(), resource=["https://elsewhere.example/mcp"])
    if kind == "this server under another host name":  # bound to what it names, not to Host
        return make_token(UserFactory(), resource=["http://localhost/mcp"])
    if kind == "unrestricted audience":  # DOT's "any resource": refused here (fail closed)
        return make_token(UserFactory(), resource=[])
    if kind == "inactive user":
        return make_token(UserFactory(is_active=False))
    if kind == "unknown":
        return "not-a-real-token"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "refused_token",
    [
        "expired",
        "other audience",
        "this server under another host name",
        "unrestricted audience",
        "inactive user",
        "unknown",
    ],
    indirect=True,
)
async def test_refused_tokens_get_invalid_token(http, refused_token):
    headers, body = modern("resources/templates/list", **auth_header(refused_token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.json()["error"] == "invalid_token"


async def test_malformed_authorization_headers(http, transactional_db):
    for value in ("Basic dXNlcjpwYXNz", "Bearer ", "Bearer"):
        headers, body = modern("resources/templates/list", authorization=value)
        response = await http.post("/mcp", headers=headers, content=body)
        assert response.status_code == 401, value


@pytest.mark.parametrize("second", ["other", "same", "basic"])
async def test_more_than_one_authorization_header_is_an_invalid_request(http, seeded, second):
    """RFC 6750 §3.1: which header names the caller is a choice a proxy in front may make
    otherwise; refused whatever the tokens, valid ones too, before any token is checked."""
    headers, body = modern("tools/list")
    other = {"other": f"Bearer {seeded.other_token}", "same": f"Bearer {seeded.token}",
             "basic": "Basic dXNlcjpwYXNz"}[second]  # fmt: skip
    sent = [*headers.items(), ("authorization", f"Bearer {seeded.token}"), ("authorization", other)]
    response = await http.post("/mcp", headers=sent, content=body)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "Send one Authorization header; this request has 2",
    }
    assert 'error="invalid_request"' in response.headers["www-authenticate"]


async def test_no_answer_of_the_endpoint_may_be_stored(http, seeded):
    """One account's answers, errors and refusals too: no browser or proxy keeps any
    (RFC 9111 no-store), as the account pages."""
    token = auth_header(seeded.token)
    requests = [
        ("POST", *modern("tools/list", **token)),  # 200, 2026 wire
        ("POST", *legacy("tools/list", **token)),  # 200, 2025 wire
        ("POST", *modern("tools/list")),  # 401
        ("POST", *modern("tools/list", authorization="Bearer not-a-token")),  # 401 invalid_token
        ("POST", *modern("tools/list", **token, **{"content-type": "text/plain"})),  # 415
        ("POST", *modern("m" * 70, **token)),  # 404, answered in the SDK's place
        ("POST", *modern("tools/call", {"name": "serch"}, name="serch", **token)),  # 400, SDK
        ("GET", *modern("tools/list", **token)),  # 405
        ("OPTIONS", *modern("tools/list", origin=BROWSER_ORIGIN,
                            **{"access-control-request-method": "POST"})),  # 204 preflight
    ]  # fmt: skip
    statuses = []
    for method, headers, body in requests:
        response = await http.request(method, "/mcp", headers=headers, content=body)
        statuses.append(response.status_code)
        assert response.headers.get_list("cache-control") == ["no-store"], response.status_code
    assert statuses == [200, 200, 401, 401, 415, 404, 400, 405, 204]


@pytest.fixture
def write_only_token(transactional_db) -> str:
    from tests.factories import UserFactory

    return make_token(UserFactory(), scope="memory:write")


async def test_insufficient_scope_is_403_with_scope(http, write_only_token):
    headers, body = modern("resources/templates/list", **auth_header(write_only_token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="memory:read memory:write"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        # The metadata address of /mcp/, which is /mcp too: the same resource.
        "/.well-known/oauth-protected-resource/mcp/",
    ],
)
async def test_protected_resource_metadata(http, path):
    response = await http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    metadata = response.json()
    assert metadata["resource"] == settings.MCP_RESOURCE_URL
    assert metadata["authorization_servers"] == [settings.PUBLIC_BASE_URL]
    assert metadata["scopes_supported"] == ["memory:read", "memory:write"]
    assert metadata["bearer_methods_supported"] == ["header"]
    refused = await http.post(path)
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD, OPTIONS"
    assert refused.json() == {
        "error": "invalid_request",
        "error_description": "POST is not allowed here; this address takes GET, HEAD, OPTIONS",
    }


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8000", "[::1]:8000"])
async def test_every_host_name_is_told_the_one_resource_and_its_tokens_work_there(
    http, seeded, host
):
    """A client that follows the metadata, whichever host name it reached the server by, asks
    for PUBLIC_BASE_URL/mcp; a token for it is accepted under every host name served."""
    headers, body = modern("resources/templates/list", host=host)
    challenge = await http.post("/mcp", headers=headers, content=body)
    assert f'resource_metadata="{METADATA_URL}"' in challenge.headers["www-authenticate"]
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        metadata = (await http.get(path, headers={"host": host})).json()
        assert metadata["resource"] == settings.MCP_RESOURCE_URL
        assert metadata["authorization_servers"] == [settings.PUBLIC_BASE_URL]
    headers, body = modern("resources/templates/list", host=host, **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_foreign_host_and_origin_are_refused(http, seeded):
    headers, body = modern("resources/templates/list", **auth_header(seeded.token))
    response = await http.post(
        "/mcp", headers={**headers, "host": "evil.example.com"}, content=body
    )
    assert response.status_code == 421
    response = await http.post(
        "/mcp", headers={**headers, "origin": "https://evil.example.com"}, content=body
    )
    assert response.status_code == 403
    response = await http.post(
        "/mcp", headers={**headers, "origin": "http://localhost:6274"}, content=body
    )
    assert response.status_code == 200


@pytest.mark.parametrize("origin", ["http://[", "http://[::1", "", "null", "localhost"])
async def test_an_origin_that_is_not_a_url_is_refused_as_invalid(http, seeded, origin):
    headers, body = modern("resources/templates/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers={**headers, "origin": origin}, content=body)
    assert response.status_code == 403
    assert response.content == b"Invalid Origin header"


async def test_the_host_check_follows_allowed_hosts(http, seeded, settings):
    headers, body = modern("resources/templates/list", **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    settings.ALLOWED_HOSTS = ["memory.example.com"]  # the answers above are not kept
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 421
    response = await http.post(
        "/mcp", headers={**headers, "host": "memory.example.com"}, content=body
    )
    assert response.status_code == 200


async def test_transport_errors_are_json_rpc_errors_not_500(http, seeded):
    token = auth_header(seeded.token)
    uri = f"threengram://memory/{seeded.memory.id}"
    headers, body = modern("resources/read", {"uri": uri}, name=uri, **token)

    async def post(h, b):
        return await http.post("/mcp", headers=h, content=b)

    cases = {
        "malformed JSON": await post(headers, "{not json"),
        "batch": await post(headers, json.dumps([json.loads(body)])),
        "unknown method": await post(*modern("memories/dump", **token)),
        "removed method": await post(
            *modern("resources/subscribe", {"uri": uri}, name=uri, **token)
        ),
        "missing Mcp-Name": await post({k: v for k, v in headers.items() if k != "mcp-name"}, body),
        "mismatched Mcp-Name": await post({**headers, "mcp-name": "threengram://memory/x"}, body),
        "mismatched Mcp-Method": await post({**headers, "mcp-method": "tools/list"}, body),
        "missing _meta": await post(
            headers,
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
            ),
        ),
        "unsupported version": await post(
            {**headers, "mcp-protocol-version": "2099-01-01"}, body.replace(MODERN, "2099-01-01")
        ),
        "bad params": await post(
            *modern("completion/complete", {"ref": {"type": "ref/nope"}, "argument": {}}, **token)
        ),
    }
    expected = {
        "malformed JSON": (400, -32700),
        "batch": (400, -32600),
        "unknown method": (404, -32601),
        "removed method": (404, -32601),
        "missing Mcp-Name": (400, -32020),
        "mismatched Mcp-Name": (400, -32020),
        "mismatched Mcp-Method": (400, -32020),
        "missing _meta": (400, -32602),
        "unsupported version": (400, -32022),
        "bad params": (400, -32602),
    }
    for case, response in cases.items():
        assert (response.status_code, response.json()["error"]["code"]) == expected[case], case


async def test_legacy_wire_errors(http, seeded):
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
        **auth_header(seeded.token),
    }
    response = await http.post("/mcp", headers=headers, content="{oops")
    assert response.status_code == 400 and response.json()["error"]["code"] == -32700
    unknown = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "memories/dump"})
    response = await http.post("/mcp", headers=headers, content=unknown)
    assert response.json()["error"]["code"] == -32601


async def test_oversized_body_is_413_naming_the_limit(http, seeded):
    headers, _ = modern("tools/call", **auth_header(seeded.token))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "remember", "arguments": {"content": "x" * MAX_REQUEST_BODY_BYTES}}})  # fmt: skip
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 413
    assert response.json()["error"]["message"] == (
        f"the body is {len(body)} bytes; at most {MAX_REQUEST_BODY_BYTES} are read"
    )


async def test_token_check_failure_is_generic_and_logged(http, monkeypatch, caplog):
    detail = "database unreachable at 10.0.0.7"

    async def broken(token):
        raise OSError(detail)

    monkeypatch.setattr(auth, "authenticate", broken)
    caplog.set_level(logging.ERROR, logger="mcp_gateway")
    headers, body = modern("resources/templates/list", **auth_header("whatever"))
    headers["x-request-id"] = "proxy-req-0123456789"  # a proxy's id is reused (observability)
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == -32603 and detail not in error["message"]
    assert error["message"] == "Internal error (request id proxy-req-0123456789)"
    assert "proxy-req-0123456789" in caplog.text and detail not in caplog.text


async def test_a_database_outage_at_the_token_check_answers_503_retryable(http, monkeypatch):
    async def database_down(token):
        raise psycopg.OperationalError("connection to server failed")

    monkeypatch.setattr(auth, "authenticate", database_down)
    headers, body = modern("resources/templates/list", **auth_header("whatever"))
    headers["x-request-id"] = "proxy-req-0123456789"
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 503
    assert response.headers.get_list("retry-after") == ["1"]
    assert response.headers["content-type"] == "application/json"
    assert "www-authenticate" not in response.headers
    error = response.json()["error"]
    assert error["code"] == -32603 and "(request id proxy-req-0123456789)" in error["message"]
    assert error["data"] == {"retryable": True, "retryAfterSeconds": 1}


async def test_an_outage_before_the_pool_opened_answers_503_within_the_pool_timeout(
    asgi_app, db, settings, monkeypatch, tmp_path
):
    """A server started (or its pool closed) while PostgreSQL is down: two clients at once each
    get their retryable 503 within DATABASE_POOL_TIMEOUT (docs/operations.md), not after the
    pool's own 30 s wait for a fill that cannot happen."""
    import asyncio

    from infra import asyncdb

    settings.ASYNC_DATABASE_POOL_MAX = 4
    settings.ASYNC_DATABASE_POOL_MIN = 1
    settings.ASYNC_DATABASE_POOL_TIMEOUT = 1.0
    real_kwargs = asyncdb.connection_kwargs
    # A socket folder where no PostgreSQL listens.
    monkeypatch.setattr(
        asyncdb, "connection_kwargs", lambda: {**real_kwargs(), "host": str(tmp_path)}
    )
    await asyncdb.close()
    try:
        async with httpx2.AsyncClient(
            transport=asgi_transport(asgi_app), base_url="http://localhost", timeout=60
        ) as client:
            headers, body = modern("tools/list", **auth_header("some-token"))

            async def one() -> tuple[int, float]:
                started = time.monotonic()
                response = await client.post("/mcp", headers=headers, content=body)
                return response.status_code, time.monotonic() - started

            results = await asyncio.wait_for(asyncio.gather(one(), one()), timeout=30)
    finally:
        await asyncdb.close()
    for status, elapsed in results:
        assert status == 503
        assert elapsed < 3, f"503 after {elapsed:.1f} s with DATABASE_POOL_TIMEOUT=1 s"


async def test_a_handler_meeting_a_database_outage_answers_503_retryable(
    http, seeded, monkeypatch, caplog
):
    """The JSON-RPC error says retryable; the HTTP status and Retry-After say it to proxies."""

    async def database_down(**kwargs):
        raise psycopg.OperationalError("connection to server failed")

    monkeypatch.setattr(resources, "read_owned_memories", database_down)
    caplog.set_level(logging.INFO, logger="threengram.access")
    uri = f"threengram://memory/{seeded.memory.id}"
    # The legacy wire: the handler reads on its own, after the token check.
    headers = {**auth_header(seeded.token), "content-type": "application/json",
               "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-11-25"}  # fmt: skip
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": uri}}
    )
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 503
    assert response.headers.get_list("retry-after") == ["1"]
    assert response.json()["error"]["data"]["retryable"] is True
    (line,) = [r for r in caplog.records if r.name == "threengram.access"]
    assert line.status == 503 and line.request_id == response.headers["x-request-id"]


async def test_other_paths_go_to_django(http, transactional_db):
    assert (await http.get("/admin/login/")).status_code == 200
    assert (await http.get("/mcpx")).status_code == 404
    assert (await http.get("/mcp/x")).status_code == 404


async def test_every_mcp_request_gets_one_access_line_without_content(http, seeded, caplog):
    caplog.set_level(logging.INFO, logger="threengram.access")
    uri = f"threengram://memory/{seeded.memory.id}"
    headers, body = modern("resources/read", {"uri": uri}, name=uri, **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    lines = [r for r in caplog.records if r.name == "threengram.access"]
    assert len(lines) == 1
    line = lines[0]
    assert line.request_id == response.headers["x-request-id"]
    assert line.tenant_id == str(seeded.tenant.pk)
    assert (line.method, line.mcp_method, line.status) == ("POST", "resources/read", 200)
    assert line.latency_ms >= 0
    assert seeded.memory.content not in caplog.text and seeded.token not in caplog.text


async def test_the_access_line_names_the_method_and_tool_on_the_2025_wire_too(http, seeded, caplog):
    """The 2025 wire sends no Mcp-Method header (the official SDK's ClientSession settles on it):
    the access line takes the method, and the tool of a tools/call, from the MCP server, so an
    operator can tell which traffic is which. Never an argument."""
    caplog.set_level(logging.INFO, logger="threengram.access")
    calls = [
        ("tools/list", {}),
        ("tools/call", {"name": "search", "arguments": {"query": "secret words"}}),
    ]
    for method, params in calls:
        headers, body = legacy(method, params, **auth_header(seeded.token))
        assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    lines = [r for r in caplog.records if r.name == "threengram.access"]
    assert [(line.mcp_method, line.mcp_tool) for line in lines] == [
        ("tools/list", "-"),
        ("tools/call", "search"),
    ]
    assert "secret words" not in caplog.text


async def test_a_notification_on_the_2025_wire_is_logged_by_its_method(http, seeded, caplog):
    """The SDK answers a notification 202 before the MCP server reads it: its access line names
    its method all the same."""
    caplog.set_level(logging.INFO, logger="threengram.access")
    headers, _ = legacy("ping", **auth_header(seeded.token))
    sent = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = await http.post("/mcp", headers=headers, content=json.dumps(sent))
    assert response.status_code == 202
    [line] = [r for r in caplog.records if r.name == "threengram.access"]
    assert (line.mcp_method, line.mcp_tool) == ("notifications/cancelled", "-")


@pytest.mark.parametrize("name", [{"query": "secret words"}, "secret words"])
async def test_a_tool_name_that_is_none_of_ours_is_not_logged(http, seeded, caplog, name):
    """A tools/call whose name is an object, or no tool's, is refused; what the client put there
    is text of its own, which the access line never holds."""
    caplog.set_level(logging.INFO, logger="threengram.access")
    params = {"name": name, "arguments": {}}
    headers, body = legacy("tools/call", params, **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert "error" in response.json() or response.json()["result"]["isError"]
    [line] = [r for r in caplog.records if r.name == "threengram.access"]
    assert line.mcp_method == "tools/call" and line.mcp_tool in ("-", "(unknown)")
    assert "secret words" not in caplog.text


async def test_refused_requests_are_logged_too(http, caplog):
    caplog.set_level(logging.INFO, logger="threengram.access")
    headers, body = modern("tools/list", **auth_header("not-a-token"))
    response = await http.post("/mcp", headers=headers, content=body)
    line = next(r for r in caplog.records if r.name == "threengram.access")
    assert (response.status_code, line.status, line.tenant_id) == (401, 401, "-")
    assert "not-a-token" not in caplog.text


def legacy(method: str, params: dict | None = None, **headers) -> tuple[dict, str]:
    """Headers and body of a stateless 2025-11-25 request, as the SDK client sends them."""
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params or {}}
    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    return {**base, **headers}, json.dumps(body)


# What the 2025 wire would take for a notification (and drop unanswered) or answer with a
# validation dump: each an Invalid Request, as on the 2026 wire (JSON-RPC 2.0 §5.1).
LEGACY_INVALID = {
    "id null": {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
    "id true": {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
    "id 1.5": {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
    "id an object": {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"},
    "a batch": [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    "a number": 123,
    "an empty object": {},
    "jsonrpc 1.0": {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    "no method": {"jsonrpc": "2.0", "id": 1},
}


@pytest.mark.parametrize("case", sorted(LEGACY_INVALID))
async def test_a_malformed_legacy_message_is_an_invalid_request(http, seeded, case):
    headers, _ = legacy("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=json.dumps(LEGACY_INVALID[case]))
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Body must be a single JSON-RPC request or notification object",
        },
    }


async def test_a_legacy_request_still_reaches_the_server_whole(http, seeded):
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    assert any(tool["name"] == "remember" for tool in response.json()["result"]["tools"])


async def test_the_sdks_task_does_not_carry_the_request_that_started_it(http, asgi_app, seeded):
    # Under daphne (no lifespan events) the first request starts the SDK's long-lived task.
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    context = asgi_app._runner.get_context()
    for variable in (tenancy.current_tenant, auth.current_principal, request_id_var):
        assert variable not in context


async def test_a_legacy_request_logs_its_access_line_and_nothing_else(http, seeded, caplog):
    caplog.set_level(logging.DEBUG)
    uri = f"threengram://memory/{seeded.memory.id}"
    headers, body = legacy("resources/read", {"uri": uri}, **auth_header(seeded.token))
    await http.post("/mcp", headers=headers, content=body)  # the first starts the SDK (a line)
    caplog.clear()
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    server_side = [
        r.name for r in caplog.records if r.levelno >= logging.INFO and r.name != "httpx2"
    ]
    assert server_side == ["threengram.access"]


def _mcp_post_scope(headers: dict, raw: list[tuple[bytes, bytes]] = ()) -> dict:
    """The ASGI scope of a POST /mcp with these headers (and `raw` ones, as bytes), for a test
    that plays the server's part itself."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *raw]
        + [(name.encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }


async def test_a_client_gone_before_its_body_is_read_is_no_error(asgi_app, seeded, caplog):
    caplog.set_level(logging.DEBUG)
    headers, _ = legacy("tools/list", **auth_header(seeded.token))
    scope = _mcp_post_scope(headers)

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        pass

    await asgi_app(scope, receive, send)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    (line,) = [r for r in caplog.records if r.name == "threengram.access"]
    assert line.tenant_id == str(seeded.tenant.pk)


# --- what real clients need beyond the happy path -----------------------------------------
# HTTP 403 `insufficient_scope` for a tool the token does not cover (SDK step-up), CORS for
# browser-based clients under the same policy as the Django endpoints, and 405 for the event
# stream this stateless server never offers.
BROWSER_ORIGIN = "http://localhost:6274"  # e.g. the MCP Inspector's web client
MCP_HEADERS = {
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "last-event-id",
}
REMEMBER = {
    "name": "remember",
    "arguments": {"memoryType": "note", "topic": "t", "content": "written with a read token"},
}


@pytest.fixture
def read_only_token(transactional_db) -> str:
    return make_token(UserFactory(), scope="memory:read")


def _listed(header: str) -> set[str]:
    return {name.strip().lower() for name in header.split(",")}


# --- step-up -----------------------------------------------------------------------------------
@pytest.mark.parametrize("wire", ["2026-07-28", "2025-11-25"])
async def test_a_write_tool_with_a_read_only_token_is_403_insufficient_scope(
    http, read_only_token, wire
):
    token = auth_header(read_only_token)
    if wire == "2026-07-28":
        headers, body = modern("tools/call", REMEMBER, name="remember", **token)
    else:
        headers, body = legacy("tools/call", REMEMBER, **token)
    response = await http.post("/mcp", headers=headers, content=body)

    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="memory:read memory:write"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge
    # The body names the scope as a JSON-RPC error, the one body of a non-2xx reply that MCP
    # clients read: for those that do not step up, or whose person kept the grant read-only.
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["message"] == "insufficient_scope: this tool needs the memory:write scope"
    assert await Memory.objects.acount() == 0


async def test_read_tools_and_thread_listing_with_a_read_only_token_are_200(http, read_only_token):
    token = auth_header(read_only_token)
    for name, arguments in [("search", {"query": "x"}), ("configure_thread", {"action": "list"})]:
        headers, body = modern(
            "tools/call", {"name": name, "arguments": arguments}, name=name, **token
        )
        response = await http.post("/mcp", headers=headers, content=body)
        assert response.status_code == 200, name
        assert "www-authenticate" not in response.headers
        assert response.json()["result"]["isError"] is False


# --- CORS --------------------------------------------------------------------------------------
async def test_a_preflight_from_an_allowed_origin_is_204_without_credentials(http):
    response = await http.options(
        "/mcp",
        headers={
            "origin": BROWSER_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": ", ".join(sorted(MCP_HEADERS)),
        },
    )
    assert response.status_code == 204
    assert response.content == b"" and "content-length" not in response.headers
    assert response.headers["access-control-allow-origin"] == BROWSER_ORIGIN
    assert _listed(response.headers["access-control-allow-headers"]) >= MCP_HEADERS
    # The one method /mcp serves, and GET, whose 405 tells a browser client there is no stream.
    assert _listed(response.headers["access-control-allow-methods"]) == {"get", "post", "options"}
    assert "www-authenticate" in _listed(response.headers["access-control-expose-headers"])
    assert "access-control-allow-credentials" not in response.headers


async def test_answers_to_an_allowed_origin_carry_cors_headers_challenges_included(
    http, read_only_token
):
    headers, body = modern("tools/list", origin=BROWSER_ORIGIN)
    refused = await http.post("/mcp", headers=headers, content=body)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == BROWSER_ORIGIN
    assert "www-authenticate" in _listed(refused.headers["access-control-expose-headers"])

    headers, body = modern("tools/list", origin=BROWSER_ORIGIN, **auth_header(read_only_token))
    listed = await http.post("/mcp", headers=headers, content=body)
    assert listed.status_code == 200 and listed.json()["result"]["tools"]
    assert listed.headers["access-control-allow-origin"] == BROWSER_ORIGIN


async def test_a_browser_clients_stream_request_reads_the_405_that_says_there_is_none(
    http, read_only_token
):
    """After initialize a browser-based client (the TypeScript SDK's) opens the server's stream
    with GET: it must be able to read the 405 (CORS headers on it), not fail as a network
    error."""
    response = await http.get(
        "/mcp",
        headers={
            "origin": BROWSER_ORIGIN,
            "accept": "text/event-stream",
            **auth_header(read_only_token),
        },
    )
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.headers["access-control-allow-origin"] == BROWSER_ORIGIN


async def test_answers_without_an_origin_carry_no_cors_headers(http, read_only_token):
    headers, body = modern("tools/list", **auth_header(read_only_token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    assert not [name for name in response.headers if name.startswith("access-control-")]


async def test_other_origins_meet_the_dns_rebinding_check_as_before(
    http, read_only_token, settings
):
    foreign = "https://evil.example.com"
    preflight = await http.options(
        "/mcp", headers={"origin": foreign, "access-control-request-method": "POST"}
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    headers, body = modern("tools/list", origin=foreign, **auth_header(read_only_token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 403

    # Not allowed by CORS, but its host is one of ALLOWED_HOSTS: served, without CORS headers.
    settings.CORS_ALLOWED_ORIGIN_REGEXES = []
    headers, body = modern("tools/list", origin=BROWSER_ORIGIN, **auth_header(read_only_token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_allowing_every_origin_does_not_lift_the_dns_rebinding_check(
    http, read_only_token, settings
):
    """CORS_ALLOW_ALL_ORIGINS names no origin: a foreign one is still refused; one whose host
    is one of ALLOWED_HOSTS is served, with the CORS headers the setting asks for."""
    settings.CORS_ALLOW_ALL_ORIGINS = True
    settings.CORS_ALLOWED_ORIGIN_REGEXES = []
    foreign = "https://evil.example.com"
    preflight = await http.options(
        "/mcp", headers={"origin": foreign, "access-control-request-method": "POST"}
    )
    assert preflight.status_code == 403
    headers, body = modern("tools/list", origin=foreign, **auth_header(read_only_token))
    refused = await http.post("/mcp", headers=headers, content=body)
    assert refused.status_code == 403
    assert refused.content == b"Invalid Origin header"

    headers, body = modern("tools/list", origin=BROWSER_ORIGIN, **auth_header(read_only_token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == BROWSER_ORIGIN


async def test_configured_origins_are_allowed(http, read_only_token, settings):
    settings.CORS_ALLOWED_ORIGINS = ["https://agents.example.com"]
    settings.CORS_ALLOWED_ORIGIN_REGEXES = []
    headers, body = modern(
        "tools/list", origin="https://agents.example.com", **auth_header(read_only_token)
    )
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://agents.example.com"


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
async def test_protected_resource_metadata_allows_the_mcp_headers(http, path):
    response = await http.options(
        path,
        headers={
            "origin": "https://anywhere.example.com",
            "access-control-request-method": "GET",
            "access-control-request-headers": "mcp-protocol-version",
        },
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "*"
    assert _listed(response.headers["access-control-allow-headers"]) >= MCP_HEADERS


@pytest.fixture
async def django_connections_closed():
    """Django views ran in asgiref's thread: close its connection so the test database can be
    dropped."""
    yield
    await sync_to_async(connections.close_all, thread_sensitive=True)()


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-authorization-server",
        "/oauth/token/",
        "/oauth/register/",
        "/oauth/revoke/",
    ],
)
async def test_the_oauth_endpoints_answer_preflights_under_the_same_policy(
    http, path, django_connections_closed
):
    response = await http.options(
        path,
        headers={
            "origin": BROWSER_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, mcp-protocol-version",
        },
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == BROWSER_ORIGIN
    assert _listed(response.headers["access-control-allow-headers"]) >= MCP_HEADERS
    foreign = await http.options(
        path,
        headers={"origin": "https://evil.example.com", "access-control-request-method": "POST"},
    )
    assert foreign.headers.get("access-control-allow-origin") in (None, "*")


async def test_the_account_pages_are_not_open_to_other_origins(
    http, transactional_db, django_connections_closed
):
    response = await http.get(resolve_url(settings.LOGIN_URL), headers={"origin": BROWSER_ORIGIN})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


# --- GET /mcp ----------------------------------------------------------------------------------
async def test_deeply_nested_arguments_are_a_tool_error_not_an_internal_one(http, seeded, caplog):
    """The SDK's JSON parser accepts some 1,500 levels; the argument walk answers any of them."""
    caplog.set_level(logging.ERROR)
    headers, body = modern(
        "tools/call",
        {"name": "search", "arguments": {"query": "x", "memoryTypes": "NESTED"}},
        name="search",
        **auth_header(seeded.token),
    )
    body = body.replace('"NESTED"', "[" * 1200 + "]" * 1200)
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] and "nested more than 32 levels deep" in result["content"][0]["text"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_get_is_405_at_once(http, read_only_token):
    started = time.monotonic()
    for headers in ({}, auth_header(read_only_token)):
        response = await http.get("/mcp", headers={"accept": "text/event-stream", **headers})
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
async def test_every_method_but_post_is_405_allowing_post(http, read_only_token, method):
    # RFC 9110 §15.5.6: a 405 names the methods allowed; before authentication, as for GET.
    for headers in ({}, auth_header(read_only_token)):
        response = await http.request(method, "/mcp", headers=headers)
        assert (response.status_code, response.headers["allow"]) == (405, "POST")


# --- the order of the checks -------------------------------------------------------------------
async def test_the_first_check_a_request_fails_answers_it(http, write_only_token, settings):
    """/mcp checks, in order: Host, Origin, CORS preflight, GET, bearer token, the token itself,
    scope, rate limit. Each request below fails one check and every later one it can: the
    earliest answers, and the later ones cost nothing (a refused request spends no budget)."""
    settings.MCP_RATE_LIMIT = 1
    foreign = "https://evil.example.com"
    unknown = auth_header("not-a-real-token")
    preflight = {"access-control-request-method": "POST"}
    cases = [
        ("GET", {"host": "evil.example.com", "origin": foreign, **unknown}, 421),
        ("OPTIONS", {"origin": foreign, **preflight, **unknown}, 403),
        ("GET", {"origin": foreign, **unknown}, 403),
        ("OPTIONS", {"origin": BROWSER_ORIGIN, **preflight, **unknown}, 204),
        ("GET", {"origin": BROWSER_ORIGIN, **unknown}, 405),
        ("POST", {"authorization": "Basic dXNlcjpwYXNz"}, 401),
        ("POST", unknown, 401),
        ("POST", auth_header(write_only_token), 403),
        ("POST", auth_header(write_only_token), 403),  # the one request of the budget is unspent
    ]
    answers = []
    for method, extra, _ in cases:
        headers, body = modern("tools/list", **extra)
        response = await http.request(method, "/mcp", headers=headers, content=body)
        answers.append((method, response.status_code))
    assert answers == [(method, status) for method, _, status in cases]


# "ab" and the first half of an emoji (U+1F600): what JavaScript's JSON.stringify writes for a
# string cut inside the emoji, valid JSON (RFC 8259 §7) that the SDK's own parser refuses.
CUT_EMOJI = "ab\ud83d"


def _outcome(response) -> tuple:
    body = response.json()
    if "error" in body:
        return ("error", body["error"]["code"], body["error"]["message"])
    result = body["result"]
    return ("result", result.get("isError"), result["content"][0]["text"])


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "remember", "arguments":
            {"memoryType": "note", "topic": "t", "content": CUT_EMOJI}}, "remember"),
        ("tools/call", {"name": "search", "arguments": {"query": CUT_EMOJI}}, "search"),
        ("prompts/get", {"name": "briefing", "arguments": {"project": CUT_EMOJI}}, "briefing"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "briefing"},
            "argument": {"name": "project", "value": CUT_EMOJI}}, None),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "threengram://memory/{id}"},
            "argument": {"name": "id", "value": CUT_EMOJI}}, None),
    ],
)  # fmt: skip
async def test_a_lone_surrogate_gets_the_same_answer_on_both_wires(
    http, seeded, method, params, name
):
    token = auth_header(seeded.token)
    headers, body = modern(method, params, name=name, **token)
    assert "\\ud83d" in body
    on_2026 = _outcome(await http.post("/mcp", headers=headers, content=body))
    headers, body = legacy(method, params, **token)
    on_2025 = _outcome(await http.post("/mcp", headers=headers, content=body))
    assert "must not contain lone surrogates" in str(on_2026)
    assert on_2025 == on_2026


async def test_a_lone_surrogate_nested_past_pythons_recursion_is_a_parse_error(http, seeded):
    # json.loads reads nesting deeper than a recursive walk of what it read may go.
    headers, _ = legacy("tools/list", **auth_header(seeded.token))
    deep = "[" * 1400 + "]" * 1400
    for query in ("x", "\\ud800"):
        body = (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search",'
            f'"arguments":{{"query":"{query}","x":{deep}}}}}}}'
        )
        response = await http.post("/mcp", headers=headers, content=body)
        assert response.status_code == 400 and response.json()["error"]["code"] == -32700


@pytest.mark.parametrize("request_id", ["\\ud800", "a\\udc00b"])
async def test_an_id_with_a_lone_surrogate_is_an_invalid_request_not_echoed_changed(
    http, seeded, request_id
):
    """The 2025 wire's SDK cannot read it, and the answer may not carry another id."""
    headers, _ = legacy("ping", **auth_header(seeded.token))
    body = f'{{"jsonrpc":"2.0","id":"{request_id}","method":"ping"}}'
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"] == "id: must not contain lone surrogates (invalid Unicode)"


async def test_a_body_with_a_byte_order_mark_is_served_on_both_wires(http, seeded):
    token = auth_header(seeded.token)
    for headers, body in (modern("tools/list", **token), legacy("tools/list", **token)):
        response = await http.post("/mcp", headers=headers, content=b"\xef\xbb\xbf" + body.encode())
        assert response.status_code == 200 and "result" in response.json()


# --- what the body must be, named on both wires -------------------------------------------


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize(
    ("changed", "status", "message"),
    [
        (
            {"content-type": "text/plain"},
            415,
            "Content-Type must be application/json; got text/plain",
        ),
        ({"content-type": ""}, 415, "Content-Type must be application/json; got none"),
        ({"content-encoding": "gzip"}, 415, "Content-Encoding gzip is not supported"),
        ({"accept": "text/event-stream"}, 406, "Accept must include application/json"),
        ({"accept": "text/html"}, 406, "Accept must include application/json"),
        # The most specific range decides (RFC 9110 §12.5.1): JSON refused beside */*.
        ({"accept": "application/json;q=0, */*"}, 406, "Accept must include application/json"),
        ({"accept": "*/*;q=0"}, 406, "Accept must include application/json"),
    ],
)
async def test_a_body_or_answer_this_endpoint_cannot_serve_is_named_on_both_wires(
    http, seeded, wire, changed, status, message
):
    headers, body = wire("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers={**headers, **changed}, content=body)
    assert response.status_code == status
    assert response.json()["error"]["code"] == -32600
    assert response.json()["error"]["message"].startswith(message)


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize(
    "accept",
    [
        "application/json;q=0.1, text/event-stream",
        "text/event-stream, application/*;q=0.5",
        "text/event-stream;q=0, */*",
        "Application/JSON; charset=utf-8",
        "application/json;q=nan",  # not a weight, as q=abc is not
    ],
)
async def test_an_accept_header_that_admits_json_is_served(http, seeded, wire, accept):
    headers, body = wire("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers={**headers, "accept": accept}, content=body)
    assert response.status_code == 200, response.text
    assert "tools" in response.json()["result"]


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize(
    "content_type", ["Application/JSON", "application/json; charset=utf-8", "APPLICATION/JSON"]
)
async def test_a_json_content_type_is_read_whatever_its_case(http, seeded, wire, content_type):
    """Media types are case-insensitive (RFC 9110 §8.3.1)."""
    headers, body = wire("tools/list", **auth_header(seeded.token))
    response = await http.post(
        "/mcp", headers={**headers, "content-type": content_type}, content=body
    )
    assert response.status_code == 200, response.text
    assert "tools" in response.json()["result"]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (b"content-type", b"application/json\x7f",
         "Content-Type must be application/json; got application/json\\x7f"),
        (b"content-type", b"application/\x1bjson",
         "Content-Type must be application/json; got application/\\x1bjson"),
        (b"content-encoding", b"gzip\x00",
         "Content-Encoding gzip\\x00 is not supported; send the body as is"),
    ],
)  # fmt: skip
async def test_a_header_refused_is_echoed_with_its_invisible_characters_escaped(
    asgi_app, seeded, name, value, message
):
    """`application/json<DEL>` is not application/json: the refusal shows why."""
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    headers.pop(name.decode(), None)
    scope = _mcp_post_scope(headers, [(name, value)])
    status, answer = await _answered(asgi_app, scope, [body.encode()])
    assert status == 415
    assert json.loads(answer)["error"] == {"code": -32600, "message": message}


@pytest.mark.parametrize(
    "length",
    [
        "²".encode("latin-1"),  # a digit to str.isdigit, not to int()
        b"9" * 5_000,  # more digits than Python converts to an int
    ],
)
async def test_a_content_length_that_is_no_size_is_answered_not_a_crash(asgi_app, seeded, length):
    """The server in front may pass any header through: /mcp answers it as JSON-RPC, as any
    body it cannot serve, and no exception leaves the application."""
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    scope = _mcp_post_scope(headers, [(b"content-length", length)])
    status, answered = await _answered(asgi_app, scope, [body.encode()])
    answer = json.loads(answered)
    assert status in (400, 413)
    assert answer["error"]["code"] == -32600
    assert "body" in answer["error"]["message"]


@pytest.mark.parametrize(("wire", "status"), [(modern, 400), (legacy, 200)])
async def test_an_unknown_tool_is_invalid_params_on_both_wires(http, seeded, wire, status):
    """A JSON-RPC error, as MCP's tools "Error Handling" lists it, not a tool result: HTTP 400
    on the 2026 wire (its status table), 200 on the 2025 wire (errors travel in the body)."""
    name = {"name": "serch"} if wire is modern else {}
    headers, body = wire(
        "tools/call", {"name": "serch", "arguments": {}}, **name,
        **auth_header(seeded.token),
    )  # fmt: skip
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == status
    assert "result" not in response.json()
    assert response.json()["error"] == {
        "code": -32602,
        "message": "Unknown tool: 'serch'; did you mean 'search'?",
    }


SERVED = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
UNSUPPORTED = (
    "Unsupported protocol version {!r} (the MCP-Protocol-Version header); this endpoint serves "
    "2026-07-28 and, negotiated by initialize, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
)


@pytest.mark.parametrize("wire", [modern, legacy])  # a body of either revision's shape
@pytest.mark.parametrize("version", ["2025-99-99", "2023-01-01", "2026-07-28 ", "garbage", ""])
async def test_an_unsupported_protocol_version_is_told_the_versions_served(
    http, seeded, wire, version
):
    """400 (MCP 2025-11-25 transport: an unsupported MCP-Protocol-Version header) with the
    2026 revision's -32022 and its {supported, requested}: supported as server/discover lists
    it, the message naming the handshake versions too, for a request (its id echoed) and a
    notification alike."""
    headers, body = wire("tools/list", **auth_header(seeded.token))
    headers = {**headers, "mcp-protocol-version": version}
    request = json.loads(body)
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for sent, request_id in ((request, request["id"]), (notification, None)):
        response = await http.post("/mcp", headers=headers, content=json.dumps(sent))
        assert response.status_code == 400
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": -32022,
                "message": UNSUPPORTED.format(version),
                "data": {"supported": ["2026-07-28"], "requested": version},
            },
        }


async def test_an_unsupported_protocol_version_is_echoed_cut(http, seeded):
    headers, body = modern("tools/list", **auth_header(seeded.token))
    version = "9" * 5000
    response = await http.post(
        "/mcp", headers={**headers, "mcp-protocol-version": version}, content=body
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["data"]["requested"] == f"{'9' * 64}…"
    assert error["message"] == UNSUPPORTED.format(f"{'9' * 64}…")


@pytest.mark.parametrize("version", SERVED)
async def test_every_served_protocol_version_is_served(http, seeded, version):
    wire = modern if version == MODERN else legacy
    headers, body = wire("tools/list", **auth_header(seeded.token))
    response = await http.post(
        "/mcp", headers={**headers, "mcp-protocol-version": version}, content=body
    )
    assert response.status_code == 200 and response.json()["result"]["tools"]


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize(
    ("params", "kind"), [([1], "an array"), ("x", "a string"), (3, "a number"), (True, "a boolean")]
)
async def test_params_that_are_no_object_are_named_on_both_wires(http, seeded, wire, params, kind):
    """MCP carries params as an object on every message: any other is an Invalid Request that
    names them, for a request and a notification alike."""
    headers, body = wire("tools/list", **auth_header(seeded.token))
    request = {**json.loads(body), "params": params}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": params}
    for sent in (request, notification):
        response = await http.post("/mcp", headers=headers, content=json.dumps(sent))
        assert response.status_code == 400
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": f"params: must be an object, not {kind}; MCP passes parameters by name",
            },
        }
        assert int(response.headers["content-length"]) == len(response.content)


@pytest.mark.parametrize("wire", [modern, legacy])
async def test_a_batch_is_still_no_single_message_on_both_wires(http, seeded, wire):
    headers, body = wire("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=f"[{body}]")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32600,
        "message": "Body must be a single JSON-RPC request or notification object",
    }


@pytest.mark.parametrize("length", [64, 65, 900_000])
async def test_an_unknown_method_is_echoed_cut_on_the_2025_wire(http, seeded, length):
    """The SDK echoes an unknown method whole: one longer than any method is answered before
    it, as it answers, the echo cut at 64 characters as every name a caller made up."""
    method = "m" * length
    headers, body = legacy(method, **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 200
    shown = method if length <= 64 else f"{method[:64]}…"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32601, "message": "Method not found", "data": shown},
    }


@pytest.mark.parametrize("length", [64, 65, 15_000])
async def test_an_unknown_method_is_echoed_cut_on_the_2026_wire(http, seeded, length):
    """The SDK echoes an unknown method whole, and the Mcp-Method header that must equal it is
    bounded only by the HTTP server's 16 KiB of headers: one longer than any method is answered
    before it, as it answers (404, as the 2026 wire answers -32601), the echo cut."""
    method = "m" * length
    headers, body = modern(method, **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 404
    shown = method if length <= 64 else f"{method[:64]}…"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found", "data": shown},
    }


async def test_a_long_mcp_method_header_leaves_other_refusals_to_the_sdk(http, seeded):
    """Only a request whose method is the header's is answered before the SDK: a body that
    names another method is the header mismatch it is, and a notification is acknowledged."""
    method = "m" * 65
    headers, body = modern(method, **auth_header(seeded.token))
    mismatched = {**json.loads(body), "method": "tools/list"}
    response = await http.post("/mcp", headers=headers, content=json.dumps(mismatched))
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32020)
    notification = {k: v for k, v in json.loads(body).items() if k != "id"}
    response = await http.post("/mcp", headers=headers, content=json.dumps(notification))
    assert response.status_code == 202


# --- hostile input, answered alike on both wires -------------------------------------------


def _with_raw(body: str, placeholder: str, raw: bytes) -> bytes:
    """`body` with the JSON string `placeholder` (quotes included) written as `raw` bytes."""
    return body.encode().replace(json.dumps(placeholder).encode(), raw)


async def _sent_raw(asgi_app, headers: dict, chunks: list[bytes]) -> tuple[int, bytes]:
    """The status and body of the answer to a request whose body arrives in `chunks` (with no
    Content-Length: chunked transfer coding)."""
    headers = {name: value for name, value in headers.items() if name != "content-length"}
    return await _answered(asgi_app, _mcp_post_scope(headers), chunks)


async def _answered(asgi_app, scope: dict, chunks: list[bytes]) -> tuple[int, bytes]:
    """The status and body of the answer to the request `scope` whose body arrives in
    `chunks`."""
    received = [
        {"type": "http.request", "body": chunk, "more_body": number < len(chunks) - 1}
        for number, chunk in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await asgi_app(scope, receive, send)
    start, *parts = sent
    return start["status"], b"".join(part.get("body", b"") for part in parts)


# A lone surrogate (U+D800) as raw bytes, as a client that does not escape it writes it: not
# UTF-8 (RFC 3629 §3), read by Python's JSON parser as the surrogate, as its escape is.
RAW_SURROGATE = b"\xed\xa0\x80"


async def test_a_lone_surrogate_as_raw_bytes_gets_the_field_named_on_both_wires(http, seeded):
    token = auth_header(seeded.token)
    params = {"name": "search", "arguments": {"query": "SURROGATE"}}
    answers = []
    for headers, body in (
        modern("tools/call", params, name="search", **token),
        legacy("tools/call", params, **token),
    ):
        raw = _with_raw(body, "SURROGATE", b'"ab' + RAW_SURROGATE + b'"')
        response = await http.post("/mcp", headers=headers, content=raw)
        assert response.status_code == 200
        answers.append(_outcome(response))
    assert answers[0] == answers[1]
    assert answers[0][0] == "result" and answers[0][1] is True
    assert answers[0][2].startswith("invalid_input: query: must not contain lone surrogates")


async def test_an_initialize_with_a_lone_surrogate_as_raw_bytes_is_read_alike_with_or_without_the_version_header(  # noqa: E501
    http, seeded
):
    headers, _ = legacy("initialize", **auth_header(seeded.token))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "NAME", "version": "1"}}})  # fmt: skip
    raw = _with_raw(body, "NAME", b'"agent' + RAW_SURROGATE + b'"')
    with_version = await http.post("/mcp", headers=headers, content=raw)
    del headers["mcp-protocol-version"]
    without = await http.post("/mcp", headers=headers, content=raw)
    assert with_version.status_code == without.status_code == 200, with_version.text
    assert with_version.json() == without.json()
    assert with_version.json()["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize("written", [b'"a\\ud800"', b'"a' + RAW_SURROGATE + b'"'])
async def test_an_id_with_a_lone_surrogate_is_refused_on_both_wires(http, seeded, wire, written):
    """An answer echoing it would be JSON that strict parsers refuse (RFC 8259 §8.2), and one
    echoing it changed would answer another request."""
    headers, body = wire("ping", **auth_header(seeded.token))
    raw = _with_raw(json.dumps({**json.loads(body), "id": "ID"}), "ID", written)
    response = await http.post("/mcp", headers=headers, content=raw)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "id: must not contain lone surrogates (invalid Unicode)",
        },
    }


@pytest.mark.parametrize("wire", [modern, legacy])
async def test_a_chunked_body_over_the_limit_is_413_naming_it_as_a_declared_one(
    asgi_app, seeded, wire
):
    headers, _ = wire("tools/list", **auth_header(seeded.token))
    chunk = b" " * (256 * 1024)
    status, body = await _sent_raw(asgi_app, headers, [b"{", *[chunk] * 4, b"}"])
    assert status == 413
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"the body is more than {MAX_REQUEST_BODY_BYTES} bytes; at most "
            f"{MAX_REQUEST_BODY_BYTES} are read",
        },
    }


@pytest.mark.parametrize("wire", [modern, legacy])
async def test_a_chunked_body_within_the_limit_is_served(asgi_app, seeded, wire):
    headers, body = wire("tools/list", **auth_header(seeded.token))
    raw = body.encode()
    status, answer = await _sent_raw(asgi_app, headers, [raw[:10], raw[10:], b""])
    assert status == 200 and json.loads(answer)["result"]["tools"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{oops", "Parse error: key must be a string at line 1 column 2"),
        ('{"jsonrpc": "2.0",', "Parse error: EOF while parsing a value at line 1 column 18"),
        ("[1,]", "Parse error: trailing comma at line 1 column 4"),
        ("1" * 5000, "Parse error: number out of range at line 1 column 4302"),
    ],
)
async def test_a_parse_error_says_why_on_both_wires(http, seeded, body, message):
    answers = []
    for wire in (modern, legacy):
        headers, _ = wire("tools/list", **auth_header(seeded.token))
        response = await http.post("/mcp", headers=headers, content=body)
        answers.append((response.status_code, response.json()))
    assert answers[0] == answers[1]
    assert answers[0] == (
        400,
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}},
    )


@pytest.mark.parametrize(
    ("wire", "body", "message"),
    [
        (modern, "[" * 10_000 + "]" * 10_000, "Parse error: nested deeper than about 1,500 "
         "levels of arrays and objects, as deep as they are read"),
        (legacy, "[" * 10_000 + "]" * 10_000, "Parse error: nested deeper than 201 levels "
         "(at line 1 column 202); at most 201 are read"),
        # Within what json.loads reads (the envelope is checked), past what the SDK's parser does.
        (legacy, '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"x":' + "[" * 300
         + "]" * 300 + "}}", "Parse error: nested deeper than 201 levels (at line 1 column 260); "
         "at most 201 are read"),
    ],
)  # fmt: skip
async def test_a_body_nested_deeper_than_its_wires_parser_reads_is_told_the_limit(
    http, seeded, wire, body, message
):
    headers, _ = wire("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": message},
    }
    assert int(response.headers["content-length"]) == len(response.content)


def test_the_nesting_limit_named_is_the_json_parsers():
    """The 2025 wire's parser (pydantic's) reads 201 levels and no more."""
    import pydantic_core

    from mcp_gateway.wire import JSON_NESTING_MAX

    pydantic_core.from_json("[" * JSON_NESTING_MAX + "]" * JSON_NESTING_MAX)
    with pytest.raises(ValueError, match="recursion limit exceeded"):
        pydantic_core.from_json("[" * (JSON_NESTING_MAX + 1) + "]" * (JSON_NESTING_MAX + 1))


@pytest.mark.parametrize("written", [b'"tools/\\ud800"', b'"tools/' + RAW_SURROGATE + b'"'])
async def test_a_method_with_a_lone_surrogate_is_echoed_without_the_routers_mark(
    http, seeded, written
):
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    raw = _with_raw(body, "tools/list", written)
    response = await http.post("/mcp", headers=headers, content=raw)
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32601, "message": "Method not found", "data": "tools/\ufffd"},
    }


@pytest.mark.parametrize("wire", [modern, legacy])
@pytest.mark.parametrize("level", ["info", "loud", 3])
async def test_a_method_this_server_does_not_serve_is_not_found_whatever_its_params(
    http, seeded, wire, level
):
    """logging is no capability of this server: setting a level is -32601, valid or not (the
    SDK checks the params of a method it knows before finding that nothing serves it)."""
    headers, body = wire("logging/setLevel", {"level": level}, **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    error = response.json()["error"]
    assert (error["code"], error["message"]) == (-32601, "Method not found")
    assert error["data"] == "logging/setLevel"
