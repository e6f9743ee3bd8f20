"""A browser-based MCP client: a page on another (loopback) origin calls /mcp with fetch() in
Chromium. The browser's own CORS checks decide: its preflight must be answered, the answer
must name the page's origin, and the page must be able to read the challenge header. A page
on an origin the policy does not allow gets nothing."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.factories import UserFactory
from tests.mcp_gateway.conftest import make_token

pytestmark = [pytest.mark.browser, pytest.mark.live]

# What the page runs: a 2026-07-28 tools/list with a bearer token (custom headers: the browser
# sends a preflight first), then the same without a token, reading the challenge it gets.
CALL_TOOLS_LIST = """
async ([url, token]) => {
  const call = (headers) => fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/list',
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'tools/list',
      params: {_meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      }},
    }),
  });
  try {
    const listed = await call({authorization: `Bearer ${token}`});
    const body = await listed.json();
    const refused = await call({});
    return {
      status: listed.status,
      tools: body.result.tools.map((tool) => tool.name),
      refusedStatus: refused.status,
      challenge: refused.headers.get('www-authenticate'),
    };
  } catch (error) {
    return {error: String(error)};
  }
}
"""


class _BlankPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>app</title>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def app_origin():
    """A real HTTP server on loopback serving a blank page: the browser-based client's origin.
    Served for real (not a routed fake): Chromium lets only a page that itself came from the
    loopback address space call a loopback server (Local Network Access)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BlankPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def bearer(daphne_server) -> str:
    return make_token(UserFactory(), scope="memory:read", resource=[daphne_server("/mcp")])


def test_a_page_on_a_loopback_origin_lists_the_tools(page, daphne_server, bearer, app_origin):
    page.goto(f"{app_origin}/app")
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))

    result = page.evaluate(CALL_TOOLS_LIST, [daphne_server("/mcp"), bearer])

    assert "error" not in result, (result, messages)
    assert result["status"] == 200
    assert {"remember", "search", "get_memories"} <= set(result["tools"])
    assert result["refusedStatus"] == 401
    # Readable cross-origin only because the answer exposes it.
    assert 'scope="memory:read memory:write"' in result["challenge"]


@pytest.mark.server_env(CORS_ALLOWED_ORIGIN_REGEXES=r"^https://agents\.example\.com$")
def test_a_page_on_an_origin_not_allowed_gets_nothing(page, daphne_server, bearer, app_origin):
    """The same page, on a server whose policy allows another origin only: Chromium's
    preflight is refused, and the page gets nothing."""
    page.goto(f"{app_origin}/app")
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))

    result = page.evaluate(CALL_TOOLS_LIST, [daphne_server("/mcp"), bearer])

    assert result == {"error": "TypeError: Failed to fetch"}
    assert any("CORS" in message for message in messages), messages
