"""Operability: health probes, version, and structured access logs without tenant text."""

import json
import logging

import pytest

from threengram.observability import VERSION, JsonFormatter


def test_health_needs_no_database(client):
    response = client.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_ready_checks_database_and_migrations(client, db):
    response = client.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "database": "ok"}


def test_version(client):
    assert client.get("/version").json() == {"name": "threengram", "version": VERSION}


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
        response = client.get("/health?content=secret-memory-text")
    record = next(r for r in caplog.records if r.name == "threengram.access")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == response["X-Request-ID"]
    assert line["tenant_id"] == str(tenant.pk)
    assert (line["method"], line["path"], line["status"]) == ("GET", "/health", 200)
    assert isinstance(line["latency_ms"], float)
    assert "secret-memory-text" not in json.dumps(line)


@pytest.mark.parametrize("path", ["/health", "/ready", "/version"])
def test_probes_are_plain_json(client, db, path):
    assert client.get(path)["Content-Type"] == "application/json"


def test_background_handler_keeps_the_request_ids_of_the_logging_thread():
    import io

    from threengram.observability import BackgroundStreamHandler, request_id_var

    handler = BackgroundStreamHandler()
    stream = io.StringIO()
    handler.target.setStream(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.background")
    logger.addHandler(handler)
    token = request_id_var.set("req-1234abcd")
    try:
        logger.error("failed", exc_info=ValueError("boom"))
    finally:
        request_id_var.reset(token)
        logger.removeHandler(handler)
        handler.close()  # drains the queue
    line = json.loads(stream.getvalue())
    assert line["request_id"] == "req-1234abcd"
    assert "ValueError: boom" in line["exception"]
