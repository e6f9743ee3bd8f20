"""The baseline of scripts/bench_gateway.py: the MCP SDK's own minimal stateless server, serving
one ~1 KB in-memory resource body with no auth and no database: the ceiling the gateway's own
figures are compared with (docs/performance.md).

uvicorn: `app` (its lifespan starts the session manager). daphne sends no lifespan, so
`lazy_app` starts it on the first request.
"""

from __future__ import annotations

import asyncio
import json

import mcp_types as types
from mcp.server import Server

BODY = json.dumps(
    {"id": 1, "title": "perf doc", "tags": ["a", "b", "c"], "text": "x" * 900},
    separators=(",", ":"),
)


async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri=params.uri, mime_type="application/json", text=BODY)
        ],
        ttl_ms=60_000,
        cache_scope="public",
    )


async def list_resources(ctx, params) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[])


server = Server(
    "perf-a", version="0", on_read_resource=read_resource, on_list_resources=list_resources
)
app = server.streamable_http_app(stateless_http=True, json_response=True)


class _LazyLifespan:
    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()

    async def _run(self) -> None:
        async with server.session_manager.run():
            self.ready.set()
            await self.stop.wait()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            if self.task is None:
                self.task = asyncio.get_running_loop().create_task(self._run())
            await self.ready.wait()
        await app(scope, receive, send)


lazy_app = _LazyLifespan()
