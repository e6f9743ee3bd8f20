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
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import re
import sys
import time
from typing import Any, NamedTuple

import mcp_types as types
import pydantic_core
from django.conf import settings
from django.http.request import MediaType, split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from infra import asyncdb, dbfaults
from infra.observability import new_request_id, request_id_var, tenant_id_var, write_logs_at_once
from infra.rate_limit import FixedWindow, event_loop_counter_store
from mcp_gateway import auth, cors
from mcp_gateway.principal import Principal
from mcp_gateway.server import (
    MethodCalled,
    build_server,
    internal_error,
    log_failure,
    method_called,
    unavailable_error,
)
from memories import bounds, tenancy
from memories.bounds import LONE_SURROGATE, UNPAIRED_SURROGATE_MARK

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("threengram.access")

MCP_PATH = settings.MCP_PATH
_MCP_PATHS = (MCP_PATH, f"{MCP_PATH}/")
# RFC 9728 §3.1: path-inserted form for the resource MCP_RESOURCE_URL, plus the root form that
# some clients try first.
METADATA_PATHS = frozenset({f"{auth.METADATA_PREFIX}{MCP_PATH}", auth.METADATA_PREFIX})
# Larger bodies get 413 before any parsing. A request carries one memory at most (bounded far
# below this) plus the JSON-RPC envelope.
MAX_REQUEST_BODY_BYTES = 1024 * 1024

_JSON = (b"content-type", b"application/json")
_RETRY_AFTER = (b"retry-after", str(dbfaults.RETRY_AFTER_SECONDS).encode())


Headers = dict[bytes, bytes]


def _headers(scope: Scope) -> Headers:
    """The request's headers by (lower-case) name, read once; the first of a repeated one."""
    headers: Headers = {}
    for name, value in scope["headers"]:
        headers.setdefault(name, value)
    return headers


def _header(headers: Headers, name: bytes) -> str | None:
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


def _host_allowed(host: str | None) -> bool:
    """DNS-rebinding protection from the site's own ALLOWED_HOSTS (same rules as Django)."""
    if not host:
        return False
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def _origin_allowed(origin: str | None) -> bool:
    if origin is None:
        return True  # not a browser, or same-origin
    parts = cors.parsed_origin(origin)
    return parts is not None and parts.scheme in ("http", "https") and _host_allowed(parts.netloc)


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


async def _legacy_envelope_checked(
    scope: Scope, headers: Headers, receive: Receive
) -> tuple[Receive, Answer | None]:
    """On the 2025 wire (no protocol version header, or a handshake version), the SDK takes a
    request whose id is null or neither a string nor an integer for a notification (202, and the
    request is dropped unanswered), and answers a malformed envelope with -32602 and its
    validation dump. So its body is read here and checked as the 2026 wire checks it: an Invalid
    Request (-32600, JSON-RPC 2.0 §5.1; MCP 2025-11-25 basic: ids are strings or integers, never
    null). Returns the receive that replays what was read to the SDK, and the refusal if any.
    What does not parse, a notification and an oversized body go on to the SDK as they came."""
    version = _header(headers, b"mcp-protocol-version")
    if scope["method"] != "POST" or (
        version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
    ):
        return receive, None
    replay, read, raw = await _read_body(receive)
    if raw is None:
        return replay, None
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return replay, None
    # JSON-RPC 2.0 §4.1: a notification is a request object without an id.
    notification = isinstance(decoded, dict) and "id" not in decoded
    envelope = types.JSONRPCNotification if notification else types.JSONRPCRequest
    try:
        envelope.model_validate(decoded)
    except ValidationError:
        return replay, _not_one_message(decoded)
    called = method_called.get()
    if notification and called is not None:
        # The SDK answers a notification (202) before its handlers run, and with them the MCP
        # server's record of the method: the access line is written by then.
        called.method = decoded["method"][: bounds.SHOWN_KEY_MAX]
    if not notification and len(decoded["method"]) > bounds.SHOWN_KEY_MAX:
        # Longer than any method: the SDK would echo it whole in its answer (up to the body
        # limit). Answered here as the SDK answers an unknown method, the echo cut.
        if called is not None:
            called.method = decoded["method"][: bounds.SHOWN_KEY_MAX]
        return replay, _method_not_found(decoded["method"], decoded["id"], status=200)
    if _SDK_PARSER_REFUSES.search(raw) and not _sdk_parses(raw):
        # The SDK's JSON parser refuses what this one read (a lone surrogate, e.g. a string cut
        # inside an emoji by a JavaScript client; a byte-order mark): it gets the same request
        # re-encoded, each lone surrogate marked so that the argument checks name the field as
        # on the 2026 wire. Not in the id, which the answer must echo unchanged (JSON-RPC 2.0
        # §5) and the SDK cannot read.
        request_id = decoded.get("id") if isinstance(decoded, dict) else None
        if isinstance(request_id, str) and LONE_SURROGATE.search(request_id):
            body = _jsonrpc_error(
                types.INVALID_REQUEST, "id: must not contain lone surrogates (invalid Unicode)"
            )
            return replay, Answer(400, body, [_JSON])
        try:
            rewritten = json.dumps(_mark_lone_surrogates(decoded), ensure_ascii=False).encode()
        except RecursionError:
            # Nested deeper than Python's recursion allows (json.loads reads deeper): deeper
            # still than the SDK's parser reads, which answers it as any body it cannot parse.
            return replay, None
        read[:] = [{"type": "http.request", "body": rewritten, "more_body": False}]
    return replay, None


