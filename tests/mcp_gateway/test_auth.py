"""The bearer-token check (mcp_gateway.auth): concurrent requests share one round trip, and each
still gets the verdict of its own token and only its own tenant's memories — as the owner role,
and as the application role under row-level security (memories/tenancy.py)."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager

import pytest
from django.test import override_settings
from django.utils import timezone

from mcp_gateway import auth
from memories import tenancy
from memories.access import NIL_ID
from tests.factories import UserFactory
from tests.mcp_gateway.conftest import make_token, run_sync

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["owner role", "app role under RLS"])
def database_role(request, seeded) -> str:
    """The role the gateway's connections act as (after `seeded` wrote its rows as the owner)."""
    role = tenancy.APP_ROLE if request.param == "app role under RLS" else ""
    with override_settings(DATABASE_APP_ROLE=role):
        yield role


@pytest.fixture
def connections_opened(monkeypatch) -> list[int]:
    """How many connections (round trips, here) the token check used."""
    opened: list[int] = []
    real_connection = auth.asyncdb.connection

    @asynccontextmanager
    async def counting_connection():
        opened.append(1)
        async with real_connection() as conn:
            yield conn

    monkeypatch.setattr(auth.asyncdb, "connection", counting_connection)
    return opened


async def test_concurrent_checks_share_one_round_trip_and_keep_their_own_verdicts(
    seeded, database_role, connections_opened
):
    expired = await run_sync(
        lambda: make_token(UserFactory(), expires=timezone.now() - timezone.timedelta(seconds=1))
    )

    (mine, mine_rows), (cross, cross_rows), refused, lone, unknown = await asyncio.gather(
        auth.authenticate_and_read(seeded.token, [seeded.memory.id]),
        # A valid token asking for another tenant's id, in the same batch as that tenant's
        # own request: it gets nothing, as if the id did not exist.
        auth.authenticate_and_read(seeded.other_token, [seeded.memory.id]),
        auth.authenticate_and_read(expired, [seeded.memory.id]),
        auth.authenticate(seeded.other_token),
        auth.authenticate("not-a-real-token"),
    )

    assert len(connections_opened) == 1
    assert mine.user_id == seeded.tenant.pk and set(mine_rows) == {seeded.memory.id}
    assert mine_rows[seeded.memory.id].content == seeded.memory.content
    assert cross.user_id == seeded.other_tenant.pk and cross_rows == {}
    assert refused == (None, {})
    assert lone.user_id == seeded.other_tenant.pk
    assert unknown is None


async def test_under_rls_the_check_reads_nothing_without_its_tenant(seeded):
    """The second wall is really up: the fused statement alone, as the application role with no
    tenant set, still accepts the token but reads none of its owner's memories."""
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        async with auth.asyncdb.connection() as conn:
            arrays = auth._TokenChecks._arrays(
                [(0, auth._Check(auth._checksum(seeded.token), [seeded.memory.id]))]
            )
            (rows,) = await auth.asyncdb.execute_prepared(
                conn, [(auth.CHECK_TOKENS, (*arrays, auth.settings.MCP_RESOURCE_URL))]
            )
    ((_n, user_id, *_token, memory_id),) = [row[:5] for row in rows]
    assert user_id == seeded.tenant.pk and memory_id is None


async def test_concurrent_checks_share_one_statement(seeded, sent_statements):
    """As the owner role (no RLS), the whole batch is a single statement."""
    await asyncio.gather(
        auth.authenticate_and_read(seeded.token, [seeded.memory.id]),
        auth.authenticate_and_read(seeded.other_token, [seeded.foreign_memory.id]),
        auth.authenticate(seeded.token),
    )
    ((_sql, (numbers, _checksums, memory_ids, _audience)),) = sent_statements
    assert numbers == [0, 1, 2]
    assert memory_ids == [seeded.memory.id, seeded.foreign_memory.id, None]


async def test_missing_foreign_and_malformed_ids_look_alike_in_a_batch(seeded, sent_statements):
    results = await asyncio.gather(
        auth.authenticate_and_read(seeded.token, [uuid.uuid4()]),
        auth.authenticate_and_read(seeded.token, [seeded.foreign_memory.id]),
        auth.authenticate_and_read(seeded.token, [NIL_ID]),  # what a malformed id becomes
    )
    assert [rows for _, rows in results] == [{}, {}, {}]
    assert {principal.user_id for principal, _ in results} == {seeded.tenant.pk}


async def test_checks_in_separate_loop_turns_are_separate_statements(seeded, sent_statements):
    first = await auth.authenticate(seeded.token)
    second = await auth.authenticate(seeded.other_token)
    assert (first.user_id, second.user_id) == (seeded.tenant.pk, seeded.other_tenant.pk)
    assert len(sent_statements) == 2


async def test_a_failed_statement_fails_every_request_of_the_batch(seeded, monkeypatch):
    @asynccontextmanager
    async def unreachable():
        raise OSError("connection refused")
        yield  # pragma: no cover

    monkeypatch.setattr(auth.asyncdb, "connection", unreachable)
    results = await asyncio.gather(
        auth.authenticate(seeded.token),
        auth.authenticate_and_read(seeded.other_token, [seeded.memory.id]),
        return_exceptions=True,
    )
    assert [type(result) for result in results] == [OSError, OSError]
    # Nothing is left behind: the next check, with the database back, works.
    monkeypatch.undo()
    assert (await auth.authenticate(seeded.token)).user_id == seeded.tenant.pk


async def test_a_cancelled_request_does_not_disturb_its_batch(seeded, sent_statements):
    cancelled = asyncio.ensure_future(auth.authenticate(seeded.other_token))
    kept = asyncio.ensure_future(auth.authenticate(seeded.token))
    await asyncio.sleep(0)  # both are now waiting for the same statement
    cancelled.cancel()
    assert (await kept).user_id == seeded.tenant.pk
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(sent_statements) == 1


async def test_under_rls_the_requests_of_one_token_share_its_statements(seeded, sent_statements):
    other_memory_id = seeded.foreign_memory.id
    with override_settings(DATABASE_APP_ROLE=tenancy.APP_ROLE):
        (_, first), (_, second), (_, foreign) = await asyncio.gather(
            auth.authenticate_and_read(seeded.token, [seeded.memory.id]),
            auth.authenticate_and_read(seeded.token, [uuid.uuid4()]),
            auth.authenticate_and_read(seeded.other_token, [other_memory_id]),
        )
    assert set(first) == {seeded.memory.id} and second == {}
    assert set(foreign) == {other_memory_id}
    # Two tokens: a tenant setting and a check for each, whatever the number of requests.
    kinds = [sql for sql, _ in sent_statements]
    assert kinds == [f"EXECUTE {auth.SET_TENANT_FROM_TOKEN}", f"EXECUTE {auth.CHECK_TOKENS}"] * 2
