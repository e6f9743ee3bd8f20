"""Workarounds around the MCP SDK's JSON-RPC handling, all in this module so that a fix in the SDK
is a change to this file alone: `for_sdk` makes a request what the SDK reads on either wire, or
answers it in the SDK's place where the SDK would answer it wrongly or the two wires would answer it
differently (a malformed envelope or a null id on the 2025 wire, a method echoed whole or with a
lone surrogate, an unsupported protocol version, a body its JSON parser refuses, a chunked body over
the limit, an id with a lone surrogate, a parse error without its reason).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import mcp_types as types
import pydantic_core
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from mcp_gateway.access_log import method_called
from mcp_gateway.guards import (
    JSON,
    MAX_REQUEST_BODY_BYTES,
    Answer,
    Headers,
    body_too_large,
    header,
    jsonrpc_error,
)
from memories import bounds
from memories.bounds import LONE_SURROGATE, UNPAIRED_SURROGATE_MARK

# Every protocol revision this endpoint serves, newest first: 2026-07-28 without a handshake,
# the others as `initialize` negotiates them.
SERVED_PROTOCOL_VERSIONS = (
    *MODERN_PROTOCOL_VERSIONS,
    *sorted(HANDSHAKE_PROTOCOL_VERSIONS, reverse=True),
)


class ForSdk(NamedTuple):
    """What the SDK is handed of a request (`scope`, `receive`, `send`), or, with `answer`, what
    the request gets in its place: `receive` then replays what was read, for draining."""

    scope: Scope
    receive: Receive
    send: Send
    answer: Answer | None = None


async def for_sdk(scope: Scope, headers: Headers, receive: Receive, send: Send) -> ForSdk:
    """The request made what the SDK reads on either wire: its body read ahead (and answered
    here when over MAX_REQUEST_BODY_BYTES or with a lone surrogate in its id), its Content-Type
    spelled as the SDK compares it, and on the 2025 wire its envelope checked (and its body
    re-encoded where the SDK's parser would refuse it) first; or the answer it gets instead.
    The SDK's refusals of a body are made to say why (_RefusalsReasoned)."""
    scope = _with_plain_json_content_type(scope, headers)
    body = await _read_body(receive)
    if body.oversized:
        return ForSdk(scope, body.receive, send, body_too_large(None))
    version = header(headers, b"mcp-protocol-version")
    if version is not None and version not in SERVED_PROTOCOL_VERSIONS:
        return ForSdk(scope, body.receive, send, _unsupported_version(version, body.raw))
    if body.raw is None:  # the client left before sending all of it: the SDK finds it gone
        return ForSdk(scope, body.receive, send)
    modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
    refusal = _lone_surrogate_in_id(body.raw)
    if refusal is None and modern:
        refusal = _long_method_refused(headers, body.raw)
    elif refusal is None:
        refusal = _legacy_envelope_checked(body)
    reasoned = _RefusalsReasoned(body.raw, send, modern=modern)
    return ForSdk(scope, body.receive, reasoned.send, refusal)


def _with_plain_json_content_type(scope: Scope, headers: Headers) -> Scope:
    """`scope` with its Content-Type spelled as the SDK compares it on the 2025 wire (exactly
    `application/json`), when the client wrote it otherwise (`Application/JSON`), which
    the body guard (mcp_gateway.guards) admitted."""
    if headers.get(b"content-type", b"").startswith(b"application/json"):
        return scope
    kept = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*kept, (b"content-type", b"application/json")]}


