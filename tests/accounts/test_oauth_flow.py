"""The authorization and token endpoints: what an MCP client gets, and what every bad input gets
(the right OAuth error, and no change in the database)."""

from __future__ import annotations

import hashlib
import html
import re
import time

import pytest
from django.conf import settings
from django.shortcuts import resolve_url
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
)

from accounts.oauth_validators import canonical_resource
from tests.accounts.oauth_helpers import (
    REDIRECT_URI,
    authorize_params,
    authorize_url,
    consent_fields,
    exchange,
    get_code,
    pkce_pair,
    redirect_query,
    scope_choices,
    token_request,
)
from tests.factories import ApplicationFactory

NEW_PASSWORD = "a much better passphrase 2026"

AccessToken = get_access_token_model()
Grant = get_grant_model()
RefreshToken = get_refresh_token_model()

pytestmark = pytest.mark.django_db


@pytest.fixture
def application(db):
    return ApplicationFactory(name="Test MCP client", redirect_uris=REDIRECT_URI)


def _counts() -> tuple[int, int, int]:
    return Grant.objects.count(), AccessToken.objects.count(), RefreshToken.objects.count()


def _checksum(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _tokens(signed_in, application, **overrides) -> dict:
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge, **overrides)
    response = exchange(signed_in, application, code, verifier)
    assert response.status_code == 200, response.content
    return response.json()


# --- metadata and mounted views --------------------------------------------------------------


def test_authorization_server_metadata_advertises_only_what_is_supported(client):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    base = settings.PUBLIC_BASE_URL
    assert response.json() == {
        "issuer": base,
        "authorization_endpoint": f"{base}/oauth/authorize/",
        "token_endpoint": f"{base}/oauth/token/",
        "revocation_endpoint": f"{base}/oauth/revoke/",
        "registration_endpoint": f"{base}/oauth/register/",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["memory:read", "memory:write"],
        "token_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ],
        "revocation_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


@pytest.mark.parametrize(
    "path",
    [
        "/oauth/applications/",
        "/oauth/applications/register/",
        "/oauth/authorized_tokens/",
        "/oauth/introspect/",
        "/oauth/device/",
        "/.well-known/openid-configuration",
        "/o/applications/",
    ],
)
def test_views_mcp_clients_do_not_need_are_not_mounted(signed_in, path):
    assert signed_in.get(path).status_code == 404


# --- the happy path ----------------------------------------------------------------------------


def test_code_exchange_issues_hashed_one_hour_tokens_bound_to_mcp(signed_in, application, tenant):
    body = _tokens(signed_in, application)
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert set(body["scope"].split()) == {"memory:read", "memory:write"}
    access = AccessToken.objects.get(token_checksum=_checksum(body["access_token"]))
    assert access.user == tenant
    assert access.resource == [settings.MCP_RESOURCE_URL]
    # Hashed at rest: only the checksum is stored, the token column is blank.
    assert access.token == ""
    refresh = RefreshToken.objects.get(token_checksum=_checksum(body["refresh_token"]))
    assert refresh.token == "" and refresh.resource == [settings.MCP_RESOURCE_URL]
    assert Grant.objects.count() == 0  # the code is consumed


def test_authorization_without_scope_asks_for_both_and_the_person_chooses(signed_in, application):
    """A client that sends no scope (and knows no step-up) would be read-only for good: it is
    asked the whole tool surface, as one sending the challenged scope is, and the consent page
    still offers "Read only"."""
    _, challenge = pkce_pair()
    page = signed_in.get(authorize_url(authorize_params(application, challenge, scope=None)))
    assert scope_choices(page) == ["memory:read memory:write", "memory:read"]
    assert _tokens(signed_in, application, scope=None)["scope"] == "memory:read memory:write"
    # OpenID Connect scopes alone are as no scope.
    assert _tokens(signed_in, application, scope="openid profile")["scope"] == (
        "memory:read memory:write"
    )


def test_token_request_without_resource_inherits_the_granted_mcp_resource(signed_in, application):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    response = exchange(signed_in, application, code, verifier, resource=None)
    assert response.status_code == 200
    access = AccessToken.objects.get(token_checksum=_checksum(response.json()["access_token"]))
    assert access.resource == [settings.MCP_RESOURCE_URL]


def test_consent_page_shows_client_redirect_host_scopes_and_resource(signed_in, application):
    _, challenge = pkce_pair()
    response = signed_in.get(authorize_url(authorize_params(application, challenge)))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Test MCP client" in page
    assert "<strong>127.0.0.1:33418</strong>" in page
    assert "Read your memories" in page
    assert "Write, revise, archive and resolve your memories" in page
    assert f"<code>{settings.MCP_RESOURCE_URL}</code>" in page
    assert "runs on your own computer" in page  # only a loopback redirect is registered
    # The form may post to this site and its redirect may go to this client only (CSP3 §6.3.1).
    assert "form-action 'self' http://127.0.0.1:33418;" in response["Content-Security-Policy"]


@pytest.mark.parametrize(
    ("redirect_uri", "shown"),
    [
        ("http://127.0.0.1:6274/oauth/callback", "127.0.0.1:6274"),
        ("http://[::1]:33418/callback", "[::1]:33418"),
        ("https://claude.ai/api/mcp/auth_callback", "claude.ai"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", "anysphere.cursor-retrieval"),
        ("cursor:/oauth/callback", "cursor:"),
    ],
)
def test_the_consent_page_names_where_it_sends_you_with_the_port(signed_in, redirect_uri, shown):
    """Two local clients differ only by their port: the page names it, as Connected apps does."""
    client = ApplicationFactory(redirect_uris=redirect_uri)
    _, challenge = pkce_pair()
    params = authorize_params(client, challenge, redirect_uri=redirect_uri)
    response = signed_in.get(authorize_url(params))
    assert response.status_code == 200, response.content
    assert f"<dd><strong>{shown}</strong></dd>" in response.text


def test_allowing_a_client_removed_since_the_consent_page_was_shown_says_so(signed_in):
    """A daily clean-up of stale clients (or staff) removed it before the person clicked."""
    from tests.accounts.oauth_helpers import consent_fields

    application = ApplicationFactory(redirect_uris=REDIRECT_URI)
    _, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge))
    fields = consent_fields(signed_in.get(url))
    application.delete()
    response = signed_in.post(url, {**fields, "allow": "Authorize"})
    assert response.status_code == 400 and "no longer registered" in response.text


