"""`python3 scripts/dev.py serve` is a safe default for a person running their own memory
server: DEBUG off, a generated SECRET_KEY kept in .env, static files served, friendly error
pages, and log-in working over plain http on this machine (scripts/devserver.py)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx2
import psutil
import pytest

from scripts import devserver
from tests.mcp_gateway.conftest import ROOT, free_port, subprocess_database_url

LEAKS = ("Traceback", "URLconf", "SECRET_KEY", "DATABASE_URL", "settings.py", "site-packages")
# Where a run that goes past its checks fails at once: no database answers there.
NO_DATABASE = "postgresql://nobody@127.0.0.1:1/nothing"


def serve(dotenv, **variables: str | None) -> subprocess.CompletedProcess:
    """`serve` run to its end on `dotenv`, on a free port unless told otherwise (None: a
    variable unset, left to the .env)."""
    environment = {
        **os.environ,
        "THREENGRAM_ENV_FILE": str(dotenv),
        "DATABASE_URL": NO_DATABASE,
        "PORT": str(free_port()),
        **variables,
    }
    return subprocess.run(
        [sys.executable, "-m", "scripts.devserver", "serve"],
        cwd=ROOT,
        env={key: value for key, value in environment.items() if value is not None},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_new_dotenv_gets_a_secret_key_and_no_debug(tmp_path):
    dotenv = tmp_path / ".env"
    devserver._write_dotenv(dotenv)
    text = dotenv.read_text()
    assert re.fullmatch(r"SECRET_KEY=[A-Za-z0-9_-]{60,}\n", text)
    devserver._write_dotenv(dotenv)
    assert dotenv.read_text() == text  # kept: sessions survive a restart


def test_a_dotenv_as_earlier_versions_wrote_it_loses_debug_and_nothing_else(tmp_path):
    generated, edited = tmp_path / "generated.env", tmp_path / "edited.env"
    generated.write_text("DEBUG=1\nSECRET_KEY=abc_DEF-123\n")
    edited.write_text("DEBUG=1\nSECRET_KEY=abc_DEF-123\nLOG_FORMAT=plain\n")
    devserver._write_dotenv(generated)
    devserver._write_dotenv(edited)
    assert generated.read_text() == "SECRET_KEY=abc_DEF-123\n"
    assert edited.read_text().startswith("DEBUG=1\n")  # the owner's own choice stays


def test_the_dotenv_holding_the_secret_key_is_readable_by_its_owner_only(tmp_path):
    old_mask = os.umask(0o022)
    try:
        devserver._write_dotenv(tmp_path / ".env")
    finally:
        os.umask(old_mask)
    assert (tmp_path / ".env").stat().st_mode & 0o777 == 0o600


def test_a_dotenv_with_an_empty_key_gets_one_in_its_place(tmp_path):
    """As in .env.example: with DEBUG off the settings would refuse to start on it."""
    dotenv = tmp_path / ".env"
    dotenv.write_text("LOG_FORMAT=plain\nSECRET_KEY=\nLOG_LEVEL=WARNING\n")
    devserver._write_dotenv(dotenv)
    assert re.fullmatch(
        r"LOG_FORMAT=plain\nSECRET_KEY=[\w-]{60,}\nLOG_LEVEL=WARNING\n", dotenv.read_text()
    )


def test_a_dotenv_written_by_hand_without_a_key_gets_one_and_keeps_the_rest(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text("DATABASE_URL=postgresql://memory@db.example.com/memory")
    dotenv.chmod(0o644)
    devserver._write_dotenv(dotenv)
    text = dotenv.read_text()
    assert re.fullmatch(
        r"DATABASE_URL=postgresql://memory@db\.example\.com/memory\nSECRET_KEY=[\w-]{60,}\n", text
    )
    assert dotenv.stat().st_mode & 0o777 == 0o600
    devserver._write_dotenv(dotenv)
    assert dotenv.read_text() == text


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1", "http://127.0.0.1:8001"),
        ("::1", "http://[::1]:8001"),
        # Every address: this machine's loopback, not an origin no client can use (and the
        # https redirect every page of a non-loopback origin gets).
        ("0.0.0.0", "http://127.0.0.1:8001"),
        ("::", "http://[::1]:8001"),
    ],
)
def test_serve_names_the_origin_it_listens_on(host, origin):
    assert devserver.local_origin(host, "8001") == origin


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"PORT": "abc"}, "PORT"),
        ({"PORT": "0"}, "PORT"),
        ({"PORT": "99999"}, "PORT"),
        ({"HOST": "my host"}, "HOST"),
        ({"HOST": "[::1]"}, "HOST"),  # brackets belong to the URL, not the address
        # Found only by listening: daphne said so in a log line, after "serving on".
        ({"HOST": "198.51.100.7"}, "HOST"),  # not an address of this machine
        ({"HOST": "no-such-host.invalid"}, "HOST"),
    ],
)
def test_serve_refuses_an_address_it_cannot_listen_on_naming_it(tmp_path, variables, named):
    dotenv = tmp_path / ".env"
    result = serve(dotenv, **variables)
    assert result.returncode != 0
    assert result.stderr.startswith(f"{named} must be") and result.stderr.count("\n") == 1, (
        result.stderr
    )
    assert not dotenv.exists()  # nothing written, no database started


@pytest.mark.parametrize(
    ("embedded", "env", "with_demo"),
    [
        (True, {}, True),
        # Another server's database may hold real accounts: no account with a published password.
        (False, {}, False),
        (False, {"DEMO_PASSWORD": ""}, False),
        (False, {"DEMO_PASSWORD": "chosen for this database"}, True),
    ],
)
def test_the_demo_account_goes_on_the_embedded_database_or_where_asked(embedded, env, with_demo):
    steps = devserver.serve_steps(embedded=embedded, env=env)
    assert (["demo_account"] in steps) is with_demo
    assert steps[0][0] == "migrate" and steps[-1][0] == "collectstatic"


def test_serve_refuses_a_port_in_use_before_it_starts_anything(tmp_path):
    """A second serve on the port of the first stops before anything else: it must not run the
    migrations or reset the demo password under the running one, print "serving on", and then
    fail in a log line."""
    dotenv = tmp_path / ".env"
    with socket.create_server(("127.0.0.1", 0)) as first:
        port = first.getsockname()[1]
        result = serve(dotenv, PORT=str(port))
    assert result.returncode != 0
    suggested = re.fullmatch(
        rf"PORT must be free: {port} is in use on 127\.0\.0\.1 \(another serve\?\);"
        r" serve on another with PORT=(\d+)\n",
        result.stderr,
    )
    assert suggested and int(suggested[1]) != port
    assert not dotenv.exists()


def listening(port: int) -> socket.socket | None:
    """A listener on `port` of 127.0.0.1, or None when something else holds it."""
    try:
        return socket.create_server(("127.0.0.1", port))
    except OSError:
        return None


def test_the_port_a_refusal_suggests_is_one_found_free():
    """The port after the busy one may be busy too (a second serve already on it): the one
    suggested is one that could be listened on when suggested."""
    with contextlib.ExitStack() as held:
        for _ in range(20):  # two ports side by side, both held
            first = held.enter_context(socket.create_server(("127.0.0.1", 0)))
            port = first.getsockname()[1]
            if (second := listening(port + 1)) is not None:
                held.enter_context(second)
                break
        else:
            pytest.skip("found no two free ports side by side")
        problem = devserver.listen_address_problem("127.0.0.1", str(port))
        suggested = re.fullmatch(
            rf"PORT must be free: {port} is in use on 127\.0\.0\.1 \(another serve\?\);"
            r" serve on another with PORT=(\d+)",
            problem or "",
        )
        assert suggested, problem
        assert int(suggested[1]) not in (port, port + 1)
        assert devserver.listen_address_problem("127.0.0.1", suggested[1]) is None


def test_a_bad_value_in_the_dotenv_is_named_in_one_line(db, tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"SECRET_KEY={'k' * 50}\nLOG_LEVEL=verbose\n")
    result = serve(dotenv, DATABASE_URL=subprocess_database_url())
    assert result.returncode != 0
    assert result.stderr == (
        "LOG_LEVEL='VERBOSE': must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL.\n"
    )


def test_a_weak_demo_password_stops_serve_naming_it(db, tmp_path):
    """A DEMO_PASSWORD asks for the demo account on a database other than the embedded one,
    maybe of a server others reach: held to the rules of every password, named, no traceback."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"SECRET_KEY={'k' * 50}\n")
    result = serve(dotenv, DATABASE_URL=subprocess_database_url(), DEMO_PASSWORD="a")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "DEMO_PASSWORD is refused: This password is too short." in result.stderr
    assert "serving on" not in result.stdout


