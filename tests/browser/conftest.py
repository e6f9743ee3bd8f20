"""Browser tests: pytest-playwright driving Debian's Chromium against a live daphne process.

- Chromium comes from Debian (`apt-get install chromium`), never from `playwright install`: the
  session fixture `chromium_executable` (tests/conftest.py) installs it when missing (CI runs
  as root).
- The server is a real daphne subprocess on a free port, using the pytest-django test database
  (the `transactional_db` data is committed, so the other process sees it). DEBUG=1 there, so
  the cookies work over plain http.
- These tests run last: pytest-playwright's session-scoped Playwright keeps an asyncio loop
  running in the main thread until the session ends, and Django refuses synchronous ORM calls
  wherever a loop is running. Our own ORM calls in these tests are allowed explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.mcp_gateway.conftest import free_port, subprocess_database_url

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Last of all: pytest's own reordering (which groups items by their parametrized higher-scoped
# fixtures, such as pytest-playwright's browser name) would otherwise move other tests after these.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    browser_dir = Path(__file__).parent
    items.sort(key=lambda item: Path(item.path).is_relative_to(browser_dir))


@pytest.fixture(scope="session")
def browser_type_launch_args(chromium_executable):
    """pytest-playwright's launch options: Debian's Chromium, headless, no sandbox (root)."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    # Set before Playwright starts its loop and restored after it stops (fixture order).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield {"executable_path": chromium_executable, "headless": True, "args": CHROMIUM_ARGS}
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class LiveServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, path: str) -> str:
        return self.url + path


def _start_daphne(extra_env: dict[str, str]) -> tuple[LiveServer, subprocess.Popen, object]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "threengram.test_settings",
        "DATABASE_URL": subprocess_database_url(),
        # Live servers run behind row-level security, as the application role does in
        # production (memories/tenancy.py): every end-to-end test exercises the second wall.
        "DATABASE_APP_ROLE": "threengram_app",
        "DEBUG": "1",
        "PUBLIC_BASE_URL": url,
        "DATABASE_POOL_MIN": "1",
        "DATABASE_POOL_MAX": "4",
        **extra_env,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "daphne.log"
    log = log_path.open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "threengram.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/login/", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            _stop_daphne(process, log)
            pytest.fail(f"daphne did not start on {url}; see {log_path}")
        time.sleep(0.2)
    return LiveServer(url), process, log


def _stop_daphne(process: subprocess.Popen, log) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.close()


@pytest.fixture(scope="session")
def _daphne_servers(browser_type_launch_args, django_db_setup, django_db_blocker):
    """One live server per set of `server_env` settings, for the whole session: starting daphne
    took seconds per test. Each test still gets its own data (transactional_db flushes the
    tables the server reads), as the end-to-end tests' session-wide server does."""
    started: dict[tuple, tuple[LiveServer, subprocess.Popen, object]] = {}

    def server(extra_env: dict[str, str]) -> LiveServer:
        key = tuple(sorted(extra_env.items()))
        if key not in started:
            with django_db_blocker.unblock():
                started[key] = _start_daphne(extra_env)
        return started[key][0]

    yield server
    for _, process, log in started.values():
        _stop_daphne(process, log)


@pytest.fixture
def daphne_server(request, _daphne_servers, transactional_db) -> LiveServer:
    """The live server; `@pytest.mark.server_env(NAME=value)` adds settings for its process."""
    marker = request.node.get_closest_marker("server_env")
    return _daphne_servers(marker.kwargs if marker else {})


@pytest.fixture(scope="session")
def screenshots():
    """Save a full-page screenshot of each page under artifacts/browser/ (git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def shoot(page, name: str) -> None:
        page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)

    return shoot


@pytest.fixture
def console_errors(page):
    """Errors the browser reports for this page: a resource blocked by the CSP, a failed load."""
    errors: list[str] = []
    page.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    return errors
