#!/usr/bin/env python3
"""Fairness between accounts on one server process: account A sends N searches at once, over and
over; account B's searches, one at a time, are timed. Run per MCP_ACCOUNT_CONCURRENCY_MAX and
MCP_ACCOUNT_QUEUE_WAIT_MS (0: A's requests past the bound are refused at once, not queued).

    .venv/bin/python scripts/bench_fairness.py [--caps 0,4] [--waits 0,10000] [--loads 0,8,32]
        [--duration 10]

A scratch database `threengram_fairness` on the embedded PostgreSQL (dropped and made afresh:
two accounts of --memories / 2 memories each, with vectors, scripts/bench_data.py), one real
token per account, and one daphne process (as the README starts it; rate limit off) per cap.
A's queries are 500 characters, B's a short question, both `search` on the 2026-07-28 wire
(scripts/bench/loadgen.py); A waits the Retry-After of a 429 before sending again. Prints B's
median and p95 per (cap, wait, load), with A's answers and 429s per second, and A's median.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from scripts import bench_data, bench_load, scale_out  # noqa: E402
from scripts.bench import loadgen  # noqa: E402

DATABASE = "threengram_fairness"  # not a threengram_bench* database
HEAVY = ("decision deploy cache review budget migration release " * 10)[:500]
LIGHT = "which cache did we decide on for the release?"


def scratch_corpus(memories: int) -> str:
    from threengram.embedded_db import start

    url = make_conninfo(start(database="postgres"), dbname=DATABASE)
    bench_data.recreate(url)
    bench_load.migrate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        bench_data.generate(conn, memories=memories, tenants=2, largest=memories // 2, vectors=True)
        conn.execute("VACUUM ANALYZE")
    return url


def start_daphne(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    port = scale_out.free_port()
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
               "threengram.asgi:application"]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=-2)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while not _answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"daphne did not start; see {log}")
        time.sleep(0.2)
    return process, url


def _answers(url: str) -> bool:
    import httpx2

    try:
        httpx2.get(url.replace("/mcp", "/health"), timeout=1)
    except httpx2.HTTPError:
        return False
    return True


async def search(http, url: str, token: str, query: str) -> tuple[int, float]:
    headers, body = loadgen.tool_call(token, "search", {"query": query})
    started = time.perf_counter()
    response = await http.post(url, headers=headers, content=body)
    return response.status_code, (time.perf_counter() - started) * 1000


async def measure(url: str, a: str, b: str, load: int, duration: float) -> dict:
    stop = asyncio.Event()
    a_statuses: list[int] = []
    a_ms: list[float] = []

    async def heavy() -> None:
        async with loadgen._http_client(60) as http:
            while not stop.is_set():
                status, ms = await search(http, url, a, HEAVY)
                a_statuses.append(status)
                if status == 200:
                    a_ms.append(ms)
                if status == 429:  # as told (Retry-After), as an MCP client's retry does
                    await asyncio.sleep(1)

    workers = [asyncio.create_task(heavy()) for _ in range(load)]
    await asyncio.sleep(1.0 if load else 0)  # A's load under way
    a_statuses.clear()
    a_ms.clear()
    b_ms: list[float] = []
    async with loadgen._http_client(60) as http:
        until = time.monotonic() + duration
        while time.monotonic() < until:
            status, ms = await search(http, url, b, LIGHT)
            assert status == 200, status
            b_ms.append(ms)
    stop.set()
    await asyncio.gather(*workers)
    return {
        "b_p50": statistics.median(b_ms),
        "b_p95": loadgen.percentile(b_ms, 95),
        "b_calls": len(b_ms),
        "a_p50": statistics.median(a_ms) if a_ms else 0.0,
        "a_ok": a_statuses.count(200) / duration,
        "a_429": a_statuses.count(429) / duration,
        "a_other": len(a_statuses) - a_statuses.count(200) - a_statuses.count(429),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0,4", help="MCP_ACCOUNT_CONCURRENCY_MAX values")
    parser.add_argument("--waits", default="0,10000", help="MCP_ACCOUNT_QUEUE_WAIT_MS values")
    parser.add_argument("--loads", default="0,8,32", help="A's searches at once")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--memories", type=int, default=4_000)
    options = parser.parse_args()
    url = scratch_corpus(options.memories)
    a, b = (tenant.token for tenant in bench_load.mint_tenants(url, 2))
    print(
        "| MCP_ACCOUNT_CONCURRENCY_MAX | MCP_ACCOUNT_QUEUE_WAIT_MS | A at once | B p50 ms | "
        "B p95 ms | A 200/s | A 429/s | A p50 ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    # A wait matters only under a bound.
    runs = [(cap, wait) for cap in options.caps.split(",") for wait in options.waits.split(",")]
    runs = list(dict.fromkeys((cap, wait if cap != "0" else "-") for cap, wait in runs))
    with tempfile.TemporaryDirectory() as logs:
        for cap, wait in runs:
            env = bench_load.server_env(url) | {
                "MCP_RATE_LIMIT": "0",
                "MCP_ACCOUNT_CONCURRENCY_MAX": cap,
                "MCP_ACCOUNT_QUEUE_WAIT_MS": wait if wait != "-" else "0",
            }
            process, mcp_url = start_daphne(env, Path(logs) / f"daphne-{cap}-{wait}.log")
            try:
                for load in map(int, options.loads.split(",")):
                    row = asyncio.run(measure(mcp_url, a, b, load, options.duration))
                    print(
                        f"| {cap} | {wait} | {load} | {row['b_p50']:.1f} | {row['b_p95']:.1f} | "
                        f"{row['a_ok']:.0f} | {row['a_429']:.0f} | {row['a_p50']:.1f} |"
                        + (f" ({row['a_other']} other statuses)" if row["a_other"] else ""),
                        flush=True,
                    )
            finally:
                bench_load.stop([process])


if __name__ == "__main__":
    main()