NOT_ONE_MESSAGE = "Body must be a single JSON-RPC request or notification object"
_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number"}


def _not_one_message(decoded: Any) -> Answer:
    """The Invalid Request answer to a body that is no single JSON-RPC request or notification,
    naming `params` when they are what is wrong.

    -32600 (Invalid Request), not -32602 (Invalid Params): JSON-RPC 2.0 §4.2 also lets params
    be an array, but MCP's message schema carries them as an object on every request and
    notification, so a body with any other params is no MCP message, refused with its envelope
    before any method is looked up, as a malformed id is; and a string is not even JSON-RPC's.
    -32602 is what a method answers of the params it reads."""
    params = decoded.get("params") if isinstance(decoded, dict) else None
    message = NOT_ONE_MESSAGE
    if params is not None and not isinstance(params, dict):
        kind = _JSON_KINDS.get(type(params), "a number")
        message = f"params: must be an object, not {kind}; MCP passes parameters by name"
    return Answer(400, _jsonrpc_error(types.INVALID_REQUEST, message), [_JSON])


class _EnvelopeRefusalNamed:
    """The receive and send of a 2026-wire request, which the SDK reads itself: when it refuses
    the body as no single request or notification (with no word of why), the answer names
    `params` when they are what is wrong, as on the 2025 wire (_not_one_message). The body
    is kept as it passes, and looked at only then: the hot path parses it once, in the SDK."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self._chunks: list[bytes] = []
        self._held: dict | None = None

    async def receive(self) -> dict:
        message = await self._receive()
        if message["type"] == "http.request":
            self._chunks.append(message.get("body", b""))
        return message

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start" and message["status"] == 400:
            self._held = message  # until its body says whether it is that refusal
            return
        if self._held is not None:
            start, self._held = self._held, None
            body = message.get("body", b"")
            if not message.get("more_body", False) and _is_not_one_message(body):
                answer = _not_one_message(_decoded(b"".join(self._chunks)))
                headers = [h for h in start["headers"] if h[0] != b"content-length"]
                length = (b"content-length", str(len(answer.body)).encode())
                start = {**start, "headers": [*headers, length]}
                message = {**message, "body": answer.body}
            await self._send(start)
        await self._send(message)


async def _long_method_refused(headers: Headers, receive: Receive) -> tuple[Receive, Answer | None]:
    """On the 2026 wire the SDK echoes an unknown method whole in -32601's data, and the method
    must equal the Mcp-Method header, which only the HTTP server bounds (16 KiB of headers). A
    header longer than any method names none: only then is the body read ahead of the SDK and,
    when it is a request for that method, answered as the SDK answers an unknown method (404,
    the 2026 wire's status for -32601), the echo cut. Any other body (a notification, one that
    names another method, a malformed envelope) goes on to the SDK as it came, which echoes
    no method in those answers. Returns the receive that replays what was read."""
    method = _header(headers, b"mcp-method")
    if method is None or len(method) <= bounds.SHOWN_KEY_MAX:
        return receive, None
    replay, _, raw = await _read_body(receive)
    decoded = _decoded(raw) if raw is not None else None
    if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") != method:
        return replay, None
    try:
        types.JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return replay, None
    return replay, _method_not_found(method, _request_id_in(raw), status=404)


def _method_not_found(method: str, request_id: str | int | None, *, status: int) -> Answer:
    """-32601 for a method longer than any, as the SDK answers an unknown method but with the
    echo cut (bounds.shown_key); `status` is the wire's for it (2025: 200, 2026: 404)."""
    body = _jsonrpc_error(
        types.METHOD_NOT_FOUND, "Method not found", bounds.shown_key(method), request_id=request_id
    )
    return Answer(status, body, [_JSON])


