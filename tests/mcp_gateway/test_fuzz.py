"""Hostile input: property-based fuzzing of `/mcp` with hypothesis.

Random JSON-RPC shapes, methods, params, routing headers, sizes and unicode (lone surrogates,
NUL, huge numbers, deep nesting), on both protocol wires, with no token, a bad token or a valid
one (so the authenticated paths, tools/call with random arguments included, are fuzzed and not
only the 401 wall). The real ASGI application runs in-process over httpx2's ASGI transport; one
event loop and one small connection pool serve every case so that thousands fit in a CI run.

The property: never a 5xx; a JSON reply is a well-formed JSON-RPC response (result xor error
with an integer code, never -32603) or an OAuth-style HTTP error; a tool error is never
`internal_error` (NUL and lone surrogates in any argument, nested ones too, are `invalid_input`);
no reply carries a stack trace.
`FUZZ_EXAMPLES` (environment) sets the number of cases; 10,000 by default.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os

import httpx2
import mcp_types as types
import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_gateway import tools
from tests.factories import MemoryFactory, UserFactory
from tests.mcp_gateway.conftest import asgi_transport, make_token

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
WIRES = ["2026-07-28", "2025-11-25", "2025-06-18", "1999-01-01", "", "\u00e9\u0000"]
METHODS = [
    "initialize",
    "notifications/initialized",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "sampling/createMessage",
]
SCHEMAS = {tool.name: tool.input_schema for tool in tools.TOOLS}
TOOLS = sorted(SCHEMAS)
ARGUMENT_NAMES = sorted({name for schema in SCHEMAS.values() for name in schema["properties"]})
TRACE_MARKERS = ("Traceback", 'File "/', "site-packages", "psycopg.", "django.db")

# Text with everything a JSON parser or PostgreSQL may choke on: NUL, lone surrogates
# (json.dumps escapes them as \udXXX; PostgreSQL rejects both in text), emoji, RTL marks.
hostile_text = st.text(
    alphabet=st.characters(codec=None, categories=None), max_size=40
) | st.sampled_from(
    ["", "\x00", "\ud800", "a\udfffb", "threengram://memory/", "\u202e", "💥" * 10, "%s", "'"]
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([10**400, -(10**400), 0, -1, 2**63, 2**64 + 1]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(ARGUMENT_NAMES) | hostile_text, children, max_size=4)
    ),
    max_leaves=12,
)
# REAL_ID is replaced by the id of the tenant's memory (the test makes it), in body and headers.
REAL_ID = "00000000-feed-7000-8000-00000000beef"
memory_uris = st.one_of(
    st.just(f"threengram://memory/{REAL_ID}"),
    st.builds("threengram://memory/{}".format, hostile_text),
    st.uuids().map(lambda u: f"threengram://memory/{u}"),
    hostile_text,
)


def _value_for(schema: dict) -> st.SearchStrategy:
    """Mostly values of the declared type, with hostile content and out-of-bound sizes."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema.get("type", "string")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    options = []
    for kind in kinds:
        if kind == "string":
            options.append(
                hostile_text
                | st.sampled_from(["\x00", "a\ud800", "\udfff" * 3, "ok\x00ok"])
                | st.uuids().map(str)
                | st.just(REAL_ID)
                | st.sampled_from(["2026-12-02T10:00:00Z", "2026-13-45T99:00:00", "x" * 20_001])
                | st.sampled_from(["2026-12-10", "2026-02-30", "0000-01-01"])
                # Search query syntax: tsquery operators, quotes, prefixes, a lone exclusion.
                | st.sampled_from(["a & | ! :* ' \\", '"unclosed', "-", "-x -y", "(a|b)", "数据库"])
            )
        elif kind == "integer":
            # Whole floats near the bounds: JSON Schema counts 5.0 as an integer.
            options.append(numbers | st.integers(-2, 60).map(float))
        elif kind == "array":
            options.append(st.lists(_value_for(schema.get("items", {})), max_size=4))
        elif kind == "object":
            options.append(_arguments(schema))
        elif kind == "null":
            options.append(st.none())
        else:
            options.append(scalars)
    return st.one_of(options)


