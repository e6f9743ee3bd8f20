"""The ASGI application: `/mcp` and its RFC 9728 metadata go to the MCP gateway, everything else
to Django. The same object runs under daphne and uvicorn.

Why a router of our own instead of mounting the SDK's Starlette app:
- daphne sends no ASGI lifespan events, and the SDK's session manager must be running (its task
  group) before any request: started here on lifespan (uvicorn) or on the first MCP request;
- each request is authenticated here with one SQL statement (mcp_gateway.auth) and the tenant
  handed to the handlers in a context variable. The SDK's `auth=` option fails open when its
  verifier is missing, and its middleware stack costs time on every request;
- the hot path (token check + `resources/read`) runs no Django middleware and no worker thread;
  handlers that use the ORM enter Django's per-request context themselves (mcp_gateway.orm).

The guards a request passes first are mcp_gateway.guards; the workarounds around the SDK's
JSON-RPC handling, mcp_gateway.wire; what each request sends and logs, mcp_gateway.access_log.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
import time
from typing import Any

from django.conf import settings
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from infra import asyncdb, dbfaults
from infra.observability import new_request_id, request_id_var, tenant_id_var, write_logs_at_once
from mcp_gateway import auth, cors, wire
from mcp_gateway.access_log import RETRY_AFTER, Reply, log_access, log_failure, method_called
from mcp_gateway.guards import (
    JSON,
    MAX_REQUEST_BODY_BYTES,
    Answer,
    Headers,
    InFlight,
    Origin,
    bearer_token,
    challenge,
    guard_after_token,
    guard_before_token,
    guard_rate_limit,
    header,
    jsonrpc_error,
    repeated_authorization,
    request_origin,
)
from mcp_gateway.principal import Principal
from mcp_gateway.server import build_server, internal_error, unavailable_error
from memories import tenancy

logger = logging.getLogger(__name__)

MCP_PATH = settings.MCP_PATH
_MCP_PATHS = (MCP_PATH, f"{MCP_PATH}/")
# RFC 9728 §3.1: path-inserted form for the resource MCP_RESOURCE_URL, plus the root form that
# some clients try first, and the form for MCP_PATH/, which is the endpoint too (a client
# configured with it looks there); all three name the one resource, MCP_RESOURCE_URL.
METADATA_PATHS = frozenset(
    {
        f"{auth.METADATA_PREFIX}{MCP_PATH}",
        f"{auth.METADATA_PREFIX}{MCP_PATH}/",
        auth.METADATA_PREFIX,
    }
)


def _headers(scope: Scope) -> Headers:
    """The request's headers by (lower-case) name, read once; the first of a repeated one."""
    headers: Headers = {}
    for name, value in scope["headers"]:
        headers.setdefault(name, value)
    return headers


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    all_headers = list(headers or [])
    if status != 204:  # RFC 9110 §8.6: none in a 204
        all_headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive) -> None:
    """Consume a request body we answer without reading (keeps HTTP/1.1 keep-alive sane), but
    never more than the body limit: past it the server may drop the connection instead."""
    more, received = True, 0
    while more and received <= MAX_REQUEST_BODY_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        received += len(message.get("body", b""))
        more = message.get("more_body", False)


async def _answer(receive: Receive, send: Send, answer: Answer) -> None:
    await _drain(receive)
    await _respond(send, answer.status, answer.body, answer.headers)


def _error_body(error: MCPError) -> bytes:
    """The answer to a request that failed before the MCP server could answer it, as that
    server answers the same failure (mcp_gateway.server)."""
    return jsonrpc_error(error.code, error.message, error.data)