def _is_not_one_message(body: bytes) -> bool:
    answer = _decoded(body)
    error = answer.get("error") if isinstance(answer, dict) else None
    return isinstance(error, dict) and error.get("message") == NOT_ONE_MESSAGE


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


async def _read_body(receive: Receive) -> tuple[Receive, list[dict], bytes | None]:
    """The request's body as read ahead of the SDK: the receive that replays it, the messages
    read (which the caller may replace), and the body, None when it is over
    MAX_REQUEST_BODY_BYTES or the client left before sending all of it."""
    read: list[dict] = []
    size, complete = 0, False
    while size <= MAX_REQUEST_BODY_BYTES:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            complete = True
            break

    async def replay() -> dict:
        return read.pop(0) if read else await receive()

    if not complete or size > MAX_REQUEST_BODY_BYTES:
        return replay, read, None
    return replay, read, b"".join(message.get("body", b"") for message in read)


# Every protocol revision this endpoint serves, newest first: 2026-07-28 without a handshake,
# the others as `initialize` negotiates them.
SERVED_PROTOCOL_VERSIONS = (
    *MODERN_PROTOCOL_VERSIONS,
    *sorted(HANDSHAKE_PROTOCOL_VERSIONS, reverse=True),
)


def _unsupported_version(requested: str, raw: bytes | None) -> Answer:
    """A protocol version header this endpoint does not serve: 400 (MCP 2025-11-25 transport:
    an invalid or unsupported MCP-Protocol-Version is 400 Bad Request) with the 2026 revision's
    -32022 and its {supported, requested}, for a request and a notification alike. Answered
    here because the SDK takes any header that is not a handshake version for the 2026 wire,
    whose checks then name the body's envelope instead. `supported` is what server/discover
    lists (the 2026 revision holds the two to agree); the message names the handshake versions
    too, for a person reading it."""
    shown = bounds.shown_key(requested)
    served = ", ".join(SERVED_PROTOCOL_VERSIONS[len(MODERN_PROTOCOL_VERSIONS) :])
    message = (
        f"Unsupported protocol version {shown!r} (the MCP-Protocol-Version header); this "
        f"endpoint serves {', '.join(MODERN_PROTOCOL_VERSIONS)} and, negotiated by "
        f"initialize, {served}"
    )
    data = types.UnsupportedProtocolVersionErrorData(
        supported=list(MODERN_PROTOCOL_VERSIONS), requested=shown
    ).model_dump(mode="json")
    body = _jsonrpc_error(
        types.UNSUPPORTED_PROTOCOL_VERSION, message, data, request_id=_request_id_in(raw)
    )
    return Answer(400, body, [_JSON])


def _request_id_in(raw: bytes | None) -> str | int | None:
    """The id of the request in `raw`, for an error answered before the SDK reads it; None
    (JSON-RPC 2.0 §5: null when it cannot be read) for a notification, or an id that is none
    (MCP basic: a string or an integer)."""
    decoded = _decoded(raw) if raw is not None else None
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if valid else None


# What may make pydantic's JSON parser (the SDK's on the 2025 wire) refuse a body json.loads
# reads: a \u escape of a surrogate (lone ones are refused), a byte-order mark, UTF-16.
_SDK_PARSER_REFUSES = re.compile(rb"\\u[dD][89a-fA-F]|^(\xef\xbb\xbf|\xff\xfe|\xfe\xff)")


def _sdk_parses(raw: bytes) -> bool:
    try:
        pydantic_core.from_json(raw)
    except ValueError:
        return False
    return True


def _mark_lone_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate of its strings (json.loads pairs the others) replaced
    by bounds.UNPAIRED_SURROGATE_MARK, which the same checks refuse."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub(UNPAIRED_SURROGATE_MARK, value)
    if isinstance(value, dict):
        return {_mark_lone_surrogates(k): _mark_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_lone_surrogates(item) for item in value]
    return value


