"""A tenant's whole journey in a real browser, then staff auditing it in the admin.

sign up → authorize an MCP client through the consent page → see it under Connected apps →
revoke → its tokens are gone → browse memories → delete the account → its other app's token is
gone too → staff see the erasure record. A screenshot of every page goes to artifacts/browser/.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2 as httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from playwright.sync_api import expect

from accounts.erasure import erase_account
from accounts.models import ErasureRecord
from memories.models import ERASED, Memory
from memories.services import archive_memory, record_memory, revise_memory
from tests.factories import PASSWORD, ApplicationFactory, RefreshTokenFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.live]

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
CALLBACK = "http://127.0.0.1:33418/callback"
SCOPES = "memory:read memory:write"
ALLOW_BUTTON = "[name=allow]"  # DOT's consent form (AllowForm) submits "allow"


def _token_exists(raw: str) -> bool:
    return AccessToken.objects.filter(
        token_checksum=hashlib.sha256(raw.encode()).hexdigest()
    ).exists()


def _authorize_through_consent(page, daphne_server, screenshots, name: str) -> str:
    """The authorization-code + PKCE flow an MCP client runs (RFC 6749 §4.1, RFC 7636), with the
    human part done in the browser. Returns the access token."""
    application = ApplicationFactory(name=name, redirect_uris=CALLBACK)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": CALLBACK,
        "scope": SCOPES,
        "state": secrets.token_urlsafe(8),
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "resource": daphne_server("/mcp"),
    }
    redirects: list[str] = []
    # The client's loopback redirect URI: catch the browser's navigation there.
    page.route(
        "http://127.0.0.1:33418/**",
        lambda route: (redirects.append(route.request.url), route.fulfill(body="done"))[1],
    )
    page.goto(daphne_server(reverse("oauth2_provider:authorize")) + "?" + urlencode(query))
    expect(page.get_by_text(name)).to_be_visible()
    screenshots(page, "03-consent")
    page.locator(ALLOW_BUTTON).first.click()
    page.wait_for_url("http://127.0.0.1:33418/**")
    code = parse_qs(urlsplit(redirects[-1]).query)["code"][0]
    response = httpx.post(
        daphne_server(reverse("oauth2_provider:token")),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": application.client_id,
            "code_verifier": verifier,
            "resource": daphne_server("/mcp"),
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def test_tenant_journey_and_staff_audit(page, browser, daphne_server, screenshots, console_errors):
    # --- sign up ---------------------------------------------------------------------------
    page.goto(daphne_server("/signup/"))
    screenshots(page, "01-signup")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password:", exact=True).fill("a long and lovely passphrase")
    page.get_by_label("Password confirmation:").fill("a long and lovely passphrase")
    page.get_by_role("button", name="Create account").click()
    expect(page).to_have_url(daphne_server("/memories/"))
    expect(page.get_by_text("Welcome, ada.")).to_be_visible()
    screenshots(page, "02-memories-empty")
    ada = get_user_model().objects.get(username="ada")

    # --- two MCP clients get access ---------------------------------------------------------
    first_token = _authorize_through_consent(page, daphne_server, screenshots, "Claude Code")
    second_token = _authorize_through_consent(page, daphne_server, screenshots, "Notes agent")
    assert _token_exists(first_token) and _token_exists(second_token)

    # --- connected apps, revoke one ---------------------------------------------------------
    page.goto(daphne_server("/apps/"))
    expect(page.get_by_role("heading", name="Claude Code")).to_be_visible()
    expect(page.get_by_role("heading", name="Notes agent")).to_be_visible()
    expect(page.get_by_text("Read your memories").first).to_be_visible()
    screenshots(page, "04-connected-apps")
    # Revoking takes a second, deliberate step: the first click only asks.
    card = page.locator("li.card", has=page.get_by_role("heading", name="Claude Code"))
    expect(card.get_by_role("button", name="Revoke Claude Code")).to_be_hidden()
    card.get_by_text("Revoke…").click()
    expect(card.get_by_text("Disconnect Claude Code?")).to_be_visible()
    assert _token_exists(first_token)
    card.get_by_role("button", name="Revoke Claude Code").click()
    expect(page.get_by_text("Claude Code is disconnected")).to_be_visible()
    expect(page.get_by_role("heading", name="Claude Code")).to_have_count(0)
    screenshots(page, "05-app-revoked")
    assert not _token_exists(first_token)
    assert _token_exists(second_token)
    assert not RefreshToken.objects.filter(
        user=ada, application__name="Claude Code", revoked__isnull=True
    ).exists()

    # --- memories: browse, search, history ----------------------------------------------------
    first = record_memory(owner=ada, memory_type="decision", topic="database", content="Use SQLite")
    revise_memory(owner=ada, predecessor_id=first.id, content="Use PostgreSQL 18")
    lunch = record_memory(owner=ada, memory_type="note", topic="lunch", content="Pizza on Friday")
    archive_memory(owner=ada, memory_id=lunch.id)
    record_memory(owner=ada, memory_type="commitment", topic="release", content="Ship v1 by Friday")
    page.goto(daphne_server("/memories/"))
    expect(page.get_by_text("Use PostgreSQL 18")).to_be_visible()
    expect(page.get_by_text("Use SQLite")).to_have_count(0)
    page.get_by_label("Include superseded and archived").check()
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Use SQLite")).to_be_visible()
    expect(page.get_by_text("Pizza on Friday")).to_be_visible()
    screenshots(page, "06-memories-all")
    page.get_by_label("Search text, topic or tag").fill("postgresql")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Pizza on Friday")).to_have_count(0)
    page.get_by_role("link", name="Full history").first.click()
    expect(page.get_by_role("heading", name="History")).to_be_visible()
    expect(page.get_by_text("This memory")).to_be_visible()
    screenshots(page, "07-memory-history")

    # --- export -------------------------------------------------------------------------------
    page.goto(daphne_server("/account/"))
    screenshots(page, "08-account")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download my memories (JSON)").click()
    exported = download_info.value.path().read_text()
    assert '"Use SQLite"' in exported and '"memory_count": 4' in exported

    # --- delete the account ---------------------------------------------------------------------
    page.get_by_role("link", name="Delete my account…").click()
    expect(page.get_by_text("There is no undo.")).to_be_visible()
    screenshots(page, "09-delete-account")
    page.get_by_label("Your password:").fill("not it")
    page.get_by_role("button", name="Erase my account for good").click()
    expect(page.get_by_text("That is not your password. Nothing was deleted.")).to_be_visible()
    page.get_by_label("Your password:").fill("a long and lovely passphrase")
    page.get_by_role("button", name="Erase my account for good").click()
    expect(page.get_by_role("heading", name="Your account is deleted")).to_be_visible()
    screenshots(page, "10-account-deleted")
    assert not _token_exists(second_token)
    assert set(Memory.objects.filter(owner=ada).values_list("content", flat=True)) == {ERASED}
    page.goto(daphne_server("/memories/"))
    expect(page).to_have_url(re.compile(r"/login/"))
    assert console_errors == []

    # --- staff audit the erasure in the admin -------------------------------------------------
    staff = UserFactory(username="auditor", is_staff=True, is_superuser=True)
    staff_page = browser.new_page()
    staff_page.goto(daphne_server("/admin/login/"))
    staff_page.get_by_label("Username").fill(staff.username)
    staff_page.get_by_label("Password:").fill(PASSWORD)
    staff_page.get_by_role("button", name="Log in").click()
    expect(staff_page.get_by_text("Site administration")).to_be_visible()
    staff_page.goto(daphne_server("/admin/accounts/erasurerecord/"))
    record = ErasureRecord.objects.get(account=ada)
    row = staff_page.get_by_role("row").filter(has_text=str(ada.pk))
    expect(row).to_contain_text("the account holder")
    screenshots(staff_page, "11-admin-erasure-records")
    staff_page.goto(daphne_server(f"/admin/accounts/erasurerecord/{record.pk}/change/"))
    expect(staff_page.get_by_text("oauth_access_tokens")).to_be_visible()
    screenshots(staff_page, "12-admin-erasure-record")
    staff_page.close()


def test_pages_read_well_on_a_phone(browser, daphne_server, screenshots):
    tenant = UserFactory(username="grace")
    record_memory(
        owner=tenant,
        memory_type="preference",
        topic="code review",
        content="Prefers small pull requests with a clear description of why, not only what. " * 3,
    )
    # What agents and clients write: words longer than a phone is wide (a path, a URL, an
    # identifier) must wrap, not push the page sideways.
    long_one = record_memory(
        owner=tenant,
        memory_type="fact",
        topic="src/accounts/management/commands/erase_account.py::EraseAccountCommand.handle",
        content="The command asks to type the username.",
        project="github.com/example-org/threengram-infrastructure-deployments",
        tags=["x" * 64],
    )
    RefreshTokenFactory(user=tenant, application=ApplicationFactory(name="Phone agent"))
    RefreshTokenFactory(
        user=tenant,
        application=ApplicationFactory(name="com.example.supercalifragilistic.mcp-client-agent"),
    )
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.goto(daphne_server("/login/"))
    screenshots(page, "phone-01-login")
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password:").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(daphne_server("/memories/"))
    # The first Tab stop is the skip link, visible when focused, and it moves focus to main.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to main content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    for path, name in (
        ("/memories/", "phone-02-memories"),
        ("/apps/", "phone-03-connected-apps"),
        ("/account/", "phone-04-account"),
        ("/account/delete/", "phone-05-delete-account"),
        (f"/memories/{long_one.id}/", "phone-06-memory"),
    ):
        page.goto(daphne_server(path))
        # Against the layout viewport: a mobile browser widens window.innerWidth to fit
        # whatever overflows, so only clientWidth shows the sideways scroll.
        fits = page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        assert fits, f"{path} scrolls sideways on a phone"
        screenshots(page, name)
    context.close()


def test_mcp_refuses_revoked_and_erased_tokens(page, daphne_server):
    tenant = UserFactory()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "browser-test", "version": "1"},
        },
    }

    def call_mcp(token: str) -> int:
        return httpx.post(
            daphne_server("/mcp"),
            json=initialize,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
            },
        ).status_code

    refresh = RefreshTokenFactory(
        user=tenant,
        application=ApplicationFactory(name="Doomed client"),
        access_token__resource=[daphne_server("/mcp")],
    )
    token = refresh.access_token.token
    assert call_mcp(token) != 401, "a live token must authenticate at /mcp"
    page.goto(daphne_server("/login/"))
    page.get_by_label("Username").fill(tenant.username)
    page.get_by_label("Password:").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(daphne_server("/memories/"))
    page.goto(daphne_server("/apps/"))
    page.get_by_text("Revoke…").click()
    page.get_by_role("button", name="Revoke Doomed client").click()
    expect(page.get_by_text("Doomed client is disconnected")).to_be_visible()
    assert call_mcp(token) == 401

    survivor = RefreshTokenFactory(
        user=tenant, access_token__resource=[daphne_server("/mcp")]
    ).access_token.token
    assert call_mcp(survivor) != 401
    erase_account(user=tenant)
    assert call_mcp(survivor) == 401
