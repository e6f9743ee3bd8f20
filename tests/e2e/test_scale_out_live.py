"""Scale-out on real parts: nginx, configured by deploy/nginx.conf, in front of two uvicorn
processes on one PostgreSQL. The nginx address is the public origin (PUBLIC_BASE_URL). One SDK
client's requests are spread over both processes, and reads, cache hints, writes, the OAuth flow
and the log-in throttle (by the client address nginx saw) all work through it."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx2
import pytest

from memories.models import Memory
from scripts import scale_out
from tests.e2e.conftest import server_user
from tests.e2e.oauth.conftest import Browser
from tests.e2e.oauth.test_sdk_flow import _provider, _token_row
from tests.factories import PASSWORD
from tests.mcp_gateway.conftest import (
    Recorder,
    free_port,
    make_token,
    mcp_client,
    run_sync,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.anyio, pytest.mark.live]

FAILURES_PER_ADDRESS = 3


class Stack:
    def __init__(self, nginx: scale_out.Nginx, backends: list) -> None:
        self.nginx = nginx
        self.backends = backends
        self.url = nginx.url

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def upstreams_since(self, line: int, expected: int) -> list[str]:
        """The upstream address of each request nginx logged after access-log line `line`, once
        `expected` such lines are there (or after 5 s). nginx writes a request's line when it
        is done with the connection's request, which may be after the client has the response
        (a refused body is drained first), so reading the log at once may miss it."""
        deadline = time.monotonic() + 5
        entries = self.nginx.access_log()[line:]
        while len(entries) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
            entries = self.nginx.access_log()[line:]
        return [entry.split()[-2] for entry in entries]


@pytest.fixture(scope="module")
def behind_nginx(django_db_setup, django_db_blocker):
    """deploy/nginx.conf in front of two uvicorn processes, the nginx origin as public origin."""
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        public = f"http://127.0.0.1:{port}"
        env = {
            "PUBLIC_BASE_URL": public,
            # The throttle counts in a cache every process shares (docs/operations.md).
            "CACHE_URL": f"filecache://{folder}/cache",
            "LOGIN_FAILURES_PER_IP": str(FAILURES_PER_ADDRESS),
            # Plain http on loopback: the log-in's session and CSRF cookies must come back.
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
        }
        backends = []
        try:
            for number in range(2):
                backend_port = free_port()
                log = Path(folder) / f"uvicorn-{number}.log"
                command = scale_out.uvicorn_command(backend_port)
                backends.append(start_server(command, backend_port, log, env))
            with scale_out.running_nginx(
                port,
                [int(b.url.rsplit(":", 1)[1]) for b in backends],
                Path(folder) / "nginx",
            ) as nginx:
                yield Stack(nginx, backends)
        finally:
            for backend in backends:
                stop_server(backend)


def test_the_running_configuration_is_deploy_nginx_conf(behind_nginx):
    running = (behind_nginx.nginx.runtime_dir / "nginx.conf").read_text()
    template = (scale_out.DEPLOY / "nginx.conf").read_text()
    # Outside the filled-in fields (addresses, ports, paths) the text is the deploy/ file's.
    pattern = re.escape(template)
    pattern = re.sub(r"@@[A-Z_]+@@", lambda _: "(.+?)", pattern.replace(r"\@\@", "@@"))
    assert re.fullmatch(pattern, running, flags=re.DOTALL)
    assert "proxy_buffering off;" in running


async def test_sdk_client_reads_and_writes_through_nginx_on_both_processes(behind_nginx, seeded):
    token = await run_sync(make_token, seeded.tenant, resource=[behind_nginx.mcp_url])
    logged_before = len(behind_nginx.nginx.access_log())
    recorder = Recorder()
    uri = f"threengram://memory/{seeded.memory.id}"
    async with mcp_client(behind_nginx.mcp_url, token, recorder=recorder) as client:
        first = await client.read_resource(uri)
        sent_after_first = len(recorder.methods)
        second = await client.read_resource(uri)  # within the TTL: from the client's cache
        sent_after_second = len(recorder.methods)
        stored = await client.call_tool(
            "remember",
            {"memoryType": "decision", "topic": "scale-out", "content": "Two processes, one DB"},
        )
        memory_id = stored.structured_content["memory"]["id"]
        revised = await client.call_tool(
            "revise", {"predecessorId": memory_id, "content": "Two processes behind nginx"}
        )
        found = await client.call_tool("search", {"query": "processes nginx"})
        fetched = await client.call_tool("get_memories", {"ids": [memory_id]})
        read_new = await client.read_resource(
            f"threengram://memory/{revised.structured_content['memory']['id']}"
        )

    # Every HTTP request the client sent (the recorder saw each) is one access-log line.
    answered = Counter(behind_nginx.upstreams_since(logged_before, len(recorder.methods)))
    ports = {backend.url.rsplit(":", 1)[1] for backend in behind_nginx.backends}
    assert {address.rsplit(":", 1)[1] for address in answered} == ports  # both processes
    assert sum(answered.values()) >= 6 and min(answered.values()) >= 2
    assert sent_after_second == sent_after_first  # the second read never left the client
    assert first.contents[0].text == second.contents[0].text
    assert json.loads(first.contents[0].text)["content"] == seeded.memory.content
    read_hints = [r for r in recorder.results if "contents" in r]
    assert {(r["ttlMs"], r["cacheScope"]) for r in read_hints} == {(86_400_000, "private")}
    assert not stored.is_error and not revised.is_error and not fetched.is_error
    assert [hit["id"] for hit in found.structured_content["hits"]][:1] == [
        revised.structured_content["memory"]["id"]
    ]
    assert fetched.structured_content["memories"][0]["validTo"] is not None  # superseded
    assert json.loads(read_new.contents[0].text)["content"] == "Two processes behind nginx"
    rows = await run_sync(
        lambda: list(
            Memory.objects.filter(owner=seeded.tenant, topic="scale-out").values_list(
                "content", "valid_to"
            )
        )
    )
    assert sorted((content, valid_to is None) for content, valid_to in rows) == [
        ("Two processes behind nginx", True),
        ("Two processes, one DB", False),
    ]


@pytest.mark.django_db(transaction=True)
def test_sdk_oauth_flow_through_nginx(behind_nginx):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    user = server_user()
    browser = Browser(behind_nginx.url, user.username)
    provider = _provider(behind_nginx.url, browser)

    async def flow():
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(behind_nginx.mcp_url, http_client=http)) as client,
        ):
            return await client.call_tool("search", {"query": "nginx"})

    try:
        found = anyio.run(flow)
    finally:
        browser.close()
    assert not found.is_error and found.structured_content["hits"] == []
    access = _token_row(provider.storage_.tokens.access_token)
    # The token names the public origin, which is nginx's, not a process's own address.
    assert access.user == user and access.resource == [behind_nginx.mcp_url]
    assert provider.authorization_urls[0].startswith(f"{behind_nginx.url}/")


def _fail_log_in(url: str, source: str, username: str, headers: dict | None = None) -> int:
    """One wrong password from the loopback address `source`; the response status."""
    transport = httpx2.HTTPTransport(local_address=source)
    with httpx2.Client(base_url=url, transport=transport, timeout=10) as http:
        page = http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        response = http.post(
            "/login/",
            data={"csrfmiddlewaretoken": token, "username": username, "password": "wrong"},
            headers=headers or {},
        )
        return response.status_code


@pytest.mark.django_db(transaction=True)
def test_log_in_throttle_counts_the_address_nginx_saw(behind_nginx):
    user = server_user()
    url = behind_nginx.url
    statuses = [_fail_log_in(url, "127.0.0.2", user.username) for _ in range(FAILURES_PER_ADDRESS)]
    assert statuses == [200] * FAILURES_PER_ADDRESS  # refused, counted
    assert _fail_log_in(url, "127.0.0.2", user.username) == 429
    # A header naming another address does not get the client past its own count.
    forged = {"X-Forwarded-For": "203.0.113.9"}
    assert _fail_log_in(url, "127.0.0.2", user.username, forged) == 429
    # Another client of the same proxy is its own address, not nginx's 127.0.0.1.
    assert _fail_log_in(url, "127.0.0.3", user.username) == 200
    with httpx2.Client(base_url=url, timeout=10) as http:
        page = http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        ok = http.post(
            "/login/",
            data={"csrfmiddlewaretoken": token, "username": user.username, "password": PASSWORD},
        )
    assert ok.status_code == 302  # 127.0.0.1 itself was never throttled


def test_the_request_id_is_nginxs_not_the_clients(behind_nginx):
    chosen = {"X-Request-ID": "chosen-by-the-client-0001"}
    with httpx2.Client(base_url=behind_nginx.url, headers=chosen, timeout=10) as http:
        ids = [http.get("/version").headers["X-Request-ID"] for _ in range(2)]
        ids.append(http.post("/mcp", json={}).headers["X-Request-ID"])  # the gateway's too
    assert all(re.fullmatch("[0-9a-f]{32}", request_id) for request_id in ids), ids
    assert len(set(ids)) == 3


def test_nginx_refuses_a_body_over_the_apps_limit_before_it_reaches_a_process(behind_nginx):
    logged_before = len(behind_nginx.nginx.access_log())
    response = httpx2.post(
        behind_nginx.mcp_url,
        content=b"x" * (1024 * 1024 + 1),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 413
    assert behind_nginx.upstreams_since(logged_before, 1) == ["-"]  # no process was asked