# JSON-RPC 2.0 §5.1 leaves -32000 to -32099 to the server's own errors.
RATE_LIMITED = -32029


def _jsonrpc_error(
    code: int, message: str, data: Any = None, *, request_id: str | int | None = None
) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def _error_body(error: MCPError) -> bytes:
    """The answer to a request that failed before the MCP server could answer it, as that
    server answers the same failure (mcp_gateway.server)."""
    return _jsonrpc_error(error.code, error.message, error.data)


def _rate_limited(user_id: int) -> int | None:
    """Count one request of this user; the seconds to wait when over MCP_RATE_LIMIT, else None.

    After authentication, so the tenant is the token's user (all of its tokens share one budget)
    and unauthenticated floods cannot spend a user's budget. Counted from the event loop: with
    the local-memory default cache, in this process's memory (microseconds, no database hit);
    with a shared cache (CACHE_URL, redis or memcached) the limit holds across server processes
    at one or two round trips to it (memcached: one; redis: EXISTS, INCR)."""
    if settings.MCP_RATE_LIMIT <= 0:
        return None
    window = FixedWindow(
        name="mcp",
        limit=settings.MCP_RATE_LIMIT,
        window=settings.MCP_RATE_LIMIT_WINDOW,
        store=event_loop_counter_store(),
    )
    return window.hit(str(user_id))


# --- the guards of /mcp, in the order they run ------------------------------------------------
# Each is a plain function, not a coroutine, so the checks add no await to the hot path: None
# lets the request on, an `Answer` ends it. An answer is built only when one is given, or shared
# when it never varies.


class Answer(NamedTuple):
    """What a guard answers in the MCP server's place; the request goes no further."""

    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] | None = None


_INVALID_HOST = Answer(421, b"Invalid Host header")
_INVALID_ORIGIN = Answer(403, b"Invalid Origin header")
_NO_STREAM = Answer(405, b"", [(b"allow", b"POST")])


def _host_guard(headers: Headers) -> Answer | None:
    """DNS-rebinding protection, by Host: a page whose name was rebound to this server's address
    still sends its own name, which is none of ALLOWED_HOSTS. 421 Misdirected Request
    (RFC 9110 §15.5.20): this server does not answer for that name."""
    return None if _host_allowed(_header(headers, b"host")) else _INVALID_HOST


def _origin_guard(headers: Headers, *, listed_origin: bool) -> Answer | None:
    """DNS-rebinding protection, by Origin (MCP Streamable HTTP transport, Security Warning:
    servers MUST validate the Origin header, and answer 403 Forbidden to an invalid one).

    An origin CORS_ALLOWED_ORIGINS or CORS_ALLOWED_ORIGIN_REGEXES names passes; any other must
    name one of ALLOWED_HOSTS. CORS_ALLOW_ALL_ORIGINS trusts no origin in particular, so it lets
    none skip this (and `check --deploy` refuses it, threengram/checks.py)."""
    if listed_origin or _origin_allowed(_header(headers, b"origin")):
        return None
    return _INVALID_ORIGIN


def _preflight_guard(method: str, *, cross_origin: bool) -> Answer | None:
    """A CORS preflight from an origin the CORS policy allows (mcp_gateway.cors): 204 with the
    preflight headers, before authentication, since a browser sends no credentials with it
    (Fetch standard §3.2.2)."""
    if method == "OPTIONS" and cross_origin:
        return Answer(204, b"", cors.preflight_headers())
    return None


def _stream_guard(method: str) -> Answer | None:
    """POST is the one method this endpoint serves: 405 with `Allow: POST` (RFC 9110 §15.5.6)
    for any other, before authentication. GET would open a server-initiated stream (MCP
    Streamable HTTP transport, "Listening for Messages from the Server"), and DELETE end a
    session: this server is stateless and sends nothing unasked, so a client must not hold a
    stream open waiting. (A CORS preflight is answered before this.)"""
    return _NO_STREAM if method != "POST" else None


