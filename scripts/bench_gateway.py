#!/usr/bin/env python3
"""Benchmark: `resources/read` through the gateway (bearer auth + PostgreSQL, 1,000,000 memories)
against the MCP SDK's own minimal stateless server (no auth, no database, ~1 KB in-memory body),
in the same run, on the same machine, with the same load generator (wrk + scripts/bench/read.lua).

    .venv/bin/python scripts/bench_gateway.py [--rounds 3] [--duration 8] [--connections 16]
        [--servers uvicorn-uvloop] [--variant-env NAME=VALUE ...] [--baseline-tree DIR]

Needs `wrk` (Debian: apt-get install -y wrk). Uses its own database, `threengram_bench_gateway`,
on the embedded PostgreSQL (or on the server of DATABASE_URL), seeded once with INSERT ... SELECT
generate_series and reused afterwards. Every server runs one process on 127.0.0.1; rounds are
interleaved so that the machine's drift hits every case alike; ratios are taken within a round.
Servers (--servers): uvicorn-uvloop (uvicorn with uvloop and httptools, what it picks by default
here), uvicorn (pure-Python asyncio + h11) and daphne (the README's server). Cases on each:
  minimal-read      the SDK minimal server, resources/read           (the baseline)
  gateway-read      the gateway, resources/read: token check + gate, acting as the table owner
  gateway-read-rls  the same with row-level security (DATABASE_APP_ROLE=threengram_app, the
                    settings default)
  gateway-catalog   the gateway, resources/templates/list: token check only (a step)
  gateway-read-rls-old  with --baseline-tree DIR: gateway-read-rls served by the code in DIR
                    (e.g. `git worktree add DIR <commit>`), to measure a change in the same rounds
  gateway-read-rls-variant  with --variant-env NAME=VALUE (repeatable): gateway-read-rls with
                    those settings, to measure a setting in the same rounds
plus the reads on the legacy 2025-11-25 wire. Prints Markdown tables for docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.bench.procstat import host_cpu  # noqa: E402
from scripts.scale_out import free_port  # noqa: E402

BENCH = ROOT / "scripts" / "bench"
DATABASE = "threengram_bench_gateway"  # not the other benchmarks' threengram_bench
PUBLIC_BASE_URL = "http://127.0.0.1:8000"
TOKEN = "bench-" + "t" * 40
READ_IDS = 200  # the load reads random memories among this many of the token user's
TENANTS = 100
P99_GOAL_MS = 25  # the goal at 16 concurrent clients (docs/performance.md)


def database_url() -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if os.environ.get("DATABASE_URL"):
        import psycopg
        from psycopg import sql

        admin = os.environ["DATABASE_URL"]
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        params = conninfo_to_dict(admin)
        params["dbname"] = DATABASE
        return make_conninfo(**params)
    from threengram.embedded_db import start

    return start(database=DATABASE)


def server_env(url: str, app_role: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": url,
        # One token drives all the load here: the default per-user rate limit (docs/security.md)
        # would refuse it. A limit it never reaches keeps the counting on every request.
        "MCP_RATE_LIMIT": "1000000000",
        # Row-level security: "" = the owner (migrations, seeding and the main cases),
        # "threengram_app" for the gateway-read-rls case.
        "DATABASE_APP_ROLE": app_role,
        "DJANGO_SETTINGS_MODULE": "threengram.settings",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
        # The default log level (INFO): one access line per request, as in production; a
        # lower level would drop those lines unmeasured.
        "LOG_LEVEL": "INFO",
    }


def seed(url: str, rows: int) -> list[str]:
    """Migrate and fill the bench database once; return the memory ids the load reads."""
    import psycopg

    env = server_env(url)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    with psycopg.connect(url, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
        if count < rows:
            print(f"seeding {rows:,} memories (once)", flush=True)
            started = time.monotonic()
            conn.execute("TRUNCATE memories_memory, oauth2_provider_accesstoken CASCADE")
            conn.execute(
                "INSERT INTO accounts_user (password, is_superuser, username, first_name, "
                "last_name, email, is_staff, is_active, date_joined) "
                "SELECT '!', false, 'bench' || i, '', '', '', false, true, now() "
                "FROM generate_series(1, %s) i ON CONFLICT (username) DO NOTHING",
                (TENANTS,),
            )
            # Spread over TENANTS owners, ~1 KB each, unique per owner (the live-content
            # constraint), UUIDv7 ids as the application issues them (PostgreSQL 18 uuidv7()).
            conn.execute(
                "INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, "
                "topic, scope, project, tags, recorded_at, status) "
                "SELECT uuidv7(), u.id, c.content, length(c.content), 'note', 'bench', "
                "'personal', NULL, '{}', now() - (%s - i) * interval '1 second', 'active' "
                "FROM generate_series(1, %s) i "
                "JOIN accounts_user u ON u.username = 'bench' || (1 + i %% %s) "
                "CROSS JOIN LATERAL "
                "(SELECT 'memory ' || i || ' ' || repeat('x', 950) AS content) c",
                (rows, rows, TENANTS),
            )
            conn.execute("ANALYZE memories_memory")
            print(f"seeded in {time.monotonic() - started:.0f} s", flush=True)
        user_id = conn.execute("SELECT id FROM accounts_user WHERE username = 'bench1'").fetchone()[
            0
        ]
        conn.execute("DELETE FROM oauth2_provider_accesstoken WHERE token = %s", (TOKEN,))
        conn.execute(
            "INSERT INTO oauth2_provider_accesstoken (user_id, token, token_checksum, expires, "
            "scope, resource, created, updated) VALUES (%s, %s, %s, now() + interval '1 day', "
            "'memory:read memory:write', %s::jsonb, now(), now())",
            (
                user_id,
                TOKEN,
                hashlib.sha256(TOKEN.encode()).hexdigest(),
                json.dumps([f"{PUBLIC_BASE_URL}/mcp"]),
            ),
        )
        ids = conn.execute(
            "SELECT id FROM memories_memory WHERE owner_id = %s ORDER BY random() LIMIT %s",
            (user_id, READ_IDS),
        ).fetchall()
        total = conn.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
    print(f"{total:,} memories in {DATABASE}", flush=True)
    return [str(row[0]) for row in ids]


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen


def start(name: str, command: list[str], env: dict, cwd: Path, logs: Path) -> Server:
    port = free_port()
    command = [part.replace("{port}", str(port)) for part in command]
    log = (logs / f"{name}.log").open("wb")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Server(name, port, process)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{name} did not start; see {logs / name}.log")


def wrk(server: Server, case: dict, connections: int, duration: int) -> dict:
    env = {**os.environ, **case["env"]}
    _, steal_before, total_before = host_cpu()
    output = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "--latency",
         "-s", str(BENCH / "read.lua"), f"http://127.0.0.1:{server.port}/mcp"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    _, steal_after, total_after = host_cpu()

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": latency("50"),
        "p99": latency("99"),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": errors.group(1) if errors else "",
        "steal_pct": round(
            100 * (steal_after - steal_before) / max(total_after - total_before, 1), 1
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8, help="seconds per measured run")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--servers", default="uvicorn-uvloop,uvicorn,daphne")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="a checkout of older code (git worktree): its gateway runs as gateway-read-rls-old, "
        "in the same rounds, on the same database (same migrations required)",
    )
    parser.add_argument(
        "--variant-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for a second RLS gateway, gateway-read-rls-variant, run in the same "
        "rounds (repeatable)",
    )
    args = parser.parse_args()
    variant_env = dict(pair.split("=", 1) for pair in args.variant_env)
    if not shutil.which("wrk"):
        sys.exit("wrk not found: apt-get install -y wrk")

    url = database_url()
    ids = seed(url, args.rows)
    uris = " ".join(f"threengram://memory/{memory_id}" for memory_id in ids)
    python = sys.executable
    commands = {
        "uvicorn": [python, "-m", "uvicorn", "--host", "127.0.0.1", "--port", "{port}",
                    "--log-level", "warning", "--no-access-log", "--loop", "asyncio",
                    "--http", "h11"],
        # uvicorn's C parts (`uvicorn[standard]`): uvloop's event loop, httptools' HTTP parser.
        "uvicorn-uvloop": [python, "-m", "uvicorn", "--host", "127.0.0.1", "--port", "{port}",
                           "--log-level", "warning", "--no-access-log", "--loop", "uvloop",
                           "--http", "httptools"],
        "daphne": [python, "-m", "daphne", "-b", "127.0.0.1", "-p", "{port}", "-v", "0"],
    }  # fmt: skip
    cases = []
    logs = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    servers: list[Server] = []
    try:
        for kind in args.servers.split(","):
            gateway = start(
                f"gateway-{kind}",
                [*commands[kind], "threengram.asgi:application"],
                server_env(url),
                ROOT,
                logs,
            )
            minimal = start(
                f"minimal-{kind}",
                [*commands[kind], "minimal_server:" + ("lazy_app" if kind == "daphne" else "app")],
                {**os.environ, "PYTHONPATH": str(BENCH)},
                BENCH,
                logs,
            )
            gateway_rls = start(
                f"gateway-rls-{kind}",
                [*commands[kind], "threengram.asgi:application"],
                server_env(url, app_role="threengram_app"),
                ROOT,
                logs,
            )
            servers += [gateway, minimal, gateway_rls]
            old = None
            if args.baseline_tree:
                old = start(
                    f"gateway-rls-old-{kind}",
                    [*commands[kind], "threengram.asgi:application"],
                    server_env(url, app_role="threengram_app"),
                    args.baseline_tree.resolve(),
                    logs,
                )
                servers.append(old)
            variant = None
            if variant_env:
                variant = start(
                    f"gateway-rls-variant-{kind}",
                    [*commands[kind], "threengram.asgi:application"],
                    {**server_env(url, app_role="threengram_app"), **variant_env},
                    ROOT,
                    logs,
                )
                servers.append(variant)
            for wire in ("2026-07-28", "2025-11-25"):
                short = "2026" if wire.startswith("2026") else "2025"
                common = {"MCP_WIRE": wire}
                cases.append({"name": f"minimal-read {kind} {short}", "server": minimal,
                              "env": {**common, "MCP_URIS": "perf://doc/1"}})  # fmt: skip
                cases.append({"name": f"gateway-read {kind} {short}", "server": gateway,
                              "env": {**common, "MCP_URIS": uris, "TOKEN": TOKEN}})  # fmt: skip
                cases.append({"name": f"gateway-read-rls {kind} {short}", "server": gateway_rls,
                              "env": {**common, "MCP_URIS": uris, "TOKEN": TOKEN}})  # fmt: skip
                if old and short == "2026":
                    cases.append({"name": f"gateway-read-rls-old {kind} {short}", "server": old,
                                  "env": {**common, "MCP_URIS": uris, "TOKEN": TOKEN}})  # fmt: skip
                if variant:  # on both wires: where a setting does not apply, a noise control
                    cases.append({"name": f"gateway-read-rls-variant {kind} {short}",
                                  "server": variant,
                                  "env": {**common, "MCP_URIS": uris, "TOKEN": TOKEN}})  # fmt: skip
            cases.append({"name": f"gateway-catalog {kind} 2026", "server": gateway,
                          "env": {"MCP_WIRE": "2026-07-28", "TOKEN": TOKEN,
                                  "MCP_METHOD": "resources/templates/list"}})  # fmt: skip
        for case in cases:  # warm up: pools, prepared statements, and a correctness check
            result = wrk(case["server"], case, args.connections, 2)
            if result["non_2xx"] or result["socket_errors"]:
                sys.exit(f"{case['name']}: {result}; server logs in {logs}")
        results: dict[str, list[dict]] = {case["name"]: [] for case in cases}
        for round_number in range(args.rounds):
            shift = round_number * 3 % len(cases)
            for case in cases[shift:] + cases[:shift]:
                result = wrk(case["server"], case, args.connections, args.duration)
                result["round"] = round_number
                results[case["name"]].append(result)
                print(json.dumps({"case": case["name"], **result}), flush=True)
    finally:
        for server in servers:
            server.process.terminate()
        for server in servers:
            server.process.wait(10)

    print(f"\n{args.rounds} rounds x {args.duration} s, c{args.connections}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
          + (f", variant: {' '.join(args.variant_env)}" if variant_env else "") + "\n")  # fmt: skip
    print(
        "| case | server | wire | req/s median (min-max) | p50 ms | p99 ms median (max) "
        f"| rounds with p99 ≤ {P99_GOAL_MS} ms | host steal % median (max) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        label, kind, wire = name.split()
        rps, p99, steal = ([r[key] for r in runs] for key in ("rps", "p99", "steal_pct"))
        print(
            f"| {label} | {kind} | {wire} | {statistics.median(rps):.0f} ({min(rps):.0f}-"
            f"{max(rps):.0f}) | {statistics.median(r['p50'] for r in runs):.1f} | "
            f"{statistics.median(p99):.1f} ({max(p99):.1f}) | "
            f"{sum(value <= P99_GOAL_MS for value in p99)} of {len(p99)} | "
            f"{statistics.median(steal):.1f} ({max(steal):.1f}) |"
        )
    for numerator, denominator in (
        ("gateway-read", "minimal-read"),
        ("gateway-read-rls", "minimal-read"),
        ("gateway-read-rls", "gateway-read"),
        *([("gateway-read-rls-old", "minimal-read")] if args.baseline_tree else []),
        *(
            [
                ("gateway-read-rls-variant", "minimal-read"),
                ("gateway-read-rls-variant", "gateway-read-rls"),
            ]
            if variant_env
            else []
        ),
    ):
        print(f"\n| ratio {numerator} / {denominator}, per round | median (min-max) |")
        print("|---|---|")
        for kind in args.servers.split(","):
            for wire in ("2026", "2025"):
                if f"{numerator} {kind} {wire}" not in results:
                    continue
                ratios = [
                    n["rps"] / d["rps"]
                    for n, d in zip(
                        results[f"{numerator} {kind} {wire}"],
                        results[f"{denominator} {kind} {wire}"],
                        strict=True,
                    )
                ]
                print(
                    f"| {kind}, {wire} wire | {statistics.median(ratios):.2f} "
                    f"({min(ratios):.2f}-{max(ratios):.2f}) |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
