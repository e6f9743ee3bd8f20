"""Mixed MCP load over HTTP, and the row-by-row check that no acknowledged write was lost.

Used by scripts/bench_load.py (the benchmark) and by the load and fault tests
(tests/e2e/test_load_and_faults_live.py). Raw JSON-RPC POSTs with httpx2 on
the 2026-07-28 wire, with exactly the headers and `_meta` an SDK 2.3 client sends: the load
generator costs less CPU than the SDK client, on a machine it shares with the servers.

Each client is one keep-alive HTTP connection of one tenant (one bearer token) and sends one
request at a time, bounded by a duration and a request count. A client only revises memories it
wrote itself, always the newest version, so every revise is expected to succeed: any failure is
an error, not a lost race.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import httpx2

WIRE = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": WIRE,
    "io.modelcontextprotocol/clientInfo": {"name": "threengram-loadgen", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# Share of each operation in the mix (reads dominate, as for agents that mostly recall).
MIX = {
    "resources/read": 40,
    "search": 20,
    "get_memories": 15,
    "remember": 15,
    "revise": 10,
}
# httpx2 writes a request's headers and body separately: without TCP_NODELAY, Nagle's algorithm
# holds the body until the server's delayed ACK (~40 ms on Linux), which would dominate latency.
SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
SEARCH_WORDS = ["decision", "deploy", "cache", "review", "budget", "migration", "release"]


@dataclass
class Tenant:
    token: str
    memory_ids: list[str]  # existing memories of this tenant, for reads


@dataclass
class Sample:
    method: str
    started: float  # time.monotonic()
    ms: float
    status: int  # HTTP status, 0 = no response (connection error, timeout)
    error: str | None  # None = success
    retry_after: str | None = None


@dataclass
class Ack:
    """A write the server acknowledged: it must be in the database afterwards."""

    kind: str  # remember | revise
    memory_id: str
    content: str
    predecessor_id: str | None = None


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def errors(self) -> list[Sample]:
        return [s for s in self.samples if s.error is not None]


def _request(method: str, token: str, params: dict, name: str) -> tuple[dict, bytes]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": WIRE,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return headers, json.dumps(body).encode()


def resource_read(token: str, memory_id: str) -> tuple[dict, bytes]:
    uri = f"threengram://memory/{memory_id}"
    return _request("resources/read", token, {"uri": uri}, uri)


def tool_call(token: str, tool: str, arguments: dict) -> tuple[dict, bytes]:
    return _request("tools/call", token, {"name": tool, "arguments": arguments}, tool)


def _http_client(timeout: float) -> httpx2.AsyncClient:
    """One keep-alive connection per simulated client."""
    transport = httpx2.AsyncHTTPTransport(
        socket_options=SOCKET_OPTIONS,
        limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1),
    )
    return httpx2.AsyncClient(timeout=timeout, transport=transport)


class _Client:
    def __init__(self, number: int, tenant: Tenant, rng: random.Random, mix: dict) -> None:
        self.number = number
        self.mix = mix
        self.tenant = tenant
        self.rng = rng
        self.heads: list[str] = []  # newest versions of this client's own memories
        self.written = 0

    def next_operation(self) -> tuple[str, dict, bytes, dict]:
        """(label, headers, body, context) of the next request."""
        token, rng = self.tenant.token, self.rng
        label = rng.choices(list(self.mix), weights=list(self.mix.values()))[0]
        if label == "revise" and not self.heads:
            label = "remember"
        if label == "resources/read":
            memory_id = rng.choice(self.tenant.memory_ids)
            return label, *resource_read(token, memory_id), {}
        if label == "search":
            arguments = {"query": rng.choice(SEARCH_WORDS), "limit": 10}
            return label, *tool_call(token, "search", arguments), {}
        if label == "get_memories":
            ids = rng.sample(self.tenant.memory_ids, min(3, len(self.tenant.memory_ids)))
            return label, *tool_call(token, "get_memories", {"ids": ids}), {}
        self.written += 1
        content = (
            f"load client {self.number} write {self.written} {uuid.uuid4().hex}: "
            + rng.choice(SEARCH_WORDS)
            + " noted during the load run"
        )
        if label == "remember":
            arguments = {"memoryType": "note", "topic": "load test", "content": content}
            return label, *tool_call(token, "remember", arguments), {"content": content}
        predecessor = self.heads.pop(rng.randrange(len(self.heads)))
        arguments = {"predecessorId": predecessor, "content": content}
        context = {"content": content, "predecessor": predecessor}
        return label, *tool_call(token, "revise", arguments), context


def _error_of(response: httpx2.Response) -> tuple[str | None, dict | None]:
    if response.status_code != 200:
        return f"HTTP {response.status_code}", None
    try:
        body = response.json()
    except ValueError:
        return "invalid JSON", None
    if "error" in body:
        return f"JSON-RPC {body['error'].get('code')}", None
    result = body.get("result", {})
    if result.get("isError"):
        text = (result.get("content") or [{}])[0].get("text", "")
        return f"tool error: {text.split(':', 1)[0]}", None
    return None, result


async def _run_client(
    client: _Client,
    http: httpx2.AsyncClient,
    url: str,
    deadline: float,
    budget: list[int],
    result: Result,
    stop: asyncio.Event,
) -> None:
    while time.monotonic() < deadline and budget[0] > 0 and not stop.is_set():
        budget[0] -= 1
        label, headers, body, context = client.next_operation()
        started = time.monotonic()
        try:
            response = await http.post(url, headers=headers, content=body)
            error, payload = _error_of(response)
            status, retry_after = response.status_code, response.headers.get("retry-after")
        except httpx2.HTTPError as exc:
            error, payload, status, retry_after = type(exc).__name__, None, 0, None
        elapsed = (time.monotonic() - started) * 1000
        result.samples.append(Sample(label, started, elapsed, status, error, retry_after))
        if error is None and label in ("remember", "revise"):
            memory_id = payload["structuredContent"]["memory"]["id"]
            result.acks.append(
                Ack(label, memory_id, context["content"], context.get("predecessor"))
            )
            client.heads.append(memory_id)
        # An unacknowledged revise may or may not have been applied: its predecessor has left
        # `heads` already, so the chain is not revised again (only acks are checked).
        if error is not None and status in (0, 503):
            await asyncio.sleep(0.05)  # a retryable failure: back off a little, as a client would


async def run_load(
    urls: str | list[str],
    tenants: list[Tenant],
    *,
    clients: int,
    duration: float,
    max_requests: int = 10_000_000,
    seed: int = 7,
    timeout: float = 30.0,
    mix: dict[str, int] = MIX,
    stop: asyncio.Event | None = None,
) -> Result:
    """`clients` concurrent clients (client i uses tenant i mod len, and server URL i mod len)
    for `duration` seconds or `max_requests` requests in all or until `stop` is set, whichever
    comes first."""
    stop = stop or asyncio.Event()
    urls = [urls] if isinstance(urls, str) else urls
    result = Result()
    budget = [max_requests]
    started = time.monotonic()
    deadline = started + duration
    https = [_http_client(timeout) for _ in range(clients)]
    try:
        await asyncio.gather(
            *(
                _run_client(
                    _Client(i, tenants[i % len(tenants)], random.Random(seed * 1000 + i), mix),  # noqa: S311
                    https[i],
                    urls[i % len(urls)],
                    deadline,
                    budget,
                    result,
                    stop,
                )
                for i in range(clients)
            )
        )
    finally:
        for http in https:
            await http.aclose()
    result.seconds = time.monotonic() - started
    return result


async def run_reads(urls: list[str], uris: list[str], *, clients: int, duration: float) -> Result:
    """Only `resources/read` of the given URIs, no token: the SDK minimal server's baseline."""
    result = Result()
    deadline = time.monotonic() + duration
    rng = random.Random(11)  # noqa: S311 (a load mix, not a secret)

    async def client(http: httpx2.AsyncClient, url: str) -> None:
        while time.monotonic() < deadline:
            uri = rng.choice(uris)
            headers, body = _request("resources/read", "", {"uri": uri}, uri)
            del headers["Authorization"]
            started = time.monotonic()
            try:
                response = await http.post(url, headers=headers, content=body)
                error, _ = _error_of(response)
                status = response.status_code
            except httpx2.HTTPError as exc:
                error, status = type(exc).__name__, 0
            elapsed = (time.monotonic() - started) * 1000
            result.samples.append(Sample("resources/read", started, elapsed, status, error))

    https = [_http_client(30.0) for _ in range(clients)]
    started = time.monotonic()
    try:
        await asyncio.gather(*(client(http, urls[i % len(urls)]) for i, http in enumerate(https)))
    finally:
        for http in https:
            await http.aclose()
    result.seconds = time.monotonic() - started
    return result


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summary_rows(result: Result) -> list[dict]:
    """One row per method plus "all": count, req/s, p50/p95/p99 ms, errors."""
    by_method: dict[str, list[Sample]] = defaultdict(list)
    for sample in result.samples:
        by_method[sample.method].append(sample)
    rows = []
    for method in [*MIX, "all"]:
        samples = result.samples if method == "all" else by_method.get(method, [])
        if not samples:
            continue
        ok = [s.ms for s in samples if s.error is None]
        rows.append(
            {
                "method": method,
                "count": len(samples),
                "rps": len(samples) / result.seconds,
                "p50": percentile(ok, 50),
                "p95": percentile(ok, 95),
                "p99": percentile(ok, 99),
                "errors": len(samples) - len(ok),
            }
        )
    return rows


