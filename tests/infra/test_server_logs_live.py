"""The production server's own lines (uvicorn's start-up and shutdown) are JSON, as the app's
are, when it runs as docs/operations.md says; its --log-level still applies to them."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import pytest

from tests.mcp_gateway.conftest import free_port, start_server, stop_server

# docs/operations.md: one process behind nginx, at the default LOG_LEVEL and LOG_FORMAT.
DOCUMENTED = ["--proxy-headers", "--forwarded-allow-ips", "127.0.0.1", "--no-access-log"]
UVICORN_LINES = {"Started server process", "Application startup complete.", "Uvicorn running on"}
DEFAULTS = {"LOG_LEVEL": "INFO", "LOG_FORMAT": "json"}


def _run(extra: list[str]) -> str:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
               *DOCUMENTED, *extra, "threengram.asgi:application"]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(command, port, Path(folder) / "server.log", DEFAULTS)
        try:
            assert httpx2.get(f"{server.url}/health", timeout=10).status_code == 200
            time.sleep(0.3)  # past the background log writer's batch
        finally:
            stop_server(server)  # SIGTERM, as systemd and orchestrators stop it
        return server.output()


def _records(output: str) -> list[dict]:
    lines = [line for line in output.splitlines() if line.strip()]
    not_json = []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            not_json.append(line)
    assert not_json == []
    return records


def _uvicorn_messages(records: list[dict]) -> list[str]:
    return [r["message"] for r in records if r["logger"].startswith("uvicorn")]


@pytest.mark.live
def test_uvicorns_own_lines_are_json_lines(transactional_db):
    records = _records(_run([]))
    messages = _uvicorn_messages(records)
    for expected in UVICORN_LINES | {"Finished server process"}:
        assert any(m.startswith(expected) for m in messages), messages
    # The last line too: written although the process ends by its signal, with no exit handler.
    assert messages[-1].startswith("Finished server process")
    # uvicorn's duplicate of the message with terminal colours is left out.
    assert not any("color_message" in r for r in records)
    assert any(r["logger"] == "threengram.access" and r["path"] == "/health" for r in records)


@pytest.mark.live
def test_uvicorns_log_level_still_applies_to_its_lines(transactional_db):
    records = _records(_run(["--log-level", "warning"]))
    assert _uvicorn_messages(records) == []
