"""Per-user rate limit of /mcp: HTTP 429 with Retry-After once a user has used
up MCP_RATE_LIMIT requests in the window, checked after authentication and before any handler."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from django.core.cache import cache
from mcp.shared.exceptions import MCPError

from mcp_gateway.guards import InFlight
from memories.models import Memory
from tests.factories import UserFactory
from tests.mcp_gateway.conftest import (
    IN_PROCESS_URL,
    asgi_transport,
    free_port,
    make_token,
    mcp_client,
    run_sync,
    start_server,
    stop_server,
)
from tests.mcp_gateway.test_asgi import _mcp_post_scope, auth_header, legacy, modern

pytestmark = pytest.mark.anyio


@pytest.fixture
async def http(asgi_app):
    cache.clear()
    async with httpx2.AsyncClient(
        transport=asgi_transport(asgi_app), base_url="http://localhost"
    ) as c:
        yield c
    cache.clear()


async def _new_token() -> str:
    return await run_sync(lambda: make_token(UserFactory()))


def _remember(token: str, content: str):
    return modern(
        "tools/call",
        {
            "name": "remember",
            "arguments": {"content": content, "memoryType": "fact", "topic": "limits"},
        },
        name="remember",
        **auth_header(token),
    )


async def test_over_the_limit_is_429_with_retry_after_and_runs_nothing(
    http, transactional_db, settings
):
    settings.MCP_RATE_LIMIT = 3
    settings.MCP_RATE_LIMIT_WINDOW = 60
    tenant = await run_sync(UserFactory)
    # Two tokens of one user share one budget: the limit is per user, not per token.
    tokens = [await run_sync(make_token, tenant), await run_sync(make_token, tenant)]
    for attempt in range(3):
        headers, body = _remember(tokens[attempt % 2], f"note {attempt}")
        response = await http.post("/mcp", headers=headers, content=body)
        assert response.status_code == 200, response.text
    headers, body = _remember(tokens[1], "one too many")
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 429
    assert 0 < int(response.headers["retry-after"]) <= 60
    # A JSON-RPC error, which MCP clients pass on to the model: why, and for how long.
    error = response.json()["error"]
    assert error["message"].startswith(
        "too_many_requests: this account's calls reached 3 in 60 seconds; retry after "
    )
    assert error["data"]["retryAfter"] == int(response.headers["retry-after"])
    # The refused call did nothing.
    assert await run_sync(lambda: Memory.objects.filter(owner=tenant).count()) == 3

    # Another user is not affected.
    headers, body = _remember(await _new_token(), "someone else")
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_the_sdk_client_tells_the_model_why_and_how_long(asgi_app, seeded, settings):
    """The official client raises the server's own message, not "Server returned an error
    response"."""
    cache.clear()
    settings.MCP_RATE_LIMIT = 2
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, transport=asgi_transport(asgi_app)
    ) as client:  # initialize, then one call: the budget of 2 is spent
        await client.list_tools()
        with pytest.raises(MCPError, match=r"^too_many_requests: .* retry after \d+ seconds$"):
            await client.call_tool("describe_environment", {})
    cache.clear()


