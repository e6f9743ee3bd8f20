"""Shared steps of the authorization-code flow, driven through Django's test client."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

from django.conf import settings
from django.test import Client

from tests.factories import ApplicationFactory

REDIRECT_URI = "http://127.0.0.1:33418/callback"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_params(application, challenge: str, **overrides) -> dict:
    params = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "state-123",
        "scope": "memory:read memory:write",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": settings.MCP_RESOURCE_URL,
    }
    params.update(overrides)
    return {key: value for key, value in params.items() if value is not None}


def authorize_url(params: dict) -> str:
    return "/oauth/authorize/?" + urlencode(params, doseq=True)


def redirect_query(response) -> dict[str, list[str]]:
    assert response.status_code == 302, response.content
    location = response["Location"]
    assert location.startswith(REDIRECT_URI), location
    return parse_qs(urlsplit(location).query)


def consent_fields(page) -> dict[str, str]:
    """The hidden fields of the consent form and its checked choices, as a browser would submit
    them unchanged."""
    assert page.status_code == 200, page.content
    text = page.content.decode()
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', text)
    found += re.findall(r'<input type="radio" name="([^"]+)" value="([^"]*)" checked>', text)
    return {name: html.unescape(value) for name, value in found}


def scope_choices(page) -> list[str]:
    """The scopes the consent page offers to grant, in order."""
    return re.findall(r'<input type="radio" name="scope" value="([^"]*)"', page.content.decode())


def get_code(client, application, challenge: str, **overrides) -> str:
    """Consent (Allow) as the logged-in user; return the authorization code."""
    url = authorize_url(authorize_params(application, challenge, **overrides))
    fields = consent_fields(client.get(url))
    response = client.post(url, {**fields, "allow": "Authorize"})
    return redirect_query(response)["code"][0]


def a_code_to_exchange(user):
    """A new client, and a code `user` gave it in a browser of their own: (application, code,
    verifier)."""
    application = ApplicationFactory(redirect_uris=REDIRECT_URI)
    browser = Client()
    browser.force_login(user)
    verifier, challenge = pkce_pair()
    return application, get_code(browser, application, challenge), verifier


def token_request(client, application, **data):
    body = {"client_id": application.client_id, **data}
    body = {key: value for key, value in body.items() if value is not None}
    return client.post("/oauth/token/", body)


def exchange(client, application, code: str, verifier: str, **overrides):
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
        "resource": settings.MCP_RESOURCE_URL,
    }
    data.update(overrides)
    return token_request(client, application, **data)
