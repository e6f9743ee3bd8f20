"""Client ID Metadata Documents: an HTTPS client_id is fetched on first sight, safely.

The network is outside the system, so DNS answers and the HTTPS server are simulated at the two
points DOT's fetcher touches (socket.getaddrinfo and urllib3's connection pool); everything from
the authorization request to the stored Application is real. What these tests pin down: every
resolved address is checked and the connection goes to a checked address, private/loopback/
link-local answers are refused, redirects are not followed, size, time and type are bounded,
and the document may ask only for what an MCP client needs (same policy as DCR)."""

from __future__ import annotations

import json
import socket

import pytest
from oauth2_provider import cimd
from oauth2_provider.models import get_application_model

from tests.accounts.oauth_helpers import REDIRECT_URI, authorize_params, authorize_url, pkce_pair

Application = get_application_model()

pytestmark = pytest.mark.django_db

CLIENT_ID = "https://client.example.com/mcp/client.json"
PUBLIC_IP = "93.184.215.14"


def _document(**overrides) -> dict:
    return {
        "client_id": CLIENT_ID,
        "client_name": "Example Agent",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **overrides,
    }


class FakeResponse:
    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        self.status = status
        self.headers = {"Content-Type": content_type, "Cache-Control": "max-age=600"}
        self._body = body

    def read(self, amount: int) -> bytes:
        return self._body[:amount]

    def read1(self, amount: int) -> bytes:
        """What has arrived, as a socket gives it: here all of it, then nothing."""
        arrived, self._body = self._body[:amount], self._body[amount:]
        return arrived

    def release_conn(self) -> None:
        pass


class FakeInternet:
    """DNS answers and one HTTPS document, recording every connection attempt."""

    def __init__(self) -> None:
        self.addresses = [PUBLIC_IP]
        self.status = 200
        self.body = json.dumps(_document()).encode()
        self.content_type = "application/json"
        self.connections: list[dict] = []

    def getaddrinfo(self, host, port, *args, **kwargs):
        assert host == "client.example.com"
        return [
            (
                socket.AF_INET6 if ":" in ip else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (ip, port),
            )
            for ip in self.addresses
        ]

    def pool(self, host, port, timeout, server_hostname, **kwargs):
        internet = self

        class Pool:
            def urlopen(self, method, path, headers, redirect, preload_content):
                internet.connections.append(
                    {
                        "ip": host,
                        "port": port,
                        "server_hostname": server_hostname,
                        "host_header": headers["Host"],
                        "path": path,
                        "redirect": redirect,
                        "timeout": timeout.total,
                    }
                )
                return FakeResponse(internet.status, internet.body, internet.content_type)

            def close(self):
                pass

        return Pool()


@pytest.fixture
def internet(monkeypatch):
    fake = FakeInternet()
    monkeypatch.setattr(cimd.socket, "getaddrinfo", fake.getaddrinfo)
    monkeypatch.setattr(cimd.urllib3, "HTTPSConnectionPool", fake.pool)
    return fake


def _authorize(client, client_id=CLIENT_ID):
    _, challenge = pkce_pair()
    params = authorize_params(Application(client_id=client_id), challenge)
    return client.get(authorize_url(params))


def test_first_sight_fetches_the_document_from_a_checked_address(signed_in, internet):
    response = _authorize(signed_in)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Example Agent" in page and CLIENT_ID in page
    assert "runs on your own computer" in page
    application = Application.objects.get(client_id=CLIENT_ID)
    assert application.registration_source == "cimd"
    assert application.client_type == "public"
    [connection] = internet.connections
    # The connection goes to the address that was checked, with SNI/Host for the real name.
    assert connection["ip"] == PUBLIC_IP
    assert connection["server_hostname"] == "client.example.com"
    assert connection["host_header"] == "client.example.com"
    assert connection["path"] == "/mcp/client.json"
    assert connection["redirect"] is False
    assert 0 < connection["timeout"] <= 5


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["10.1.2.3"],
        ["192.168.0.10"],
        ["169.254.169.254"],  # cloud metadata
        ["::1"],
        ["fd00::1"],
        ["fe80::1"],
        ["::ffff:10.0.0.1"],
        ["64:ff9b::a9fe:a9fe"],  # NAT64 of 169.254.169.254
        # Global to ipaddress on this Python; a local gateway may route them inward.
        ["64:ff9b:1::a9fe:a9fe"],  # local-use NAT64 (RFC 8215)
        ["::a00:1"],  # IPv4-compatible 10.0.0.1
        ["::ffff:0:a00:1"],  # SIIT's IPv4-translated 10.0.0.1
        ["fec0::1"],  # site-local
        [PUBLIC_IP, "10.0.0.1"],  # one private answer spoils the host
    ],
)
def test_private_loopback_and_link_local_addresses_are_never_contacted(
    signed_in, internet, addresses
):
    internet.addresses = addresses
    response = _authorize(signed_in)
    assert response.status_code == 400  # unknown client: no redirect to an unverified URI
    assert internet.connections == []
    assert not Application.objects.filter(client_id=CLIENT_ID).exists()


@pytest.mark.parametrize(
    ("status", "body", "content_type"),
    [
        (302, b"", "text/html"),  # redirects are not followed
        (200, b"<html>", "text/html"),
        (200, json.dumps(_document(client_name="x" * 20_000)).encode(), "application/json"),
        (200, json.dumps(_document(client_id="https://other.example.com/c.json")).encode(), None),
        (200, json.dumps(_document(redirect_uris=["http://evil.example.com/cb"])).encode(), None),
        (200, json.dumps(_document(grant_types=["implicit"])).encode(), None),
        (
            200,
            json.dumps(_document(token_endpoint_auth_method="client_secret_post")).encode(),
            None,
        ),
    ],
    ids=[
        "redirect",
        "not-json",
        "over-16KiB",
        "client-id-mismatch",
        "http-non-loopback-redirect-uri",
        "implicit-grant",
        "confidential",
    ],
)
def test_bad_documents_register_nothing(signed_in, internet, status, body, content_type):
    internet.status = status
    internet.body = body
    internet.content_type = content_type or "application/json"
    assert _authorize(signed_in).status_code == 400
    assert len(internet.connections) == 1
    assert not Application.objects.filter(client_id=CLIENT_ID).exists()


@pytest.mark.parametrize(
    "client_id",
    [
        "https://user@client.example.com/c.json",
        "https://client.example.com/a/../c.json",
    ],
)
def test_malformed_client_id_urls_are_not_fetched(signed_in, internet, client_id):
    assert _authorize(signed_in, client_id=client_id).status_code == 400
    assert internet.connections == []
    assert Application.objects.count() == 0
