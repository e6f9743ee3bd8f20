"""Fixtures for the gateway: tokens, in-process ASGI clients, and live server processes.

Rows must be committed (`transactional_db`) for the gateway to see them: it reads with its own
psycopg connections, in-process as in a server subprocess.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from django.conf import settings
from django.db import connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg.conninfo import make_conninfo

from infra import asyncdb
from mcp_gateway import auth
from memories import access
from tests.factories import AccessTokenFactory, MemoryFactory, UserFactory

ROOT = Path(__file__).resolve().parents[2]


def make_token(user, scope: str = "memory:read memory:write", **kwargs) -> str:
    """A DOT access token for `user`, issued for this MCP server (RFC 8707 resource)."""
    kwargs.setdefault("resource", [settings.MCP_RESOURCE_URL])
    raw = f"test-token-{uuid.uuid4().hex}"  # kept here: DOT may store only its checksum
    AccessTokenFactory(user=user, scope=scope, token=raw, **kwargs)
    return raw


@dataclass
class Seeded:
    tenant: object
    other_tenant: object
    token: str
    other_token: str
    memory: object
    foreign_memory: object


@pytest.fixture
def seeded(transactional_db) -> Seeded:
    tenant, other = UserFactory(), UserFactory()
    return Seeded(
        tenant=tenant,
        other_tenant=other,
        token=make_token(tenant),
        other_token=make_token(other),
        memory=MemoryFactory(
            owner=tenant,
            content="Décision: ship the resource ✓",
            topic="gateway",
            project="threengram",
            tags=["mcp", "cache"],
        ),
        foreign_memory=MemoryFactory(owner=other, content="someone else's secret"),
    )


def readable_check_params(statement: str, params: tuple | None) -> tuple | None:
    """The token check's columns go as comma-separated texts (mcp_gateway.auth): as lists here,
    request numbers as ints; so do the ids of the gate's read (memories.access), as UUIDs."""
    if statement == f"EXECUTE {access.READ_OWNED}":
        owner_id, memory_ids = params
        return owner_id, [uuid.UUID(memory_id) for memory_id in memory_ids.split(",")]
    if statement != f"EXECUTE {auth.CHECK_TOKENS}":
        return params
    numbers, checksums, *rest = params
    return ([int(number) for number in numbers.split(",")], checksums.split(","), *rest)


@pytest.fixture
def sent_statements(monkeypatch) -> list[tuple[str, object]]:
    """Every statement the gateway's native connections (infra.asyncdb) send: (sql, params)
    of each `execute`, and ("EXECUTE name", arguments) of each prepared statement."""
    sent: list[tuple[str, object]] = []
    real_connection, real_execute_prepared = asyncdb.connection, asyncdb.execute_prepared

    @asynccontextmanager
    async def recording_connection():
        async with real_connection() as conn:
            original = conn.execute

            async def execute(sql, params=None):
                sent.append((sql, params))
                return await original(sql, params)

            conn.execute = execute
            yield conn

    async def recording_execute_prepared(conn, calls):
        for name, arguments in calls:
            sent.append((f"EXECUTE {name}", readable_check_params(f"EXECUTE {name}", arguments)))
        return await real_execute_prepared(conn, calls)

    monkeypatch.setattr(asyncdb, "connection", recording_connection)
    monkeypatch.setattr(asyncdb, "execute_prepared", recording_execute_prepared)
    return sent


@dataclass
class Recorder:
    """Records the Mcp-Method header (or "-") of every HTTP request a client sends, and the
    decoded JSON-RPC `result` of every JSON reply (to check what is on the wire)."""

    methods: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)

    async def hook(self, request: httpx2.Request) -> None:
        self.methods.append(request.headers.get("mcp-method", "-"))

    async def response_hook(self, response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").startswith("application/json"):
            await response.aread()
            if not response.content:
                return
            body = response.json()
            if isinstance(body, dict) and "result" in body:
                self.results.append(body["result"])


@asynccontextmanager
async def mcp_client(
    url: str,
    token: str | None,
    *,
    mode: str = "auto",
    recorder: Recorder | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    hooks = {"request": [recorder.hook], "response": [recorder.response_hook]} if recorder else {}
    async with (
        httpx2.AsyncClient(
            headers=headers, event_hooks=hooks, transport=transport, timeout=30
        ) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def run_sync(function: Callable, *args, **kwargs):
    """Run ORM code from an async test, in a thread whose connection is closed afterwards."""

    def call():
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()

    return await asyncio.to_thread(call)


# --- in-process: the real ASGI application over httpx2's ASGI transport ----------------------
@pytest.fixture
async def asgi_app() -> AsyncIterator[object]:
    """A fresh router per test: an SDK session manager runs once, on one event loop. httpx2's
    ASGITransport sends no lifespan, like daphne, so the router starts itself on first use."""
    from mcp_gateway.asgi import GatewayRouter
    from threengram.asgi import django_application

    router = GatewayRouter(django_application)
    yield router
    await router.shutdown()


IN_PROCESS_URL = "http://localhost/mcp"


def asgi_transport(app) -> httpx2.ASGITransport:
    return httpx2.ASGITransport(app=app)


# --- live server processes -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def subprocess_database_url() -> str:
    params = asyncdb.connection_kwargs()
    params.pop("autocommit")
    return make_conninfo(**params)


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen
    log: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(command: list[str], port: int, log: Path, extra_env: dict | None = None):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "threengram.settings",
        "DATABASE_URL": subprocess_database_url(),
        # Live servers run behind row-level security, as the application role does in
        # production (memories/tenancy.py): every end-to-end test exercises the second wall.
        "DATABASE_APP_ROLE": "threengram_app",
        "SECRET_KEY": "live-test-secret-key-not-for-any-deployment",
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "ASYNC_DATABASE_POOL_MIN": "1",
        "ASYNC_DATABASE_POOL_MAX": "4",
        "LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    handle = log.open("wb")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError(f"server did not listen:\n{log.read_text(errors='replace')}")
    return LiveServer(url=f"http://localhost:{port}", process=process, log=log)


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(5)


@contextmanager
def running_daphne(port: int, extra_env: dict | None = None) -> Iterator[LiveServer]:
    """daphne serving threengram.asgi:application on `port`, as the README's run command does."""
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "threengram.asgi:application"],
            port,
            Path(folder) / "daphne.log",
            extra_env,
        )  # fmt: skip
        try:
            yield server
        finally:
            stop_server(server)


@pytest.fixture(scope="module")
def live_daphne(django_db_setup, django_db_blocker) -> Iterator[LiveServer]:
    with running_daphne(free_port()) as server:
        yield server


@pytest.fixture(scope="module")
def live_uvicorn(django_db_setup, django_db_blocker) -> Iterator[LiveServer]:
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(
            [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning", "threengram.asgi:application"],
            port,
            Path(folder) / "uvicorn.log",
        )  # fmt: skip
        try:
            yield server
        finally:
            stop_server(server)


# The whitelist of docs/design.md ("Why a long-lived cache is correct") for the body of
# threengram://memory/{id}. Changing this set is a design change (see mcp_gateway/resources.py), so
# both the in-process and the live tests pin it.
IMMUTABLE_BODY_KEYS = {
    "id",
    "content",
    "contentLength",
    "memoryType",
    "topic",
    "scope",
    "project",
    "recordedAt",
}