def test_the_consent_page_isolates_the_clients_name_from_the_text_around_it(signed_in):
    """A name stored before registration refused bidi controls cannot reorder the heading."""
    application = ApplicationFactory(name="\u202eedoC edualC", redirect_uris=REDIRECT_URI)
    _, challenge = pkce_pair()
    page = signed_in.get(authorize_url(authorize_params(application, challenge))).text
    assert "<q><bdi>\u202eedoC edualC</bdi></q>" in page


def test_consent_page_has_no_loopback_warning_for_a_web_client(signed_in):
    web = ApplicationFactory(redirect_uris="https://claude.ai/api/mcp/auth_callback")
    _, challenge = pkce_pair()
    params = authorize_params(
        web, challenge, redirect_uri="https://claude.ai/api/mcp/auth_callback"
    )
    page = signed_in.get(authorize_url(params)).content.decode()
    assert "<strong>claude.ai</strong>" in page
    assert "runs on your own computer" not in page


def test_consent_is_asked_even_with_approval_prompt_auto(signed_in, application):
    _tokens(signed_in, application)
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge, approval_prompt="auto")
    assert signed_in.get(authorize_url(params)).status_code == 200


def test_anonymous_visitor_is_sent_to_log_in(client, application):
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(application, challenge)))
    assert response.status_code == 302
    login_path = resolve_url(settings.LOGIN_URL)
    assert response["Location"].startswith(f"{login_path}?next=/oauth/authorize/")


def _link(page, text: str) -> str:
    """The address of the page's link whose text is `text` (the first, as a person reads)."""
    found = re.search(rf'<a href="([^"]*)"[^>]*>{text}</a>', page.content.decode())
    assert found, text
    return html.unescape(found[1])


