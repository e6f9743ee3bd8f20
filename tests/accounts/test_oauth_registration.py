"""Dynamic Client Registration (RFC 7591): open to anonymous MCP clients, but hardened."""

from __future__ import annotations

import hashlib

import pytest
from django.core.cache import cache
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

Application = get_application_model()
AccessToken = get_access_token_model()

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counters():
    cache.clear()
    yield
    cache.clear()


def _register(client, remote_addr="127.0.0.1", **metadata):
    body = {
        "client_name": "Claude",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    return client.post(
        "/oauth/register/", body, content_type="application/json", REMOTE_ADDR=remote_addr
    )


@pytest.mark.parametrize(
    "redirect_uris",
    [
        ["https://claude.ai/api/mcp/auth_callback"],
        ["http://127.0.0.1:33418/callback", "http://127.0.0.1/"],  # VS Code
        ["http://localhost:52100/callback"],  # Claude Code
        ["http://[::1]:8080/cb"],
        ["https://vscode.dev/redirect", "http://127.0.0.1:33418/"],
    ],
)
def test_anonymous_mcp_client_registers_as_a_public_client(client, redirect_uris):
    response = _register(client, redirect_uris=redirect_uris)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == "public"
    assert application.authorization_grant_type == "authorization-code"
    assert application.redirect_uris.split() == redirect_uris
    assert application.user is None


def test_registration_access_token_expires_and_is_stored_hashed(client):
    body = _register(client).json()
    checksum = hashlib.sha256(body["registration_access_token"].encode()).hexdigest()
    token = AccessToken.objects.get(token_checksum=checksum)
    assert token.token == ""
    assert token.user is None and token.resource == []
    lifetime = token.expires - timezone.now()
    assert timezone.timedelta(days=6, hours=23) < lifetime <= timezone.timedelta(days=7)


@pytest.mark.parametrize(
    ("metadata", "error", "named"),
    [
        ({"redirect_uris": ["http://evil.example.com/cb"]}, "invalid_redirect_uri", "loopback"),
        (
            {"redirect_uris": ["https://ok.example.com/cb", "http://10.0.0.7/cb"]},
            "invalid_redirect_uri",
            "loopback",
        ),
        ({"redirect_uris": ["cursor://anysphere/callback"]}, "invalid_redirect_uri", "https"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri", "https"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata", "implicit"),
        ({"grant_types": ["password"]}, "invalid_client_metadata", "password"),
        (
            {"grant_types": ["client_credentials"], "redirect_uris": []},
            "invalid_client_metadata",
            "client_credentials",
        ),
        ({"response_types": ["token"]}, "invalid_client_metadata", "token"),
        ({"redirect_uris": []}, "invalid_client_metadata", "redirect_uris"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata", "jwt"),
    ],
)
def test_registration_beyond_what_an_mcp_client_needs_is_refused(client, metadata, error, named):
    response = _register(client, **metadata)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert named in response.json()["error_description"]
    assert Application.objects.count() == 0
    assert AccessToken.objects.count() == 0


def test_malformed_registration_body_is_refused(client):
    response = client.post("/oauth/register/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert Application.objects.count() == 0


def test_registration_is_rate_limited_per_ip(client, settings):
    settings.OAUTH_REGISTRATION_RATE = 3
    for _ in range(3):
        assert _register(client).status_code == 201
    response = _register(client)
    assert response.status_code == 429
    assert response.json()["error"] == "too_many_requests"
    assert 0 < int(response["Retry-After"]) <= settings.OAUTH_REGISTRATION_RATE_WINDOW
    assert Application.objects.count() == 3
    # Another address is not affected.
    assert _register(client, remote_addr="198.51.100.7").status_code == 201


def test_rejected_registrations_count_against_the_rate(client, settings):
    settings.OAUTH_REGISTRATION_RATE = 2
    for _ in range(2):
        assert _register(client, redirect_uris=["http://evil.example.com/"]).status_code == 400
    assert _register(client).status_code == 429


def test_stale_unused_registrations_are_deleted_and_used_ones_kept(client, tenant):
    from django.core.management import call_command

    from tests.factories import AccessTokenFactory, ApplicationFactory, RefreshTokenFactory

    old = timezone.now() - timezone.timedelta(days=31)
    unused = Application.objects.get(client_id=_register(client).json()["client_id"])
    in_use = ApplicationFactory(registration_source="dcr")
    AccessTokenFactory(application=in_use, user=tenant)
    refreshable = ApplicationFactory(registration_source="dcr")
    RefreshTokenFactory(application=refreshable, user=tenant, access_token=None)
    recent = Application.objects.get(client_id=_register(client).json()["client_id"])
    manual = ApplicationFactory()
    Application.objects.exclude(pk=recent.pk).update(created=old)

    call_command("clear_stale_oauth_clients", "--days", "30", stdout=None)

    remaining = set(Application.objects.values_list("pk", flat=True))
    assert remaining == {in_use.pk, refreshable.pk, recent.pk, manual.pk}
    assert unused.pk not in remaining


def test_token_endpoint_is_rate_limited_per_ip(client, settings):
    settings.OAUTH_TOKEN_RATE = 3
    form = {"grant_type": "authorization_code", "code": "guess", "client_id": "nobody"}
    for _ in range(3):
        response = client.post("/oauth/token/", form, REMOTE_ADDR="192.0.2.50")
        assert response.status_code in (400, 401), response.content  # refused, but answered
    response = client.post("/oauth/token/", form, REMOTE_ADDR="192.0.2.50")
    assert response.status_code == 429
    assert response.json()["error"] == "too_many_requests"
    assert 0 < int(response["Retry-After"]) <= settings.OAUTH_TOKEN_RATE_WINDOW
    # Another address is not affected.
    assert client.post("/oauth/token/", form, REMOTE_ADDR="192.0.2.51").status_code != 429
