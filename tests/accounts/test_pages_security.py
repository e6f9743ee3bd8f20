"""Every page under the strict Content-Security-Policy, with CSRF, framing and cookie protection."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.views import JUST_DELETED_SESSION_KEY
from tests.factories import PASSWORD, MemoryFactory

ANONYMOUS_PAGES = ["accounts:login", "accounts:signup", "accounts:account_deleted"]
SIGNED_IN_PAGES = [
    "accounts:memories",
    "accounts:connected_apps",
    "accounts:account",
    "accounts:password_change",
    "accounts:password_change_done",
    "accounts:delete_account",
]


def _pages(client, tenant):
    for name in ANONYMOUS_PAGES:
        if name == "accounts:account_deleted":
            # Shown only right after an erasure, which leaves this flag.
            session = client.session
            session[JUST_DELETED_SESSION_KEY] = True
            session.save()
        yield name, client.get(reverse(name))
    client.force_login(tenant)
    MemoryFactory(owner=tenant)
    for name in SIGNED_IN_PAGES:
        yield name, client.get(reverse(name))


def test_every_page_is_served_under_the_csp_without_inline_code(client, tenant):
    for name, response in _pages(client, tenant):
        assert response.status_code == 200, name
        csp = response["Content-Security-Policy"]
        # (Django adds the nonce only to responses whose templates used it.)
        assert "script-src 'self'" in csp and "style-src 'self';" in csp, name
        assert "unsafe-inline" not in csp, name
        assert "frame-ancestors 'none'" in csp, name
        assert response["X-Frame-Options"] == "DENY", name
        html = response.text
        # No inline script or style: CSP would block them, so they must not exist at all.
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), name
        assert "<style" not in html and " style=" not in html, name
        assert not re.search(r"\son[a-z]+=", html), name  # no inline event handlers
        assert '<link rel="stylesheet" href="/static/css/site.css">' in html, name


def test_every_form_carries_a_csrf_token(client, tenant):
    for name, response in _pages(client, tenant):
        html = response.text
        posts = len(re.findall(r'<form[^>]*method="post"', html))
        assert html.count('name="csrfmiddlewaretoken"') == posts, name


@pytest.mark.django_db
def test_posts_without_a_csrf_token_are_refused():
    client = Client(enforce_csrf_checks=True)
    for name in ("accounts:login", "accounts:signup"):
        assert client.post(reverse(name), {"username": "x", "password": "y"}).status_code == 403


def test_session_and_csrf_cookies_are_secure_httponly_and_samesite(tenant):
    client = Client()
    client.get(reverse("accounts:login"))
    csrf = client.cookies["csrftoken"]
    assert csrf["secure"] and csrf["httponly"] and csrf["samesite"] == "Lax"
    client.post(reverse("accounts:login"), {"username": tenant.username, "password": PASSWORD})
    session = client.cookies["sessionid"]
    assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"


def test_the_stylesheet_is_served(client, db):
    response = client.get("/static/css/site.css")
    assert response.status_code == 200
    assert ":focus-visible" in b"".join(response.streaming_content).decode()


@pytest.mark.parametrize("method", ["get", "head"])
def test_the_default_icon_address_leads_to_the_icon_the_pages_link(client, db, method):
    """A browser asks for /favicon.ico whatever the page links."""
    response = getattr(client, method)("/favicon.ico", follow=True)
    assert response.redirect_chain == [("/static/favicon.svg", 302)]
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
