"""Scale-out shown: two daphne processes behind the round-robin proxy (scripts/round_robin_proxy.py)
on one PostgreSQL. One SDK client's requests alternate between the processes, and reads, cache
hints and writes work through either."""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from pathlib import Path

import httpx2
import pytest

from memories.models import Memory
from tests.mcp_gateway.conftest import (
    Recorder,
    free_port,
    mcp_client,
    run_sync,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.anyio, pytest.mark.live]


def daphne_command(port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
            "threengram.asgi:application"]  # fmt: skip


@pytest.fixture(scope="module")
def proxied_pair(django_db_setup, django_db_blocker):
    """Two daphne processes and the proxy in front of them; yields (proxy, backends)."""
    with tempfile.TemporaryDirectory() as folder:
        backends = []
        try:
            for number in range(2):
                port = free_port()
                log = Path(folder) / f"daphne-{number}.log"
                backends.append(start_server(daphne_command(port), port, log))
            port = free_port()
            command = [sys.executable, "scripts/round_robin_proxy.py", "--port", str(port)]
            for backend in backends:
                command += ["--backend", backend.url.replace("localhost", "127.0.0.1")]
            proxy = start_server(command, port, Path(folder) / "proxy.log")
            try:
                yield proxy, backends
            finally:
                stop_server(proxy)
        finally:
            for backend in backends:
                stop_server(backend)


class Upstreams(Recorder):
    """Also records which backend answered each request (the proxy's X-Upstream header)."""

    def __init__(self) -> None:
        super().__init__()
        self.upstreams: list[str] = []

    async def response_hook(self, response: httpx2.Response) -> None:
        self.upstreams.append(response.headers.get("x-upstream", "-"))
        await super().response_hook(response)


async def test_one_clients_requests_alternate_between_two_processes(proxied_pair, seeded):
    proxy, backends = proxied_pair
    recorder = Upstreams()
    uri = f"threengram://memory/{seeded.memory.id}"
    async with mcp_client(proxy.mcp_url, seeded.token, recorder=recorder) as client:
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
            "revise", {"predecessorId": memory_id, "content": "Two processes behind a proxy"}
        )
        found = await client.call_tool("search", {"query": "processes proxy"})
        fetched = await client.call_tool("get_memories", {"ids": [memory_id]})
        read_new = await client.read_resource(
            f"threengram://memory/{revised.structured_content['memory']['id']}"
        )

    ports = {backend.url.rsplit(":", 1)[1] for backend in backends}
    answered = [upstream.rsplit(":", 1)[1] for upstream in recorder.upstreams]
    assert len(answered) >= 6 and set(answered) == ports  # both processes answered
    assert all(a != b for a, b in itertools.pairwise(answered))  # strictly alternating
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
    assert json.loads(read_new.contents[0].text)["content"] == "Two processes behind a proxy"
    rows = await run_sync(
        lambda: list(
            Memory.objects.filter(owner=seeded.tenant, topic="scale-out").values_list(
                "content", "valid_to"
            )
        )
    )
    assert sorted((content, valid_to is None) for content, valid_to in rows) == [
        ("Two processes behind a proxy", True),
        ("Two processes, one DB", False),
    ]
