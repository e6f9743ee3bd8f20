"""Second stage of scripts/dev.py, run inside .venv: own the database, then serve or test.

Holding the embedded server in this parent process means the migrate step, daphne and pytest all
share one running PostgreSQL, and it is stopped cleanly when the command ends (Ctrl-C included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from threengram.embedded_db import start

    url = start()
    print("embedded PostgreSQL 18 running (data in .pgdata/)", flush=True)
    return url


def _run(args: list[str], env: dict[str, str]) -> int:
    process = subprocess.Popen(args, env=env, cwd=ROOT)

    def forward(signum: int, _frame: object) -> None:
        process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return process.wait()


def main() -> None:
    command, extra = sys.argv[1], sys.argv[2:]
    env = dict(os.environ)
    if command == "serve":
        _write_dotenv()
    embedded = not env.get("DATABASE_URL")
    env["DATABASE_URL"] = _database_url()
    python = sys.executable
    if command == "serve":
        # Migrations run as the database owner; the server as the row-level-security role
        # (memories/tenancy.py), which the migrations create on the embedded database.
        owner_env = {**env, "DATABASE_APP_ROLE": ""}
        for step in (["migrate", "--no-input", "-v", "0"], ["demo_account"]):
            if subprocess.run([python, "manage.py", *step], env=owner_env, cwd=ROOT).returncode:
                sys.exit(1)
        if embedded:
            env.setdefault("DATABASE_APP_ROLE", "threengram_app")
        host = os.environ.get("HOST", "127.0.0.1")
        port = os.environ.get("PORT", "8000")
        print(f"serving on http://{host}:{port}/ (MCP endpoint /mcp); Ctrl-C stops", flush=True)
        code = _run(
            [python, "-m", "daphne", "-b", host, "-p", port, "threengram.asgi:application", *extra],
            env,
        )
    else:
        for lint in (["check", "."], ["format", "--check", "."]):
            if subprocess.run([python, "-m", "ruff", *lint], cwd=ROOT).returncode:
                sys.exit("ruff found problems; fix with: ruff check --fix . && ruff format .")
        code = _run([python, "-m", "pytest", *extra], env)
    sys.exit(code)


def _write_dotenv() -> None:
    """A local .env with DEBUG on and a random SECRET_KEY, written once and git-ignored."""
    dotenv = ROOT / ".env"
    if not dotenv.exists():
        import secrets

        dotenv.write_text(f"DEBUG=1\nSECRET_KEY={secrets.token_urlsafe(50)}\n")


if __name__ == "__main__":
    main()