def verify_acks(connection, acks: list[Ack]) -> list[str]:
    """Every acknowledged write, row by row, against the database (a psycopg connection).
    Returns the problems found (empty = nothing lost, nothing half-applied)."""
    problems: list[str] = []
    ids = [uuid.UUID(ack.memory_id) for ack in acks]
    rows = {
        str(row[0]): row[1:]
        for row in connection.execute(
            "SELECT id, content, predecessor_id FROM memories_memory WHERE id = ANY(%s)", (ids,)
        ).fetchall()
    }
    predecessors = [uuid.UUID(ack.predecessor_id) for ack in acks if ack.predecessor_id]
    closed = {
        str(row[0]): row[1:]
        for row in connection.execute(
            "SELECT p.id, p.valid_to IS NOT NULL, "
            "(SELECT count(*) FROM memories_memory s "
            "WHERE s.owner_id = p.owner_id AND s.predecessor_id = p.id) "
            "FROM memories_memory p WHERE p.id = ANY(%s)",
            (predecessors,),
        ).fetchall()
    }
    for ack in acks:
        row = rows.get(ack.memory_id)
        if row is None:
            problems.append(f"{ack.kind} {ack.memory_id}: acknowledged but missing")
            continue
        content, predecessor_id = row
        if content != ack.content:
            problems.append(f"{ack.kind} {ack.memory_id}: content differs from what was sent")
        if ack.kind == "revise":
            if str(predecessor_id) != ack.predecessor_id:
                problems.append(f"revise {ack.memory_id}: wrong predecessor link")
            valid_to_set, successors = closed.get(ack.predecessor_id, (False, 0))
            if not valid_to_set:
                problems.append(f"revise {ack.memory_id}: predecessor still current")
            if successors != 1:
                problems.append(f"revise {ack.memory_id}: predecessor has {successors} successors")
    return problems
