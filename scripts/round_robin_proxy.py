#!/usr/bin/env python3
"""A small loopback reverse proxy that sends each HTTP request to the next of several server
processes in turn (round robin per request, not per connection), to show that threengram scales
out: the MCP endpoint is stateless, so any process can answer any request.

    .venv/bin/python scripts/round_robin_proxy.py --port 8080 \\
        --backend http://127.0.0.1:8001 --backend http://127.0.0.1:8002

Every response carries `X-Upstream: <backend host:port>`, so a client can see which process
answered. The Host header is passed through unchanged (the servers check it against
ALLOWED_HOSTS), and X-Forwarded-For is set. A demonstration and test tool for 127.0.0.1, not a
production proxy: it buffers bodies, has no TLS and no health checks (use nginx or a managed load
balancer in production, docs/operations.md).
"""

from __future__ import annotations

import argparse
import itertools
import socket

import httpx2

# RFC 9110 §7.6.1: connection-specific fields are not forwarded.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    }
)


class RoundRobinProxy:
    """ASGI app forwarding each request to the next backend."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = [backend.rstrip("/") for backend in backends]
        self._next = itertools.cycle(range(len(self.backends)))
        transport = httpx2.AsyncHTTPTransport(
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        self.http = httpx2.AsyncClient(transport=transport, timeout=60)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.http.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        backend = self.backends[next(self._next)]
        url = backend + scope["raw_path"].decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP]
        client = scope.get("client")
        if client:
            headers.append((b"x-forwarded-for", client[0].encode()))
        upstream = backend.split("://", 1)[1].encode()
        try:
            response = await self.http.request(scope["method"], url, headers=headers, content=body)
        except httpx2.HTTPError:
            await send(
                {
                    "type": "http.response.start",
                    "status": 502,
                    "headers": [(b"x-upstream", upstream), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        content = response.content
        out_headers = [
            (k.lower().encode(), v.encode("latin-1"))
            for k, v in response.headers.multi_items()
            if k.lower().encode() not in HOP_BY_HOP and k.lower() != "content-encoding"
        ]
        out_headers += [
            (b"x-upstream", upstream),
            (b"content-length", str(len(content)).encode()),
        ]
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": out_headers})  # fmt: skip
        await send({"type": "http.response.body", "body": content})


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--backend", action="append", required=True)
    args = parser.parse_args()
    uvicorn.run(
        RoundRobinProxy(args.backend),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