class GatewayRouter:
    """ASGI app: MCP paths to the gateway, everything else to `django_app`."""

    def __init__(self, django_app: ASGIApp) -> None:
        self.django_app = django_app
        self.server = build_server()
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server,
            # Stateless: any process can answer any request (no sessions, no sticky routing).
            # Plain JSON replies: no handler here streams notifications.
            stateless=True,
            json_response=True,
            # Host/Origin are checked in this router against ALLOWED_HOSTS; the SDK still
            # checks Content-Type, the Accept header and the body size.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=MAX_REQUEST_BODY_BYTES,
        )
        self._metadata = json.dumps(
            {
                "resource": settings.MCP_RESOURCE_URL,
                "authorization_servers": [settings.PUBLIC_BASE_URL],
                "scopes_supported": [settings.MEMORY_READ_SCOPE, settings.MEMORY_WRITE_SCOPE],
                "bearer_methods_supported": ["header"],
                "resource_name": "threengram memory",
            }
        ).encode()
        self.in_flight = InFlight()
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and scope["path"] in _MCP_PATHS:
            # The endpoint URL as people paste it, with a trailing slash too, is the endpoint.
            await self._mcp({**scope, "path": MCP_PATH}, receive, send)
        elif scope["type"] == "http" and scope["path"] in METADATA_PATHS:
            await self._protected_resource_metadata(scope, receive, send)
        else:
            await self.django_app(scope, receive, send)

    # --- /mcp ----------------------------------------------------------------------------
    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One /mcp request under the site's request id (infra.observability), so that the log
        records of one request can be followed across the site and the gateway; errors quote it
        to the client, and the answer echoes it in X-Request-ID."""
        headers = _headers(scope)
        request_id = new_request_id(header(headers, b"x-request-id"))
        request_token = request_id_var.set(request_id)
        started = time.perf_counter()
        origin = request_origin(headers)
        reply = Reply(send, request_id, origin.headers)
        outcome_token = dbfaults.request_outcome.set(reply.outcome)
        shortfall_token = auth.scope_shortfall.set(reply.shortfall)
        called_token = method_called.set(reply.called)
        try:
            await self._authenticated_mcp(scope, headers, receive, reply.send, origin)
        finally:
            if settings.MCP_ACCESS_LOG:
                log_access(scope, headers, request_id, reply, started)
            method_called.reset(called_token)
            auth.scope_shortfall.reset(shortfall_token)
            dbfaults.request_outcome.reset(outcome_token)
            request_id_var.reset(request_token)

    async def _authenticated_mcp(
        self, scope: Scope, headers: Headers, receive: Receive, send: Send, origin: Origin
    ) -> None:
        """Run /mcp's guards in order, then dispatch: Host and Origin (DNS rebinding), a CORS
        preflight, a method other than POST, the bearer token, scope, body, the account's
        requests at once, rate limit. The first guard that answers ends the request; the order
        is part of the contract (a preflight carries no token, a refused request spends no
        budget). A request past its account's requests at once waits here for a slot, holding no
        database connection; the slot is held until the request ends, however it ends."""
        answer = guard_before_token(scope["method"], headers, origin)
        if answer is not None:
            await _answer(receive, send, answer)
            return
        principal = await self._authenticate(scope, headers, receive, send)
        if principal is None:
            return  # refused, and answered
        answer = guard_after_token(principal, headers) or await self.in_flight.enter(
            principal.user_id
        )
        if answer is not None:
            await _answer(receive, send, answer)
            return
        try:
            answer = guard_rate_limit(principal)
            if answer is not None:
                await _answer(receive, send, answer)
                return
            await self._dispatch(scope, headers, receive, send, principal)
        finally:
            self.in_flight.leave(principal.user_id)

    async def _authenticate(
        self, scope: Scope, headers: Headers, receive: Receive, send: Send
    ) -> Principal | None:
        """The principal of the request's bearer token, or None once the refusal is answered:
        400 `invalid_request` for more than one Authorization header (RFC 6750 §3.1: more than
        one way of sending a token; a proxy that reads the last of them would name another
        caller than this server, which reads the first), 401 without a token (§3.1: a challenge
        with no error code), 401 `invalid_token` for one that is not valid (auth.authenticate),
        or what a token check that could not run gets (_token_check_failed)."""
        answer = repeated_authorization(scope["headers"])
        if answer is not None:
            await _answer(receive, send, answer)
            return None
        token = bearer_token(headers)
        if token is None:
            await _answer(receive, send, challenge(401, None, "Authentication required"))
            return None
        try:
            principal = await auth.authenticate(token)
        except Exception as exc:
            await self._token_check_failed(receive, send, exc)
            return None
        if principal is None:
            answer = challenge(401, "invalid_token", "Invalid or expired token")
            await _answer(receive, send, answer)
        return principal

    async def _token_check_failed(self, receive: Receive, send: Send, exc: Exception) -> None:
        """The token check could not run (called while `exc` is handled). A database outage is
        retryable (infra.dbfaults): 503 with Retry-After and a JSON-RPC error saying so. Anything
        else is a generic error, logged with its stack and never its message."""
        if not dbfaults.is_unavailable(exc):
            await self._internal_error(receive, send, 503, "bearer token check")
            return
        logger.warning("MCP bearer token check: database unavailable")
        dbfaults.mark_unavailable(exc)
        body = _error_body(unavailable_error(request_id_var.get()))
        await _answer(receive, send, Answer(503, body, [JSON, RETRY_AFTER]))

    async def _dispatch(
        self,
        scope: Scope,
        headers: Headers,
        receive: Receive,
        send: Send,
        principal: Principal,
    ) -> None:
        """Hand an admitted request to the MCP server, the tenant in context variables: the
        handlers' principal, the log records' tenant id and row-level security's tenant, all
        from the verified token only."""
        reset = auth.current_principal.set(principal)
        tenant_token = tenant_id_var.set(str(principal.user_id))
        rls_token = tenancy.current_tenant.set(principal.user_id)
        try:
            await self._serve(scope, headers, receive, send)
        except ClientDisconnect:
            logger.debug("MCP client disconnected before its request was read")
        except Exception:
            await self._internal_error(receive, send, 500, "MCP transport")
        finally:
            tenancy.current_tenant.reset(rls_token)
            tenant_id_var.reset(tenant_token)
            auth.current_principal.reset(reset)

    async def _serve(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        """The MCP server's answer to the request made what the SDK reads on either wire, or
        the answer it gets in the SDK's place (mcp_gateway.wire)."""
        if not self._ready.is_set():  # only until the first request has started it
            await self.startup()
        request = await wire.for_sdk(scope, headers, receive, send)
        if request.answer is not None:
            await _answer(request.receive, request.send, request.answer)
            return
        await self.session_manager.handle_request(request.scope, request.receive, request.send)

    async def _internal_error(self, receive: Receive, send: Send, status: int, where: str) -> None:
        request_id = request_id_var.get()
        log_failure(f"MCP request ({where})", request_id, sys.exc_info()[1])
        try:
            await _respond(send, status, _error_body(internal_error(request_id)), [JSON])
        except Exception:  # the response had already started: nothing more can be said
            logger.debug("could not send the error response for %s", request_id)

    # --- RFC 9728 protected resource metadata ---------------------------------------------
    async def _protected_resource_metadata(
        self, scope: Scope, receive: Receive, send: Send
    ) -> None:
        await _drain(receive)
        # Public metadata: any origin may read it (RFC 9728 §3), with the headers MCP clients
        # send along.
        cors_any = (b"access-control-allow-origin", b"*")
        if scope["method"] == "OPTIONS":
            await _respond(
                send,
                204,
                b"",
                [
                    cors_any,
                    (b"access-control-allow-methods", b"GET, OPTIONS"),
                    (
                        b"access-control-allow-headers",
                        ", ".join(cors.conf.CORS_ALLOW_HEADERS).encode(),
                    ),
                    (b"access-control-max-age", str(cors.conf.CORS_PREFLIGHT_MAX_AGE).encode()),
                ],
            )
        elif scope["method"] in ("GET", "HEAD"):
            await _respond(send, 200, self._metadata, [JSON, cors_any])
        else:
            # In the JSON error format of the OAuth endpoints, as Django's 405s there are.
            allowed = "GET, HEAD, OPTIONS"
            problem = f"{scope['method']} is not allowed here; this address takes {allowed}"
            body = json.dumps({"error": "invalid_request", "error_description": problem})
            await _respond(send, 405, body.encode(), [JSON, cors_any, (b"allow", allowed.encode())])

    # --- session manager lifecycle --------------------------------------------------------
    async def _run_session_manager(self) -> None:
        async with self.session_manager.run():
            self._ready.set()
            await self._stop.wait()

    async def startup(self) -> None:
        """Start the SDK session manager once: on lifespan (uvicorn) or first use (daphne)."""
        if self._runner is None:  # one event loop: no await between the check and the set
            # An empty context: the task outlives the request that starts it (daphne sends no
            # lifespan events), and must not carry its principal, tenant or request id.
            self._runner = asyncio.get_running_loop().create_task(
                self._run_session_manager(), context=contextvars.Context()
            )
        if not self._ready.is_set():
            ready = asyncio.ensure_future(self._ready.wait())
            await asyncio.wait([self._runner, ready], return_when=asyncio.FIRST_COMPLETED)
            if self._runner.done():
                ready.cancel()
                self._runner.result()  # re-raise a start-up failure
                raise RuntimeError("MCP session manager stopped")

    async def shutdown(self) -> None:
        if self._runner is not None:
            self._stop.set()
            await self._runner
        await asyncdb.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: dict[str, Any] = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                write_logs_at_once()
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
