#!/usr/bin/env python3
"""The one load benchmark: mixed MCP traffic from many tenants over HTTP, with the gateway's
baseline (the MCP SDK's minimal server) measured in the same run.

    .venv/bin/python scripts/bench_load.py [--workers 2] [--clients 16] [--duration 20]
    .venv/bin/python scripts/bench_load.py --held    # 64 clients x 60 s; exit 1 on any error

1. Corpus: its own database `threengram_bench_load` on the embedded PostgreSQL (or on the server
   of BENCH_DATABASE_URL), generated with scripts/bench_data.py (progress bar) and reused while it
   holds --memories memories (--fresh regenerates it).
2. Tokens: a real django-oauth-toolkit AccessToken per tenant, resource = [MCP_RESOURCE_URL],
   scopes memory:read memory:write.
3. Servers, on 127.0.0.1 only: N single-process uvicorn servers (--workers N, own ports; load
   generator client i talks to server i mod N) of the gateway (threengram.asgi:application,
   production settings), and as many of the SDK's minimal stateless server
   (scripts/bench/minimal_server.py, no auth, no database, ~1 KB body). Not `uvicorn --workers`:
   its worker processes answer on the inherited socket without TCP_NODELAY, which adds Linux's
   delayed ACK to every response (docs/performance.md, "Measured and not kept"). With --proxy
   nginx the same N processes serve one address through nginx, configured by deploy/nginx.conf;
   with --proxy nginx+pgbouncer they also reach PostgreSQL through PgBouncer in transaction
   mode, deploy/pgbouncer.ini (scripts/scale_out.py; Debian's packages, installed when
   missing); --proxy pgbouncer reaches the processes directly and PostgreSQL through PgBouncer.
   --scale-out runs only the mixed traffic, its set-ups (by default 1 process direct, N direct,
   N behind nginx, N behind nginx + PgBouncer) alternating in --rounds rounds, so that a change
   of host load falls on all of them; it adds the CPU each part (server processes, PostgreSQL,
   nginx, PgBouncer, the load client) spent per request, and the per-round ratios against N
   processes direct.
4. Phases, same load generator (scripts/bench/loadgen.py, raw JSON-RPC on the 2026-07-28 wire):
   minimal server resources/read (the baseline), gateway resources/read only, gateway mixed
   (resources/read, search, get_memories, remember, revise). Then every acknowledged remember and
   revise is checked row by row in the database.
Prints a Markdown table: requests/s, p50/p95/p99 (successful requests) per method, errors, and
the peak resident memory of all server processes (sampled every 0.5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from scripts import bench_data, scale_out  # noqa: E402
from scripts.bench import loadgen  # noqa: E402
from scripts.bench.procstat import cpu_seconds, host_cpu  # noqa: E402

DATABASE = "threengram_bench_load"
PUBLIC_BASE_URL = "http://127.0.0.1:8000"  # tokens name PUBLIC_BASE_URL/mcp; Host is 127.0.0.1
READS_PER_TENANT = 50


def database_url(fresh: bool, memories: int, tenants: int) -> str:
    url = os.environ.get("BENCH_DATABASE_URL")
    if not url:
        from threengram.embedded_db import start

        url = make_conninfo(start(database="postgres"), dbname=DATABASE)
    admin = make_conninfo(url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (conninfo_to_dict(url)["dbname"],)
        ).fetchone()
    if exists and not fresh:
        with psycopg.connect(url) as conn:
            count = conn.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
        if count >= memories:
            print(f"corpus: reusing {count:,} memories in {DATABASE}", flush=True)
            migrate(url)  # a corpus built before a schema change catches up
            return url
    bench_data.recreate(url)
    migrate(url)
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        bench_data.generate(
            conn, memories=memories, tenants=tenants, largest=max(memories // 10, 1)
        )
        conn.execute("VACUUM ANALYZE")
    print(f"corpus: {memories:,} memories generated in {time.monotonic() - started:.0f} s")
    return url


def migrate(url: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        # Migrations may build indexes on a whole corpus: no statement timeout for them.
        env=server_env(url) | {"DATABASE_STATEMENT_TIMEOUT_MS": "0"},
        check=True,
    )


def server_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "threengram.settings",
        "THREENGRAM_ENV_FILE": "",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "PUBLIC_BASE_URL": PUBLIC_BASE_URL,
        "LOG_LEVEL": "WARNING",
    }


def mint_tenants(url: str, count: int) -> list[loadgen.Tenant]:
    """One real DOT access token per tenant (the tenants of the corpus with the most memories
    after the largest one), and the ids of memories each one reads."""
    os.environ.update(server_env(url))
    import django

    django.setup()
    from django.conf import settings
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    from accounts.models import User
    from memories import tenancy

    application, _ = Application.objects.get_or_create(
        name="bench-load",
        defaults={
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    tenants = []
    users = User.objects.filter(username__startswith="bench").order_by("id")[:count]
    for user in users:
        raw = f"bench-load-{secrets.token_urlsafe(24)}"
        AccessToken.objects.create(
            user=user,
            application=application,
            token=raw,
            scope=f"{settings.MEMORY_READ_SCOPE} {settings.MEMORY_WRITE_SCOPE}",
            resource=[settings.MCP_RESOURCE_URL],
            expires=timezone.now() + timedelta(hours=2),
        )
        with tenancy.acting_for(user.pk):  # row-level security is on (production settings)
            ids = [
                str(memory_id)
                for memory_id in user.memories.filter(valid_to__isnull=True)
                .order_by("?")
                .values_list("id", flat=True)[:READS_PER_TENANT]
            ]
        tenants.append(loadgen.Tenant(token=raw, memory_ids=ids))
    return tenants


def start_servers(app: str, count: int, env: dict, logs: Path, app_dir: Path = ROOT):
    """`count` single-process uvicorn servers on their own ports (see the module docstring)."""
    processes, urls = [], []
    for number in range(count):
        port = scale_out.free_port()
        log = logs / f"{app.split(':')[0]}-{number}.log"
        command = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
                   "--log-level", "warning", "--no-access-log",
                   "--proxy-headers", "--forwarded-allow-ips", "127.0.0.1",
                   "--app-dir", str(app_dir), app]  # fmt: skip
        processes.append(
            subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
            )
        )
        urls.append(f"http://127.0.0.1:{port}/mcp")
    for process, url in zip(processes, urls, strict=True):
        port = int(url.split(":")[2].split("/")[0])
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(processes)
                sys.exit(f"{app} did not start; logs in {logs}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.2)
    return processes, urls


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def gateway_stack(
    proxy: str,
    workers: int,
    url: str,
    env: dict,
    logs: Path,
    app_dir: Path = ROOT,
    pool_size: int = 20,
):
    """The gateway's `workers` processes, reached directly (`proxy` "none": client i talks to
    process i mod N), through nginx ("nginx"), directly but reaching PostgreSQL through
    PgBouncer ("pgbouncer"), or through nginx with PgBouncer between the processes and
    PostgreSQL ("nginx+pgbouncer"), all configured by deploy/. Yields (server processes, the
    URLs the clients use, {component: root pids} of the parts in front and behind)."""
    with contextlib.ExitStack() as stack:
        folder = Path(tempfile.mkdtemp(prefix=f"{proxy.replace('+', '-')}-", dir=logs))
        parts: dict[str, list[int]] = {}
        if "pgbouncer" in proxy:
            # PgBouncer runs as the database server's user (scripts/scale_out.py).
            logs.chmod(0o755)
            folder.chmod(0o755)
            params = conninfo_to_dict(url)
            secret = secrets.token_urlsafe(16)
            bouncer = stack.enter_context(
                scale_out.running_pgbouncer(
                    scale_out.free_port(),
                    params["host"],
                    int(params.get("port", 5432)),
                    folder / "pgbouncer",
                    {params["user"]: secret},
                    pool_size,
                    app_dir / "deploy",
                )
            )
            parts["pgbouncer"] = [bouncer.process.pid]
            env = env | {
                "DATABASE_URL": bouncer.conninfo(params["dbname"], params["user"], secret),
                "DATABASE_TRANSACTION_POOLER": "1",
            }
        processes, urls = start_servers(
            "threengram.asgi:application", workers, env, folder, app_dir
        )
        stack.callback(stop, processes)
        if proxy.startswith("nginx"):
            ports = [int(u.split(":")[2].split("/")[0]) for u in urls]
            nginx = stack.enter_context(
                scale_out.running_nginx(
                    scale_out.free_port(), ports, folder / "nginx", app_dir / "deploy"
                )
            )
            parts["nginx"] = [nginx.process.pid]
            urls = [f"{nginx.url}/mcp"]
        yield processes, urls, parts


def postmaster_pid(url: str) -> int | None:
    """The PostgreSQL server's own pid, when it listens on a Unix socket of this machine."""
    params = conninfo_to_dict(url)
    host, port = params.get("host", ""), params.get("port", "5432")
    lock = Path(host) / f".s.PGSQL.{port}.lock"
    try:
        return int(lock.read_text().split()[0]) if host.startswith("/") else None
    except (OSError, ValueError, IndexError):
        return None


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


