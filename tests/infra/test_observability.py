"""Operability: health probes, version, and structured access logs without tenant text."""

import io
import json
import logging
import re
import select
import time

import httpx2
import pytest
from django.test import Client

from infra.observability import VERSION, JsonFormatter, readiness
from tests.mcp_gateway.conftest import free_port, running_daphne


def test_health_needs_no_database(client):
    response = client.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_ready_checks_database_and_migrations(client, db):
    readiness.forget()
    response = client.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "database": "ok"}


def test_ready_answers_from_a_check_at_most_a_few_seconds_old(
    client, db, django_assert_num_queries, django_assert_max_num_queries, monkeypatch
):
    readiness.forget()
    assert readiness.max_age <= 10
    with django_assert_max_num_queries(10) as checked:
        assert client.get("/ready").status_code == 200
    assert len(checked) > 0  # the migration planner read the database
    with django_assert_num_queries(0):  # a flood of probes costs the database nothing
        for _ in range(50):
            assert client.get("/ready").json() == {"status": "ready", "database": "ok"}
    monkeypatch.setattr(readiness, "max_age", 0.0)  # as if the answer had grown old
    with django_assert_max_num_queries(10) as rechecked:
        assert client.get("/ready").status_code == 200
    assert len(rechecked) > 0


def test_ready_logs_why_the_database_cannot_be_used_and_tells_the_probe_only_that(
    django_db_setup,
):
    """A server whose database refuses it (here: an application role that does not exist, as
    when a DBA's statements were not run; a wrong password or a server down read alike from
    outside) is unready; the operator learns why from its log, the public probe does not."""
    role = "threengram_role_nobody_created"
    with running_daphne(free_port(), {"DATABASE_APP_ROLE": role}) as server:
        response = httpx2.get(f"{server.url}/ready", timeout=30)
        assert response.status_code == 503
        assert response.json() == {"status": "unavailable", "database": "unreachable"}
        assert role not in response.text
        deadline = time.monotonic() + 10
        while "readiness: the database cannot be used" not in server.output():
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.1)
        [logged] = [
            line["message"]
            for line in map(json.loads, re.findall(r"^\{.*\}$", server.output(), re.MULTILINE))
            if line["logger"] == "infra.observability"
        ]
    assert logged == f'readiness: the database cannot be used: role "{role}" does not exist'


def test_an_orchestrator_probes_a_process_at_its_own_address_over_plain_http(client, db, settings):
    """A probe names the process's address as its Host, which ALLOWED_HOSTS does not (Django
    would answer 400), and comes over plain http behind the TLS proxy (the https redirect would
    answer 301): the probes answer it all the same. Every other path stays behind both."""
    settings.ALLOWED_HOSTS = ["memory.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    readiness.forget()
    probe = {"HTTP_HOST": "10.1.2.3:8001"}
    assert client.get("/health", **probe).json() == {"status": "ok"}
    assert client.get("/ready", **probe).json() == {"status": "ready", "database": "ok"}
    assert client.get("/version", **probe).status_code == 400
    assert client.get("/version", HTTP_HOST="memory.example.com").status_code == 301


@pytest.mark.parametrize("path", ["/health", "/ready"])
def test_a_probe_takes_only_get_and_head(client, db, path):
    """A probe only reads: a POST or a DELETE answered 200 "ok" would tell its sender that
    something was done."""
    readiness.forget()
    assert client.head(path).status_code == 200
    for method in ("POST", "PUT", "PATCH", "DELETE", "TRACE", "OPTIONS"):
        response = client.generic(method, path)
        assert response.status_code == 405, method
        assert response["Allow"] == "GET, HEAD"
        assert response.json() == {
            "error": "invalid_request",
            "error_description": f"{method} is not allowed here; this address takes GET, HEAD",
        }


def test_version(client):
    assert client.get("/version").json() == {"name": "threengram", "version": VERSION}


def test_version_takes_only_get_and_head_and_says_so_in_json():
    """Said so to any program: a POST without a CSRF token, as every program's is, got the
    site's "form expired" page before."""
    client = Client(enforce_csrf_checks=True)
    assert client.head("/version").status_code == 200
    for method in ("POST", "PUT", "PATCH", "DELETE", "PROPFIND", "TRACE"):
        response = client.generic(method, "/version")
        assert response.status_code == 405, method
        assert response["Allow"] == "GET, HEAD"
        assert response.json() == {
            "error": "invalid_request",
            "error_description": f"{method} is not allowed here; this address takes GET, HEAD",
        }


def test_every_response_carries_a_request_id(client):
    minted = client.get("/health")["X-Request-ID"]
    assert len(minted) == 32
    assert client.get("/health", headers={"X-Request-ID": "proxy-id-1234"})["X-Request-ID"] == (
        "proxy-id-1234"
    )
    assert client.get("/health", headers={"X-Request-ID": "bad id\n"})["X-Request-ID"] != "bad id\n"


def test_access_log_is_json_with_request_and_tenant_ids(client, tenant, caplog):
    client.force_login(tenant)
    with caplog.at_level(logging.INFO, logger="threengram.access"):
        response = client.get("/version?content=secret-memory-text")
    record = next(r for r in caplog.records if r.name == "threengram.access")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == response["X-Request-ID"]
    assert line["tenant_id"] == str(tenant.pk)
    assert (line["method"], line["path"], line["status"]) == ("GET", "/version", 200)
    assert isinstance(line["latency_ms"], float)
    assert "secret-memory-text" not in json.dumps(line)


SEARCHED = "my-bank-pin-4711"


def formatted_lines(caplog) -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(record)) for record in caplog.records]


