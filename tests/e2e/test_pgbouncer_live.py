"""A server process behind PgBouncer in transaction mode, configured by deploy/pgbouncer.ini with
one server connection: the tools, the web pages, the OAuth flow and erasure work, and tenants whose
requests take turns on that one PostgreSQL session each see all of their own rows and none of
another's (the role and tenant of row-level security are set inside each transaction,
DATABASE_TRANSACTION_POOLER)."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

import anyio
import httpx2
import pytest
from django.urls import reverse

from accounts.models import ErasureRecord
from infra import asyncdb
from memories.models import Memory
from scripts import scale_out
from tests.e2e.conftest import logged_in, server_user
from tests.e2e.oauth.conftest import Browser
from tests.e2e.oauth.test_sdk_flow import _provider, _token_row
from tests.factories import PASSWORD, MemoryFactory
from tests.mcp_gateway.conftest import (
    free_port,
    make_token,
    mcp_client,
    run_sync,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.anyio, pytest.mark.live]

PASSWORD_OF_POOLER_LOGIN = "pooler-test-password"


class Pooled:
    def __init__(self, server, bouncer: scale_out.PgBouncer, url: str) -> None:
        self.server = server
        self.bouncer = bouncer
        self.url = url
        self.mcp_url = f"{url}/mcp"

    def server_connections_opened(self) -> int:
        return self.bouncer.log().count("new connection to server")


@pytest.fixture(scope="module")
def pooled(django_db_setup, django_db_blocker):
    """One uvicorn process whose every database connection goes through PgBouncer (pool size
    1) to the test database."""
    with django_db_blocker.unblock():
        params = asyncdb.connection_kwargs()
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)  # PgBouncer runs as another user (scale_out.running_pgbouncer)
        with scale_out.running_pgbouncer(
            free_port(),
            params["host"],
            int(params.get("port", 5432)),
            Path(folder) / "pgbouncer",
            {params["user"]: PASSWORD_OF_POOLER_LOGIN},
            pool_size=1,
        ) as bouncer:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            env = {
                "DATABASE_URL": bouncer.conninfo(
                    params["dbname"], params["user"], PASSWORD_OF_POOLER_LOGIN
                ),
                "DATABASE_TRANSACTION_POOLER": "1",
                "PUBLIC_BASE_URL": url,
                "SESSION_COOKIE_SECURE": "0",
                "CSRF_COOKIE_SECURE": "0",
                "DATABASE_POOL_MIN": "1",
                "DATABASE_POOL_MAX": "3",
            }
            server = start_server(
                scale_out.uvicorn_command(port), port, Path(folder) / "uvicorn.log", env
            )
            try:
                yield Pooled(server, bouncer, url)
            finally:
                stop_server(server)


async def _tenant_rounds(client, own_ids: set[str], other_id: str, rounds: int) -> list[str]:
    """Searches, reads and writes of one tenant; what it saw that was not its own. Each write
    names a project, in another case every other turn: new to the tenant at first (its first
    spelling is settled under a lock of the write's transaction), then the one it has."""
    seen_foreign = []
    for number in range(rounds):
        found = await client.call_tool("search", {"query": "interleaved pooled", "limit": 20})
        hits = {hit["id"] for hit in found.structured_content["hits"]}
        seen_foreign += sorted(hits - own_ids)
        assert own_ids <= hits, (number, sorted(own_ids), sorted(hits))  # the right tenant in force
        fetched = await client.call_tool("get_memories", {"ids": [other_id, *sorted(own_ids)]})
        got = {memory["id"] for memory in fetched.structured_content["memories"]}
        seen_foreign += sorted(got - own_ids)
        assert got == own_ids
        read = await client.read_resource(f"threengram://memory/{sorted(own_ids)[0]}")
        assert json.loads(read.contents[0].text)["id"] == sorted(own_ids)[0]
        stored = await client.call_tool(
            "remember",
            {
                "memoryType": "note",
                "topic": "pool",
                "content": f"interleaved pooled, turn {number}",
                "project": ("Pooled", "POOLED")[number % 2],
            },
        )
        assert stored.structured_content["memory"]["project"] == "Pooled"
        own_ids.add(stored.structured_content["memory"]["id"])
    return seen_foreign


async def test_two_tenants_taking_turns_on_one_server_connection_see_only_their_own(pooled, seeded):
    tenants = (seeded.tenant, seeded.other_tenant)
    own = []
    for tenant in tenants:
        ids = await run_sync(
            lambda t=tenant: {
                str(MemoryFactory(owner=t, content=f"interleaved pooled {n} of {t.username}").id)
                for n in range(2)
            }
        )
        own.append(ids)
    tokens = [await run_sync(make_token, tenant, resource=[pooled.mcp_url]) for tenant in tenants]
    async with (
        mcp_client(pooled.mcp_url, tokens[0]) as first,
        mcp_client(pooled.mcp_url, tokens[1]) as second,
    ):
        foreign = await asyncio.gather(
            _tenant_rounds(first, own[0], sorted(own[1])[0], rounds=6),
            _tenant_rounds(second, own[1], sorted(own[0])[0], rounds=6),
        )
    assert foreign == [[], []]
    assert pooled.server_connections_opened() == 1  # every turn on the one session
    stored = await run_sync(
        lambda: {
            tenant.pk: set(
                map(str, Memory.objects.filter(owner=tenant).values_list("id", flat=True))
            )
            for tenant in tenants
        }
    )
    seeded_ids = (str(seeded.memory.id), str(seeded.foreign_memory.id))
    assert stored == {
        tenants[0].pk: own[0] | {seeded_ids[0]},
        tenants[1].pk: own[1] | {seeded_ids[1]},
    }


@pytest.mark.django_db(transaction=True)
def test_memory_pages_of_two_users_taking_turns(pooled):
    users = [server_user(), server_user()]
    memories = [MemoryFactory(owner=user, content=f"page of {user.username}") for user in users]
    clients = [logged_in(pooled.url, user) for user in users]
    try:
        for _ in range(3):
            for number, http in enumerate(clients):
                page = http.get(reverse("accounts:memories"))
                assert page.status_code == 200
                assert memories[number].content in page.text
                assert memories[1 - number].content not in page.text
                detail = http.get(reverse("accounts:memory_detail", args=[memories[number].id]))
                assert detail.status_code == 200 and memories[number].content in detail.text
    finally:
        for http in clients:
            http.close()


@pytest.mark.django_db(transaction=True)
def test_erasure_through_the_pooler(pooled):
    user, bystander = server_user(), server_user()
    mine = MemoryFactory(owner=user, content="to be erased")
    theirs = MemoryFactory(owner=bystander, content="stays")
    http = logged_in(pooled.url, user)
    try:
        page = http.get(reverse("accounts:delete_account"))
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        response = http.post(
            reverse("accounts:delete_account"),
            data={"csrfmiddlewaretoken": token, "password": PASSWORD},
        )
    finally:
        http.close()
    assert response.status_code == 302
    assert ErasureRecord.objects.filter(account=user).exists()
    assert Memory.objects.get(pk=mine.pk).content != "to be erased"
    assert Memory.objects.get(pk=theirs.pk).content == "stays"


@pytest.mark.django_db(transaction=True)
def test_sdk_oauth_flow_through_the_pooler(pooled):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    user = server_user()
    memory = MemoryFactory(owner=user, content="found through the pooler")
    browser = Browser(pooled.url, user.username)
    provider = _provider(pooled.url, browser)

    async def flow():
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(pooled.mcp_url, http_client=http)) as client,
        ):
            return await client.call_tool("search", {"query": "pooler"})

    try:
        found = anyio.run(flow)
    finally:
        browser.close()
    assert [hit["id"] for hit in found.structured_content["hits"]] == [str(memory.id)]
    assert _token_row(provider.storage_.tokens.access_token).user == user
