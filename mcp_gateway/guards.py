"""The guards of /mcp, in the order they run: Host and Origin (DNS rebinding), a CORS preflight,
a method other than POST, the bearer token, scope, body, the account's requests at once, rate
limit. Each is a plain function of the request's headers (or of its verified principal), not a
coroutine, so the checks add no await to the hot path: None lets the request on, an `Answer`
ends it (the account's slot, `InFlight.enter`, is the one coroutine: it waits only when the
account has none free). An answer is built only when one is given, or shared when it never
varies. The router (mcp_gateway.asgi) runs them: `guard_before_token`, the token check,
`guard_after_token`, `InFlight.enter`, `guard_rate_limit`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import deque
from typing import Any, NamedTuple

import mcp_types as types
from django.conf import settings
from django.http.request import MediaType, split_domain_port, validate_host

from infra.rate_limit import FixedWindow, event_loop_counter_store
from mcp_gateway import auth, cors
from mcp_gateway.principal import Principal
from memories import bounds

logger = logging.getLogger(__name__)

# Larger bodies get 413 before any parsing. A request carries one memory at most (bounded far
# below this) plus the JSON-RPC envelope.
MAX_REQUEST_BODY_BYTES = 1024 * 1024

JSON = (b"content-type", b"application/json")


Headers = dict[bytes, bytes]


def header(headers: Headers, name: bytes) -> str | None:
    """A header's value as text (HTTP header bytes are Latin-1), or None when absent."""
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


class Answer(NamedTuple):
    """What a guard (or a workaround of mcp_gateway.wire) answers in the MCP server's place; the
    request goes no further."""

    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] | None = None


def jsonrpc_error(
    code: int, message: str, data: Any = None, *, request_id: str | int | None = None
) -> bytes:
    """A JSON-RPC 2.0 error response (§5.1), the body of an answer given in the MCP server's
    place."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


_INVALID_HOST = Answer(421, b"Invalid Host header")
_INVALID_ORIGIN = Answer(403, b"Invalid Origin header")
_NO_STREAM = Answer(405, b"", [(b"allow", b"POST")])


def _host_guard(headers: Headers) -> Answer | None:
    """DNS-rebinding protection, by Host: a page whose name was rebound to this server's address
    still sends its own name, which is none of ALLOWED_HOSTS. 421 Misdirected Request
    (RFC 9110 §15.5.20): this server does not answer for that name."""
    return None if _host_allowed(header(headers, b"host")) else _INVALID_HOST


def _host_allowed(host: str | None) -> bool:
    """DNS-rebinding protection from the site's own ALLOWED_HOSTS (same rules as Django)."""
    if not host:
        return False
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def _origin_guard(headers: Headers, *, listed_origin: bool) -> Answer | None:
    """DNS-rebinding protection, by Origin (MCP Streamable HTTP transport, Security Warning:
    servers MUST validate the Origin header, and answer 403 Forbidden to an invalid one).

    An origin CORS_ALLOWED_ORIGINS or CORS_ALLOWED_ORIGIN_REGEXES names passes; any other must
    name one of ALLOWED_HOSTS. CORS_ALLOW_ALL_ORIGINS trusts no origin in particular, so it lets
    none skip this (and `check --deploy` refuses it, threengram/checks.py)."""
    if listed_origin or _origin_allowed(header(headers, b"origin")):
        return None
    return _INVALID_ORIGIN


def _origin_allowed(origin: str | None) -> bool:
    if origin is None:
        return True  # not a browser, or same-origin
    parts = cors.parsed_origin(origin)
    return parts is not None and parts.scheme in ("http", "https") and _host_allowed(parts.netloc)


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


def bearer_token(headers: Headers) -> str | None:
    """The token of an `Authorization: Bearer` header (RFC 6750 §2.1, the one method the
    protected-resource metadata names), else None: the request carries no credentials."""
    authorization = header(headers, b"authorization") or ""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def repeated_authorization(raw_headers: list[tuple[bytes, bytes]]) -> Answer | None:
    """400 `invalid_request` (RFC 6750 §3.1) for a request with more than one Authorization
    header: which one names the caller is a choice a proxy in front may make otherwise."""
    count = sum(1 for name, _ in raw_headers if name == b"authorization")
    if count < 2:
        return None
    return challenge(
        400, "invalid_request", f"Send one Authorization header; this request has {count}"
    )


