"""The log-in, sign-up and consent pages in a real browser (Debian's chromium through
Playwright): what a person sees and does, including that the browser actually follows the consent
form's redirect to the client (Content-Security-Policy `form-action` applies to that redirect)."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from django.conf import settings
from django.shortcuts import resolve_url
from oauth2_provider.models import get_access_token_model

from tests.accounts.oauth_helpers import REDIRECT_URI, pkce_pair
from tests.factories import PASSWORD, ApplicationFactory, UserFactory

NEW_PASSWORD = "a long and lovely passphrase"

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]


def _authorization_url(
    base_url: str, application, challenge: str, redirect_uri: str = REDIRECT_URI
) -> str:
    params = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": redirect_uri,
        "state": "xyz",
        "scope": "memory:read memory:write",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": f"{base_url}/mcp",
    }
    return f"{base_url}/oauth/authorize/?{urlencode(params)}"


def _consent(
    chromium: str,
    base_url: str,
    url: str,
    username: str,
    button: str,
    redirect_uri: str = REDIRECT_URI,
) -> tuple[str, str]:
    """Log in, read the consent page, press `button`; return (consent text, client callback)."""
    from playwright.sync_api import sync_playwright

    callbacks: list[str] = []
    login_path = resolve_url(settings.LOGIN_URL)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.set_default_timeout(10_000)
        # The client's loopback listener: answer the callback like a native client would.
        client_origin = "{0.scheme}://{0.netloc}".format(urlsplit(redirect_uri))
        page.route(
            f"{client_origin}/**",
            lambda route: (callbacks.append(route.request.url), route.fulfill(body="done")),
        )
        page.goto(url)
        assert urlsplit(page.url).path == login_path
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base_url}/oauth/authorize/**")
        text = page.inner_text("main")
        page.get_by_role("button", name=button).click()
        page.wait_for_url(f"{redirect_uri}**")
        browser.close()
    return text, callbacks[0]


def test_allow_in_chromium_sends_the_code_to_the_client(oauth_server, chromium_executable):
    application = ApplicationFactory(name="Claude Code", redirect_uris=REDIRECT_URI)
    user = UserFactory()
    _, challenge = pkce_pair()
    url = _authorization_url(oauth_server.url, application, challenge)

    text, callback = _consent(chromium_executable, oauth_server.url, url, user.username, "Allow")

    assert "Claude Code" in text
    assert "127.0.0.1" in text
    assert "Read your memories" in text
    assert f"{oauth_server.url}/mcp" in text
    query = parse_qs(urlsplit(callback).query)
    assert query["state"] == ["xyz"] and query["iss"] == [oauth_server.url]
    assert query["code"][0]


def test_allow_in_chromium_sends_the_code_to_a_client_on_the_ipv6_loopback(
    oauth_server, chromium_executable
):
    """A CSP source cannot name [::1]: the page must still let the browser go back there."""
    redirect_uri = "http://[::1]:33418/callback"
    application = ApplicationFactory(redirect_uris=redirect_uri)
    user = UserFactory()
    _, challenge = pkce_pair()
    url = _authorization_url(oauth_server.url, application, challenge, redirect_uri)

    _, callback = _consent(
        chromium_executable, oauth_server.url, url, user.username, "Allow", redirect_uri
    )

    query = parse_qs(urlsplit(callback).query)
    assert callback.startswith(redirect_uri) and query["code"][0]


def test_deny_in_chromium_sends_access_denied_to_the_client(oauth_server, chromium_executable):
    application = ApplicationFactory(redirect_uris=REDIRECT_URI)
    user = UserFactory()
    _, challenge = pkce_pair()
    url = _authorization_url(oauth_server.url, application, challenge)

    _, callback = _consent(chromium_executable, oauth_server.url, url, user.username, "Deny")

    query = parse_qs(urlsplit(callback).query)
    assert query["error"] == ["access_denied"]
    assert "code" not in query


def test_a_new_person_signs_up_from_the_log_in_page_and_allows_the_client(
    oauth_server, chromium_executable
):
    """No account yet: from the log-in page the authorization request sent them to, "Sign up",
    the form, and straight on to the consent page; Allow sends the client a code it exchanges."""
    from playwright.sync_api import sync_playwright

    application = ApplicationFactory(name="Claude Code", redirect_uris=REDIRECT_URI)
    verifier, challenge = pkce_pair()
    url = _authorization_url(oauth_server.url, application, challenge)
    callbacks: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_executable, args=["--no-sandbox"]
        )
        page = browser.new_page()
        page.set_default_timeout(10_000)
        page.route(
            "{0.scheme}://{0.netloc}/**".format(urlsplit(REDIRECT_URI)),
            lambda route: (callbacks.append(route.request.url), route.fulfill(body="done")),
        )
        page.goto(url)
        assert urlsplit(page.url).path == resolve_url(settings.LOGIN_URL)
        page.get_by_role("main").get_by_role("link", name="Sign up").click()
        page.get_by_label("Username").fill("newcomer")
        page.get_by_label("Password:", exact=True).fill(NEW_PASSWORD)
        page.get_by_label("Password confirmation:").fill(NEW_PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Create account").click()
        assert page.url == url  # the consent page of the request, not /memories/
        text = page.inner_text("main")
        page.get_by_role("button", name="Allow").click()
        page.wait_for_url(f"{REDIRECT_URI}**")
        browser.close()

    assert "Welcome, newcomer" in text and "Claude Code" in text
    query = parse_qs(urlsplit(callbacks[0]).query)
    assert query["state"] == ["xyz"] and query["iss"] == [oauth_server.url]
    response = httpx2.post(
        f"{oauth_server.url}/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": REDIRECT_URI,
            "client_id": application.client_id,
            "code_verifier": verifier,
            "resource": f"{oauth_server.url}/mcp",
        },
    )
    assert response.status_code == 200, response.text
    checksum = hashlib.sha256(response.json()["access_token"].encode()).hexdigest()
    assert get_access_token_model().objects.get(token_checksum=checksum).user.username == (
        "newcomer"
    )