def test_a_new_person_signs_up_from_the_log_in_page_and_comes_back_to_consent(client, application):
    """No account yet: the log-in page's "Sign up" link, then the sign-up form, keep the
    authorization request, so the new account lands on its consent page, not on /memories/."""
    verifier, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge))
    log_in_page = client.get(client.get(url)["Location"])
    sign_up_page = client.get(_link(log_in_page, "Sign up"))
    fields = consent_fields(sign_up_page)  # the hidden fields: the CSRF token and `next`
    assert fields["next"] == url

    response = client.post(
        resolve_url("accounts:signup"),
        {**fields, "username": "ada", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )

    assert response.status_code == 302 and response["Location"] == url
    consent = client.get(url)
    assert "Test MCP client" in consent.text
    code = redirect_query(client.post(url, {**consent_fields(consent), "allow": "Authorize"}))
    assert code["state"] == ["state-123"]
    tokens = exchange(client, application, code["code"][0], verifier)
    assert tokens.status_code == 200, tokens.content
    assert AccessToken.objects.get().user.username == "ada"


def test_deny_redirects_with_access_denied_and_issues_nothing(signed_in, application):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    response = signed_in.post(authorize_url(params), params)  # no "allow": the Deny button
    query = redirect_query(response)
    assert query["error"] == ["access_denied"]
    assert query["state"] == ["state-123"]
    assert query["iss"] == [settings.PUBLIC_BASE_URL]
    assert _counts() == (0, 0, 0)


@pytest.mark.parametrize("tampered", ["https://evil.example.com/cb", "http://[::1"])
def test_a_denial_never_goes_to_a_redirect_uri_edited_into_the_consent_post(
    signed_in, application, tampered
):
    """RFC 6749 §4.1.2.1: an error goes to a registered redirect URI only, or to none."""
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    response = signed_in.post(authorize_url(params), {**params, "redirect_uri": tampered})
    assert response.status_code == 400
    assert "Location" not in response
    assert "not one it registered" in response.text
    assert _counts() == (0, 0, 0)


@pytest.mark.parametrize(
    ("tampered", "named"),
    [
        ({"scope": ""}, "scope"),
        ({"redirect_uri": ""}, "redirect_uri"),
        ({"client_id": ""}, "client_id"),
        ({"scope": "", "client_id": ""}, "client_id, scope"),
    ],
)
def test_a_consent_post_with_an_emptied_field_names_it_and_issues_nothing(
    signed_in, application, tampered, named
):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    response = signed_in.post(authorize_url(params), {**params, **tampered, "allow": "Authorize"})
    assert response.status_code == 400
    assert f"without a valid {named};" in response.text
    assert "Allow" not in response.text
    assert _counts() == (0, 0, 0)


# --- bad authorization requests: refused before the consent page --------------------------


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),  # oauthlib reads it as plain
        ({"resource": "https://other.example.com/mcp"}, "invalid_target"),
        (
            {"resource": [settings.MCP_RESOURCE_URL, "https://other.example.com/api"]},
            "invalid_target",
        ),
        ({"scope": "memory:read admin"}, "invalid_scope"),
        # RFC 7636 §4.2: an S256 challenge is 43 BASE64URL characters, unpadded.
        ({"code_challenge": "A" * 129}, "invalid_request"),
        ({"code_challenge": "A" * 42}, "invalid_request"),
        ({"code_challenge": "A" * 43 + "="}, "invalid_request"),
        ({"code_challenge": "A" * 42 + "+"}, "invalid_request"),
        ({"nonce": "n" * 256}, "invalid_request"),  # more than the grant can keep
    ],
)
def test_bad_authorization_request_is_redirected_with_an_error(
    signed_in, application, overrides, error
):
    _, challenge = pkce_pair()
    response = signed_in.get(authorize_url(authorize_params(application, challenge, **overrides)))
    query = redirect_query(response)
    assert query["error"] == [error]
    assert query["state"] == ["state-123"]
    assert query["iss"] == [settings.PUBLIC_BASE_URL]  # RFC 9207 on errors too
    assert _counts() == (0, 0, 0)


def test_plain_pkce_smuggled_into_the_consent_post_is_refused(signed_in, application):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    tampered = {**params, "code_challenge_method": "plain", "allow": "Authorize"}
    query = redirect_query(signed_in.post(authorize_url(params), tampered))
    assert query["error"] == ["invalid_request"]
    assert _counts() == (0, 0, 0)


@pytest.mark.parametrize("overrides", [{"code_challenge": "A" * 5000}, {"nonce": "n" * 256}])
def test_an_overlong_value_smuggled_into_the_consent_post_is_refused(
    signed_in, application, overrides
):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    tampered = {**params, **overrides, "allow": "Authorize"}
    query = redirect_query(signed_in.post(authorize_url(params), tampered))
    assert query["error"] == ["invalid_request"]
    assert _counts() == (0, 0, 0)


def test_foreign_resource_smuggled_into_the_consent_post_is_refused(signed_in, application):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge)
    tampered = {**params, "resource": "https://other.example.com/mcp", "allow": "Authorize"}
    query = redirect_query(signed_in.post(authorize_url(params), tampered))
    assert query["error"] == ["invalid_target"]
    assert _counts() == (0, 0, 0)


@pytest.mark.parametrize(
    "resource",
    [
        "http://localhost:8000/mcp",  # this server by another of its host names
        "http://127.0.0.1:8001/mcp",
        "http://127.0.0.1:8000/api",
    ],
)
def test_a_resource_the_metadata_does_not_name_is_told_the_one_it_does(
    signed_in, application, resource
):
    """The protected resource metadata names PUBLIC_BASE_URL/mcp under every host name, and a
    token is bound to what it names: a client that asks for another resource did not follow
    the metadata, and is told which resource to ask for."""
    expected = (
        f"resource must be {settings.MCP_RESOURCE_URL}, the resource this server's protected "
        f"resource metadata names under every host name (got {resource})."
    )
    assert_invalid_target_everywhere(
        signed_in, application, resource, expected, HTTP_HOST="localhost:8000"
    )


