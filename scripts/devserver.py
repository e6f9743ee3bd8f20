"""Second stage of scripts/dev.py, run inside .venv (`python -m scripts.devserver`, from the
repository root): own the database, then serve or test.

Holding the embedded server in this parent process means the migrate step, daphne and pytest all
share one running PostgreSQL, and it is stopped cleanly when the command ends (Ctrl-C included).
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    if url := os.environ.get("DATABASE_URL"):
        if problem := database_problem(url):
            sys.exit(problem)
        return url
    from django.core.exceptions import ImproperlyConfigured

    from threengram.embedded_db import start

    try:
        url = start()
    except ImproperlyConfigured as refused:  # a sentence for the person, not a traceback
        sys.exit(str(refused))
    print("embedded PostgreSQL 18 running (data in .pgdata/)", flush=True)
    return url


def database_problem(url: str) -> str | None:
    """Why the database at DATABASE_URL (a .env edited by hand) cannot be reached, in a line, or
    None. Tried first: the migrate step would wait out its pool's timeout, log each retry and
    end in a traceback. A URL the settings cannot read is theirs to name (never echoing it: it
    holds the password)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except psycopg.Error:
        return None
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.OperationalError as refused:
        return f"DATABASE_URL: cannot connect: {str(refused).splitlines()[0]}"
    return None


def serve_steps(*, embedded: bool, env: dict[str, str]) -> list[list[str]]:
    """The manage.py commands `serve` runs before the server. The demo account, whose password
    is printed (and published in the README), goes on the embedded database only: another
    server's may hold real accounts and be reachable. DEMO_PASSWORD asks for it there too."""
    with_demo = embedded or bool(env.get("DEMO_PASSWORD"))
    return [
        ["migrate", "--no-input", "-v", "0"],
        *([["demo_account"]] if with_demo else []),
        ["collectstatic", "--no-input", "-v", "0"],
    ]


def daphne_command(host: str, port: str, extra: list[str]) -> list[str]:
    """The server `serve` runs. daphne's own access lines carry the query string (a search of
    the memories page, an OAuth code): at verbosity 0 only the site's access line (the path
    alone) is written."""
    return [sys.executable, "-m", "daphne", "-v", "0", "-b", host, "-p", port,
            "threengram.asgi:application", *extra]  # fmt: skip


def _dying_with_this_process() -> Callable[[], None] | None:
    """What a child runs before it starts so that the kernel sends it SIGTERM when this process
    dies (Linux's PR_SET_PDEATHSIG). Killed (SIGKILL), this process cannot stop daphne itself,
    which would keep the port and answer every page with a 503 once the next run stopped the
    database under it. The function is looked up here: the forked child only calls it."""
    if sys.platform != "linux":
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, signal.SIGTERM)


def _run(args: list[str], env: dict[str, str]) -> int:
    process = subprocess.Popen(args, env=env, cwd=ROOT, preexec_fn=_dying_with_this_process())

    def forward(signum: int, _frame: object) -> None:
        process.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    return process.wait()


def _exit_cleanly(signum: int, _frame: object) -> None:
    """SIGTERM, and SIGHUP (the terminal closed), end the command as Ctrl-C does: through the
    exit handlers, which stop the embedded PostgreSQL. By default they end the process at once,
    and the database outlived the command."""
    sys.exit(128 + signum)


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # Ctrl-C while starting: stopped, as asked, not a failure
        sys.exit(128 + signal.SIGINT)


def _main() -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_cleanly)
    command, extra = sys.argv[1], sys.argv[2:]
    env = dict(os.environ)
    host = env.get("HOST", "127.0.0.1")
    port = env.get("PORT", "8000")
    if command == "serve":
        if problem := listen_address_problem(host, port):
            sys.exit(problem)  # before .env is written or the database started
        dotenv = Path(env.get("THREENGRAM_ENV_FILE") or ROOT / ".env")
        _write_dotenv(dotenv)
        # As the settings read it: .env fills in what the environment leaves unset (here the
        # choice of database, made before the settings are loaded).
        import environ

        environ.Env.read_env(str(dotenv), overwrite=False)
        env = dict(os.environ)
        # The public origin the OAuth metadata and challenges name: this server's. Empty is
        # unset, as the settings read it: left empty, they would name port 8000 whatever PORT.
        if not env.get("PUBLIC_BASE_URL", "").strip():
            env["PUBLIC_BASE_URL"] = local_origin(host, port)
    embedded = not env.get("DATABASE_URL")
    env["DATABASE_URL"] = _database_url()
    python = sys.executable
    if command == "serve":
        # Migrations run as the database owner; the server as the row-level-security role
        # (memories/tenancy.py), which the migrations create on the embedded database.
        owner_env = {**env, "DATABASE_APP_ROLE": ""}
        # DEBUG is off, so the app server serves /static/ from STATIC_ROOT (WhiteNoise).
        for step in serve_steps(embedded=embedded, env=env):
            if subprocess.run([python, "manage.py", *step], env=owner_env, cwd=ROOT).returncode:
                sys.exit(1)
        if embedded:
            env.setdefault("DATABASE_APP_ROLE", "threengram_app")
        origin = local_origin(host, port)
        print(f"serving on {origin}/ (MCP endpoint /mcp); Ctrl-C stops", flush=True)
        code = _run(
            daphne_command(host, port, extra),
            env,
        )
    else:
        for lint in (["check", "."], ["format", "--check", "."]):
            if subprocess.run([python, "-m", "ruff", *lint], cwd=ROOT).returncode:
                sys.exit("ruff found problems; fix with: ruff check --fix . && ruff format .")
        code = _run([python, "-m", "pytest", *extra], env)
    sys.exit(code)


