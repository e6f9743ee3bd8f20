"""The whole OAuth flow of a real MCP client (the MCP Python SDK's own OAuthClientProvider)
against a live server: discovery, registration (DCR, or a Client ID Metadata Document), login,
consent, code exchange, refresh with rotation, revocation."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from django.conf import settings
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
)

from tests.factories import UserFactory

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

AccessToken = get_access_token_model()
Application = get_application_model()
RefreshToken = get_refresh_token_model()

REDIRECT_URI = "http://127.0.0.1:33418/callback"
PROTOCOL_VERSION = "2025-11-25"


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def _provider(base_url, browser, *, client_metadata_url=None, scope=None):
    storage = MemoryStorage()

    async def redirect_handler(authorization_url: str) -> None:
        provider.authorization_urls.append(authorization_url)
        provider.callback_url = await anyio.to_thread.run_sync(browser.visit, authorization_url)

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(provider.callback_url).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )

    provider = OAuthClientProvider(
        server_url=f"{base_url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=scope,
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_metadata_url,
    )
    provider.authorization_urls = []
    provider.storage_ = storage
    return provider


def _token_row(raw: str):
    import hashlib

    checksum = hashlib.sha256(raw.encode()).hexdigest()
    return AccessToken.objects.filter(token_checksum=checksum).select_related("user").first()


def _refresh_row(raw: str):
    import hashlib

    checksum = hashlib.sha256(raw.encode()).hexdigest()
    return RefreshToken.objects.filter(token_checksum=checksum).first()


async def _call_mcp(http: httpx2.AsyncClient, base_url: str) -> httpx2.Response:
    return await http.post(
        f"{base_url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "oauth-e2e", "version": "1"},
            },
        },
        headers={
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Accept": "application/json, text/event-stream",
        },
    )


def test_sdk_client_registers_authorizes_refreshes_and_revokes(oauth_server, make_browser):
    user = UserFactory()
    browser = make_browser(user.username)
    provider = _provider(oauth_server.url, browser)
    requests_seen: list[str] = []

    async def log_request(request: httpx2.Request) -> None:
        requests_seen.append(f"{request.method} {request.url.path}")

    async def call_mcp():
        async with httpx2.AsyncClient(
            auth=provider,
            event_hooks={"request": [log_request]},
            timeout=30,
        ) as http:
            return await _call_mcp(http, oauth_server.url)

    first = anyio.run(call_mcp)
    tokens = provider.storage_.tokens
    client_info = provider.storage_.client_info

    # Discovery from the 401, then RFC 8414 metadata at the root, DCR, authorize, token.
    assert requests_seen[:5] == [
        "POST /mcp",
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /.well-known/oauth-authorization-server",
        "POST /oauth/register/",
        "POST /oauth/token/",
    ]
    assert first.status_code == 200

    # Authorization request: PKCE S256 and the RFC 8707 resource of /mcp.
    query = parse_qs(urlsplit(provider.authorization_urls[0]).query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == [f"{oauth_server.url}/mcp"]
    # The consent page names the client, its redirect host, the scopes in words, the resource.
    page = browser.consent_pages[0]
    assert "SDK test client" in page
    assert "127.0.0.1" in page
    # The SDK asks for the scopes the 401 challenge names, else the resource metadata's list.
    requested = set(query["scope"][0].split())
    assert requested <= {"memory:read", "memory:write"} and "memory:read" in requested
    for scope, words in settings.OAUTH2_PROVIDER["SCOPES"].items():
        assert (words in page) == (scope in requested)
    assert f"{oauth_server.url}/mcp" in page
    # RFC 9207: the redirect carried iss = the issuer (the SDK validated it too).
    assert parse_qs(urlsplit(browser.callback_urls[0]).query)["iss"] == [oauth_server.url]

    # The registered client is public, the token is bound to /mcp for this user, 1 h, both scopes.
    application = Application.objects.get(client_id=client_info.client_id)
    assert application.client_type == "public"
    assert application.registration_source == "dcr"
    access = _token_row(tokens.access_token)
    assert access.user == user
    assert access.resource == [f"{oauth_server.url}/mcp"]
    assert set(access.scope.split()) == requested
    assert 3500 <= tokens.expires_in <= 3600
    # Stored hashed: the token column is blank, only the checksum identifies it.
    assert access.token == ""
    assert _refresh_row(tokens.refresh_token).token == ""

    # The client's clock says the access token has expired: the SDK refreshes before calling.
    provider.context.token_expiry_time = time.time() - 1
    requests_seen.clear()
    second = anyio.run(call_mcp)
    assert second.status_code == 200
    assert requests_seen == ["POST /oauth/token/", "POST /mcp"]
    refreshed = provider.storage_.tokens

    # Refresh rotated both tokens; the old access token is gone, the old refresh token revoked.
    assert refreshed.access_token != tokens.access_token
    assert refreshed.refresh_token != tokens.refresh_token
    assert _token_row(tokens.access_token) is None
    assert _refresh_row(tokens.refresh_token).revoked is not None
    assert _token_row(refreshed.access_token).resource == [f"{oauth_server.url}/mcp"]

    # RFC 7009: the public client revokes its refresh token; the pair is dead.
    revoked = httpx2.post(
        f"{oauth_server.url}/oauth/revoke/",
        data={
            "token": refreshed.refresh_token,
            "token_type_hint": "refresh_token",
            "client_id": client_info.client_id,
        },
    )
    assert revoked.status_code == 200
    assert _token_row(refreshed.access_token) is None
    again = httpx2.post(
        f"{oauth_server.url}/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refreshed.refresh_token,
            "client_id": client_info.client_id,
            "resource": f"{oauth_server.url}/mcp",
        },
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_sdk_client_with_client_id_metadata_document(oauth_server, make_browser):
    """The SDK uses its HTTPS client_id URL instead of DCR because the server advertises
    client_id_metadata_document_supported. The document itself cannot be served over public HTTPS
    from a test machine (the fetcher refuses loopback and private addresses by design), so the
    Application row DOT would create on first fetch is stored beforehand, fresh; the fetch rules
    are tested in tests/accounts/test_oauth_cimd.py."""
    client_id = "https://client.example.com/.well-known/mcp-client.json"
    Application.objects.create(
        client_id=client_id,
        name="Example CIMD client",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
        registration_source=Application.RegistrationSource.CIMD,
        cimd_expires_at=time_in(hours=1),
    )
    user = UserFactory()
    browser = make_browser(user.username)
    provider = _provider(oauth_server.url, browser, client_metadata_url=client_id)
    requests_seen: list[str] = []

    async def log_request(request: httpx2.Request) -> None:
        requests_seen.append(f"{request.method} {request.url.path}")

    async def flow():
        async with httpx2.AsyncClient(
            auth=provider,
            event_hooks={"request": [log_request]},
            timeout=30,
        ) as http:
            return await _call_mcp(http, oauth_server.url)

    response = anyio.run(flow)
    assert response.status_code == 200
    assert "POST /oauth/register/" not in requests_seen
    assert parse_qs(urlsplit(provider.authorization_urls[0]).query)["client_id"] == [client_id]
    page = browser.consent_pages[0]
    assert "Example CIMD client" in page and client_id in page
    assert "runs on your own computer" in page  # loopback-only redirect warning
    access = _token_row(provider.storage_.tokens.access_token)
    assert access.application.client_id == client_id
    assert access.user == user
    assert Application.objects.filter(registration_source="dcr").count() == 0


def test_mcp_call_with_the_sdk_client_and_its_oauth_provider(oauth_server, make_browser):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    user = UserFactory()
    browser = make_browser(user.username)
    provider = _provider(oauth_server.url, browser)

    async def flow():
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(f"{oauth_server.url}/mcp", http_client=http)) as client,
        ):
            return await client.list_tools()

    tools = anyio.run(flow)
    assert tools is not None
    access = _token_row(provider.storage_.tokens.access_token)
    assert access.user == user and access.resource == [f"{oauth_server.url}/mcp"]


def test_the_python_sdk_journey_steps_up_from_a_read_only_grant(oauth_server, make_browser):
    """The person first grants read-only. `remember` then answers HTTP 403 insufficient_scope;
    the SDK asks again for the challenged scopes, the person allows writing, and the SDK
    retries the call, which succeeds. Then search, the resource and the briefing prompt."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from memories.models import Memory

    user = UserFactory()
    browser = make_browser(user.username, grants=("memory:read", None))
    provider = _provider(oauth_server.url, browser)
    statuses: list[tuple[str, int]] = []

    async def log_response(response: httpx2.Response) -> None:
        statuses.append(
            (f"{response.request.method} {response.request.url.path}", response.status_code)
        )

    async def journey():
        async with (
            httpx2.AsyncClient(
                auth=provider, timeout=30, event_hooks={"response": [log_response]}
            ) as http,
            Client(streamable_http_client(f"{oauth_server.url}/mcp", http_client=http)) as client,
        ):
            listed = await client.list_tools()
            read_only_scope = provider.storage_.tokens.scope
            remembered = await client.call_tool(
                "remember",
                {"memoryType": "decision", "topic": "py sdk", "content": "Step up to write"},
            )
            found = await client.call_tool("search", {"query": "step up"})
            uri = remembered.structured_content["memory"]["uri"]
            read = await client.read_resource(uri)
            prompt = await client.get_prompt("briefing", {})
            return listed, read_only_scope, remembered, found, read, prompt

    listed, read_only_scope, remembered, found, read, prompt = anyio.run(journey)

    assert {tool.name for tool in listed.tools} >= {"remember", "search"}
    assert read_only_scope == "memory:read"
    assert ("POST /mcp", 403) in statuses  # the step-up challenge, answered by the SDK
    first, second = (parse_qs(urlsplit(url).query) for url in provider.authorization_urls)
    assert first["scope"] == ["memory:read memory:write"]  # what the 401 challenge names
    assert second["scope"] == ["memory:read memory:write"]  # what the 403 challenge names
    assert not remembered.is_error, remembered.content[0].text
    memory = Memory.objects.get(owner=user, content="Step up to write")
    assert set(_token_row(provider.storage_.tokens.access_token).scope.split()) == {
        "memory:read",
        "memory:write",
    }
    assert [hit["id"] for hit in found.structured_content["hits"]] == [str(memory.pk)]
    assert read.contents[0].uri == memory.resource_uri
    assert prompt.messages[0].content.text


def test_a_person_who_keeps_the_grant_read_only_leaves_the_sdk_an_error_naming_the_scope(
    oauth_server, make_browser
):
    """At the step-up the person chooses "Read only" again: the SDK's retry is refused too, and
    what the agent gets names the scope the write needs (not a generic server error)."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    from memories.models import Memory

    user = UserFactory()
    browser = make_browser(user.username, grants=("memory:read", "memory:read"))
    provider = _provider(oauth_server.url, browser)

    async def write():
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(f"{oauth_server.url}/mcp", http_client=http)) as client,
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(
                    "remember", {"memoryType": "note", "topic": "t", "content": "read only"}
                )
            return refused.value

    refused = anyio.run(write)

    assert len(browser.consent_pages) == 2  # asked at first, then again at the step-up
    assert refused.message == "insufficient_scope: this tool needs the memory:write scope"
    assert not Memory.objects.filter(owner=user).exists()


def time_in(**delta):
    from django.utils import timezone

    return timezone.now() + timezone.timedelta(**delta)