def _bearer_token(headers: Headers) -> str | None:
    """The token of an `Authorization: Bearer` header (RFC 6750 §2.1, the one method the
    protected-resource metadata names), else None: the request carries no credentials."""
    authorization = _header(headers, b"authorization") or ""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _challenge(status: int, error: str | None, description: str) -> Answer:
    """A refused bearer token (RFC 6750 §3): the error as JSON and a `WWW-Authenticate: Bearer`
    challenge naming the protected-resource metadata (RFC 9728 §5.1), from which a client finds
    where to get a token. Without credentials the challenge carries no error code (§3.1)."""
    body = {"error": error or "invalid_request", "error_description": description}
    challenge = auth.challenge(error, description if error else None)
    return Answer(
        status, json.dumps(body).encode(), [_JSON, (b"www-authenticate", challenge.encode())]
    )


def _media_type(value: str | None) -> str:
    """The media type of a Content-Type or Accept entry, without parameters, lower case (media
    types are case-insensitive, RFC 9110 §8.3.1)."""
    return (value or "").split(";")[0].strip().lower()


def _body_guard(headers: Headers) -> Answer | None:
    """What the body must be, answered as a JSON-RPC error naming it on both wires (the SDK
    answers some of these with an empty or plain-text body, and reads the Content-Type case-
    sensitively on the 2025 wire): a JSON body (415), in no content coding (415, RFC 9110
    §8.4), of at most MAX_REQUEST_BODY_BYTES when its length is declared (413), and an answer
    the client accepts as JSON (406)."""
    content_type = _media_type(_header(headers, b"content-type"))
    if content_type != "application/json":
        return _refused(415, f"Content-Type must be application/json; got {content_type or 'none'}")
    coding = (_header(headers, b"content-encoding") or "identity").strip().lower()
    if coding != "identity":
        return _refused(
            415, f"Content-Encoding {coding[:40]} is not supported; send the body as is"
        )
    length = _header(headers, b"content-length")
    if length is not None:
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), and not converted past
        # the limit's own length (int() refuses thousands of digits).
        if not (length.isascii() and length.isdigit()):
            return _refused(
                400, f"Content-Length must be the body's size in bytes; got {length[:20]!r}"
            )
        size = length.lstrip("0") or "0"
        if len(size) > len(str(MAX_REQUEST_BODY_BYTES)) or int(size) > MAX_REQUEST_BODY_BYTES:
            shown = size if len(size) <= 20 else f"{size[:20]}…"
            return _refused(
                413, f"the body is {shown} bytes; at most {MAX_REQUEST_BODY_BYTES} are read"
            )
    if not _accepts_json(_header(headers, b"accept") or ""):
        return _refused(406, "Accept must include application/json (the answers are JSON)")
    return None


def _accepts_json(accept: str) -> bool:
    """Whether an Accept header admits a JSON answer: its most specific range that covers
    application/json has a weight above 0 (RFC 9110 §12.5.1: `application/json;q=0` refuses
    JSON even beside `*/*`). Parameters other than the weight do not narrow the range here."""
    covering = []
    for entry in accept.split(","):
        try:
            media = MediaType(entry)
            media_range, weight = (media.main_type, media.sub_type), media.quality
            if math.isnan(weight):  # q=nan: not a weight, ignored as Django ignores q=abc
                weight = 1
        except ValueError:  # a parameter Django cannot decode: the range as written, weight 1
            media_range, weight = tuple(_media_type(entry).partition("/")[::2]), 1
        if media_range in _JSON_RANGES:
            covering.append((_JSON_RANGES[media_range], weight))
    return bool(covering) and max(covering)[1] > 0


# The ranges that cover application/json, by specificity.
_JSON_RANGES = {("application", "json"): 2, ("application", "*"): 1, ("*", "*"): 0}


def _with_plain_json_content_type(scope: Scope, headers: Headers) -> Scope:
    """`scope` with its Content-Type spelled as the SDK compares it on the 2025 wire (exactly
    `application/json`), when the client wrote it otherwise (`Application/JSON`), which
    _body_guard admitted."""
    if headers.get(b"content-type", b"").startswith(b"application/json"):
        return scope
    kept = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*kept, (b"content-type", b"application/json")]}


def _refused(status: int, message: str) -> Answer:
    return Answer(status, _jsonrpc_error(types.INVALID_REQUEST, message), [_JSON])


def _scope_guard(principal: Principal) -> Answer | None:
    """Every MCP method needs memory:read (RFC 6750 §3.1 `insufficient_scope`, 403); tools that
    write are checked per call, so a read-only token can still list them and read."""
    if principal.can(settings.MEMORY_READ_SCOPE):
        return None
    return _challenge(403, "insufficient_scope", f"Required scope: {settings.MEMORY_READ_SCOPE}")


