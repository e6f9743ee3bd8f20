"""Dynamic Client Registration (RFC 7591): open to anonymous MCP clients, but hardened."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

Application = get_application_model()
AccessToken = get_access_token_model()

pytestmark = pytest.mark.django_db


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
        # Cursor, given only the URL (RFC 8252 §7.1: its own scheme, then its other callbacks).
        [
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "https://www.cursor.com/agents/mcp/oauth/callback",
            "http://localhost:8787/callback",
        ],
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
    # RFC 7591 §3.2.1: when it was issued; no secret, so no secret's expiry.
    assert body["client_id_issued_at"] == int(application.created.timestamp())
    assert "client_secret_expires_at" not in body


def test_a_confidential_registration_says_when_its_secret_expires(client):
    """RFC 7591 §3.2.1: REQUIRED with a secret (0: never)."""
    body = _register(client, token_endpoint_auth_method="client_secret_post").json()
    assert body["client_secret"] and body["client_secret_expires_at"] == 0
    assert isinstance(body["client_id_issued_at"], int)


def test_registration_access_token_expires_and_is_stored_hashed(client):
    response = _register(client)
    # It carries the registration token: no cache keeps it, nor the management answers.
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    read = client.get(
        body["registration_client_uri"],
        HTTP_AUTHORIZATION=f"Bearer {body['registration_access_token']}",
    )
    assert read.status_code == 200 and "no-store" in read["Cache-Control"]
    checksum = hashlib.sha256(body["registration_access_token"].encode()).hexdigest()
    token = AccessToken.objects.get(token_checksum=checksum)
    assert token.token == ""
    assert token.user is None and token.resource == []
    lifetime = token.expires - timezone.now()
    assert timezone.timedelta(days=6, hours=23) < lifetime <= timezone.timedelta(days=7)


def _update(client, registration: dict, remote_addr="127.0.0.1", **metadata):
    """RFC 7592 §2.2: PUT the full metadata to the registration's URI with its token."""
    body = {
        "client_id": registration["client_id"],
        "client_name": "Claude",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    return client.put(
        f"/oauth/register/{registration['client_id']}/",
        body,
        content_type="application/json",
        REMOTE_ADDR=remote_addr,
        HTTP_AUTHORIZATION=f"Bearer {registration['registration_access_token']}",
    )


# One row per rule of the registration policy (accounts/oauth_registration.py).
POLICY_VIOLATIONS = [
    ({"redirect_uris": ["http://evil.example.com/cb"]}, "invalid_redirect_uri", "loopback"),
    (
        {"redirect_uris": ["https://ok.example.com/cb", "http://10.0.0.7/cb"]},
        "invalid_redirect_uri",
        "loopback",
    ),
    ({"redirect_uris": ["myapp://anysphere/callback"]}, "invalid_redirect_uri", "https"),
    # RFC 6749 §3.1.2: a redirection endpoint URI must not include a fragment component.
    ({"redirect_uris": ["cursor://anysphere/callback#x"]}, "invalid_redirect_uri", "fragment"),
    ({"redirect_uris": ["https://ok.example.com/cb#top"]}, "invalid_redirect_uri", "fragment"),
    ({"redirect_uris": ["http://127.0.0.1:33418/cb#"]}, "invalid_redirect_uri", "fragment"),
    ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri", "https"),
    # Goes to evil.example, while a page showing the authority would name claude.ai.
    (
        {"redirect_uris": ["https://claude.ai@evil.example/cb"]},
        "invalid_redirect_uri",
        "user information",
    ),
    # Stored space-separated, this one URI would register a second, plain-http one.
    (
        {"redirect_uris": ["https://ok.example.com/cb http://evil.example.com/cb"]},
        "invalid_redirect_uri",
        "white space",
    ),
    # The authorization endpoint takes ASCII URIs only; a look-alike host (a Cyrillic "a", U+0430).
    ({"redirect_uris": ["https://\u0430pple.com/cb"]}, "invalid_redirect_uri", "ASCII"),
    ({"redirect_uris": ["https://b\u00fccher.example/cb"]}, "invalid_redirect_uri", "xn--"),
    ({"redirect_uris": ["https://ok.example.com/caf\u00e9"]}, "invalid_redirect_uri", "ASCII"),
    ({"grant_types": ["implicit"]}, "invalid_client_metadata", "implicit"),
    ({"grant_types": ["password"]}, "invalid_client_metadata", "password"),
    (
        {"grant_types": ["client_credentials"], "redirect_uris": []},
        "invalid_client_metadata",
        "client_credentials",
    ),
    (
        {"grant_types": ["authorization_code", "urn:ietf:params:oauth:grant-type:device_code"]},
        "invalid_client_metadata",
        "device_code",
    ),
    (
        {"grant_types": "authorization_code"},
        "invalid_client_metadata",
        "grant_types must be an array of strings; got a string",
    ),
    (
        {"grant_types": None},
        "invalid_client_metadata",
        "grant_types must be an array of strings; got null",
    ),
    (
        {"grant_types": ["authorization_code", None]},
        "invalid_client_metadata",
        "grant_types must be an array of strings; grant_types[1] is null",
    ),
    (
        {"response_types": None},
        "invalid_client_metadata",
        "response_types must be an array of strings; got null",
    ),
    (
        {"redirect_uris": None},
        "invalid_client_metadata",
        "redirect_uris must be an array of strings; got null",
    ),
    (
        {"redirect_uris": ["https://a.example/cb", 7]},
        "invalid_redirect_uri",
        "redirect_uris must be an array of strings; redirect_uris[1] is a number",
    ),
    (
        {"grant_types": ["authorization_code", "authorization_code"]},
        "invalid_client_metadata",
        "grant_types lists 'authorization_code' more than once",
    ),
    (
        {"redirect_uris": ["https://a.example/cb", "https://b.example/cb", "https://a.example/cb"]},
        "invalid_redirect_uri",
        "redirect_uris lists 'https://a.example/cb' more than once",
    ),
    ({"redirect_uris": ["https:///cb"]}, "invalid_redirect_uri", "'https:///cb' has no host"),
    ({"redirect_uris": ["http:///cb"]}, "invalid_redirect_uri", "'http:///cb' has no host"),
    (
        {"redirect_uris": ["https://%65vil.com/cb"]},
        "invalid_redirect_uri",
        "'https://%65vil.com/cb': its host '%65vil.com' is not a valid host name or IP address",
    ),
    (
        {"redirect_uris": ["http://[::1]:0/cb"]},
        "invalid_redirect_uri",
        "'http://[::1]:0/cb': the port must be a number from 1 to 65535",
    ),
    (
        {"redirect_uris": ["http://127.0.0.1:65536/cb"]},
        "invalid_redirect_uri",
        "the port must be a number from 1 to 65535",
    ),
    ({"response_types": ["token"]}, "invalid_client_metadata", "token"),
    ({"redirect_uris": "https://claude.ai/cb"}, "invalid_client_metadata", "redirect_uris"),
    ({"redirect_uris": []}, "invalid_client_metadata", "redirect_uris"),
    ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata", "jwt"),
    ({"token_endpoint_auth_method": ["none"]}, "invalid_client_metadata", "auth_method"),
    ({"scope": "memory:read admin"}, "invalid_client_metadata", "admin"),
    ({"scope": ["memory:read"]}, "invalid_client_metadata", "scope"),
    ({"client_name": "x" * 101}, "invalid_client_metadata", "100 characters"),
    ({"client_name": 7}, "invalid_client_metadata", "client_name"),
    ({"client_name": "Cl\x00aude"}, "invalid_client_metadata", "NUL"),
    # A right-to-left override shows "edoC edualC" as "Claude Code" on the consent page.
    ({"client_name": "\u202eedoC edualC"}, "invalid_client_metadata", "bidi"),
    ({"client_name": "Claude\u200b Code"}, "invalid_client_metadata", "formatting"),
    ({"client_name": "Cl\ud800aude"}, "invalid_client_metadata", "surrogate"),
    ({"logo_uri": ["https://x.example/\x00"]}, "invalid_client_metadata", "logo_uri[0]"),
    # Django's own check of a longer URI names no limit.
    (
        {"redirect_uris": ["https://ok.example.com/" + "a" * 2_030]},
        "invalid_redirect_uri",
        "at most 2048 characters; got 2053",
    ),
    (
        {"redirect_uris": [f"http://127.0.0.1:{port}/cb" for port in range(40000, 40021)]},
        "invalid_redirect_uri",
        "at most 20 URIs; got 21",
    ),
]


def _violation_ids():
    return [f"{sorted(m)[0]}-{named}" for m, _error, named in POLICY_VIOLATIONS]


@pytest.mark.parametrize(("metadata", "error", "named"), POLICY_VIOLATIONS, ids=_violation_ids())
def test_registration_beyond_what_an_mcp_client_needs_is_refused(client, metadata, error, named):
    response = _register(client, **metadata)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert named in response.json()["error_description"]
    assert Application.objects.count() == 0
    assert AccessToken.objects.count() == 0


@pytest.mark.parametrize(("metadata", "error", "named"), POLICY_VIOLATIONS, ids=_violation_ids())
def test_an_update_beyond_what_an_mcp_client_needs_is_refused_and_changes_nothing(
    client, metadata, error, named
):
    registration = _register(client).json()
    before = Application.objects.get(client_id=registration["client_id"])
    response = _update(client, registration, **metadata)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == error
    assert named in response.json()["error_description"]
    after = Application.objects.get(client_id=registration["client_id"])
    assert (after.redirect_uris, after.authorization_grant_type, after.client_type, after.name) == (
        before.redirect_uris,
        before.authorization_grant_type,
        before.client_type,
        before.name,
    )


def test_an_update_within_the_policy_is_applied(client):
    registration = _register(client).json()
    response = _update(
        client,
        registration,
        client_name="Claude (renamed)",
        redirect_uris=["http://127.0.0.1:40000/cb"],
        scope="memory:read memory:write offline_access",
    )
    assert response.status_code == 200, response.content
    application = Application.objects.get(client_id=registration["client_id"])
    assert application.name == "Claude (renamed)"
    assert application.redirect_uris == "http://127.0.0.1:40000/cb"


@pytest.mark.parametrize(
    ("registered_with", "updated_with"),
    [("none", None), ("none", "client_secret_basic"), ("client_secret_basic", "none")],
)
def test_an_update_cannot_turn_a_public_client_confidential_or_back(
    client, registered_with, updated_with
):
    """DOT would make a public client confidential without giving it a secret: every token
    request of it would fail from then on."""
    registration = _register(client, token_endpoint_auth_method=registered_with).json()
    before = Application.objects.get(client_id=registration["client_id"])
    metadata = {"client_name": "Renamed", "token_endpoint_auth_method": updated_with}
    if updated_with is None:  # left out, as RFC 7591 §2 reads it: client_secret_basic
        body = {"client_id": registration["client_id"], "redirect_uris": ["https://a.example/cb"]}
        response = client.put(
            f"/oauth/register/{registration['client_id']}/",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {registration['registration_access_token']}",
        )
    else:
        response = _update(client, registration, **metadata)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_client_metadata"
    description = response.json()["error_description"]
    assert "token_endpoint_auth_method cannot change" in description
    assert f"registered with {'none' if registered_with == 'none' else 'client_secret'}" in (
        description
    )
    after = Application.objects.get(client_id=registration["client_id"])
    assert (after.client_type, after.name, after.client_secret) == (
        before.client_type,
        before.name,
        before.client_secret,
    )


@pytest.mark.parametrize(
    ("client_id", "named"),
    [
        ("another-client", "client_id must be this client's own"),
        (None, "client_id is missing"),
        (7, "client_id must be this client's own"),
    ],
)
def test_an_update_must_name_the_client_it_updates(client, client_id, named):
    """RFC 7592 §2.2: the client MUST include its client_id, the same as the one issued."""
    registration = _register(client).json()
    body = {
        "client_name": "Renamed",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "token_endpoint_auth_method": "none",
    }
    if client_id is not None:
        body["client_id"] = client_id
    response = client.put(
        f"/oauth/register/{registration['client_id']}/",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {registration['registration_access_token']}",
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert named in response.json()["error_description"]
    assert registration["client_id"] in response.json()["error_description"]
    assert Application.objects.get().name == "Claude"


@pytest.mark.parametrize("method", ["none", "client_secret_basic"])
def test_an_update_that_names_a_secret_must_name_the_one_issued(client, method):
    """RFC 7592 §2.2: a client_secret in an update MUST match the one issued; the client may not
    choose its own. A public client was issued none."""
    registration = _register(client, token_endpoint_auth_method=method).json()
    before = Application.objects.get()
    response = _update(
        client,
        registration,
        client_name="Renamed",
        client_secret="one-i-chose",
        token_endpoint_auth_method=method,
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "client_secret must be the one issued to this client, or left out",
    }
    after = Application.objects.get()
    assert (after.name, after.client_secret) == ("Claude", before.client_secret)
    issued = registration.get("client_secret")
    response = _update(
        client,
        registration,
        client_name="Renamed",
        client_secret=issued,
        token_endpoint_auth_method=method,
    )
    assert response.status_code == 200, response.content
    assert Application.objects.get().name == "Renamed"


def test_a_confidential_client_may_switch_how_it_sends_its_secret(client):
    registration = _register(client, token_endpoint_auth_method="client_secret_basic").json()
    response = _update(
        client, registration, client_name="Renamed", token_endpoint_auth_method="client_secret_post"
    )
    assert response.status_code == 200, response.content
    application = Application.objects.get(client_id=registration["client_id"])
    assert (application.client_type, application.name) == ("confidential", "Renamed")


def test_an_update_without_the_registration_token_is_refused_before_the_policy(client):
    registration = _register(client).json()
    registration["registration_access_token"] = "not-the-token"
    response = _update(client, registration, redirect_uris=["http://evil.example.com/cb"])
    assert response.status_code == 401


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
    assert Application.objects.count() == 3
    # Another address is not affected.
    assert _register(client, remote_addr="198.51.100.7").status_code == 201


def test_an_ipv6_host_is_counted_by_its_64_not_by_each_address_it_takes(client, settings):
    """A host or a LAN is given a whole /64: a fresh address per registration must not escape
    the rate."""
    settings.OAUTH_REGISTRATION_RATE = 3
    statuses = [_register(client, f"2001:db8:1:2::{n:x}").status_code for n in range(1, 6)]
    assert statuses == [201, 201, 201, 429, 429]
    assert _register(client, "2001:db8:1:3::1").status_code == 201  # the next /64
    # An IPv4-mapped address counts as its IPv4 address, not as one /64 of every such peer.
    mapped = [_register(client, "::ffff:198.51.100.7").status_code for _ in range(4)]
    assert mapped == [201, 201, 201, 429]
    assert _register(client, "198.51.100.7").status_code == 429  # the same peer
    assert _register(client, "::ffff:198.51.100.8").status_code == 201


def test_retry_after_is_the_time_until_the_window_frees(client, settings):
    settings.OAUTH_REGISTRATION_RATE = 1
    window = settings.OAUTH_REGISTRATION_RATE_WINDOW
    assert _register(client).status_code == 201
    response = _register(client)
    now = time.time()
    assert response.status_code == 429
    # Fixed windows start at multiples of the window length.
    assert abs(int(response["Retry-After"]) - (window - now % window)) <= 2


def test_the_default_rate_leaves_room_for_a_hosted_clients_shared_address(client):
    """A web chat's connectors register every user's connection from a few addresses of its
    own, anew on each fresh connection."""
    for _ in range(600):
        assert _register(client).status_code == 201
    assert _register(client).status_code == 429


def test_updates_share_the_registration_rate(client, settings):
    settings.OAUTH_REGISTRATION_RATE = 3
    registration = _register(client).json()
    for name in ("one", "two"):
        response = _update(client, registration, client_name=name)
        assert response.status_code == 200
        registration = response.json()  # the registration token rotates on every update
    response = _update(client, registration, client_name="three")
    assert response.status_code == 429
    assert response.json()["error"] == "too_many_requests"
    assert Application.objects.get(client_id=registration["client_id"]).name == "two"


def test_rejected_registrations_count_against_the_rate(client, settings):
    settings.OAUTH_REGISTRATION_RATE = 2
    for _ in range(2):
        assert _register(client, redirect_uris=["http://evil.example.com/"]).status_code == 400
    assert _register(client).status_code == 429


@pytest.mark.parametrize(
    ("grant_type", "registered_as", "extra"),
    [
        ("client_credentials", "client-credentials", {}),
        ("password", "password", {"username": "tenant", "password": "x"}),
        (
            "urn:ietf:params:oauth:grant-type:device_code",
            "authorization-code",
            {"device_code": "x"},
        ),
        ("implicit", "implicit", {}),
    ],
)
def test_grant_types_the_metadata_does_not_advertise_are_refused_for_every_client(
    client, grant_type, registered_as, extra
):
    """Even for a client whose registration allows the grant (here created by staff)."""
    from tests.factories import ApplicationFactory, UserFactory

    UserFactory(username="tenant")
    application = ApplicationFactory(
        client_type="confidential",
        authorization_grant_type=registered_as,
        client_secret="a-client-secret-of-some-length",
        redirect_uris="https://app.example.com/cb",
    )
    advertised = client.get("/.well-known/oauth-authorization-server").json()
    assert grant_type not in advertised["grant_types_supported"]
    response = client.post(
        "/oauth/token/",
        {
            "grant_type": grant_type,
            "client_id": application.client_id,
            "client_secret": "a-client-secret-of-some-length",
            **extra,
        },
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "unsupported_grant_type"
    assert AccessToken.objects.count() == 0


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


@pytest.mark.parametrize("days", ["-1", "0", "100000000"])
def test_clearing_stale_clients_refuses_an_age_out_of_range(db, days):
    from django.core.management import CommandError, call_command

    from tests.factories import ApplicationFactory

    just_registered = ApplicationFactory(registration_source="dcr")  # its user on the consent page
    with pytest.raises(CommandError, match="--days must be between 1 and 36500"):
        call_command("clear_stale_oauth_clients", "--days", days, stdout=None)
    assert Application.objects.filter(pk=just_registered.pk).exists()


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


def test_a_registration_body_that_is_not_json_is_refused(client):
    # A form (multipart) body, which Django reads as a form before the view reads the body
    # whole: refused as bad metadata, not a server error.
    response = client.post("/oauth/register/", {"client_name": "Claude"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert Application.objects.count() == 0


@pytest.mark.parametrize(
    ("content_type", "encoding", "named"),
    [
        ("", "utf-8", "not missing"),
        ("text/plain", "utf-8", "not text/plain"),
        ("application/x-www-form-urlencoded", "utf-8", "not application/x-www-form-urlencoded"),
        ("multipart/form-data", "utf-8", "not multipart/form-data"),
        ("application/json", "utf-16", "UTF-8"),
        ("application/json; charset=utf-16", "utf-16", "UTF-8"),
    ],
)
def test_a_registration_or_update_must_be_json_in_utf_8(client, content_type, encoding, named):
    """RFC 7591 §3.1: the metadata is sent as application/json (RFC 8259 §8.1: UTF-8). Any
    other body was read as JSON whatever it said it was, UTF-16 included."""
    metadata = {
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "token_endpoint_auth_method": "none",
    }
    body = json.dumps(metadata).encode(encoding)
    response = client.generic("POST", "/oauth/register/", body, content_type=content_type)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert named in response.json()["error_description"]
    assert Application.objects.count() == 0
    registration = _register(client).json()
    response = client.generic(
        "PUT",
        f"/oauth/register/{registration['client_id']}/",
        json.dumps(
            {**metadata, "client_id": registration["client_id"], "client_name": "New"}
        ).encode(encoding),
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {registration['registration_access_token']}",
    )
    assert response.status_code == 400
    assert named in response.json()["error_description"]
    assert Application.objects.get().name == "Claude"


def test_a_registration_body_nested_too_deeply_is_refused(client):
    body = '{"client_name": ' + "[" * 5000 + "]" * 5000 + "}"
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "the client metadata is nested more than 32 levels deep",
    }
    assert Application.objects.count() == 0
    shallower = '{"client_name": ' + "[" * 40 + "]" * 40 + "}"
    response = client.post("/oauth/register/", shallower, content_type="application/json")
    assert response.json()["error_description"] == (
        "client_name" + "[0]" * 31 + ": nested more than 32 levels deep"
    )


def test_a_number_too_long_to_read_is_named_as_such(client):
    """Python reads integers of at most 4,300 digits: the answer said the body was not JSON."""
    body = '{"client_name": "Claude", "software_version": ' + "9" * 5_000 + "}"
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "a number in the client metadata has more than 4300 digits",
    }


def test_a_body_that_is_not_json_says_where_it_stops_parsing(client):
    response = client.post("/oauth/register/", '{"client_name": }', content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "the body is not valid JSON: Expecting value (line 1, column 17)",
    }


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic"])
def test_a_client_with_a_secret_may_send_it_either_way_the_answer_names(client, tenant, method):
    # RFC 7591 §3.2.1 lets the server answer another method than the one asked for (DOT names
    # client_secret_basic, here and on reading the registration back); the token endpoint takes
    # the secret in the body too, as a client that asked for client_secret_post sends it.
    import base64

    answer = _register(client, token_endpoint_auth_method=method).json()
    assert answer["token_endpoint_auth_method"] == "client_secret_basic"
    credentials = {"client_id": answer["client_id"], "client_secret": answer["client_secret"]}
    form = {"grant_type": "authorization_code", "code": "not-a-code", "redirect_uri": "x"}
    basic = base64.b64encode(f"{answer['client_id']}:{answer['client_secret']}".encode()).decode()
    for extra, headers in ((credentials, {}), ({}, {"HTTP_AUTHORIZATION": f"Basic {basic}"})):
        response = client.post("/oauth/token/", {**form, **extra}, **headers)
        # The client authenticated: the code is what is refused, not the client.
        assert response.json()["error"] == "invalid_grant", response.content


def test_the_openid_scopes_clients_send_by_habit_are_ignored_at_registration(client):
    scope = "openid profile email address phone offline_access memory:read memory:write"
    assert _register(client, scope=scope).status_code == 201


def test_cursor_logs_in_through_its_own_scheme(client, tenant):
    from urllib.parse import parse_qs, urlencode, urlsplit

    from django.conf import settings

    from tests.accounts.oauth_helpers import consent_fields, pkce_pair

    callback = "cursor://anysphere.cursor-mcp/oauth/callback"
    client_id = _register(client, client_name="Cursor", redirect_uris=[callback]).json()[
        "client_id"
    ]
    client.force_login(tenant)
    verifier, challenge = pkce_pair()
    url = "/oauth/authorize/?" + urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": callback,
            "state": "s",
            "scope": "memory:read memory:write",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": settings.MCP_RESOURCE_URL,
        }
    )
    page = client.get(url)
    assert page.status_code == 200
    # The consent form's POST redirects to the client's scheme: the page's CSP allows it.
    assert "form-action 'self' cursor:" in page["Content-Security-Policy"]
    allowed = client.post(url, {**consent_fields(page), "allow": "Authorize"})
    assert allowed.status_code == 302 and allowed["Location"].startswith(f"{callback}?")
    code = parse_qs(urlsplit(allowed["Location"]).query)["code"][0]
    token = client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": callback,
            "code_verifier": verifier,
            "client_id": client_id,
        },
    )
    assert token.status_code == 200, token.content