def test_the_error_line_of_a_4xx_holds_no_query_text(client, tenant, caplog):
    # Django attaches the request to its 4xx and 5xx records; the memory pages' search text is
    # in the query string.
    client.force_login(tenant)
    with caplog.at_level(logging.INFO):
        # (A NUL in the page number: one in a filter is named in the page, a 200.)
        response = client.get(f"/memories/?q={SEARCHED}&page=1%00")
    assert response.status_code == 400
    lines = formatted_lines(caplog)
    [error] = [line for line in lines if line["logger"] == "django.request"]
    assert error["request"] == "GET /memories/"
    assert not [line for line in lines if SEARCHED in json.dumps(line)]


def test_the_error_line_of_a_4xx_carries_its_requests_id(client, tenant, caplog):
    client.force_login(tenant)
    with caplog.at_level(logging.INFO):
        response = client.get("/memories/no-such-id/")
    assert response.status_code == 404
    [error] = [line for line in formatted_lines(caplog) if line["logger"] == "django.request"]
    assert error["request_id"] == response["X-Request-ID"]


def test_log_time_is_utc_with_milliseconds_for_every_second():
    formatter = JsonFormatter()
    times = []
    for created in (1_800_000_000.25, 1_800_000_000.5, 1_800_000_061.125):
        record = logging.makeLogRecord({"msg": "m", "levelname": "INFO"})
        record.created, record.msecs = created, (created - int(created)) * 1000
        times.append(json.loads(formatter.format(record))["time"])
    assert times == [
        "2027-01-15T08:00:00.250Z",
        "2027-01-15T08:00:00.500Z",
        "2027-01-15T08:01:01.125Z",
    ]


@pytest.mark.parametrize("path", ["/health", "/ready", "/version"])
def test_probes_are_plain_json(client, db, path):
    assert client.get(path)["Content-Type"] == "application/json"


def _background_logger(handler) -> logging.Logger:
    from infra.observability import JsonFormatter

    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(f"test.background.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def _lines(stream) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_background_handler_keeps_the_request_ids_of_the_logging_thread():
    from infra.observability import BackgroundStreamHandler, request_id_var

    stream = io.StringIO()
    handler = BackgroundStreamHandler(stream)
    logger = _background_logger(handler)
    token = request_id_var.set("req-1234abcd")
    try:
        logger.error("failed", exc_info=ValueError("boom"))
    finally:
        request_id_var.reset(token)
        logger.removeHandler(handler)
        handler.close()
    (line,) = _lines(stream)
    assert line["request_id"] == "req-1234abcd"
    assert line["exception"] == "builtins.ValueError"  # its type; never its message


class _RecordingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_background_handler_writes_access_lines_in_batches_and_in_order():
    from infra.observability import BackgroundStreamHandler

    stream = _RecordingStream()
    handler = BackgroundStreamHandler(stream, flush_interval=0.5)
    logger = _background_logger(handler)
    try:
        for number in range(200):
            logger.info("request", extra={"number": number, "padding": "x" * 100})
        # Not written line by line as they come: the writer waits for the batch.
        assert stream.getvalue() == ""
        assert _wait_for(lambda: len(_lines(stream)) == 200)
        assert [line["number"] for line in _lines(stream)] == list(range(200))
        # Whole lines, at most PIPE_BUF bytes per write: atomic on a pipe that several
        # processes share, so their lines never interleave.
        assert 1 < len(stream.writes) < 200
        assert all(w.endswith("\n") and len(w.encode()) <= select.PIPE_BUF for w in stream.writes)
    finally:
        logger.removeHandler(handler)
        handler.close()


def test_background_handler_writes_warnings_at_once_and_the_rest_on_close():
    from infra.observability import BackgroundStreamHandler

    stream = io.StringIO()
    handler = BackgroundStreamHandler(stream, flush_interval=3600)
    logger = _background_logger(handler)
    try:
        logger.info("before")
        logger.warning("database unavailable")
        # The warning does not wait an hour, and takes the lines before it along.
        assert _wait_for(lambda: len(_lines(stream)) == 2)
        logger.info("last words")
        handler.close()  # logging.shutdown() at exit
        logger.info("after the end")  # no writer left: written at once
        assert [line["message"] for line in _lines(stream)] == [
            "before",
            "database unavailable",
            "last words",
            "after the end",
        ]
    finally:
        logger.removeHandler(handler)
        handler.close()


def test_background_handler_writes_at_once_once_the_server_shuts_down():
    """uvicorn, stopped by SIGTERM, ends the process with the signal once it has shut down: no
    exit handler runs, so nothing may wait for the writer's next batch from then on."""
    from infra.observability import BackgroundStreamHandler

    stream = io.StringIO()
    handler = BackgroundStreamHandler(stream, flush_interval=3600)
    logger = _background_logger(handler)
    try:
        logger.info("last request")
        handler.write_at_once()  # what write_logs_at_once does on lifespan shutdown
        assert [line["message"] for line in _lines(stream)] == ["last request"]
        logger.info("Finished server process")
        assert [line["message"] for line in _lines(stream)][-1] == "Finished server process"
    finally:
        logger.removeHandler(handler)
        handler.close()