def _rate_limit_guard(principal: Principal) -> Answer | None:
    """429 Too Many Requests with Retry-After (RFC 6585 §4) once the token's user has spent
    MCP_RATE_LIMIT; after authentication and the scope check, so a refused request spends no
    user's budget. A shared cache that cannot answer lets the request on (and says so in the
    log): the limit guards fairness between accounts, not access, and an outage of the cache
    should not become one of the server."""
    try:
        retry_after = _rate_limited(principal.user_id)
    except Exception as exc:  # any cache client's error
        logger.warning("MCP rate limit not counted: the cache failed (%s)", type(exc).__name__)
        return None
    if not retry_after:
        return None
    # A JSON-RPC error in the body: MCP clients surface its message at a non-2xx status (the
    # Python SDK passes on a JSON-RPC error body, where an error of another shape becomes "Server
    # returned an error response"), so the model reads why and for how long.
    body = _jsonrpc_error(
        RATE_LIMITED,
        f"too_many_requests: this account's calls reached {settings.MCP_RATE_LIMIT} in "
        f"{settings.MCP_RATE_LIMIT_WINDOW} seconds; retry after {retry_after} seconds",
        {"retryAfter": retry_after},
    )
    return Answer(429, body, [_JSON, (b"retry-after", str(retry_after).encode())])


def _guard_before_token(method: str, headers: Headers, origin: _Origin) -> Answer | None:
    """The guards that need no credentials, in order: Host and Origin (DNS rebinding), a CORS
    preflight (which carries no token), a method other than POST."""
    return (
        _host_guard(headers)
        or _origin_guard(headers, listed_origin=origin.listed)
        or _preflight_guard(method, cross_origin=origin.cross)
        or _stream_guard(method)
    )


def _guard_after_token(principal: Principal, headers: Headers) -> Answer | None:
    """The guards of an authenticated request, in order: scope, body, rate limit (last, so a
    refused request spends no budget)."""
    return _scope_guard(principal) or _body_guard(headers) or _rate_limit_guard(principal)


async def _answer(receive: Receive, send: Send, answer: Answer) -> None:
    await _drain(receive)
    await _respond(send, answer.status, answer.body, answer.headers)


# --- what every /mcp answer carries ---------------------------------------------------------


class _Origin(NamedTuple):
    """The request's Origin as the CORS policy sees it (mcp_gateway.cors). `listed`: named by
    the operator, which passes the Origin guard; `cross`: a browser-based client's origin the
    policy allows, whose every answer (challenges and errors too) carries the CORS `headers`, or
    the page cannot read it."""

    listed: bool
    cross: bool
    headers: list[tuple[bytes, bytes]]


def _request_origin(headers: Headers) -> _Origin:
    origin = _header(headers, b"origin")
    listed = cors.listed_origin(origin)
    cross = listed or cors.allowed_origin(origin)
    return _Origin(listed, cross, cors.response_headers(origin) if cross else [])


def _step_up(scope: str) -> tuple[bytes, bytes]:
    """RFC 6750 §3.1 `insufficient_scope`, naming every scope of the tool surface: the MCP
    SDKs' step-up re-authorizes with the challenged scope and retries the call."""
    value = auth.challenge("insufficient_scope", f"This call needs the {scope} scope")
    return (b"www-authenticate", value.encode())