SCALE_OUT_SETUPS = {
    "direct-1": ("1 process, direct", 1, "none"),
    "direct": ("{n} processes, direct", None, "none"),
    "nginx": ("{n} processes behind nginx", None, "nginx"),
    "pgbouncer": ("{n} processes, direct, PgBouncer", None, "pgbouncer"),
    "nginx+pgbouncer": ("{n} processes behind nginx + PgBouncer", None, "nginx+pgbouncer"),
}
COMPONENTS = ("servers", "postgres", "nginx", "pgbouncer", "load client")


def scale_out_figures(args, url: str, tenants: list, env: dict, logs: Path) -> None:
    """Mixed traffic, same clients and duration, the set-ups alternating in rounds so that a
    change of host load falls on all of them alike: per set-up, req/s of each round and their
    median, p50/p95/p99 per method over all rounds, errors, every acknowledged write checked,
    and the CPU each component spent per request. The overhead is the median of the per-round
    ratios of the last set-up against N processes direct (equal process count)."""
    setups = []
    for key in args.setups.split(","):
        # "nginx+pgbouncer:8": PgBouncer's default_pool_size 8 instead of 20
        name, _, size = key.partition(":")
        title, workers, proxy = SCALE_OUT_SETUPS[name]
        title = title.format(n=args.workers) + (f" (pool {size})" if size else "")
        setups.append((title, workers or args.workers, proxy, ROOT, int(size or 20)))
    if args.baseline_tree:
        tree = args.baseline_tree.resolve()
        setups += [(f"{title}, {tree.name}", workers, proxy, tree, size)
                   for title, workers, proxy, _, size in setups]  # fmt: skip
    postgres = postmaster_pid(url)
    results = {title: [] for title, *_ in setups}
    for round_number in range(1, args.rounds + 1):
        for title, workers, proxy, tree, size in setups:
            before_load = loadavg()
            stack = gateway_stack(proxy, workers, url, env, logs, tree, size)
            with stack as (processes, urls, parts):
                roots = {
                    "servers": [p.pid for p in processes],
                    "postgres": [postgres] if postgres else [],
                    "nginx": parts.get("nginx", []),
                    "pgbouncer": parts.get("pgbouncer", []),
                    "load client": [os.getpid()],
                }
                alone = {"load client"}  # its children are the parts measured above
                cpu_before = {n: cpu_seconds(p, n not in alone) for n, p in roots.items()}
                host_before = host_cpu()
                mixed = loadgen.run_load(
                    urls, tenants, clients=args.clients, duration=args.duration
                )
                result, rss = asyncio.run(measure(mixed, processes))
                host_after = host_cpu()
                cpu_after = {n: cpu_seconds(p, n not in alone) for n, p in roots.items()}
            with psycopg.connect(url) as conn:
                problems = loadgen.verify_acks(conn, result.acks)
            requests = max(len(result.samples), 1)
            cpu_ms = {
                name: 1000 * sum(
                    seconds - cpu_before[name].get(pid, 0.0)
                    for pid, seconds in cpu_after[name].items()
                ) / requests
                for name in roots
            }  # fmt: skip
            busy, steal, total = (a - b for a, b in zip(host_after, host_before, strict=True))
            rps = len(result.samples) / result.seconds
            results[title].append(
                {"result": result, "rps": rps, "problems": problems, "rss": rss, "cpu": cpu_ms,
                 "busy": busy / total, "steal": steal / total,
                 "load": f"{before_load} → {loadavg()}"}
            )  # fmt: skip
            print(
                f"round {round_number}, {title}: {rps:.0f} req/s, "
                f"{len(result.errors)} errors, {len(problems)} lost of {len(result.acks):,} "
                f"acknowledged writes; CPU ms/request "
                + ", ".join(f"{name} {ms:.2f}" for name, ms in cpu_ms.items())
                + f"; host busy {busy / total:.0%}, steal {steal / total:.1%}; "
                f"load average {before_load} → {loadavg()}",
                flush=True,
            )
    output, summary, cpu_lines = [], [], []
    for title, runs in results.items():
        merged = loadgen.Result(seconds=sum(run["result"].seconds for run in runs))
        for run in runs:
            merged.samples += run["result"].samples
            merged.acks += run["result"].acks
        rows = loadgen.summary_rows(merged)
        lost = sum(len(run["problems"]) for run in runs)
        output.append(
            table(f"{title}, {len(runs)} rounds", rows, max(run["rss"] for run in runs))
            + f"\nlost or wrong acknowledged writes: {lost} of {len(merged.acks):,}"
        )
        total = rows[-1]
        per_round = ", ".join(f"{run['rps']:.0f}" for run in runs)
        summary.append(
            f"| {title} | {statistics.median(run['rps'] for run in runs):.0f} ({per_round}) | "
            f"{total['p50']:.1f} | {total['p95']:.1f} | {total['p99']:.1f} | "
            f"{total['errors']} | {lost} |"
        )
        cpu_lines.append(
            f"| {title} | "
            + " | ".join(
                f"{statistics.median(run['cpu'][name] for run in runs):.2f}" for name in COMPONENTS
            )
            + f" | {statistics.median(run['busy'] for run in runs):.0%} |"
        )
    print("\n\n".join(output))
    print(
        "\n### summary, mixed traffic\n\n| set-up | req/s median (per round) | p50 ms | p95 ms | "
        "p99 ms | errors | lost writes |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        + "\n".join(summary)
    )
    print(
        "\n### CPU ms per request (median of rounds)\n\n| set-up | "
        + " | ".join(COMPONENTS)
        + " | host busy |\n| --- |"
        + " ---: |" * (len(COMPONENTS) + 1)
        + "\n"
        + "\n".join(cpu_lines)
    )
    references = {
        tree: title for title, w, p, tree, _ in setups if p == "none" and w == args.workers
    }
    for title, _, _, tree, _ in setups:
        reference = references.get(tree)
        if reference is None or title == reference:
            continue
        ratios = [
            run["rps"] / base["rps"] - 1
            for run, base in zip(results[title], results[reference], strict=True)
        ]
        print(
            f"\n{title} against {reference}: median {statistics.median(ratios):+.1%} "
            f"(per round {', '.join(f'{r:+.1%}' for r in ratios)})"
        )
    loads = "; ".join(
        f"round {i + 1} {runs[0]['load'].split(' → ')[0]} → {runs[-1]['load'].split(' → ')[1]}"
        for i, runs in enumerate(zip(*results.values(), strict=True))
    )
    print(f"\nload average by round: {loads}")


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            continue
    return total