async def test_unauthenticated_requests_do_not_spend_a_users_budget(
    http, transactional_db, settings
):
    settings.MCP_RATE_LIMIT = 2
    token = await _new_token()
    for _ in range(5):
        headers, body = modern("tools/list", **auth_header("not-a-real-token"))
        assert (await http.post("/mcp", headers=headers, content=body)).status_code == 401
    headers, body = modern("tools/list", **auth_header(token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_zero_disables_the_limit(http, transactional_db, settings):
    settings.MCP_RATE_LIMIT = 0
    token = await _new_token()
    for _ in range(20):
        headers, body = modern("tools/list", **auth_header(token))
        assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_a_cache_that_cannot_answer_lets_requests_through_and_says_so(
    http, transactional_db, settings, monkeypatch, caplog
):
    """A shared cache (redis, memcached) that is down: the request is served uncounted, with a
    warning that names the error's type, instead of an exception out of the application."""
    from mcp_gateway import guards

    class UnreachableCache:
        def incr(self, *args, **kwargs):
            raise ConnectionError("Error 111 connecting to redis:6379. Connection refused.")

        add = set = get = incr

    monkeypatch.setattr(guards, "event_loop_counter_store", UnreachableCache)
    settings.MCP_RATE_LIMIT = 1
    token = await _new_token()
    for _ in range(2):
        headers, body = modern("tools/list", **auth_header(token))
        assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_gateway.guards"]
    assert warnings == ["MCP rate limit not counted: the cache failed (ConnectionError)"] * 2


@pytest.mark.live
def test_the_limit_holds_across_server_processes_with_a_shared_cache(transactional_db):
    """Two uvicorn processes on one shared cache (here Django's file cache; redis or memcached in
    production): a client alternating between them gets 429 after the limit, not twice it."""
    token = make_token(UserFactory())
    servers = []
    with tempfile.TemporaryDirectory() as folder:
        # An hour-long window: six requests cannot straddle a window boundary but by rare chance.
        env = {
            "CACHE_URL": f"filecache://{folder}/cache",
            "MCP_RATE_LIMIT": "4",
            "MCP_RATE_LIMIT_WINDOW": "3600",
        }
        try:
            for name in ("a", "b"):
                port = free_port()
                command = [
                    *(sys.executable, "-m", "uvicorn", "--host", "127.0.0.1"),
                    *("--port", str(port), "--log-level", "warning"),
                    "threengram.asgi:application",
                ]
                servers.append(start_server(command, port, Path(folder) / f"{name}.log", env))
            statuses = []
            for attempt in range(6):
                headers, body = modern("tools/list", **auth_header(token))
                server = servers[attempt % 2]
                response = httpx2.post(server.mcp_url, headers=headers, content=body, timeout=30)
                statuses.append(response.status_code)
            assert statuses == [200, 200, 200, 200, 429, 429], statuses
            assert "Traceback" not in servers[0].output() + servers[1].output()
        finally:
            for server in servers:
                stop_server(server)


# --- requests of one account at once (MCP_ACCOUNT_CONCURRENCY_MAX) ----------------------------
@dataclass
class Held:
    """A request of the account's, in flight until `release` lets its body arrive."""

    task: asyncio.Task
    release: asyncio.Event
    sent: list[dict]

    async def status(self) -> int:
        self.release.set()
        await self.task
        return self.sent[0]["status"]


def hold(asgi_app, token: str, label: str = "held") -> Held:
    headers, body = legacy("tools/list", **auth_header(token), **{"x-request-id": label})
    release, sent = asyncio.Event(), []

    async def receive() -> dict:
        await release.wait()
        return {"type": "http.request", "body": body.encode(), "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    task = asyncio.ensure_future(asgi_app(_mcp_post_scope(headers), receive, send))
    return Held(task, release, sent)


async def in_flight(asgi_app, user_id: int, count: int, waiting: int = 0) -> None:
    """Until `count` requests of `user_id` hold their slots and `waiting` more wait for one."""
    deadline = time.monotonic() + 10
    flight = asgi_app.in_flight
    while (flight.count(user_id), flight.waiting(user_id)) != (count, waiting):
        assert time.monotonic() < deadline, (flight.count(user_id), flight.waiting(user_id))
        await asyncio.sleep(0.005)


async def test_without_a_wait_past_the_accounts_requests_at_once_is_429_at_once_naming_the_limit(
    asgi_app, http, seeded, settings
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 2
    settings.MCP_ACCOUNT_QUEUE_WAIT_MS = 0
    held = [hold(asgi_app, seeded.token) for _ in range(2)]
    await in_flight(asgi_app, seeded.tenant.pk, 2)

    headers, body = legacy("tools/list", **auth_header(seeded.token))
    response = await http.post("/mcp", headers=headers, content=body)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == {
        "code": -32029,
        "message": "too_many_requests: at most 2 requests of this account at once "
        "(concurrency limit); retry after 1 second",
        "data": {"retryAfter": 1, "concurrencyLimit": 2},
    }
    # Another account is not held back by this one's requests.
    headers, body = legacy("tools/list", **auth_header(seeded.other_token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200

    assert [await request.status() for request in held] == [200, 200]
    assert asgi_app.in_flight.count(seeded.tenant.pk) == 0
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_a_request_cancelled_or_left_by_its_client_frees_its_slot(
    asgi_app, http, seeded, settings
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    cancelled = hold(asgi_app, seeded.token)
    await in_flight(asgi_app, seeded.tenant.pk, 1)
    cancelled.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled.task
    assert asgi_app.in_flight.count(seeded.tenant.pk) == 0

    headers, _ = legacy("tools/list", **auth_header(seeded.token))

    async def gone() -> dict:
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        pass

    await asgi_app(_mcp_post_scope(headers), gone, send)
    assert asgi_app.in_flight.count(seeded.tenant.pk) == 0
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200


async def test_a_request_refused_for_the_limit_at_once_spends_no_rate_budget(
    asgi_app, http, seeded, settings
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    settings.MCP_ACCOUNT_QUEUE_WAIT_MS = 0
    settings.MCP_RATE_LIMIT = 2
    held = hold(asgi_app, seeded.token)
    await in_flight(asgi_app, seeded.tenant.pk, 1)
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    for _ in range(3):
        response = await http.post("/mcp", headers=headers, content=body)
        assert "concurrency limit" in response.json()["error"]["message"]
    assert await held.status() == 200
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    response = await http.post("/mcp", headers=headers, content=body)
    assert "reached 2 in 60 seconds" in response.json()["error"]["message"]


async def test_zero_lifts_the_bound_on_requests_at_once(asgi_app, http, seeded, settings):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 0
    held = [hold(asgi_app, seeded.token) for _ in range(6)]
    await in_flight(asgi_app, seeded.tenant.pk, 6)
    headers, body = legacy("tools/list", **auth_header(seeded.token))
    assert (await http.post("/mcp", headers=headers, content=body)).status_code == 200
    assert [await request.status() for request in held] == [200] * 6


def test_the_bound_on_requests_at_once_is_small_by_default_and_those_past_it_wait():
    from django.conf import settings as defaults

    assert defaults.MCP_ACCOUNT_CONCURRENCY_MAX == 4
    assert defaults.MCP_ACCOUNT_QUEUE_WAIT_MS == 10_000
    assert defaults.MCP_ACCOUNT_QUEUE_MAX == 64


@dataclass
class Serving:
    """The requests the MCP server was handed: the most it served at once, and their
    X-Request-IDs in the order it was handed them."""

    now: int = 0
    most: int = 0
    order: list[str] = field(default_factory=list)


@pytest.fixture
def serving(asgi_app, monkeypatch) -> Serving:
    seen = Serving()
    serve = asgi_app._serve

    async def counted(scope, headers, receive, send):
        seen.now += 1
        seen.most = max(seen.most, seen.now)
        seen.order.append(headers[b"x-request-id"].decode())
        try:
            await serve(scope, headers, receive, send)
        finally:
            seen.now -= 1

    monkeypatch.setattr(asgi_app, "_serve", counted)
    return seen


async def test_requests_past_the_bound_wait_their_turn_in_arrival_order_and_all_are_served(
    asgi_app, seeded, settings, serving
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 2
    held = []
    for number in range(6):
        held.append(hold(asgi_app, seeded.token, str(number)))
        await in_flight(asgi_app, seeded.tenant.pk, min(number + 1, 2), max(number - 1, 0))

    assert [await request.status() for request in held] == [200] * 6
    assert serving.most == 2
    assert serving.order == ["0", "1", "2", "3", "4", "5"]
    assert asgi_app.in_flight.count(seeded.tenant.pk) == 0
    assert asgi_app.in_flight.accounts() == 0  # no entry kept for an idle account


async def test_a_request_that_waited_its_bound_is_429_naming_the_limit_and_the_wait(
    asgi_app, http, seeded, settings
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    settings.MCP_ACCOUNT_QUEUE_WAIT_MS = 50
    held = hold(asgi_app, seeded.token)
    await in_flight(asgi_app, seeded.tenant.pk, 1)

    headers, body = legacy("tools/list", **auth_header(seeded.token))
    started = time.monotonic()
    response = await http.post("/mcp", headers=headers, content=body)
    assert time.monotonic() - started >= 0.05
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == {
        "code": -32029,
        "message": "too_many_requests: at most 1 request of this account at once (concurrency "
        "limit); this one waited 0.05 seconds for a slot; retry after 1 second",
        "data": {"retryAfter": 1, "concurrencyLimit": 1},
    }
    assert asgi_app.in_flight.waiting(seeded.tenant.pk) == 0
    assert await held.status() == 200
    assert asgi_app.in_flight.accounts() == 0


async def test_past_the_requests_that_may_wait_is_429_at_once_and_other_accounts_are_served(
    asgi_app, http, seeded, settings
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    settings.MCP_ACCOUNT_QUEUE_MAX = 2
    held = [hold(asgi_app, seeded.token, str(number)) for number in range(3)]
    await in_flight(asgi_app, seeded.tenant.pk, 1, 2)

    headers, body = legacy("tools/list", **auth_header(seeded.token))
    response = await asyncio.wait_for(http.post("/mcp", headers=headers, content=body), 5)
    assert response.status_code == 429
    assert response.json()["error"]["message"] == (
        "too_many_requests: at most 1 request of this account at once (concurrency limit) and "
        "2 more are waiting, as many as may; retry after 1 second"
    )
    # Another account has slots of its own, and no place in this one's queue.
    headers, body = legacy("tools/list", **auth_header(seeded.other_token))
    response = await asyncio.wait_for(http.post("/mcp", headers=headers, content=body), 5)
    assert response.status_code == 200

    assert [await request.status() for request in held] == [200] * 3
    assert asgi_app.in_flight.accounts() == 0


async def test_a_cancelled_waiter_frees_no_slot_it_did_not_hold_and_leaves_the_queue(
    asgi_app, seeded, settings, serving
):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    first = hold(asgi_app, seeded.token, "first")
    await in_flight(asgi_app, seeded.tenant.pk, 1)
    cancelled = hold(asgi_app, seeded.token, "cancelled")
    await in_flight(asgi_app, seeded.tenant.pk, 1, 1)
    last = hold(asgi_app, seeded.token, "last")
    await in_flight(asgi_app, seeded.tenant.pk, 1, 2)

    cancelled.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled.task
    # Still one served (the first's slot is not freed by a waiter) and one waiting.
    assert asgi_app.in_flight.count(seeded.tenant.pk) == 1
    assert asgi_app.in_flight.waiting(seeded.tenant.pk) == 1
    assert serving.order == ["first"]

    assert await first.status() == 200
    assert await last.status() == 200
    assert serving.most == 1
    assert serving.order == ["first", "last"]
    assert asgi_app.in_flight.accounts() == 0


async def test_a_waiter_cancelled_as_it_is_handed_a_slot_hands_it_on(settings):
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    flight = InFlight()
    assert await flight.enter(1) is None
    cancelled = asyncio.ensure_future(flight.enter(1))
    after = asyncio.ensure_future(flight.enter(1))
    while flight.waiting(1) != 2:
        await asyncio.sleep(0)

    flight.leave(1)  # the slot is the cancelled waiter's now, before it runs again
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await after is None  # handed on to the next in line
    assert (flight.count(1), flight.waiting(1)) == (1, 0)
    flight.leave(1)
    assert flight.accounts() == 0


async def test_a_cancelled_waiters_late_clean_up_keeps_a_newer_requests_count(settings):
    """A cancelled waiter runs its handler a loop pass later: by then its account's idle entry
    may be gone and a new request counted in a fresh one, which the handler must not drop."""
    settings.MCP_ACCOUNT_CONCURRENCY_MAX = 1
    flight = InFlight()
    assert await flight.enter(7) is None
    waiter = asyncio.ensure_future(flight.enter(7))
    while flight.waiting(7) != 1:
        await asyncio.sleep(0)

    waiter.cancel()  # its future is cancelled now, its handler runs later
    flight.leave(7)  # skips the cancelled waiter: the account is idle and forgotten
    assert await flight.enter(7) is None  # a new request, in a fresh entry
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert flight.count(7) == 1
    flight.leave(7)
    assert flight.accounts() == 0
