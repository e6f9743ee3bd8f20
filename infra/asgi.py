"""ASGI plumbing around the Django site."""

from __future__ import annotations

from typing import Any

Scope = dict[str, Any]


class BodilessHead:
    """RFC 9110 §9.3.2: the answer to a HEAD request has no content. Django's ASGI handler sends a
    page's body (in 64 KiB parts) whatever the method and leaves dropping it to the server;
    daphne drops the first part only, so the rest of a long page reached the client as the start
    of its next response on the connection."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: dict) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, send_without_body)