async def measure(coroutine, processes: list) -> tuple[loadgen.Result, int]:
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, sum(tree_rss_kib(process.pid) for process in processes))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    try:
        result = await coroutine
    finally:
        sampler.cancel()
    return result, peak


def table(title: str, rows: list[dict], rss_kib: int) -> str:
    lines = [
        f"### {title}",
        "",
        "| method | requests | req/s | p50 ms | p95 ms | p99 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['count']:,} | {r['rps']:.0f} | {r['p50']:.1f} | "
            f"{r['p95']:.1f} | {r['p99']:.1f} | {r['errors']} |"
        )
    lines.append(f"\nserver processes' peak RSS: {rss_kib / 1024:.0f} MiB")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20, help="seconds of mixed load")
    parser.add_argument("--baseline-duration", type=float, default=10)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=200)
    parser.add_argument("--fresh", action="store_true", help="regenerate the corpus")
    parser.add_argument(
        "--proxy",
        choices=["none", "nginx", "pgbouncer", "nginx+pgbouncer"],
        default="none",
        help="the gateway's processes behind deploy/nginx.conf (and deploy/pgbouncer.ini)",
    )
    parser.add_argument(
        "--scale-out",
        action="store_true",
        help="mixed traffic only, the --setups alternating in --rounds rounds of --duration",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --scale-out")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="--scale-out: every set-up again with the servers and the deploy/ files of this "
        "checkout (a git worktree of other code or configuration), in the same rounds",
    )
    parser.add_argument(
        "--setups",
        default="direct-1,direct,nginx,nginx+pgbouncer",
        help="--scale-out set-ups in each round, comma-separated: "
        + ", ".join(SCALE_OUT_SETUPS)
        + " (N = --workers); a PgBouncer set-up may name its pool size (nginx+pgbouncer:8)",
    )
    parser.add_argument(
        "--held", action="store_true", help="64 clients x 60 s mixed; exit 1 on any error or loss"
    )
    args = parser.parse_args()
    if args.held:
        args.clients, args.duration = 64, 60
    url = database_url(args.fresh, args.memories, args.tenants)
    tenants = mint_tenants(url, args.clients)
    logs = Path(tempfile.mkdtemp(prefix="bench-load-"))
    # The servers log at the default level (INFO): one access line per request, as in production.
    env = server_env(url) | {"LOG_LEVEL": "INFO"}
    print(
        f"{args.workers} uvicorn workers, {args.clients} clients, {len(tenants)} tenants; "
        f"server logs in {logs}",
        flush=True,
    )
    if args.scale_out:
        scale_out_figures(args, url, tenants, env, logs)
        return
    output = []
    minimal, minimal_urls = start_servers(
        "minimal_server:app", args.workers, env, logs, ROOT / "scripts" / "bench"
    )
    try:
        reads = loadgen.run_reads(
            minimal_urls, ["perf://doc/1"], clients=args.clients, duration=args.baseline_duration
        )
        result, rss = asyncio.run(measure(reads, minimal))
        output.append(
            table("baseline: SDK minimal server, resources/read", loadgen.summary_rows(result), rss)
        )
    finally:
        stop(minimal)
    with gateway_stack(args.proxy, args.workers, url, env, logs) as (gateway, gateway_urls, _):
        read_only = loadgen.run_load(
            gateway_urls,
            tenants,
            clients=args.clients,
            duration=args.baseline_duration,
            mix={"resources/read": 1},
        )
        result, rss = asyncio.run(measure(read_only, gateway))
        output.append(table("gateway, resources/read only", loadgen.summary_rows(result), rss))
        mixed = loadgen.run_load(
            gateway_urls, tenants, clients=args.clients, duration=args.duration
        )
        result, rss = asyncio.run(measure(mixed, gateway))
        output.append(table("gateway, mixed traffic", loadgen.summary_rows(result), rss))
    with psycopg.connect(url) as conn:
        problems = loadgen.verify_acks(conn, result.acks)
    writes = sum(1 for ack in result.acks if ack.kind == "remember"), len(result.acks)
    output.append(
        f"\nacknowledged writes checked row by row: {writes[1]:,} "
        f"({writes[0]:,} remember, {writes[1] - writes[0]:,} revise); problems: {len(problems)}"
    )
    for problem in problems[:20]:
        output.append(f"  {problem}")
    errors = result.errors
    for sample in errors[:10]:
        output.append(f"  error: {sample.method} {sample.error}")
    print("\n\n".join(output))
    if args.held and (errors or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
