"""URLs that Python's parser refuses (an unclosed IPv6 bracket, a port out of range) where the
OAuth endpoints take a URL: a clear OAuth error, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.accounts.oauth_helpers import authorize_params, authorize_url, pkce_pair
from tests.factories import ApplicationFactory, UserFactory

MALFORMED = ["http://[", "http://[::1/cb", "http://127.0.0.1:99999/cb", "http://127.0.0.1:x/cb"]

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("uri", MALFORMED)
def test_an_authorization_request_with_a_malformed_redirect_uri_is_refused(uri):
    client = Client()
    client.force_login(UserFactory())
    application = ApplicationFactory()
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(application, challenge, redirect_uri=uri)))
    assert response.status_code == 400
    assert b"redirect" in response.content.lower()


@pytest.mark.parametrize("uri", MALFORMED)
def test_an_authorization_request_with_a_malformed_resource_is_refused(uri):
    client = Client()
    client.force_login(UserFactory())
    _, challenge = pkce_pair()
    response = client.get(
        authorize_url(authorize_params(ApplicationFactory(), challenge, resource=uri))
    )
    assert response.status_code in (302, 400)
    assert response.status_code != 302 or "error=invalid_target" in response["Location"]


@override_settings(OAUTH_REGISTRATION_RATE=10**6)
@pytest.mark.parametrize("uri", MALFORMED)
def test_a_registration_with_a_malformed_redirect_uri_names_it(uri):
    response = Client().post(
        "/oauth/register/",
        {"redirect_uris": [uri], "token_endpoint_auth_method": "none"},
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_redirect_uri"
    assert "redirect_uri" in body["error_description"]
