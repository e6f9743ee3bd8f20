"""What one /mcp request leaves behind: the `send` that gives every answer its final status and
headers (`Reply`), its access line (`log_access`), the method and tool it called (`MethodCalled`,
noted by the MCP server's middleware), and the log record of an unexpected failure
(`log_failure`).
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from starlette.types import Scope, Send

from infra import dbfaults
from infra.observability import exception_without_message, tenant_id_var
from mcp_gateway import auth
from mcp_gateway.guards import Headers, header
from memories import bounds

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("threengram.access")

# The Retry-After of every retryable 503 (infra.dbfaults).
RETRY_AFTER = (b"retry-after", str(dbfaults.RETRY_AFTER_SECONDS).encode())


def log_failure(what: str, request_id: str, exc: BaseException) -> None:
    """Log an unexpected exception: its type and stack, never its message or arguments, which
    could quote memory content or a token."""
    logger.error(
        "%s failed, request id %s: %s",
        what,
        request_id,
        exception_without_message((type(exc), exc, exc.__traceback__)),
    )


@dataclass
class MethodCalled:
    """What one /mcp request asked for, for its access line: the JSON-RPC method and, for
    tools/call, the tool. The 2025 wire names them only in the body, which the router does not
    log; the handlers run in tasks that copy the request's context, so this is a shared mutable
    object the router puts there, not a value."""

    method: str = "-"
    tool: str = "-"


method_called: ContextVar[MethodCalled | None] = ContextVar("method_called", default=None)


def _step_up(scope: str) -> tuple[bytes, bytes]:
    """RFC 6750 §3.1 `insufficient_scope`, naming every scope of the tool surface: the MCP
    SDKs' step-up re-authorizes with the challenged scope and retries the call."""
    value = auth.challenge("insufficient_scope", f"This call needs the {scope} scope")
    return (b"www-authenticate", value.encode())


def _no_store(headers: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """No /mcp answer may be kept by a browser or a proxy (RFC 9111 §5.2.2.5): each is one
    account's, errors and refusals too, as the account pages are not kept. (An MCP result's own
    cache hint, for the client, is in its body.) An event stream keeps the SDK's no-transform,
    so that no proxy holds it back to compress it."""
    kept = (
        b", no-transform"
        if any(b"no-transform" in v for n, v in headers if n == b"cache-control")
        else b""
    )
    return (b"cache-control", b"no-store" + kept)


class Reply:
    """The `send` of one /mcp request: every answer, the MCP server's and the guards' alike,
    leaves with the CORS headers, the request id (X-Request-ID) and `Cache-Control: no-store`,
    and with the HTTP status
    that the handlers' `outcome` and `shortfall` call for (shared with them through context
    variables: they run in tasks that copy the request's context). Keeps the status and tenant
    it sent, for the access log."""

    def __init__(
        self, send: Send, request_id: str, cors_headers: list[tuple[bytes, bytes]]
    ) -> None:
        self._send = send
        self._request_id = request_id
        self._cors_headers = cors_headers
        self.outcome = dbfaults.Outcome()
        self.shortfall = auth.ScopeShortfall()
        self.status = 0
        self.tenant_id = "-"
        self.called = MethodCalled()

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            message = self._start(message)
        await self._send(message)

    def _start(self, message: dict) -> dict:
        status = message["status"]
        headers = message.get("headers", [])
        if self.outcome.unavailable:
            # A handler that met a database outage (infra.dbfaults) answered a JSON-RPC error;
            # the HTTP status says "retryable" too, for clients and proxies.
            status = 503
            headers = [*(h for h in headers if h[0] != b"retry-after"), RETRY_AFTER]
        elif self.shortfall.scope is not None:
            # A tool the token's scope does not cover (auth.note_insufficient_scope).
            status = 403
            headers = [*headers, _step_up(self.shortfall.scope)]
        self.status = status
        self.tenant_id = tenant_id_var.get()
        return {
            **message,
            "status": status,
            "headers": [
                *(h for h in headers if h[0] != b"cache-control"),
                _no_store(headers),
                *self._cors_headers,
                (b"x-request-id", self._request_id.encode()),
            ],
        }


def log_access(
    scope: Scope, headers: Headers, request_id: str, reply: Reply, started: float
) -> None:
    """One line per request: ids, the MCP method and tool (as the MCP server read them from the
    body, which is never logged, or a 2025-wire notification's method as read before it; else
    the 2026 wire's Mcp-Method header, for a request refused before it), status and latency."""
    access_logger.info(
        "mcp",
        extra={
            "request_id": request_id,
            "tenant_id": reply.tenant_id,
            "method": scope.get("method"),
            "path": settings.MCP_PATH,
            "mcp_method": reply.called.method
            if reply.called.method != "-"
            else (header(headers, b"mcp-method") or "-")[: bounds.SHOWN_KEY_MAX],
            "mcp_tool": reply.called.tool,
            "status": reply.status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        },
    )
