"""MCP Inspector's command-line client (`@modelcontextprotocol/inspector`, pinned in
conftest.py) with a bearer header: it lists the tools (in `--strict` mode, which reports tool
schemas that clients cannot use), calls one, and reads a memory resource."""

from __future__ import annotations

import json
import subprocess

import pytest

from memories.models import Memory
from tests.factories import MemoryFactory, UserFactory
from tests.mcp_gateway.conftest import make_token

from .conftest import INSPECTOR

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def inspector(node, node_modules, oauth_server, tmp_path):
    """Run the Inspector CLI against the live /mcp with a token of a fresh tenant; its state
    (~/.mcp-inspector) goes to a temporary home."""
    user = UserFactory()
    token = make_token(user, resource=[f"{oauth_server.url}/mcp"])

    def run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [node, str(INSPECTOR), "--cli", "--server-url", f"{oauth_server.url}/mcp",
             "--transport", "http", "--header", f"Authorization: Bearer {token}", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip

    run.user = user
    return run


def test_the_inspector_lists_tools_strictly_calls_one_and_reads_a_resource(inspector):
    listed = inspector("--method", "tools/list", "--strict", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    tools = json.loads(listed.stdout)["result"]["tools"]
    assert {tool["name"] for tool in tools} >= {"remember", "search", "get_memories"}
    # Strict: no schema portability problem at all, errors or warnings.
    assert "error" not in listed.stderr.lower(), listed.stderr
    assert "warning" not in listed.stderr.lower(), listed.stderr

    called = inspector(
        "--method", "tools/call", "--tool-name", "remember", "--format", "json",
        "--tool-args-json",
        json.dumps({"memoryType": "note", "topic": "inspector", "content": "Seen by the CLI"}),
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)["result"]
    assert result["structuredContent"]["memory"]["topic"] == "inspector"
    assert Memory.objects.filter(owner=inspector.user, content="Seen by the CLI").exists()

    memory = MemoryFactory(owner=inspector.user, content="Read by the CLI")
    read = inspector("--method", "resources/read", "--uri", memory.resource_uri, "--format", "json")
    assert read.returncode == 0, read.stderr
    (content,) = json.loads(read.stdout)["result"]["contents"]
    assert json.loads(content["text"])["content"] == "Read by the CLI"