def _arguments(schema: dict) -> st.SearchStrategy:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    return st.fixed_dictionaries(
        {name: _value_for(properties[name]) for name in required},
        optional={
            name: _value_for(sub) for name, sub in properties.items() if name not in required
        },
    )


# Built once, not at each draw: a strategy computes its properties (emptiness, recursion) on
# first use, and rebuilding them per case took as long as the requests themselves.
TOOL_ARGUMENTS = {name: _arguments(schema) for name, schema in SCHEMAS.items()}
ANY_ARGUMENTS = (
    st.dictionaries(st.sampled_from(ARGUMENT_NAMES), json_values, max_size=5) | json_values
)
TOOL_NAMES = st.sampled_from(TOOLS) | hostile_text
RESOURCE_URIS = memory_uris | json_values
PROMPT_NAMES = st.sampled_from(["briefing", "debrief"]) | hostile_text
PROMPT_ARGUMENT_NAMES = st.sampled_from(["scope", "project", "thread", "mode"])
PROMPT_ARGUMENTS = st.dictionaries(PROMPT_ARGUMENT_NAMES, scalars)
COMPLETED_ARGUMENT_NAMES = PROMPT_ARGUMENT_NAMES | hostile_text
OTHER_PARAMS = st.dictionaries(hostile_text, json_values, max_size=3)
META_WIRES = st.sampled_from(WIRES) | hostile_text
META_CAPABILITIES = st.just({}) | json_values

ANY_METHODS = st.sampled_from(METHODS) | hostile_text
JSONRPC_VERSIONS = st.sampled_from(["2.0", "2.0", "1.0", None]) | scalars
ANY_IDS = st.integers(1, 2**31) | numbers | hostile_text | json_values
CONTENT_TYPES = st.sampled_from(["application/json", "application/json; charset=utf-8"]) | (
    st.sampled_from(["text/plain", "application/x-www-form-urlencoded", ""])
)
ACCEPTS = st.sampled_from(["application/json, text/event-stream", "application/json"]) | (
    st.sampled_from(["text/event-stream", "*/*", "text/html", ""])
)
ROUTED_NAMES = memory_uris | st.sampled_from(TOOLS)
# Tool calls and reads weighted up: they reach the handlers.
HANDLED_METHODS = st.sampled_from(
    ["tools/call"] * 6 + ["resources/read"] * 2 + ["prompts/get", "completion/complete"] + METHODS
)


@st.composite
def tool_arguments(draw: st.DrawFn, name: object) -> object:
    if name in SCHEMAS and draw(st.integers(0, 3)):
        return draw(TOOL_ARGUMENTS[name])
    return draw(ANY_ARGUMENTS)


