"""The bearer-token check (mcp_gateway.auth): concurrent requests share one round trip, and each
still gets the verdict of its own token — as the owner role, and as the application role under
row-level security (memories/tenancy.py)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest
from django.test import override_settings
from django.utils import timezone

from mcp_gateway import auth
from memories import tenancy
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
    seeded, database_role, connections_opened, sent_statements
):
    expired = await run_sync(
        lambda: make_token(UserFactory(), expires=timezone.now() - timezone.timedelta(seconds=1))
    )

    mine, theirs, refused, unknown, mine_again = await asyncio.gather(
        auth.authenticate(seeded.token),
        auth.authenticate(seeded.other_token),
        auth.authenticate(expired),
        auth.authenticate("not-a-real-token"),
        auth.authenticate(seeded.token),
    )

    assert len(connections_opened) == 1
    # One statement for the whole batch, whatever the tenants and the role.
    ((sql, (numbers, _checksums, _audience)),) = sent_statements
    assert (sql, numbers) == (f"EXECUTE {auth.CHECK_TOKENS}", [0, 1, 2, 3, 4])
    assert mine.user_id == mine_again.user_id == seeded.tenant.pk
    assert theirs.user_id == seeded.other_tenant.pk
    assert refused is None and unknown is None


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
        auth.authenticate(seeded.other_token),
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