def challenge(status: int, error: str | None, description: str) -> Answer:
    """A refused bearer token (RFC 6750 §3): the error as JSON and a `WWW-Authenticate: Bearer`
    challenge naming the protected-resource metadata (RFC 9728 §5.1), from which a client finds
    where to get a token. Without credentials the challenge carries no error code (§3.1)."""
    body = {"error": error or "invalid_request", "error_description": description}
    value = auth.challenge(error, description if error else None)
    return Answer(status, json.dumps(body).encode(), [JSON, (b"www-authenticate", value.encode())])


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
    content_type = _media_type(header(headers, b"content-type"))
    if content_type != "application/json":
        shown = _shown_header(content_type) or "none"
        return _refused(415, f"Content-Type must be application/json; got {shown}")
    coding = (header(headers, b"content-encoding") or "identity").strip().lower()
    if coding != "identity":
        return _refused(
            415, f"Content-Encoding {_shown_header(coding)} is not supported; send the body as is"
        )
    length = header(headers, b"content-length")
    if length is not None:
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), and not converted past
        # the limit's own length (int() refuses thousands of digits).
        if not (length.isascii() and length.isdigit()):
            return _refused(
                400, f"Content-Length must be the body's size in bytes; got {length[:20]!r}"
            )
        size = length.lstrip("0") or "0"
        if len(size) > len(str(MAX_REQUEST_BODY_BYTES)) or int(size) > MAX_REQUEST_BODY_BYTES:
            return body_too_large(size if len(size) <= 20 else f"{size[:20]}…")
    if not _accepts_json(header(headers, b"accept") or ""):
        return _refused(406, "Accept must include application/json (the answers are JSON)")
    return None


def body_too_large(declared: str | None) -> Answer:
    """413 naming the body limit, and the body's size as known: its declared length, or more
    than the limit for one that came without (chunked) and was read past it."""
    size = declared if declared is not None else f"more than {MAX_REQUEST_BODY_BYTES}"
    return _refused(413, f"the body is {size} bytes; at most {MAX_REQUEST_BODY_BYTES} are read")


def _shown_header(value: str) -> str:
    """A header value as an error repeats it: cut as any name a caller made up, and each
    character that would show as nothing or as another (a control character, DEL) escaped, so
    that `application/json<DEL>` does not read `application/json`."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in bounds.shown_key(value))


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


def _refused(status: int, message: str) -> Answer:
    return Answer(status, jsonrpc_error(types.INVALID_REQUEST, message), [JSON])


def _scope_guard(principal: Principal) -> Answer | None:
    """Every MCP method needs memory:read (RFC 6750 §3.1 `insufficient_scope`, 403); tools that
    write are checked per call, so a read-only token can still list them and read."""
    if principal.can(settings.MEMORY_READ_SCOPE):
        return None
    return challenge(403, "insufficient_scope", f"Required scope: {settings.MEMORY_READ_SCOPE}")


# JSON-RPC 2.0 §5.1 leaves -32000 to -32099 to the server's own errors.
RATE_LIMITED = -32029


def guard_rate_limit(principal: Principal) -> Answer | None:
    """429 Too Many Requests with Retry-After (RFC 6585 §4) once the token's user has spent
    MCP_RATE_LIMIT; the last guard (the request holds its account's slot by then), so a refused
    request spends no user's budget. A shared cache that cannot answer lets the request on (and
    says so in the log): the limit guards fairness between accounts, not access, and an outage
    of the cache should not become one of the server."""
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
    body = jsonrpc_error(
        RATE_LIMITED,
        f"too_many_requests: this account's calls reached {settings.MCP_RATE_LIMIT} in "
        f"{settings.MCP_RATE_LIMIT_WINDOW} seconds; retry after {retry_after} seconds",
        {"retryAfter": retry_after},
    )
    return Answer(429, body, [JSON, (b"retry-after", str(retry_after).encode())])


class InFlight:
    """The requests of each account this server process is serving now, bounded per account by
    MCP_ACCOUNT_CONCURRENCY_MAX (0: unbounded). The rate limit bounds how many requests an
    account sends in a window, not how many hold the process and its database pool at once:
    one account's concurrent searches would queue every other account's behind them.

    A request past the bound waits for one of its own account's slots, in arrival order (each
    freed slot is handed to the oldest waiter, so none arriving later takes it first), rather
    than being refused: MCP clients do not retry a 429, and an agent's parallel tool calls
    would fail. The wait holds no database connection (the token check has returned its) and no
    other account's slot, so it costs the other accounts nothing. Refused (429) past
    MCP_ACCOUNT_QUEUE_WAIT_MS of waiting, or at once when MCP_ACCOUNT_QUEUE_MAX of the
    account's requests already wait (each holds its body in memory meanwhile).

    Counted after the token check (the account is known only from the verified token), in this
    process's memory: one event loop per process, so no lock, and a count that cannot outlive
    the process; an account's entry exists only while it has a request served or waiting.
    `enter` and `leave` pair up in the router's `finally`, whatever ends the request (an answer,
    an error, the client leaving, cancellation); a waiter cancelled or refused holds nothing."""

    def __init__(self) -> None:
        self._accounts: dict[int, _Account] = {}

    async def enter(self, user_id: int) -> Answer | None:
        """Count one request of `user_id` in, after waiting for a slot if its account has none
        free, or the refusal (not counted: no `leave` follows it)."""
        limit = settings.MCP_ACCOUNT_CONCURRENCY_MAX
        account = self._accounts.get(user_id)
        if account is None:
            account = self._accounts[user_id] = _Account()
        if not limit or (account.serving < limit and not account.waiting):
            account.serving += 1
            return None
        wait_ms = settings.MCP_ACCOUNT_QUEUE_WAIT_MS
        if not wait_ms or len(account.waiting) >= settings.MCP_ACCOUNT_QUEUE_MAX:
            return _concurrency_refusal(limit, len(account.waiting))
        granted = asyncio.get_running_loop().create_future()
        account.waiting.append(granted)
        try:
            async with asyncio.timeout(wait_ms / 1000):
                await granted
        except BaseException as exc:  # the wait's bound, or the request cancelled
            if granted.done() and not granted.cancelled():
                self.leave(user_id)  # handed a slot as the wait ended: handed on
            else:
                if granted in account.waiting:  # a slot's hand-over may have skipped it
                    account.waiting.remove(granted)
                self._forget_if_idle(user_id, account)
            if isinstance(exc, TimeoutError):
                return _concurrency_refusal(limit, waited_ms=wait_ms)
            raise
        return None

    def leave(self, user_id: int) -> None:
        """One request of `user_id` ended: its slot goes to the account's oldest waiter, if any."""
        account = self._accounts[user_id]
        while account.waiting:
            waiter = account.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot changes hands: `serving` stays
                return
        account.serving -= 1
        self._forget_if_idle(user_id, account)

    def count(self, user_id: int) -> int:
        """The requests of `user_id` being served now."""
        account = self._accounts.get(user_id)
        return account.serving if account else 0

    def waiting(self, user_id: int) -> int:
        """The requests of `user_id` waiting for a slot now."""
        account = self._accounts.get(user_id)
        return len(account.waiting) if account else 0

    def accounts(self) -> int:
        """The accounts with a request served or waiting now (the entries held in memory)."""
        return len(self._accounts)

    def _forget_if_idle(self, user_id: int, account: _Account) -> None:
        # By identity: a cancelled waiter runs its handler a loop pass after its future was
        # cancelled, by when its idle entry may have been dropped and a new request of the
        # account counted in a fresh one, which must stay.
        if self._accounts.get(user_id) is account and not account.serving and not account.waiting:
            del self._accounts[user_id]