def test_a_database_url_in_the_dotenv_that_cannot_be_reached_is_named_in_one_line(tmp_path):
    """Named once, at once: not after the migrate step waited out its pool's timeout, logging
    each retry and ending in two tracebacks."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"SECRET_KEY={'k' * 50}\nDATABASE_URL={NO_DATABASE}\n")
    result = serve(dotenv, DATABASE_URL=None)
    assert result.returncode != 0
    assert result.stderr == (
        'DATABASE_URL: cannot connect: connection failed: connection to server at "127.0.0.1", '
        "port 1 failed: Connection refused\n"
    )


@pytest.mark.parametrize(
    "command",
    [["-m", "scripts.devserver", "serve"], ["manage.py", "migrate"]],
    ids=["serve", "its migrate step"],
)
def test_ctrl_c_while_serve_starts_stops_it_without_a_traceback(tmp_path, command):
    """Ctrl-C at a terminal reaches the whole foreground process group: here while serve, or
    its migrate step, waits for a database that took the connection and has not answered."""
    dotenv = tmp_path / ".env"
    with socket.create_server(("127.0.0.1", 0)) as silent_database:
        dotenv.write_text(
            f"SECRET_KEY={'k' * 50}\n"
            f"DATABASE_URL=postgresql://nobody@127.0.0.1:{silent_database.getsockname()[1]}/db\n"
        )
        environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
        process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            env={
                **environment,
                "THREENGRAM_ENV_FILE": str(dotenv),
                "PORT": str(free_port()),
                "DJANGO_SETTINGS_MODULE": "threengram.settings",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            silent_database.settimeout(60)
            connection, _ = silent_database.accept()  # connecting: held open, unanswered
            with connection:
                os.killpg(process.pid, signal.SIGINT)
                _, errors = process.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 128 + signal.SIGINT
    assert "Traceback" not in errors, errors


@pytest.fixture
def served(transactional_db, tmp_path):
    """The serve command as the README runs it, on the test database and a fresh .env."""
    port = free_port()
    unset = {
        "DEBUG",
        "SECRET_KEY",
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "DJANGO_SETTINGS_MODULE",
    }
    unset |= {"DATABASE_URL", "PUBLIC_BASE_URL"}
    env = {key: value for key, value in os.environ.items() if key not in unset}
    # The database named in .env only (as .env.example suggests), and another port than the
    # default with no public origin given (a blank line for it, which the settings read as
    # unset): serve names its own.
    (tmp_path / ".env").write_text(
        f"SECRET_KEY={'k' * 50}\nDATABASE_URL={subprocess_database_url()}\nPUBLIC_BASE_URL=\n"
    )
    env.update(
        THREENGRAM_ENV_FILE=str(tmp_path / ".env"),
        PORT=str(port),
        DEMO_PASSWORD="a demo passphrase for the test",
        LOG_LEVEL="WARNING",
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "scripts.devserver", "serve"],
            cwd=ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text(errors="replace")
            try:
                httpx2.get(f"{base}/health", timeout=1)
                break
            except httpx2.TransportError:
                time.sleep(0.2)
        else:
            pytest.fail(f"serve did not answer:\n{log.read_text(errors='replace')}")
        yield base, tmp_path / ".env", log, process
    finally:
        process.terminate()
        process.wait(20)


@pytest.mark.live
def test_serve_is_safe_and_usable_over_local_http_and_a_kill_takes_its_server_down(served):
    """SIGKILL cannot be caught: daphne, left running, kept the port (the next serve could not
    listen on it) and answered 503 once the next run stopped the database under it. Checked on
    the serve just used, which saves starting another (migrations, demo account, daphne)."""
    base, dotenv, log, process = served
    assert "DEBUG" not in dotenv.read_text() and "SECRET_KEY=" in dotenv.read_text()
    output = log.read_text(errors="replace")
    assert "embedded PostgreSQL" not in output  # the database of .env, not the embedded one

    with httpx2.Client(base_url=base, timeout=30) as browser:
        assert browser.get("/static/css/site.css").status_code == 200

        missing = browser.get("/no/such/page/")
        assert missing.status_code == 404
        assert "Not found" in missing.text
        for leak in LEAKS:
            assert leak not in missing.text, leak

        page = browser.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        response = browser.post(
            "/login/",
            data={
                "csrfmiddlewaretoken": token,
                "username": "demo",
                "password": "a demo passphrase for the test",
            },
            headers={"Referer": f"{base}/login/"},
        )
        assert response.status_code == 302, response.text[:500]
        session_cookie = response.headers["set-cookie"]
        assert "sessionid=" in session_cookie and "secure" not in session_cookie.lower()
        memories = browser.get("/memories/")
        assert memories.status_code == 200 and "append-only" in memories.text
        # An MCP client is sent to this server, on this port, for its metadata.
        challenge = browser.post("/mcp").headers["www-authenticate"]
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource' in challenge
    assert "Traceback" not in log.read_text(errors="replace")
    assert _stopped_with(process, signal.SIGKILL) == []


def _stopped_with(process: subprocess.Popen, signum: int) -> list[psutil.Process]:
    """Send `signum` to serve alone; its children (daphne) still running 20 s later."""
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "serve runs daphne"
    process.send_signal(signum)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    _, alive = psutil.wait_procs(children, timeout=20)
    for orphan in alive:  # what the test found wrong, not left behind
        orphan.kill()
    return alive


@pytest.mark.live
def test_serve_stops_cleanly_when_its_terminal_closes(served):
    """SIGHUP ended serve at once, its exit handlers skipped (the embedded PostgreSQL's stop
    among them: the database outlived the command) and daphne orphaned."""
    *_, process = served
    assert _stopped_with(process, signal.SIGHUP) == []
    assert process.returncode >= 0  # exited, not killed by the signal


def test_the_production_settings_keep_secure_cookies_and_https():
    """The local relaxation follows the public origin: an https origin gets the defaults."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; import django; django.setup(); "
            "print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
            "settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS, settings.DEBUG)",
        ],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if "SECURE" not in k and k != "DEBUG"},
            "DJANGO_SETTINGS_MODULE": "threengram.settings",
            "THREENGRAM_ENV_FILE": "",
            "SECRET_KEY": "x" * 50,
            "PUBLIC_BASE_URL": "https://memory.example.com",
            "DATABASE_URL": subprocess_database_url(),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.split() == ["True", "True", "True", "31536000", "False"], result.stderr
