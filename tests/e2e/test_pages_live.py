"""Account pages through a real daphne process, as `dev.py serve` runs them: what only a real
HTTP server shows (a HEAD answered on the wire, the cache headers a browser sees)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.e2e.conftest import logged_in, server_user
from tests.factories import MemoryFactory
from tests.mcp_gateway.conftest import LiveServer, free_port, running_daphne

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def serve_daphne(django_db_setup, django_db_blocker) -> Iterator[LiveServer]:
    """daphne on plain http, as `dev.py serve` runs it."""
    port = free_port()
    insecure_cookies = {"SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0"}
    with running_daphne(
        port, {"PUBLIC_BASE_URL": f"http://localhost:{port}", **insecure_cookies}
    ) as server:
        yield server


def test_a_head_of_the_export_gets_no_body_on_the_connection(serve_daphne):
    """daphne sends all but the first part of a streamed body to a HEAD request: the client
    would read it as the start of its next response."""
    path = "/memories/export.json"
    user = server_user()
    for number in range(25):
        MemoryFactory(owner=user, content=f"{number} " + "exported " * 200)
    session = logged_in(serve_daphne.url, user).cookies["sessionid"]
    parts = urlsplit(serve_daphne.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as connection:
        connection.sendall(
            f"HEAD {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Cookie: sessionid={session}\r\n\r\n".encode()
        )
        received = b""
        connection.settimeout(1.0)
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except TimeoutError:
            pass  # the connection stays open for the next request: all was read
    head, _, after = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"no-store" in head.lower()
    assert after == b""


@pytest.mark.parametrize("path", ["/memories/", "/apps/", "/account/", "/account/delete/"])
def test_a_signed_in_persons_pages_are_never_stored(serve_daphne, path):
    http = logged_in(serve_daphne.url, server_user())
    response = http.get(path)
    assert response.status_code == 200
    cache_control = response.headers["cache-control"]
    assert "no-store" in cache_control and "private" in cache_control


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data",
        "multipart/form-data; boundary=",
        "multipart/form-data; boundary=" + "b" * 300,
    ],
)
@pytest.mark.parametrize(
    ("path", "answer"),
    [
        ("/oauth/token/", "invalid_request"),
        ("/oauth/revoke/", "invalid_request"),
        ("/login/", "page"),
        ("/signup/", "page"),
    ],
)
def test_a_multipart_body_without_a_usable_boundary_is_answered_saying_so(
    serve_daphne, path, answer, content_type
):
    """daphne (Twisted) parsed every multipart body itself, a copy the application never reads,
    and answered one it could not parse with a bare 400 and no body, before the site saw it."""
    response = httpx2.post(
        f"{serve_daphne.url}{path}", content=b"x", headers={"content-type": content_type}
    )
    assert response.status_code == 400
    if answer == "page":
        assert "This request could not be used" in response.text
        assert "boundary" in response.text
    else:
        assert response.json()["error"] == answer
        assert "boundary" in response.json()["error_description"]