def _legacy_envelope_checked(body: _Body) -> Answer | None:
    """On the 2025 wire (no protocol version header, or a handshake version), the SDK takes a
    request whose id is null or neither a string nor an integer for a notification (202, and the
    request is dropped unanswered), and answers a malformed envelope with -32602 and its
    validation dump. So its body is checked here as the 2026 wire checks it: an Invalid Request
    (-32600, JSON-RPC 2.0 §5.1; MCP 2025-11-25 basic: ids are strings or integers, never null).
    Returns the refusal if any; a body the SDK's parser would refuse is re-encoded in
    `body.read`. What does not parse and a notification go on to the SDK as they came."""
    raw = body.raw
    assert raw is not None
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    # JSON-RPC 2.0 §4.1: a notification is a request object without an id.
    notification = isinstance(decoded, dict) and "id" not in decoded
    envelope = types.JSONRPCNotification if notification else types.JSONRPCRequest
    try:
        envelope.model_validate(decoded)
    except ValidationError:
        return _not_one_message(decoded)
    called = method_called.get()
    method = decoded["method"]
    if notification and called is not None:
        # The SDK answers a notification (202) before its handlers run, and with them the MCP
        # server's record of the method: the access line is written by then.
        called.method = method[: bounds.SHOWN_KEY_MAX]
    if not notification and (len(method) > bounds.SHOWN_KEY_MAX or LONE_SURROGATE.search(method)):
        # Longer than any method: the SDK would echo it whole in its answer (up to the body
        # limit); with a lone surrogate, which no method has: it would echo the re-encoding's
        # mark (below). Answered here as the SDK answers an unknown method, the echo cut and
        # each lone surrogate shown as U+FFFD, as a decoder that reads none shows it.
        shown = LONE_SURROGATE.sub("\ufffd", method)
        if called is not None:
            called.method = shown[: bounds.SHOWN_KEY_MAX]
        return _method_not_found(shown, decoded["id"], status=200)
    if _SDK_PARSER_REFUSES.search(raw) and not _sdk_parses(raw):
        # The SDK's JSON parser refuses what this one read (a lone surrogate, e.g. a string cut
        # inside an emoji by a JavaScript client, escaped or as raw bytes; a byte-order mark):
        # it gets the same request re-encoded, each lone surrogate marked so that the argument
        # checks name the field as on the 2026 wire. (Not in the id: _lone_surrogate_in_id.)
        try:
            rewritten = json.dumps(_mark_lone_surrogates(decoded), ensure_ascii=False).encode()
        except RecursionError:
            # Nested deeper than Python's recursion allows (json.loads reads deeper): deeper
            # still than the SDK's parser reads, which answers it as any body it cannot parse.
            return None
        body.read[:] = [{"type": "http.request", "body": rewritten, "more_body": False}]
    return None


def _lone_surrogate_in_id(raw: bytes) -> Answer | None:
    """-32600 for a request whose id holds a lone surrogate, on both wires: the answer must
    echo the id unchanged (JSON-RPC 2.0 §5), and echoed it would be JSON that strict parsers
    refuse (RFC 8259 §8.2), and that the 2025 wire's SDK cannot even read. The body is decoded
    only when it may hold one."""
    if not _MAY_HOLD_LONE_SURROGATE.search(raw):
        return None
    decoded = _decoded(raw)
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    if not (isinstance(request_id, str) and LONE_SURROGATE.search(request_id)):
        return None
    body = jsonrpc_error(
        types.INVALID_REQUEST, "id: must not contain lone surrogates (invalid Unicode)"
    )
    return Answer(400, body, [JSON])


# The levels of arrays and objects each wire's JSON parser reads: pydantic's on the 2025 wire,
# Python's on the 2026 wire (as deep as Python 3.12's C recursion goes, ~1,500 less the stack
# it is called from).
JSON_NESTING_MAX = 201
PYTHON_JSON_NESTING = "about 1,500"
_TOO_DEEP = "recursion limit exceeded"


def _parse_error(raw: bytes, *, modern: bool) -> Answer:
    """-32700 naming why the body is no JSON, in pydantic's words on both wires (the 2025
    wire's SDK gives them), with the nesting limit of the wire's parser named when nesting is
    the cause."""
    reason = "not JSON"  # what the SDK's parser refused, when neither parser here says why
    if modern:
        try:
            json.loads(raw)
        except RecursionError:
            reason = (
                f"nested deeper than {PYTHON_JSON_NESTING} levels of arrays and objects, as "
                "deep as they are read"
            )
            return Answer(400, jsonrpc_error(types.PARSE_ERROR, f"Parse error: {reason}"), [JSON])
        except ValueError as exc:
            reason = str(exc)
    try:
        pydantic_core.from_json(raw)
    except ValueError as exc:
        reason = str(exc)
    if reason.startswith(_TOO_DEEP):
        where = reason.removeprefix(_TOO_DEEP).strip()
        reason = (
            f"nested deeper than {JSON_NESTING_MAX} levels ({where}); at most "
            f"{JSON_NESTING_MAX} are read"
        )
    return Answer(400, jsonrpc_error(types.PARSE_ERROR, f"Parse error: {reason}"), [JSON])


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
    return Answer(400, jsonrpc_error(types.INVALID_REQUEST, message), [JSON])


