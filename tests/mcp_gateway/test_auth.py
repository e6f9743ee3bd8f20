"""The bearer-token check (mcp_gateway.auth): concurrent requests share one statement, and each
still gets the verdict of its own token and only its own tenant's memories."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager

import pytest
from django.utils import timezone

from mcp_gateway import auth
from memories.access import NIL_ID
from tests.factories import UserFactory
from tests.mcp_gateway.conftest import make_token, run_sync

pytestmark = pytest.mark.anyio


@pytest.fixture
def statements(monkeypatch) -> list[tuple[str, tuple]]:
    """Every statement the token check sends to PostgreSQL."""
    sent: list[tuple[str, tuple]] = []
    real_connection = auth.asyncdb.connection

    @asynccontextmanager
    async def recording_connection():
        async with real_connection() as conn:
            original = conn.execute

            async def execute(sql, params=None):
                sent.append((sql, params))
                return await original(sql, params)

            conn.execute = execute
            yield conn

    monkeypatch.setattr(auth.asyncdb, "connection", recording_connection)
    return sent


async def test_concurrent_checks_share_one_statement_and_keep_their_own_verdicts(
    seeded, statements
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

    assert len(statements) == 1
    assert mine.user_id == seeded.tenant.pk and set(mine_rows) == {seeded.memory.id}
    assert mine_rows[seeded.memory.id].content == seeded.memory.content
    assert cross.user_id == seeded.other_tenant.pk and cross_rows == {}
    assert refused == (None, {})
    assert lone.user_id == seeded.other_tenant.pk
    assert unknown is None


async def test_missing_foreign_and_malformed_ids_look_alike_in_a_batch(seeded, statements):
    results = await asyncio.gather(
        auth.authenticate_and_read(seeded.token, [uuid.uuid4()]),
        auth.authenticate_and_read(seeded.token, [seeded.foreign_memory.id]),
        auth.authenticate_and_read(seeded.token, [NIL_ID]),  # what a malformed id becomes
    )
    assert [rows for _, rows in results] == [{}, {}, {}]
    assert {principal.user_id for principal, _ in results} == {seeded.tenant.pk}


async def test_checks_in_separate_loop_turns_are_separate_statements(seeded, statements):
    first = await auth.authenticate(seeded.token)
    second = await auth.authenticate(seeded.other_token)
    assert (first.user_id, second.user_id) == (seeded.tenant.pk, seeded.other_tenant.pk)
    assert len(statements) == 2


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


async def test_a_cancelled_request_does_not_disturb_its_batch(seeded, statements):
    cancelled = asyncio.ensure_future(auth.authenticate(seeded.other_token))
    kept = asyncio.ensure_future(auth.authenticate(seeded.token))
    await asyncio.sleep(0)  # both are now waiting for the same statement
    cancelled.cancel()
    assert (await kept).user_id == seeded.tenant.pk
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert len(statements) == 1