def assert_invalid_target_everywhere(signed_in, application, resource, expected, **headers):
    """`resource` is refused as `expected` at the authorization endpoint (in the redirect) and at
    the token endpoint, and no token is issued."""
    _, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge, resource=resource))
    query = redirect_query(signed_in.get(url, **headers))
    assert query["error"] == ["invalid_target"]
    assert query["error_description"] == [expected]
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    response = exchange(signed_in, application, code, verifier, resource=resource)
    assert response.json() == {"error": "invalid_target", "error_description": expected}
    assert _counts() == (1, 0, 0)


@pytest.mark.parametrize("fragment", ["#frag", "#", "/#x"])
def test_a_resource_with_a_fragment_is_invalid_target(signed_in, application, fragment):
    """RFC 8707 §2: the resource "MUST NOT include a fragment component"; one was read as /mcp
    and its tokens worked."""
    resource = settings.MCP_RESOURCE_URL + fragment
    expected = f"resource must not include a fragment (got {resource})."
    assert_invalid_target_everywhere(signed_in, application, resource, expected)


def test_unregistered_redirect_uri_is_never_redirected_to(signed_in, application):
    _, challenge = pkce_pair()
    params = authorize_params(application, challenge, redirect_uri="https://evil.example.com/cb")
    response = signed_in.get(authorize_url(params))
    assert response.status_code == 400
    assert "evil.example.com" not in response.get("Location", "")
    assert "invalid_request" in response.content.decode()
    assert _counts() == (0, 0, 0)


# --- bad token requests: the right error, nothing issued, the code not consumed -----------