class _RefusalsReasoned:
    """The send of a request the SDK reads: when it refuses the body as no JSON (on the 2026
    wire "Parse error" with no word of why; on the 2025 wire without naming the nesting limit)
    or, on the 2026 wire, as no single request or notification, the answer says why: the
    parser's reason (_parse_error), or `params` when they are what is wrong (_not_one_message,
    as the 2025 wire's envelope check names them). The body is looked at only then: the hot path
    parses it once, in the SDK."""

    def __init__(self, raw: bytes, send: Send, *, modern: bool) -> None:
        self._raw = raw
        self._send = send
        self._modern = modern
        self._held: dict | None = None

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start" and message["status"] == 400:
            self._held = message  # until its body says whether it is such a refusal
            return
        if self._held is not None:
            start, self._held = self._held, None
            answer = None if message.get("more_body", False) else self._reasoned(message)
            if answer is not None:
                headers = [h for h in start["headers"] if h[0] != b"content-length"]
                length = (b"content-length", str(len(answer.body)).encode())
                start = {**start, "headers": [*headers, length]}
                message = {**message, "body": answer.body}
            await self._send(start)
        await self._send(message)

    def _reasoned(self, message: dict) -> Answer | None:
        answer = _decoded(message.get("body", b""))
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, dict):
            return None
        if error.get("message") == NOT_ONE_MESSAGE:
            return _not_one_message(_decoded(self._raw))
        if error.get("code") == types.PARSE_ERROR:
            return _parse_error(self._raw, modern=self._modern)
        return None


def _long_method_refused(headers: Headers, raw: bytes) -> Answer | None:
    """On the 2026 wire the SDK echoes an unknown method whole in -32601's data, and the method
    must equal the Mcp-Method header, which only the HTTP server bounds (16 KiB of headers). A
    header longer than any method names none: only then is the body parsed ahead of the SDK
    and, when it is a request for that method, answered as the SDK answers an unknown method
    (404, the 2026 wire's status for -32601), the echo cut. Any other body (a notification, one
    that names another method, a malformed envelope) goes on to the SDK as it came, which
    echoes no method in those answers."""
    method = header(headers, b"mcp-method")
    if method is None or len(method) <= bounds.SHOWN_KEY_MAX:
        return None
    decoded = _decoded(raw)
    if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") != method:
        return None
    try:
        types.JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return None
    return _method_not_found(method, _request_id_in(raw), status=404)


def _method_not_found(method: str, request_id: str | int | None, *, status: int) -> Answer:
    """-32601 for a method longer than any, as the SDK answers an unknown method but with the
    echo cut (bounds.shown_key); `status` is the wire's for it (2025: 200, 2026: 404)."""
    body = jsonrpc_error(
        types.METHOD_NOT_FOUND, "Method not found", bounds.shown_key(method), request_id=request_id
    )
    return Answer(status, body, [JSON])


def _is_not_one_message(body: bytes) -> bool:
    answer = _decoded(body)
    error = answer.get("error") if isinstance(answer, dict) else None
    return isinstance(error, dict) and error.get("message") == NOT_ONE_MESSAGE


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


class _Body(NamedTuple):
    """A request's body as read ahead of the SDK: the receive that replays it, the messages read
    (which the caller may replace), the body (None when over MAX_REQUEST_BODY_BYTES or the
    client left before sending all of it), and whether it is over that limit."""

    receive: Receive
    read: list[dict]
    raw: bytes | None
    oversized: bool


async def _read_body(receive: Receive) -> _Body:
    """Read ahead of the SDK, which would answer a body over the limit without a declared
    length (chunked) in plain text: never more than one message past the limit."""
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

    if size > MAX_REQUEST_BODY_BYTES:
        return _Body(replay, read, None, oversized=True)
    if not complete:
        return _Body(replay, read, None, oversized=False)
    raw = read[0].get("body", b"") if len(read) == 1 else b"".join(m.get("body", b"") for m in read)
    return _Body(replay, read, raw, oversized=False)


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
    body = jsonrpc_error(
        types.UNSUPPORTED_PROTOCOL_VERSION, message, data, request_id=_request_id_in(raw)
    )
    return Answer(400, body, [JSON])


def _request_id_in(raw: bytes | None) -> str | int | None:
    """The id of the request in `raw`, for an error answered before the SDK reads it; None
    (JSON-RPC 2.0 §5: null when it cannot be read) for a notification, or an id that is none
    (MCP basic: a string or an integer)."""
    decoded = _decoded(raw) if raw is not None else None
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if valid else None


# A surrogate, as a \u escape or as raw bytes (UTF-8's form of one, which UTF-8 forbids and
# json.loads reads as the surrogate): json.loads pairs those that pair, and keeps the lone ones.
_MAY_HOLD_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
# What may make pydantic's JSON parser (the SDK's on the 2025 wire) refuse a body json.loads
# reads: a surrogate (lone ones are refused, and raw ones all), a byte-order mark, UTF-16.
_SDK_PARSER_REFUSES = re.compile(
    _MAY_HOLD_LONE_SURROGATE.pattern + rb"|^(\xef\xbb\xbf|\xff\xfe|\xfe\xff)"
)


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
