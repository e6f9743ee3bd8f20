"""The consent page's scopes in a real browser: what is preselected is what the client asked for,
and Allow grants no more than that, whatever the form holds."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2 as httpx
import pytest
from django.urls import reverse
from oauth2_provider.models import get_access_token_model, get_grant_model
from playwright.sync_api import expect

from tests.factories import PASSWORD, ApplicationFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.live]

AccessToken = get_access_token_model()
Grant = get_grant_model()
CALLBACK = "http://127.0.0.1:33418/callback"


class ConsentFlow:
    """One client's authorization request in the page, and the code exchange it leads to."""

    def __init__(self, page, daphne_server, scope: str | None) -> None:
        self.page, self.server = page, daphne_server
        self.application = ApplicationFactory(name="Notes agent", redirect_uris=CALLBACK)
        self.verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest())
        query = {
            "response_type": "code",
            "client_id": self.application.client_id,
            "redirect_uri": CALLBACK,
            "state": secrets.token_urlsafe(8),
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "resource": daphne_server("/mcp"),
        }
        if scope is not None:
            query["scope"] = scope
        self.url = daphne_server(reverse("oauth2_provider:authorize")) + "?" + urlencode(query)
        self.redirects: list[str] = []

    def open(self) -> None:
        # The client's loopback redirect URI: catch the browser's navigation there.
        self.page.route(
            "http://127.0.0.1:33418/**",
            lambda route: (self.redirects.append(route.request.url), route.fulfill(body="ok"))[1],
        )
        self.page.goto(self.url)
        expect(self.page.get_by_text("Notes agent")).to_be_visible()

    def submitted_scope(self) -> str:
        """The scope the form would post now, as the browser builds it."""
        return self.page.evaluate(
            "new FormData(document.getElementById('authorizationForm')).get('scope')"
        )

    def allow_and_exchange(self) -> str:
        self.page.get_by_role("button", name="Allow").click()
        self.page.wait_for_url("http://127.0.0.1:33418/**")
        code = parse_qs(urlsplit(self.redirects[-1]).query)["code"][0]
        response = httpx.post(
            self.server(reverse("oauth2_provider:token")),
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "client_id": self.application.client_id,
                "code_verifier": self.verifier,
                "resource": self.server("/mcp"),
            },
        )
        assert response.status_code == 200, response.text
        body = response.json()
        stored = AccessToken.objects.get(
            token_checksum=hashlib.sha256(body["access_token"].encode()).hexdigest()
        )
        assert stored.scope == body["scope"]
        return body["scope"]


def _log_in(page, daphne_server) -> None:
    user = UserFactory()
    page.goto(daphne_server("/login/"))
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(daphne_server("/memories/"))


def test_the_consent_page_preselects_what_the_client_asked_and_grants_no_more(page, daphne_server):
    _log_in(page, daphne_server)

    # Read asked: read shown, nothing to choose, read granted.
    flow = ConsentFlow(page, daphne_server, "memory:read")
    flow.open()
    expect(page.get_by_role("radio")).to_have_count(0)
    expect(page.get_by_text("Write, revise")).to_have_count(0)
    assert flow.submitted_scope() == "memory:read"
    assert flow.allow_and_exchange() == "memory:read"

    # No scope asked: the documented default, the tool surface, preselected as when asked.
    flow = ConsentFlow(page, daphne_server, None)
    flow.open()
    expect(page.get_by_role("radio", name="Read and write")).to_be_checked()
    assert flow.submitted_scope() == "memory:read memory:write"
    assert flow.allow_and_exchange() == "memory:read memory:write"

    # Read and write asked: that is preselected, and the person may take less.
    flow = ConsentFlow(page, daphne_server, "memory:read memory:write")
    flow.open()
    expect(page.get_by_role("radio", name="Read and write")).to_be_checked()
    expect(page.get_by_role("radio", name="Read only")).not_to_be_checked()
    page.get_by_role("radio", name="Read only").check()
    assert flow.submitted_scope() == "memory:read"
    assert flow.allow_and_exchange() == "memory:read"


def test_a_consent_form_edited_to_grant_more_than_asked_issues_nothing(page, daphne_server):
    """Read asked, the form's scope changed in the page (developer tools, an extension) to read
    and write: no code, no token, and the person is told why."""
    _log_in(page, daphne_server)
    flow = ConsentFlow(page, daphne_server, "memory:read")
    flow.open()
    page.evaluate(
        "document.querySelector('#authorizationForm input[name=scope]').value ="
        " 'memory:read memory:write'"
    )
    assert flow.submitted_scope() == "memory:read memory:write"
    page.get_by_role("button", name="Allow").click()
    expect(page.get_by_role("heading", name="Bad request")).to_be_visible()
    expect(page.get_by_text("which the app did not ask for")).to_be_visible()
    assert flow.redirects == []
    assert not Grant.objects.filter(application=flow.application).exists()
    assert not AccessToken.objects.filter(application=flow.application).exists()