class _Reply:
    """The `send` of one /mcp request: every answer, the MCP server's and the guards' alike,
    leaves with the CORS headers and the request id (X-Request-ID), and with the HTTP status
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
            headers = [*(h for h in headers if h[0] != b"retry-after"), _RETRY_AFTER]
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
                *headers,
                *self._cors_headers,
                (b"x-request-id", self._request_id.encode()),
            ],
        }


def _log_access(
    scope: Scope, headers: Headers, request_id: str, reply: _Reply, started: float
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
            "path": MCP_PATH,
            "mcp_method": reply.called.method
            if reply.called.method != "-"
            else (_header(headers, b"mcp-method") or "-")[: bounds.SHOWN_KEY_MAX],
            "mcp_tool": reply.called.tool,
            "status": reply.status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        },
    )


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
        request_id = new_request_id(_header(headers, b"x-request-id"))
        request_token = request_id_var.set(request_id)
        started = time.perf_counter()
        origin = _request_origin(headers)
        reply = _Reply(send, request_id, origin.headers)
        outcome_token = dbfaults.request_outcome.set(reply.outcome)
        shortfall_token = auth.scope_shortfall.set(reply.shortfall)
        called_token = method_called.set(reply.called)
        try:
            await self._authenticated_mcp(scope, headers, receive, reply.send, origin)
        finally:
            if settings.MCP_ACCESS_LOG:
                _log_access(scope, headers, request_id, reply, started)
            method_called.reset(called_token)
            auth.scope_shortfall.reset(shortfall_token)
            dbfaults.request_outcome.reset(outcome_token)
            request_id_var.reset(request_token)

    async def _authenticated_mcp(
        self, scope: Scope, headers: Headers, receive: Receive, send: Send, origin: _Origin
    ) -> None:
        """Run /mcp's guards in order, then dispatch: Host and Origin (DNS rebinding), a CORS
        preflight, a method other than POST, the bearer token, scope, body, rate limit. The first
        guard that answers ends the request; the order is part of the contract (a preflight
        carries no token, a refused request spends no budget)."""
        answer = _guard_before_token(scope["method"], headers, origin)
        if answer is not None:
            await _answer(receive, send, answer)
            return
        principal = await self._authenticate(headers, receive, send)
        if principal is None:
            return  # refused, and answered
        answer = _guard_after_token(principal, headers)
        if answer is not None:
            await _answer(receive, send, answer)
            return
        await self._dispatch(scope, headers, receive, send, principal)

    async def _authenticate(
        self, headers: Headers, receive: Receive, send: Send
    ) -> Principal | None:
        """The principal of the request's bearer token, or None once the refusal is answered:
        401 without a token (RFC 6750 §3.1: a challenge with no error code), 401 `invalid_token`
        for one that is not valid (auth.authenticate), or what a token check that could not run
        gets (_token_check_failed)."""
        token = _bearer_token(headers)
        if token is None:
            await _answer(receive, send, _challenge(401, None, "Authentication required"))
            return None
        try:
            principal = await auth.authenticate(token)
        except Exception as exc:
            await self._token_check_failed(receive, send, exc)
            return None
        if principal is None:
            answer = _challenge(401, "invalid_token", "Invalid or expired token")
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
        await _answer(receive, send, Answer(503, body, [_JSON, _RETRY_AFTER]))

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
        """The MCP server's answer, the request made what the SDK reads on either wire: its
        Content-Type spelled as the SDK compares it, and on the 2025 wire its envelope checked
        (and its body re-encoded where the SDK's parser would refuse it) first."""
        if not self._ready.is_set():  # only until the first request has started it
            await self.startup()
        scope = _with_plain_json_content_type(scope, headers)
        version = _header(headers, b"mcp-protocol-version")
        if version is not None and version not in SERVED_PROTOCOL_VERSIONS:
            receive, _, raw = await _read_body(receive)
            await _answer(receive, send, _unsupported_version(version, raw))
            return
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            receive, refusal = await _long_method_refused(headers, receive)
            if refusal is not None:
                await _answer(receive, send, refusal)
                return
            named = _EnvelopeRefusalNamed(receive, send)
            await self.session_manager.handle_request(scope, named.receive, named.send)
            return
        receive, refusal = await _legacy_envelope_checked(scope, headers, receive)
        if refusal is not None:
            await _answer(receive, send, refusal)
            return
        await self.session_manager.handle_request(scope, receive, send)

    async def _internal_error(self, receive: Receive, send: Send, status: int, where: str) -> None:
        request_id = request_id_var.get()
        log_failure(f"MCP request ({where})", request_id, sys.exc_info()[1])
        try:
            await _respond(send, status, _error_body(internal_error(request_id)), [_JSON])
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
            await _respond(send, 200, self._metadata, [_JSON, cors_any])
        else:
            # In the JSON error format of the OAuth endpoints, as Django's 405s there are.
            allowed = "GET, HEAD, OPTIONS"
            problem = f"{scope['method']} is not allowed here; this address takes {allowed}"
            body = json.dumps({"error": "invalid_request", "error_description": problem})
            await _respond(
                send, 405, body.encode(), [_JSON, cors_any, (b"allow", allowed.encode())]
            )

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