class _Account:
    """One account's requests in this process: how many are served, and the waiters for a
    slot, oldest first (each a future that `InFlight.leave` resolves to hand it a slot)."""

    __slots__ = ("serving", "waiting")

    def __init__(self) -> None:
        self.serving = 0
        self.waiting: deque[asyncio.Future[None]] = deque()


# A slot frees when a request is answered, milliseconds for most: the shortest wait a header
# can say.
CONCURRENCY_RETRY_AFTER_SECONDS = 1


def _concurrency_refusal(limit: int, waiting: int = 0, *, waited_ms: int = 0) -> Answer:
    """429 with Retry-After (RFC 6585 §4) and a JSON-RPC error in the rate limit's form, its
    message saying that the bound is on requests at once, not on their number, and why this
    one did not wait for a slot: it waited its bound, or as many as may wait already do."""
    wait = CONCURRENCY_RETRY_AFTER_SECONDS
    requests = "request" if limit == 1 else "requests"
    why = ""
    if waited_ms:
        why = f"; this one waited {waited_ms / 1000:g} seconds for a slot"
    elif waiting:
        why = f" and {waiting} more are waiting, as many as may"
    body = jsonrpc_error(
        RATE_LIMITED,
        f"too_many_requests: at most {limit} {requests} of this account at once (concurrency "
        f"limit){why}; retry after {wait} second{'s' if wait != 1 else ''}",
        {"retryAfter": wait, "concurrencyLimit": limit},
    )
    return Answer(429, body, [JSON, (b"retry-after", str(wait).encode())])


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


class Origin(NamedTuple):
    """The request's Origin as the CORS policy sees it (mcp_gateway.cors). `listed`: named by
    the operator, which passes the Origin guard; `cross`: a browser-based client's origin the
    policy allows, whose every answer (challenges and errors too) carries the CORS `headers`, or
    the page cannot read it."""

    listed: bool
    cross: bool
    headers: list[tuple[bytes, bytes]]


def request_origin(headers: Headers) -> Origin:
    """The request's Origin header as the CORS policy sees it."""
    origin = header(headers, b"origin")
    listed = cors.listed_origin(origin)
    cross = listed or cors.allowed_origin(origin)
    return Origin(listed, cross, cors.response_headers(origin) if cross else [])


def guard_before_token(method: str, headers: Headers, origin: Origin) -> Answer | None:
    """The guards that need no credentials, in order: Host and Origin (DNS rebinding), a CORS
    preflight (which carries no token), a method other than POST."""
    return (
        _host_guard(headers)
        or _origin_guard(headers, listed_origin=origin.listed)
        or _preflight_guard(method, cross_origin=origin.cross)
        or _stream_guard(method)
    )


def guard_after_token(principal: Principal, headers: Headers) -> Answer | None:
    """The guards of an authenticated request that count nothing, in order: scope, body. The
    account's slot (`InFlight`) comes next, then `guard_rate_limit` (last, so a refused request
    spends no budget)."""
    return _scope_guard(principal) or _body_guard(headers)
