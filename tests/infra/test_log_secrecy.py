"""What the logs never hold, at any level: OAuth codes and tokens, and the text a request
carried (a search of the memories page), in a failure's line as in the access lines of the
servers run as documented; a failure's line still names its type, request and tenant."""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from django.conf import settings

from infra.observability import JsonFormatter
from memories import browsing
from scripts import scale_out
from scripts.devserver import daphne_command
from tests.accounts.oauth_helpers import REDIRECT_URI, exchange, get_code, pkce_pair, token_request
from tests.e2e.conftest import server_user
from tests.e2e.oauth.conftest import _hidden_fields
from tests.factories import PASSWORD, ApplicationFactory
from tests.mcp_gateway.conftest import free_port, run_sync, start_server, stop_server

SECRET_QUERY = "SECRETQUERY-salary-of-bob-91f3"


class Lines(logging.Handler):
    """Every record, formatted as the server formats it."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def holding(self, *secrets: str) -> list[str]:
        return [line[:300] for line in self.lines if any(s in line for s in secrets)]


@pytest.fixture
def logged() -> Iterator[Lines]:
    """As LOG_LEVEL=DEBUG: the root logger at DEBUG (loggers without a level of their own in
    settings.LOGGING inherit it)."""
    root, lines = logging.getLogger(), Lines()
    level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(lines)
    yield lines
    root.removeHandler(lines)
    root.setLevel(level)


@pytest.mark.django_db
def test_oauth_codes_and_tokens_never_reach_the_log_even_at_debug(client, tenant, logged):
    application = ApplicationFactory(redirect_uris=REDIRECT_URI)
    client.force_login(tenant)
    verifier, challenge = pkce_pair()
    code = get_code(client, application, challenge)
    tokens = exchange(client, application, code, verifier).json()
    refresh = {"grant_type": "refresh_token", "resource": settings.MCP_RESOURCE_URL}
    refreshed = token_request(
        client, application, refresh_token=tokens["refresh_token"], **refresh
    ).json()
    assert token_request(client, application, refresh_token="not-live-4f1c", **refresh).status_code
    secrets = [code, verifier, "not-live-4f1c", *tokens.values(), *refreshed.values()]
    secrets = [s for s in secrets if isinstance(s, str) and len(s) > 8]
    assert logged.lines and logged.holding(*secrets) == []


@pytest.mark.django_db
def test_a_failed_page_logs_its_type_request_and_tenant_never_the_text(
    client, tenant, logged, monkeypatch
):
    """PostgreSQL's error message quotes the value it refused: here a search of the memories
    page, in a statement made to fail."""
    matching = browsing._matching
    monkeypatch.setattr(
        browsing,
        "_matching",
        lambda owner_id, filters, words: matching(owner_id, filters, words).extra(
            where=["(%s)::int > 0"], params=[filters.text]
        ),
    )
    client.raise_request_exception = False
    client.force_login(tenant)
    response = client.get("/memories/", {"q": SECRET_QUERY})
    assert response.status_code == 500 and SECRET_QUERY not in response.text
    (failure,) = [json.loads(line) for line in logged.lines if '"level": "ERROR"' in line]
    assert failure["exception"].startswith("django.db.utils.DataError\n")
    assert "psycopg.errors.InvalidTextRepresentation\n" in failure["exception"]  # its cause
    assert "Traceback" not in failure["exception"] and 'File "' in failure["exception"]
    assert failure["request_id"] != "-" and failure["tenant_id"] == str(tenant.pk)
    assert logged.holding(SECRET_QUERY) == []


def _search_the_memories_page(base_url: str, username: str) -> None:
    with httpx2.Client(base_url=base_url, timeout=10) as http:
        fields = _hidden_fields(http.get("/login/").text) | {
            "username": username,
            "password": PASSWORD,
        }
        assert http.post("/login/", data=fields).status_code == 302
        assert http.get("/memories/", params={"q": SECRET_QUERY}).status_code == 200


PLAIN_HTTP = {"SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0", "LOG_LEVEL": "INFO"}


def _uvicorn_as_the_readme_runs_it(port: int) -> list[str]:
    return ["python", "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
            "--proxy-headers", "--forwarded-allow-ips", "127.0.0.1", "--no-access-log",
            "threengram.asgi:application"]  # fmt: skip


def _uvicorn_with_its_access_log(port: int) -> list[str]:
    return [a for a in _uvicorn_as_the_readme_runs_it(port) if a != "--no-access-log"]


@pytest.mark.live
@pytest.mark.parametrize(
    "command",
    [
        lambda port: daphne_command("127.0.0.1", str(port), []),
        _uvicorn_as_the_readme_runs_it,
        _uvicorn_with_its_access_log,  # the settings keep uvicorn's own line out
    ],
    ids=["dev.py serve", "uvicorn", "uvicorn with its access log"],
)
def test_the_servers_access_lines_hold_no_query_string(transactional_db, command):
    import sys

    user = server_user()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        argv = [sys.executable if a == "python" else a for a in command(port)]
        server = start_server(argv, port, Path(folder) / "server.log", PLAIN_HTTP)
        try:
            _search_the_memories_page(server.url, user.username)
            time.sleep(0.5)  # the background log writer's batch
        finally:
            stop_server(server)
        output = server.output()
    assert '"path": "/memories/"' in output  # the site's own access line
    assert [line for line in output.splitlines() if SECRET_QUERY in line] == []


@pytest.mark.live
@pytest.mark.anyio
async def test_nginx_logs_the_path_without_its_query_string(transactional_db):
    user = await run_sync(server_user)
    with tempfile.TemporaryDirectory() as folder:
        port, backend_port = free_port(), free_port()
        backend = start_server(
            scale_out.uvicorn_command(backend_port),
            backend_port,
            Path(folder) / "uvicorn.log",
            PLAIN_HTTP | {"PUBLIC_BASE_URL": f"http://127.0.0.1:{port}"},
        )
        try:
            with scale_out.running_nginx(port, [backend_port], Path(folder) / "nginx") as nginx:
                await run_sync(_search_the_memories_page, nginx.url, user.username)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and len(nginx.access_log()) < 4:
                    time.sleep(0.05)
                lines = nginx.access_log()
        finally:
            stop_server(backend)
    assert any('"GET /memories/ HTTP/1.1" 200' in line for line in lines), lines
    assert [line for line in lines if SECRET_QUERY in line] == []


@pytest.mark.live
def test_nginx_error_log_holds_no_query_string_when_a_server_cannot_be_reached():
    """A search of the memories page while the server behind nginx restarts (nothing listens on
    its port yet): nginx answers 502, and none of its logs quotes the search."""
    with tempfile.TemporaryDirectory() as folder:
        port, backend_port = free_port(), free_port()  # nothing listens on backend_port
        with scale_out.running_nginx(port, [backend_port], Path(folder) / "nginx") as nginx:
            with httpx2.Client(base_url=nginx.url, timeout=10) as http:
                response = http.get(
                    "/memories/",
                    params={"q": SECRET_QUERY},
                    # the page a click on a search hit comes from
                    headers={"referer": f"{nginx.url}/memories/?q={SECRET_QUERY}"},
                )
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not nginx.access_log():
                time.sleep(0.05)
            access_log, error_log = nginx.access_log(), nginx.error_log()
    assert response.status_code == 502
    assert any('"GET /memories/ HTTP/1.1" 502' in line for line in access_log), access_log
    assert SECRET_QUERY not in error_log, error_log
