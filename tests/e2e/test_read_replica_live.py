"""A streaming read replica (pg_basebackup of the test server, scripts/scale_out.py) behind a live
server with DATABASE_REPLICA_URL: search reads the replica and may lag; resources/read and
get_memories read the primary, so a client reads its own write at once; a replica that goes away
costs a logged fallback to the primary, never an error."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from infra import asyncdb
from scripts import scale_out
from tests.mcp_gateway.conftest import (
    free_port,
    mcp_client,
    run_sync,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.anyio, pytest.mark.live]


class WithReplica:
    def __init__(self, server, replica: scale_out.Replica, dbname: str, user: str) -> None:
        self.server = server
        self.replica = replica
        self.replica_url = replica.conninfo(dbname, user)

    def replica_has(self, memory_id) -> bool:
        with psycopg.connect(self.replica_url, autocommit=True) as conn:
            row = conn.execute("SELECT 1 FROM memories_memory WHERE id = %s", (memory_id,))
            return row.fetchone() is not None

    def wait_until_replica_has(self, memory_id, seconds: float = 20) -> None:
        deadline = time.monotonic() + seconds
        while not self.replica_has(memory_id):
            assert time.monotonic() < deadline, "the replica never replayed the write"
            time.sleep(0.1)

    def replay(self, paused: bool) -> None:
        with psycopg.connect(self.replica_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()"
            )


@pytest.fixture(scope="module")
def with_replica(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        params = asyncdb.connection_kwargs()
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)  # the standby runs as the server's user (scripts/scale_out.py)
        with scale_out.running_replica(
            params["host"], int(params.get("port", 5432)), Path(folder)
        ) as replica:
            port = free_port()
            url = replica.conninfo(params["dbname"], params["user"])
            server = start_server(
                scale_out.uvicorn_command(port),
                port,
                Path(folder) / "uvicorn.log",
                {"DATABASE_REPLICA_URL": url},
            )
            try:
                yield WithReplica(server, replica, params["dbname"], params["user"])
            finally:
                stop_server(server)


async def test_own_write_is_read_at_once_while_the_lagging_replica_serves_search(
    with_replica, seeded
):
    await run_sync(with_replica.wait_until_replica_has, seeded.memory.id)
    await run_sync(with_replica.replay, paused=True)
    try:
        async with mcp_client(with_replica.server.mcp_url, seeded.token) as client:
            stored = await client.call_tool(
                "remember",
                {"memoryType": "note", "topic": "replica", "content": "Lagging replica note"},
            )
            memory_id = stored.structured_content["memory"]["id"]
            fetched = await client.call_tool("get_memories", {"ids": [memory_id]})
            read = await client.read_resource(f"threengram://memory/{memory_id}")
            lagging = await client.call_tool("search", {"query": "lagging replica note"})
            older = await client.call_tool("search", {"query": "ship the resource"})
            blocker = await client.call_tool(
                "remember",
                {"memoryType": "blocker", "topic": "disk", "content": "The staging disk is full"},
            )
            briefing = await client.call_tool("briefing", {})
            environment = await client.call_tool("describe_environment", {})
        assert not await run_sync(with_replica.replica_has, memory_id)  # still paused
    finally:
        await run_sync(with_replica.replay, paused=False)
    assert [m["id"] for m in fetched.structured_content["memories"]] == [memory_id]
    assert json.loads(read.contents[0].text)["content"] == "Lagging replica note"
    assert lagging.structured_content["hits"] == []  # the replica has not replayed it yet
    assert [h["id"] for h in older.structured_content["hits"]] == [str(seeded.memory.id)]
    # Briefing is a lag-tolerant read too: its sections come from the paused replica.
    blocker_id = blocker.structured_content["memory"]["id"]
    sections = briefing.structured_content["sections"]
    assert blocker_id not in [item["id"] for s in sections.values() for item in s["items"]]
    # And describe_environment's counts: the paused replica has neither new memory.
    assert environment.structured_content["memoriesByType"]["blocker"] == 0
    await run_sync(with_replica.wait_until_replica_has, memory_id)
    async with mcp_client(with_replica.server.mcp_url, seeded.token) as client:
        caught_up = await client.call_tool("search", {"query": "lagging replica note"})
    assert [h["id"] for h in caught_up.structured_content["hits"]] == [memory_id]


async def test_a_replica_that_goes_away_sends_search_to_the_primary(with_replica, seeded):
    await run_sync(with_replica.replica.pg_ctl, "-m", "immediate", "stop")
    async with mcp_client(with_replica.server.mcp_url, seeded.token) as client:
        stored = await client.call_tool(
            "remember",
            {"memoryType": "note", "topic": "replica", "content": "Written with no replica"},
        )
        found = await client.call_tool("search", {"query": "written with no replica"})
        briefing = await client.call_tool("briefing", {})
    assert not found.is_error and not briefing.is_error
    assert [h["id"] for h in found.structured_content["hits"]] == [
        stored.structured_content["memory"]["id"]
    ]
    assert "read replica unavailable" in with_replica.server.output()