def test_wrong_verifier_is_invalid_grant(signed_in, application):
    _, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    other_verifier, _ = pkce_pair()
    response = exchange(signed_in, application, code, other_verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == (1, 0, 0)


VERIFIER_RULE = (
    "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9 and -._~ (RFC 7636 §4.1)"
)


@pytest.mark.parametrize(
    ("overrides", "status", "expected"),
    [
        ({"code": ""}, 400, {"error": "invalid_grant", "error_description": "code is empty"}),
        (
            {"code_verifier": "v" * 100_000},
            400,
            {"error": "invalid_grant", "error_description": f"{VERIFIER_RULE}; got 100000"},
        ),
        (
            {"code_verifier": "v" * 42},
            400,
            {"error": "invalid_grant", "error_description": f"{VERIFIER_RULE}; got 42"},
        ),
        (
            {"code_verifier": "v" * 42 + "+"},
            400,
            {"error": "invalid_grant", "error_description": f"{VERIFIER_RULE}; got a '+'"},
        ),
        (
            {"client_id": None},
            401,
            {
                "error": "invalid_client",
                "error_description": "client_id is missing: a client names itself by client_id "
                "in the body or in HTTP Basic",
            },
        ),
    ],
)
def test_a_token_request_refused_says_which_field_is_wrong(
    signed_in, application, overrides, status, expected
):
    """oauthlib answered these with an error code alone."""
    verifier, challenge = pkce_pair()
    overrides = dict(overrides)
    code = overrides.pop("code", get_code(signed_in, application, challenge))
    response = exchange(signed_in, application, code, verifier, **overrides)
    assert response.status_code == status
    assert response.json() == expected
    assert _counts() == (1, 0, 0)  # the code is still there: nothing was consumed


def test_a_code_that_is_unknown_or_used_says_so(signed_in, application):
    verifier, _ = pkce_pair()
    response = exchange(signed_in, application, "not-a-code", verifier)
    assert response.json() == {
        "error": "invalid_grant",
        "error_description": "code is unknown, expired or already used",
    }


def test_a_verifier_that_does_not_match_says_so(signed_in, application):
    _, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    other_verifier, _ = pkce_pair()
    response = exchange(signed_in, application, code, other_verifier)
    assert response.json() == {
        "error": "invalid_grant",
        "error_description": "code_verifier does not match the authorization request's "
        "code_challenge",
    }


def test_missing_verifier_is_refused(signed_in, application):
    _, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    response = exchange(signed_in, application, code, None)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert _counts() == (1, 0, 0)


def test_a_replayed_code_is_refused_and_revokes_every_token_issued_from_it(
    signed_in, application, tenant
):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    first = exchange(signed_in, application, code, verifier).json()
    rotated = _refresh(signed_in, application, first["refresh_token"]).json()
    # Another code of the same user and client: its tokens are not based on the replayed code.
    other = _tokens(signed_in, application)

    response = exchange(signed_in, application, code, verifier)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    for issued in (first, rotated):  # RFC 6749 §4.1.2, including what the code's refresh minted
        assert not AccessToken.objects.filter(token_checksum=_checksum(issued["access_token"]))
        assert _refresh(signed_in, application, issued["refresh_token"]).status_code == 400
    assert AccessToken.objects.filter(token_checksum=_checksum(other["access_token"])).exists()
    assert _refresh(signed_in, application, other["refresh_token"]).status_code == 200


def test_an_unknown_code_revokes_nothing(signed_in, application):
    _tokens(signed_in, application)
    before = _counts()
    revoked = RefreshToken.objects.filter(revoked__isnull=False).count()
    response = exchange(signed_in, application, "no-such-code", "v" * 43)
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == before
    assert RefreshToken.objects.filter(revoked__isnull=False).count() == revoked


def test_foreign_redirect_uri_at_the_token_endpoint_is_invalid_grant(signed_in, application):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    response = exchange(
        signed_in, application, code, verifier, redirect_uri="http://127.0.0.1:9999/other"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == (1, 0, 0)


def test_expired_code_is_invalid_grant(signed_in, application):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    Grant.objects.filter(code=code).update(expires=timezone.now() - timezone.timedelta(seconds=1))
    response = exchange(signed_in, application, code, verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == (1, 0, 0)


@pytest.mark.parametrize(
    "resource", ["https://other.example.com/mcp", "http://127.0.0.1:8000/mcp/other"]
)
def test_wrong_resource_at_the_token_endpoint_is_invalid_target(signed_in, application, resource):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    response = exchange(signed_in, application, code, verifier, resource=resource)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert _counts() == (1, 0, 0)  # the code is still there: nothing was consumed


def test_code_of_a_user_deactivated_after_consent_is_refused(signed_in, application, tenant):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    tenant.is_active = False
    tenant.save()
    response = exchange(signed_in, application, code, verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == (1, 0, 0)


# --- refresh tokens ---------------------------------------------------------------------------


def _refresh(client, application, refresh_token, **overrides):
    data = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "resource": settings.MCP_RESOURCE_URL,
    }
    data.update(overrides)
    return token_request(client, application, **data)


def test_refresh_rotates_both_tokens(signed_in, application):
    first = _tokens(signed_in, application)
    response = _refresh(signed_in, application, first["refresh_token"])
    assert response.status_code == 200
    second = response.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert not AccessToken.objects.filter(token_checksum=_checksum(first["access_token"])).exists()
    new_access = AccessToken.objects.get(token_checksum=_checksum(second["access_token"]))
    assert new_access.resource == [settings.MCP_RESOURCE_URL]
    old = RefreshToken.objects.get(token_checksum=_checksum(first["refresh_token"]))
    assert old.revoked is not None


def test_a_refresh_replayed_within_the_grace_period_gets_the_same_tokens(signed_in, application):
    """Two windows sharing a token store refresh with the same token (RFC 9700 §4.14.2)."""
    first = _tokens(signed_in, application)
    second = _refresh(signed_in, application, first["refresh_token"])
    again = _refresh(signed_in, application, first["refresh_token"])
    assert second.status_code == again.status_code == 200
    assert again.json() == second.json()
    assert again["Cache-Control"] == "no-store"
    # Nothing was revoked: the new pair is live and refreshes on.
    assert AccessToken.objects.filter(
        token_checksum=_checksum(second.json()["access_token"])
    ).exists()
    assert _refresh(signed_in, application, second.json()["refresh_token"]).status_code == 200


@pytest.mark.parametrize(
    "asking",
    [{"scope": "memory:read"}, {"scope": "admin"}, {"resource": "https://other.example.com/mcp"}],
)
def test_a_refresh_asking_otherwise_within_the_grace_period_is_no_replay(
    signed_in, application, asking
):
    """Less scope, an unknown one, another resource: not the first refresh retried, so not its
    tokens (read-write, for /mcp), but every check, as after the grace period."""
    first = _tokens(signed_in, application)
    assert _refresh(signed_in, application, first["refresh_token"]).status_code == 200
    again = token_request(
        signed_in,
        application,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        **asking,
    )
    assert again.status_code == 400 and "access_token" not in again.json()


def test_a_refresh_replayed_within_the_grace_period_after_a_revocation_is_refused(
    signed_in, application
):
    first = _tokens(signed_in, application)
    second = _refresh(signed_in, application, first["refresh_token"]).json()
    revoked = signed_in.post(
        "/oauth/revoke/",
        {
            "token": second["refresh_token"],
            "token_type_hint": "refresh_token",
            "client_id": application.client_id,
        },
    )
    assert revoked.status_code == 200
    assert _refresh(signed_in, application, first["refresh_token"]).status_code == 400


def test_a_refresh_replayed_within_the_grace_period_after_deactivation_is_refused(
    signed_in, application, tenant
):
    first = _tokens(signed_in, application)
    second = _refresh(signed_in, application, first["refresh_token"])
    assert second.status_code == 200
    tenant.is_active = False
    tenant.save()
    again = _refresh(signed_in, application, first["refresh_token"])
    assert again.status_code == 400, again.content
    assert again.json()["error"] == "invalid_grant"


@pytest.mark.parametrize("secret", [None, "not-the-secret"], ids=["no-secret", "wrong-secret"])
def test_a_confidential_clients_refresh_replayed_without_its_secret_gets_no_tokens(
    signed_in, secret
):
    """The grace period authenticates no client: a confidential client (client_secret_post)
    refreshing twice, or a thief with its refresh token but not its secret, gets DOT's answer."""
    client_secret = "the-confidential-secret-" + "s" * 20
    application = ApplicationFactory(
        client_type="confidential", client_secret=client_secret, redirect_uris=REDIRECT_URI
    )
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    first = exchange(signed_in, application, code, verifier, client_secret=client_secret).json()
    second = _refresh(signed_in, application, first["refresh_token"], client_secret=client_secret)
    assert second.status_code == 200, second.content
    before = _counts()
    again = _refresh(signed_in, application, first["refresh_token"], client_secret=secret)
    assert again.status_code == 401, again.content
    assert again.json()["error"] == "invalid_client"
    assert "access_token" not in again.json()
    assert _counts() == before


def test_a_refresh_replayed_by_another_client_revokes_the_family(signed_in, application):
    first = _tokens(signed_in, application)
    second = _refresh(signed_in, application, first["refresh_token"]).json()
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    response = _refresh(signed_in, other, first["refresh_token"])
    assert response.status_code == 400
    assert _refresh(signed_in, application, second["refresh_token"]).status_code == 400


def test_reused_refresh_token_after_the_grace_period_revokes_the_whole_family(
    signed_in, application, settings
):
    settings.OAUTH_REFRESH_GRACE_SECONDS = 1
    first = _tokens(signed_in, application)
    second = _refresh(signed_in, application, first["refresh_token"]).json()
    time.sleep(1.2)
    response = _refresh(signed_in, application, first["refresh_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    # The thief's (or the client's) newer tokens die too: the family is revoked.
    assert not AccessToken.objects.filter(token_checksum=_checksum(second["access_token"])).exists()
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    assert _refresh(signed_in, application, second["refresh_token"]).status_code == 400


def test_refresh_for_a_foreign_resource_is_invalid_target(signed_in, application):
    first = _tokens(signed_in, application)
    before = _counts()
    response = _refresh(
        signed_in, application, first["refresh_token"], resource="https://other.example.com/mcp"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert _counts() == before
    assert (
        RefreshToken.objects.get(token_checksum=_checksum(first["refresh_token"])).revoked is None
    )


def test_refresh_token_of_a_deactivated_user_is_refused(signed_in, application, tenant):
    first = _tokens(signed_in, application)
    tenant.is_active = False
    tenant.save()
    before = _counts()
    response = _refresh(signed_in, application, first["refresh_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert _counts() == before
    assert (
        RefreshToken.objects.get(token_checksum=_checksum(first["refresh_token"])).revoked is None
    )


def test_revocation_by_the_public_client_kills_the_pair(signed_in, application):
    first = _tokens(signed_in, application)
    response = signed_in.post(
        "/oauth/revoke/",
        {"token": first["access_token"], "client_id": application.client_id},
    )
    assert response.status_code == 200
    assert not AccessToken.objects.filter(token_checksum=_checksum(first["access_token"])).exists()
    assert _refresh(signed_in, application, first["refresh_token"]).status_code == 400


def test_another_client_cannot_revoke_a_token(signed_in, application):
    first = _tokens(signed_in, application)
    other = ApplicationFactory()
    signed_in.post("/oauth/revoke/", {"token": first["access_token"], "client_id": other.client_id})
    assert AccessToken.objects.filter(token_checksum=_checksum(first["access_token"])).exists()


# --- what real clients send: scopes and resources read leniently, as the standards allow -----


def _tokens_for_consent_scope(signed_in, application, scope: str) -> dict:
    """The token response after a consent posted with `scope` (the person's choice)."""
    verifier, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge))
    fields = consent_fields(signed_in.get(url))
    response = signed_in.post(url, {**fields, "scope": scope, "allow": "Authorize"})
    code = redirect_query(response)["code"][0]
    return exchange(signed_in, application, code, verifier).json()


def test_the_consent_page_lets_the_person_grant_read_only(signed_in, application):
    _, challenge = pkce_pair()
    page = signed_in.get(authorize_url(authorize_params(application, challenge)))
    assert scope_choices(page) == ["memory:read memory:write", "memory:read"]
    assert _tokens(signed_in, application)["scope"] == "memory:read memory:write"

    body = _tokens_for_consent_scope(signed_in, application, "memory:read")
    assert body["scope"] == "memory:read"
    access = AccessToken.objects.get(token_checksum=_checksum(body["access_token"]))
    assert access.scope == "memory:read"


def test_the_read_only_choice_is_a_labelled_group_under_what_the_app_asks(signed_in, application):
    """A screen reader names the radio group, and "It will be able to" above both scopes would
    be untrue of a read-only choice."""
    _, challenge = pkce_pair()
    page = signed_in.get(authorize_url(authorize_params(application, challenge))).text
    assert '<dt id="scope-choice">You allow</dt>' in page
    assert '<dd><div role="radiogroup" aria-labelledby="scope-choice">' in page
    assert "<dt>It asks to</dt>" in page and "It will be able to" not in page
    assert "<title>Allow access · threengram</title>" in page


def test_deny_and_allow_do_not_look_alike(signed_in, application):
    """Allow is the site's filled button; Deny the outlined one beside it (the first, which
    Enter presses: the safe answer)."""
    _, challenge = pkce_pair()
    page = signed_in.get(authorize_url(authorize_params(application, challenge))).text
    deny = page.index('<button type="submit" class="secondary">Deny</button>')
    assert deny < page.index('<button type="submit" name="allow" value="Authorize">Allow</button>')


def test_a_refused_authorization_request_is_not_titled_allow_access(signed_in, application):
    _, challenge = pkce_pair()
    page = signed_in.get(
        authorize_url(authorize_params(application, challenge, client_id="no-such-client"))
    ).text
    assert "This authorization request cannot be completed" in page
    assert "<title>Cannot authorize · threengram</title>" in page


def test_a_consent_posting_the_write_scope_alone_grants_read_beside_it(signed_in, application):
    """As an authorization request would be: a token of the write scope alone could call
    nothing on /mcp (an edited form, a client posting the consent itself)."""
    body = _tokens_for_consent_scope(signed_in, application, "memory:write")
    assert body["scope"] == "memory:read memory:write"


def test_a_read_only_request_is_offered_no_choice(signed_in, application):
    _, challenge = pkce_pair()
    page = signed_in.get(
        authorize_url(authorize_params(application, challenge, scope="memory:read"))
    )
    assert scope_choices(page) == []
    assert "Write, revise" not in page.content.decode()


@pytest.mark.parametrize(
    ("asked", "granted"),
    [
        ("memory:read", "memory:read"),
        (None, "memory:read memory:write"),  # the documented default: the tool surface
        ("memory:read memory:write", "memory:read memory:write"),
    ],
)
def test_the_consent_page_preselects_exactly_what_the_client_asked_for(
    signed_in, application, asked, granted
):
    """What a person allowing without a second look grants: the request, no more (read and
    write asked is a choice, "Read only" the other one; read alone offers nothing more)."""
    verifier, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge, scope=asked))
    page = signed_in.get(url)
    fields = consent_fields(page)
    assert fields["scope"] == granted
    assert ("Write, revise" in page.text) == ("memory:write" in granted)
    code = redirect_query(signed_in.post(url, {**fields, "allow": "Authorize"}))["code"][0]
    body = exchange(signed_in, application, code, verifier).json()
    assert body["scope"] == granted
    assert AccessToken.objects.get(token_checksum=_checksum(body["access_token"])).scope == granted


@pytest.mark.parametrize(
    ("asked", "posted"),
    [
        ("memory:read", "memory:read memory:write"),
        ("memory:read", "memory:write"),  # read is added beside it, write is still more
        ("openid memory:read", "memory:read memory:write openid"),
    ],
)
def test_a_consent_form_granting_more_than_the_client_asked_is_refused(
    signed_in, application, asked, posted
):
    """The person may grant less than asked, never more: a client that needs the write scope
    asks for it (step-up). A form edited to grant more used to issue a read-write token to a
    client that asked to read."""
    _, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge, scope=asked))
    fields = consent_fields(signed_in.get(url))
    response = signed_in.post(url, {**fields, "scope": posted, "allow": "Authorize"})
    assert response.status_code == 400
    assert "granting memory:write, which the app did not ask for" in response.text
    assert _counts() == (0, 0, 0)


def test_denying_a_consent_form_edited_to_grant_more_still_tells_the_client(signed_in, application):
    _, challenge = pkce_pair()
    url = authorize_url(authorize_params(application, challenge, scope="memory:read"))
    fields = consent_fields(signed_in.get(url))
    response = signed_in.post(url, {**fields, "scope": "memory:read memory:write"})
    assert redirect_query(response)["error"] == ["access_denied"]


@pytest.mark.parametrize(
    ("asked", "granted"),
    [
        ("openid memory:read memory:write offline_access", "memory:read memory:write"),
        ("memory:read offline_access", "memory:read"),
        # Nothing left: the default, the tool surface.
        ("openid profile email offline_access", "memory:read memory:write"),
        # Every /mcp request needs the read scope: writing alone could call nothing.
        ("memory:write", "memory:read memory:write"),
        ("memory:write offline_access", "memory:read memory:write"),
    ],
)
def test_oidc_scopes_are_ignored_and_the_grant_says_what_was_granted(
    signed_in, application, asked, granted
):
    body = _tokens(signed_in, application, scope=asked)
    assert body["scope"] == granted
    assert body["refresh_token"]  # offline_access or not
    refreshed = _refresh(signed_in, application, body["refresh_token"], scope=asked)
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["scope"] == granted


def test_an_unknown_scope_is_still_refused_and_told_the_scopes_there_are(signed_in, application):
    _, challenge = pkce_pair()
    for scope, named in (
        ("openid memory:admin", "memory:admin"),
        ("memory:read,memory:write", "memory:read,memory:write"),  # joined by a comma
    ):
        params = authorize_params(application, challenge, scope=scope)
        refused = redirect_query(signed_in.get(authorize_url(params)))
        assert refused["error"] == ["invalid_scope"]
        assert refused["error_description"] == [
            f"scope: {named} is not a scope of this server, which has memory:read and "
            "memory:write, separated by spaces"
        ]


def test_a_refresh_asking_more_than_was_granted_is_told_why(signed_in, application):
    body = _tokens(signed_in, application, scope="memory:read")
    response = _refresh(
        signed_in, application, body["refresh_token"], scope="memory:read memory:write"
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_scope",
        "error_description": "scope: a refresh keeps or narrows the scope its authorization "
        "granted, never widens it; authorize again to be granted more",
    }


@pytest.mark.parametrize(
    "resource",
    [
        None,  # clients of older protocol revisions send none
        f"{settings.MCP_RESOURCE_URL}/",
        settings.MCP_RESOURCE_URL.upper().replace("/MCP", "/mcp"),  # case of scheme and host
    ],
)
def test_a_missing_or_differently_written_resource_means_the_mcp_endpoint(
    signed_in, application, resource
):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge, resource=resource)
    response = exchange(signed_in, application, code, verifier, resource=resource)
    assert response.status_code == 200, response.content
    access = AccessToken.objects.get(token_checksum=_checksum(response.json()["access_token"]))
    assert access.resource == [settings.MCP_RESOURCE_URL]


@pytest.mark.parametrize(
    ("given", "read_as"),
    [
        ("https://memory.example.com/mcp", "https://memory.example.com/mcp"),
        ("https://memory.example.com:443/mcp/", "https://memory.example.com/mcp"),
        ("HTTPS://Memory.Example.COM/mcp", "https://memory.example.com/mcp"),
        ("https://memory.example.com/MCP", "https://memory.example.com/MCP"),  # path: exact
        ("https://memory.example.com:8443/mcp", "https://memory.example.com:8443/mcp"),
        ("http://memory.example.com/mcp", "http://memory.example.com/mcp"),
        ("https://other.example.com/mcp", "https://other.example.com/mcp"),
    ],
)
def test_resources_are_compared_after_normalisation(settings, given, read_as):
    settings.MCP_RESOURCE_URL = "https://memory.example.com/mcp"
    assert canonical_resource(given) == read_as


def test_every_token_endpoint_answer_is_json_and_never_stored(client, application):
    # DOT refuses parameters in the URL with a body of JSON sent as a page.
    in_the_url = client.post(
        "/oauth/token/?grant_type=authorization_code&code=x", {"client_id": application.client_id}
    )
    assert in_the_url.status_code == 400
    assert in_the_url["Content-Type"] == "application/json"
    assert in_the_url["Cache-Control"] == "no-store"
    assert in_the_url.json() == {
        "error": "invalid_request",
        "error_description": "URL query parameters are not allowed",
    }


def test_a_token_request_in_json_is_refused_naming_the_encoding(client, application):
    response = client.post(
        "/oauth/token/",
        {"grant_type": "authorization_code", "code": "x", "client_id": application.client_id},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "the body must be application/x-www-form-urlencoded, not "
        "application/json",
    }


@pytest.mark.parametrize("form", [{}, {"grant_type": ""}, {"code": "x"}])
def test_a_token_request_without_a_grant_type_is_told_it_has_none(client, application, form):
    response = client.post("/oauth/token/", {"client_id": application.client_id, **form})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "grant_type is missing: it must be one of authorization_code, "
        "refresh_token",
    }