def listen_address_problem(host: str, port: str) -> str | None:
    """Why HOST and PORT cannot be listened on, or None. Checked first: PUBLIC_BASE_URL is made
    from them, and the settings would refuse it with a traceback naming that variable instead."""
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"PORT must be a port number from 1 to 65535; got {port!r}"
    if not host or not host.isascii() or any(c.isspace() or c in "/?#@[]" for c in host):
        return f"HOST must be a host name or an IP address to listen on; got {host!r}"
    # Tried now, as daphne will: daphne finds out only after the migrations, and says so in a
    # log line after "serving on".
    try:
        _bind(host, int(port))
    except socket.gaierror as unknown:
        return f"HOST must be a host name or an IP address to listen on; {host!r}: {unknown}"
    except OSError as refused:
        if refused.errno == errno.EADDRINUSE:
            free = _free_port_after(host, int(port))
            instead = f"serve on another with PORT={free}" if free else "serve on another PORT"
            return f"PORT must be free: {port} is in use on {host} (another serve?); {instead}"
        if refused.errno == errno.EACCES:
            return f"PORT must be one this user may listen on; {port}: {refused.strerror}"
        return f"HOST must be an address of this machine; {host!r}: {refused.strerror}"
    return None


def _bind(host: str, port: int) -> None:
    """Bind `host` and `port` and let go at once, as daphne binds (SO_REUSEADDR, the family by
    the address); OSError when it cannot."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))


# How many ports after a busy one are tried for one to suggest (a few serves side by side).
_PORTS_TRIED = 20


def _free_port_after(host: str, port: int) -> int | None:
    """The first port after `port` that `host` can be listened on at now (after 65535: from
    8001), or None when none of the next _PORTS_TRIED is."""
    after = itertools.chain(range(port + 1, 65536), range(8001, port))
    for candidate in itertools.islice(after, _PORTS_TRIED):
        try:
            _bind(host, candidate)
        except OSError:
            continue
        return candidate
    return None


# Listening on every address: this machine reaches it on loopback, the origin serve names.
_LOOPBACK_OF_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 (read, not bound)


def local_origin(host: str, port: str) -> str:
    """The origin of a server listening on `host` and `port`, reached from this machine; an
    IPv6 address in brackets (RFC 3986 3.2.2)."""
    host = _LOOPBACK_OF_ANY_ADDRESS.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# What earlier versions wrote: DEBUG on, for a server that is meant to be used, not debugged.
_OLD_DEFAULT_DOTENV = re.compile(r"DEBUG=1\nSECRET_KEY=[A-Za-z0-9_-]+\n")


# A SECRET_KEY line with no value (or empty quotes), as in .env.example.
_EMPTY_SECRET_KEY = re.compile(
    r"^[ \t]*(?:export[ \t]+)?SECRET_KEY[ \t]*=[ \t]*(?:\"\"|'')?[ \t]*$", re.MULTILINE
)


def _write_dotenv(dotenv: Path) -> None:
    """A local .env with a random SECRET_KEY, git-ignored and readable by its owner only (the key
    signs sessions); a .env written by hand without a key (say with DATABASE_URL alone) gets
    one added. DEBUG stays off (no tracebacks or settings in error pages); set DEBUG=1 in it
    only to develop. A .env exactly as earlier versions generated it loses its DEBUG=1 line."""
    import secrets

    if not dotenv.exists():
        descriptor = os.open(dotenv, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as created:
            created.write(f"SECRET_KEY={secrets.token_urlsafe(50)}\n")
        return
    written = dotenv.read_text()
    if _OLD_DEFAULT_DOTENV.fullmatch(written):
        dotenv.write_text(written.removeprefix("DEBUG=1\n"))
        print(f"{dotenv}: DEBUG=1 removed (generated default); add it back only to develop")
    elif empty := _EMPTY_SECRET_KEY.search(written):
        # The settings would refuse to start with it (DEBUG off): as good as missing.
        key = secrets.token_urlsafe(50)
        dotenv.write_text(f"{written[: empty.start()]}SECRET_KEY={key}{written[empty.end() :]}")
        print(f"{dotenv}: SECRET_KEY was empty; a generated one set")
    elif not re.search(r"^\s*(export\s+)?SECRET_KEY\s*=", written, re.MULTILINE):
        separator = "" if not written or written.endswith("\n") else "\n"
        dotenv.write_text(f"{written}{separator}SECRET_KEY={secrets.token_urlsafe(50)}\n")
        print(f"{dotenv}: SECRET_KEY added (a generated one)")
    if dotenv.stat().st_mode & 0o077:
        dotenv.chmod(0o600)


if __name__ == "__main__":
    main()
