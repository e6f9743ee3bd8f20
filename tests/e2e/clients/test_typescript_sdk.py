"""The official TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in conftest.py) connects
with nothing but the URL and its OAuth provider, configured with no scope: it asks for what the
401 challenge names, so it can write as well as read."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from memories.models import Memory
from tests.factories import UserFactory

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

JOURNEY = Path(__file__).with_name("ts_sdk_journey.mjs")
TIMEOUT_SECONDS = 90


def run_journey(node: str, node_modules: Path, mcp_url: str, browser) -> list[dict]:
    """Run the journey script, playing the person whenever it asks for an authorization."""
    process = subprocess.Popen(
        [node, str(JOURNEY), str(node_modules), mcp_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(TIMEOUT_SECONDS, process.kill)
    watchdog.start()
    records = []
    try:
        for line in process.stdout:
            record = json.loads(line)
            if "authorize" in record:
                process.stdin.write(browser.visit(record["authorize"]) + "\n")
                process.stdin.flush()
            records.append(record)
        process.wait()
    finally:
        watchdog.cancel()
    assert process.returncode == 0, (records, process.stderr.read())
    return records


def test_the_typescript_sdk_remembers_searches_reads_and_gets_the_briefing(
    oauth_server, make_browser, node, node_modules
):
    user = UserFactory()
    browser = make_browser(user.username)
    mcp_url = f"{oauth_server.url}/mcp"

    records = run_journey(node, node_modules, mcp_url, browser)

    (authorize,) = [record["authorize"] for record in records if "authorize" in record]
    query = parse_qs(urlsplit(authorize).query)
    # No scope configured: the SDK asked for the challenged scopes, the whole tool surface.
    assert query["scope"] == ["memory:read memory:write"]
    assert query["resource"] == [mcp_url]
    steps = {record["step"]: record for record in records if "step" in record}
    assert steps["connected"]["scope"] == "memory:read memory:write"

    remembered = steps["remember"]
    assert remembered["isError"] is False
    memory = Memory.objects.get(owner=user, pk=remembered["result"]["memory"]["id"])
    assert memory.content == "Ship the TypeScript journey"
    assert not steps["search"]["isError"]
    assert [hit["id"] for hit in steps["search"]["result"]["hits"]] == [str(memory.pk)]
    (content,) = steps["readResource"]["contents"]
    assert content["uri"] == memory.resource_uri
    assert json.loads(content["text"])["content"] == "Ship the TypeScript journey"
    assert steps["getPrompt"]["messages"][0]["content"]["text"]
    assert "done" in steps
