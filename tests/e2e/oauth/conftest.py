"""A live daphne process on the pytest-django test database, and a scripted "browser" that logs in
and answers the consent page the way a person would."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from django.conf import settings
from django.shortcuts import resolve_url

from tests.factories import PASSWORD
from tests.mcp_gateway.conftest import free_port, subprocess_database_url

ROOT = Path(__file__).resolve().parents[3]
DAPHNE = [sys.executable, "-m", "daphne", "-b", "127.0.0.1"]

# Wherever the account pages put the log-in page.
LOGIN_PATH = resolve_url(settings.LOGIN_URL)


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen
    env: dict[str, str] = field(repr=False)


@pytest.fixture(scope="session")
def oauth_server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        database_url = subprocess_database_url()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "threengram.test_settings",
        "DATABASE_URL": database_url,
        # Live servers run behind row-level security, as the application role does in
        # production (memories/tenancy.py): every end-to-end test exercises the second wall.
        "DATABASE_APP_ROLE": "threengram_app",
        "PUBLIC_BASE_URL": url,
        "SECURE_SSL_REDIRECT": "0",
        # Plain http on loopback: the browser must get its session and CSRF cookies back.
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "DATABASE_POOL_MIN": "1",
        "DATABASE_POOL_MAX": "4",
    }
    process = subprocess.Popen(
        [*DAPHNE, "-p", str(port), "threengram.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx2.get(f"{url}/.well-known/oauth-authorization-server", timeout=1)
            break
        except httpx2.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(
                    "daphne did not start: " + process.stderr.read().decode(errors="replace")
                ) from None
            time.sleep(0.2)
    yield LiveServer(url=url, process=process, env=env)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


class Browser:
    """A person at a browser: logs in, reads the consent page, presses Allow (or Deny), and hands
    the redirect's code/state/iss to the client, as the OS would with a loopback callback."""

    def __init__(
        self, base_url: str, username: str, *, allow: bool = True, grants: tuple = ()
    ) -> None:
        self.base_url = base_url
        self.username = username
        self.allow = allow
        # The scope to choose on each consent page in turn; None or past the end: the one
        # preselected.
        self.grants = list(grants)
        self.http = httpx2.Client(base_url=base_url, follow_redirects=False, timeout=10)
        self.consent_pages: list[str] = []
        self.callback_urls: list[str] = []

    def close(self) -> None:
        self.http.close()

    def _log_in(self, login_url: str) -> None:
        fields = _hidden_fields(self.http.get(login_url).text)
        fields.update(username=self.username, password=PASSWORD)
        response = self.http.post(login_url, data=fields)
        assert response.status_code == 302, response.text

    def visit(self, authorization_url: str) -> str:
        """Follow the authorization URL to the client's redirect URI; return that URL."""
        response = self.http.get(authorization_url)
        if response.status_code == 302 and response.headers["location"].startswith(LOGIN_PATH):
            self._log_in(response.headers["location"])
            response = self.http.get(authorization_url)
        if response.status_code == 200:
            self.consent_pages.append(response.text)
            fields = _hidden_fields(response.text)
            grant = self.grants.pop(0) if self.grants else None
            if grant is not None:
                assert grant in _scope_choices(response.text), response.text
                fields["scope"] = grant
            if self.allow:
                fields["allow"] = "Authorize"
            response = self.http.post(authorization_url, data=fields)
        assert response.status_code == 302, response.text
        self.callback_urls.append(response.headers["location"])
        return response.headers["location"]


def _hidden_fields(page: str) -> dict[str, str]:
    """Hidden fields and checked choices: what a browser submits when nothing is changed."""
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    found += re.findall(r'<input type="radio" name="([^"]+)" value="([^"]*)" checked>', page)
    return {name: html.unescape(value) for name, value in found}


def _scope_choices(page: str) -> list[str]:
    return re.findall(r'<input type="radio" name="scope" value="([^"]*)"', page)


@pytest.fixture
def make_browser(oauth_server):
    browsers: list[Browser] = []

    def make(username: str, *, allow: bool = True, grants: tuple = ()) -> Browser:
        browser = Browser(oauth_server.url, username, allow=allow, grants=grants)
        browsers.append(browser)
        return browser

    yield make
    for browser in browsers:
        browser.close()
