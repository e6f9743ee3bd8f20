"""The time limit of a Client ID Metadata Document's fetch holds for the whole document, on real
sockets: a local TLS server, which the address check is pointed at the way
tests/accounts/test_oauth_cimd.py points DNS at its fake."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
import time
import types

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from oauth2_provider import cimd
from oauth2_provider.models import get_application_model

from tests.accounts.oauth_helpers import REDIRECT_URI, authorize_params, authorize_url, pkce_pair

Application = get_application_model()
pytestmark = pytest.mark.django_db

HOST = "client.example.com"


def _certificate(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


class SlowDocumentServer:
    """An HTTPS server that sends its headers at once, then the document one byte every
    `interval` seconds: each read finishes well within any timeout, the whole does not."""

    def __init__(self, tmp_path, body: bytes, interval: float, slow_headers: bool = False) -> None:
        cert, key = _certificate(tmp_path)
        self.server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_context.load_cert_chain(cert, key)
        self.client_context = ssl.create_default_context(cafile=cert)
        self.body, self.interval, self.slow_headers = body, interval, slow_headers
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            try:
                with self.server_context.wrap_socket(raw, server_side=True) as tls:
                    tls.recv(65536)
                    if self.slow_headers:  # a header that does not end, a byte at a time
                        tls.sendall(b"HTTP/1.1 200 OK\r\nX-Pad: ")
                        ends = time.monotonic() + 10  # (a fetch without a deadline waits it out)
                        while time.monotonic() < ends and not self.stop.wait(self.interval):
                            tls.sendall(b"a")
                        return
                    tls.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(self.body)}\r\n\r\n".encode()
                    )
                    for byte in self.body:
                        if self.stop.wait(self.interval):
                            return
                        tls.sendall(bytes([byte]))
            except (OSError, ssl.SSLError):
                pass

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.listener.close()


@pytest.fixture
def slow_server(tmp_path, monkeypatch):
    client_id = None
    document = {
        "client_name": "Slow Agent",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    server = None

    def start(interval: float, slow_headers: bool = False):
        nonlocal server, client_id
        # The client_id names the server's port; the document must name it too.
        server = SlowDocumentServer(tmp_path, b"", interval, slow_headers)
        client_id = f"https://{HOST}:{server.port}/client.json"
        body = json.dumps({"client_id": client_id, **document}).encode()
        server.body = body
        return client_id, body

    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != HOST:  # urllib3 connecting to the checked address
            return real_getaddrinfo(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(cimd.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(cimd, "_ip_is_public", lambda ip: True)  # the simulated public address
    monkeypatch.setattr(
        cimd, "ssl", types.SimpleNamespace(create_default_context=lambda: server.client_context)
    )
    yield start
    if server is not None:
        server.close()


def _authorize(client, tenant, client_id):
    client.force_login(tenant)
    _, challenge = pkce_pair()
    params = authorize_params(Application(client_id=client_id), challenge)
    started = time.monotonic()
    response = client.get(authorize_url(params))
    return response, time.monotonic() - started


def test_control_a_document_sent_at_once_is_fetched(client, tenant, settings, slow_server):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}
    client_id, _ = slow_server(interval=0)
    response, _ = _authorize(client, tenant, client_id)
    assert response.status_code == 200, response.content
    assert Application.objects.filter(client_id=client_id).exists()


@pytest.mark.parametrize("endpoint", ["authorize", "anonymous token request"])
def test_a_document_sent_slowly_is_abandoned_at_the_time_limit(
    client, tenant, settings, slow_server, endpoint
):
    """docs/oauth.md: the metadata-document fetch is limited to 5 s (CIMD_FETCH_TIMEOUT_SECONDS;
    1 s here). A server that drips its document a byte at a time keeps every single read within
    the timeout, and holds the request (and one of the few fetch slots) far longer."""
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}
    client_id, body = slow_server(interval=0.02)  # 50 bytes a second: ~5 s for ~250 bytes
    assert 200 < len(body) < 16 * 1024
    if endpoint == "authorize":
        response, elapsed = _authorize(client, tenant, client_id)
    else:
        started = time.monotonic()
        response = client.post(
            "/oauth/token/",
            {
                "grant_type": "authorization_code",
                "code": "x",
                "client_id": client_id,
                "redirect_uri": REDIRECT_URI,
                "code_verifier": "v" * 43,
            },
        )
        elapsed = time.monotonic() - started
    # Within the limit (with slack for the machine), whatever the answer.
    assert elapsed < 3, (
        f"the fetch took {elapsed:.1f} s against a 1 s limit ({response.status_code})"
    )


def test_headers_sent_slowly_are_abandoned_at_the_time_limit(client, tenant, settings, slow_server):
    """urllib3's timeouts bound each read of the status line and headers, not all of them: a
    server dripping a header a byte at a time held an anonymous request for as long as it
    dripped."""
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}
    client_id, _ = slow_server(interval=0.05, slow_headers=True)
    response, elapsed = _authorize(client, tenant, client_id)
    assert response.status_code == 400  # an unknown client
    assert elapsed < 3, f"the fetch took {elapsed:.1f} s against a 1 s limit"