@st.composite
def params(draw: st.DrawFn, method: str, wire: str) -> object:
    if draw(st.integers(0, 9)) == 0:  # not even an object
        return draw(json_values)
    value: dict = {}
    if method == "tools/call":
        value["name"] = draw(TOOL_NAMES)
        value["arguments"] = draw(tool_arguments(value["name"]))
    elif method in ("resources/read", "resources/subscribe"):
        value["uri"] = draw(RESOURCE_URIS)
    elif method == "prompts/get":
        value["name"] = draw(PROMPT_NAMES)
        value["arguments"] = draw(PROMPT_ARGUMENTS)
    elif method == "completion/complete":
        if draw(st.booleans()):  # a prompt argument, as clients ask, with hostile text
            value["ref"] = {"type": "ref/prompt", "name": draw(PROMPT_NAMES)}
            value["argument"] = {
                "name": draw(COMPLETED_ARGUMENT_NAMES),
                "value": draw(hostile_text),
            }
        else:
            value["ref"] = draw(json_values)
            value["argument"] = draw(json_values)
    else:
        value.update(draw(OTHER_PARAMS))
    if draw(st.booleans()):
        meta = {
            "io.modelcontextprotocol/protocolVersion": draw(META_WIRES),
            "io.modelcontextprotocol/clientCapabilities": draw(META_CAPABILITIES),
        }
        value["_meta"] = meta if draw(st.integers(0, 4)) else draw(json_values)
    return value


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, bytes], bytes, str]:
    """(headers, body, token kind) of one hostile request."""
    wire = draw(st.sampled_from(WIRES))
    method = draw(ANY_METHODS)
    message: object = {"jsonrpc": draw(JSONRPC_VERSIONS)}
    message["method"] = method if draw(st.integers(0, 9)) else draw(json_values)
    if draw(st.integers(0, 5)):
        message["id"] = draw(ANY_IDS)
    if draw(st.integers(0, 5)):
        message["params"] = draw(params(method if isinstance(method, str) else "", wire))
    shape = draw(st.integers(0, 19))
    if shape == 0:
        message = [message, message]  # batch (not part of MCP any more)
    elif shape == 1:
        message = draw(json_values)
    if shape == 2:  # deeper than any recursive parser's stack
        depth = draw(st.sampled_from([100, 3000, 100_000]))
        body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":'
        body += b"[" * depth + b"]" * depth + b"}}"
    elif shape == 3:
        body = draw(st.binary(max_size=200))
    elif shape == 4:
        body = json.dumps(message).encode()[: draw(st.integers(0, 60))]  # truncated
    elif shape == 5:
        body = (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'
            + b"x" * (draw(st.sampled_from([1, 2, 1100])) * 1024)
            + b'"}}'
        )
    else:
        body = json.dumps(message, allow_nan=True).encode("utf-8", "surrogatepass")
    headers: dict[str, str] = {}
    if draw(st.integers(0, 9)):
        headers["content-type"] = draw(CONTENT_TYPES)
    if draw(st.integers(0, 9)):
        headers["accept"] = draw(ACCEPTS)
    if wire and draw(st.integers(0, 5)):
        headers["mcp-protocol-version"] = wire
    if draw(st.booleans()):
        headers["mcp-method"] = (
            method if isinstance(method, str) and draw(st.integers(0, 3)) else draw(hostile_text)
        )
    if draw(st.integers(0, 2)) == 0:
        headers["mcp-name"] = draw(ROUTED_NAMES)
    raw_headers = {
        key: value.encode("utf-8", "surrogatepass")
        for key, value in headers.items()
        if "\n" not in value and "\r" not in value and "\x00" not in value
    }
    token_kind = draw(st.sampled_from(["valid", "valid", "valid", "bogus", "none", "read-only"]))
    return raw_headers, body, token_kind


@st.composite
def wellformed_requests(draw: st.DrawFn) -> tuple[dict[str, bytes], bytes, str]:
    """A request as a real client frames it (envelope and routing headers right) with hostile
    params and tool arguments: these get past the transport to the handlers."""
    wire = draw(st.sampled_from(["2026-07-28", "2025-11-25"]))
    method = draw(HANDLED_METHODS)
    message_params = draw(params(method, wire))
    if isinstance(message_params, dict) and wire == "2026-07-28":
        message_params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": wire,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    message = {"jsonrpc": "2.0", "id": draw(st.integers(1, 2**31)), "method": method}
    message["params"] = message_params
    headers = {
        "content-type": b"application/json",
        "accept": b"application/json, text/event-stream",
        "mcp-protocol-version": wire.encode(),
        "mcp-method": method.encode(),
    }
    name = (
        message_params.get("name") or message_params.get("uri")
        if isinstance(message_params, dict)
        else None
    )
    if isinstance(name, str) and wire == "2026-07-28":
        headers["mcp-name"] = name.encode("utf-8", "surrogatepass")
    body = json.dumps(message).encode("utf-8", "surrogatepass")
    return headers, body, draw(st.sampled_from(["valid", "valid", "valid", "read-only"]))


