"""mcp-remote (pinned in conftest.py), the stdio bridge that desktop clients such as Claude
Desktop start as a local command, configured as the README's "Connecting a client" table says:
the URL and nothing else (plus the callback port, so that the test knows where the code goes).
On a machine with no browser it prints the authorization URL in its log; the person opens it,
logs in and consents once; the desktop client then speaks MCP over its stdin and stdout. With no
scope configured it asks for what the 401 challenge names, so it can write as well as read."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from oauth2_provider.models import get_access_token_model

from memories.models import Memory
from tests.e2e.oauth.conftest import free_port
from tests.factories import UserFactory

from .conftest import MCP_REMOTE

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

AccessToken = get_access_token_model()

TIMEOUT_SECONDS = 90
PROTOCOL_VERSION = "2025-11-25"
TOOLS = {
    "remember", "search", "get_memories", "revise", "archive", "resolve", "briefing", "handoff",
    "configure_thread", "describe_environment",
}  # fmt: skip
# mcp-remote's log (src/lib/node-oauth-client-provider.ts, src/lib/utils.ts).
AUTHORIZATION_URL = re.compile(r"Please authorize this client by visiting:\n(\S+)\n")
CALLBACK_LISTENING = re.compile(r"OAuth callback server running at http://127\.0\.0\.1:(\d+)")
NO_BROWSER = re.compile(r"Could not open a browser automatically")


class Bridge:
    """The desktop client's side of a running mcp-remote: JSON-RPC messages, one a line, on its
    stdin and stdout; its log (stderr) drained on a thread, so that a full pipe never stalls it,
    and searched as it grows."""

    def __init__(self, process: subprocess.Popen, callback_port: int, config_dir: Path) -> None:
        self.process = process
        self.callback_port = callback_port
        self.config_dir = config_dir
        self.log: list[str] = []
        self._log_grew = threading.Condition()
        self._log_ended = False
        self._last_id = 0
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self) -> None:
        for line in self.process.stderr:
            with self._log_grew:
                self.log.append(line)
                self._log_grew.notify_all()
        with self._log_grew:
            self._log_ended = True
            self._log_grew.notify_all()

    def wait_for_log(self, pattern: re.Pattern) -> re.Match:
        """The first match of `pattern` in the log, once written; a failure if mcp-remote exits
        (or the watchdog kills it) first."""
        with self._log_grew:
            self._log_grew.wait_for(lambda: pattern.search("".join(self.log)) or self._log_ended)
            match = pattern.search("".join(self.log))
        assert match, f"mcp-remote never logged {pattern.pattern!r}:\n{''.join(self.log)}"
        return match

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> dict:
        self._last_id += 1
        self.send({"id": self._last_id, "method": method, "params": params or {}})
        for line in self.process.stdout:
            message = json.loads(line)
            # Notifications and the server's own requests may come first; they answer nothing.
            if message.get("id") == self._last_id and "method" not in message:
                assert "error" not in message, (method, message)
                return message["result"]
        pytest.fail(f"mcp-remote exited before answering {method}:\n{''.join(self.log)}")

    def call_tool(self, name: str, arguments: dict) -> dict:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        assert result.get("isError") is not True, (name, result)
        return result["structuredContent"]


@pytest.fixture
def mcp_remote(node, node_modules, oauth_server, tmp_path):
    """mcp-remote on a headless machine: its tokens in a fresh config directory, no display and
    no browser opener on PATH, so its attempt to open a browser fails and the log is the only
    way to the authorization URL. A watchdog kills it if the journey hangs."""
    callback_port = free_port()
    config_dir = tmp_path / "mcp-auth"
    process = subprocess.Popen(
        [node, str(MCP_REMOTE), f"{oauth_server.url}/mcp", str(callback_port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={
            "HOME": str(tmp_path),
            "MCP_REMOTE_CONFIG_DIR": str(config_dir),
            "PATH": str(Path(node).parent),
        },
    )
    watchdog = threading.Timer(TIMEOUT_SECONDS, process.kill)
    watchdog.start()
    try:
        yield Bridge(process, callback_port, config_dir)
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()


def test_mcp_remote_signs_in_once_then_remembers_searches_and_reads(
    mcp_remote, oauth_server, make_browser
):
    user = UserFactory()
    browser = make_browser(user.username)
    mcp_url = f"{oauth_server.url}/mcp"

    # The person: reads the URL in the log, logs in and consents; the server redirects to
    # mcp-remote's loopback callback, which takes the code and exchanges it for a token.
    authorize = mcp_remote.wait_for_log(AUTHORIZATION_URL)[1]
    query = parse_qs(urlsplit(authorize).query)
    # No scope configured: mcp-remote asked for the challenged scopes, the whole tool surface.
    assert query["scope"] == ["memory:read memory:write"]
    assert query["resource"] == [mcp_url]
    callback = browser.visit(authorize)
    assert callback.startswith(f"http://localhost:{mcp_remote.callback_port}/oauth/callback?")
    # mcp-remote prints the URL, tries every browser opener, and only then listens for the
    # callback (this server answers its unauthenticated GET probe of /mcp with 405, not 401, so
    # it does not listen early). A person takes longer than that; the scripted one waits.
    listening = mcp_remote.wait_for_log(CALLBACK_LISTENING)
    assert int(listening[1]) == mcp_remote.callback_port
    assert mcp_remote.wait_for_log(NO_BROWSER)
    landing = httpx2.get(callback, timeout=10)
    assert landing.status_code == 200
    assert "Authorization successful" in landing.text

    # The desktop client: an ordinary stdio MCP session.
    initialized = mcp_remote.request(
        "initialize",
        {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "threengram-mcp-remote-e2e", "version": "1.0.0"},
        },
    )
    assert initialized["protocolVersion"] == PROTOCOL_VERSION
    mcp_remote.send({"method": "notifications/initialized"})
    listed = mcp_remote.request("tools/list")
    assert {tool["name"] for tool in listed["tools"]} == TOOLS

    remembered = mcp_remote.call_tool(
        "remember",
        {"memoryType": "decision", "topic": "mcp-remote", "content": "Bridge the desktop client"},
    )
    memory = Memory.objects.get(owner=user, pk=remembered["memory"]["id"])
    assert memory.content == "Bridge the desktop client"

    found = mcp_remote.call_tool("search", {"query": "bridge desktop client"})
    assert [hit["id"] for hit in found["hits"]] == [str(memory.pk)]

    read = mcp_remote.request("resources/read", {"uri": remembered["memory"]["uri"]})
    (content,) = read["contents"]
    assert content["uri"] == memory.resource_uri
    assert json.loads(content["text"])["content"] == "Bridge the desktop client"

    # What the person granted, and what mcp-remote keeps in its own config directory.
    (granted,) = AccessToken.objects.filter(user=user)
    assert "memory:write" in granted.scope.split()
    (stored,) = mcp_remote.config_dir.glob("mcp-remote-v1/*_tokens.json")
    assert "memory:write" in json.loads(stored.read_text())["scope"].split()