def _check(response: httpx2.Response, case: object) -> str:
    """Assert the property; return what kind of answer it was (for the coverage check)."""
    text = response.content.decode("utf-8", "replace")
    assert response.status_code < 500, (response.status_code, text[:500], case)
    for marker in TRACE_MARKERS:
        assert marker not in text, (marker, text[:500], case)
    if response.status_code in (202, 204) or not response.content:
        return f"http {response.status_code}"
    if not response.headers.get("content-type", "").startswith("application/json"):
        assert response.status_code >= 400, (response.status_code, text[:200], case)
        return f"http {response.status_code}"
    body = response.json()
    if response.status_code in (401, 403, 413, 429) and "error_description" in body:
        return f"http {response.status_code}"  # an OAuth-style HTTP error (RFC 6750 §3)
    assert isinstance(body, dict), (body, case)
    assert body.get("jsonrpc") == "2.0", (body, case)
    assert ("result" in body) != ("error" in body), (body, case)
    if response.status_code == 403:
        # A tool the token's scope does not cover: the step-up challenge, the scope named in a
        # JSON-RPC error.
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"], case
        assert body["error"]["message"].startswith("insufficient_scope"), case
        return "http 403 step-up"
    if "error" in body:
        error = body["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), (body, case)
        # An internal error is the JSON-RPC face of a 500: a bug, not an answer to bad input.
        assert error["code"] != types.INTERNAL_ERROR, (body, case)
        return f"jsonrpc error {error['code']}"
    assert response.status_code == 200, case
    if isinstance(body["result"], dict) and "isError" in body["result"]:
        if body["result"]["isError"]:
            # A tool's internal_error is the tool-result face of a 500: hostile arguments must
            # get invalid_input (or another domain error), never this.
            text = body["result"]["content"][0]["text"]
            assert not text.startswith("internal_error"), (text, case)
            return "tool result (error)"
        return "tool result"
    return "jsonrpc result"


@pytest.mark.django_db(transaction=True)
# One user sends every case: the per-user rate limit (tested in test_rate_limit.py) is off, or
# the last thousand authenticated cases would only meet the 429.
@override_settings(ASYNC_DATABASE_POOL_MAX=4, ASYNC_DATABASE_POOL_MIN=1, MCP_RATE_LIMIT=0)
def test_hostile_requests_never_get_a_500_or_a_stack_trace():
    from mcp_gateway.asgi import GatewayRouter
    from threengram.asgi import django_application

    tenant = UserFactory()
    memory = MemoryFactory(owner=tenant, content="fuzz target")
    MemoryFactory(owner=UserFactory(), content="someone else's")
    tokens = {
        "valid": make_token(tenant),
        "read-only": make_token(tenant, scope="memory:read"),
        "bogus": "not-a-real-token",
    }
    seen: collections.Counter[str] = collections.Counter()
    runner = asyncio.Runner()
    router = GatewayRouter(django_application)
    client = runner.run(_open_client(router))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=requests() | wellformed_requests())
    def fuzz(case: tuple[dict[str, bytes], bytes, str]) -> None:
        headers, body, token_kind = case
        real = (REAL_ID.encode(), str(memory.id).encode())
        headers = {key: value.replace(*real) for key, value in headers.items()}
        body = body.replace(*real)
        if token_kind in tokens:
            headers["authorization"] = f"Bearer {tokens[token_kind]}".encode()
        response = runner.run(client.post("/mcp", headers=headers, content=body))
        seen[_check(response, (headers, body[:300]))] += 1

    try:
        fuzz()
    finally:
        runner.run(client.aclose())
        runner.run(router.shutdown())
        runner.close()
    # The cases reached the handlers, not only the transport's and the 401 wall's refusals.
    assert seen["tool result"] + seen["tool result (error)"] >= EXAMPLES // 100, seen
    assert seen["jsonrpc result"] >= EXAMPLES // 100, seen
    assert seen["http 401"] >= EXAMPLES // 100, seen


async def _open_client(router) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=asgi_transport(router), base_url="http://localhost", timeout=30
    )
