"""ASGI plumbing around the Django site."""

from __future__ import annotations

import sys
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


def leave_request_bodies_to_the_application() -> None:
    """Under daphne, let the application alone read request bodies. Twisted's request, which
    daphne's extends, parses every POST body that is a form into arguments daphne never uses (a
    second copy of the body in memory), and answers a multipart body it cannot parse (no
    boundary, say) with a bare 400 and no body before the application sees it, so the client
    is never told what was wrong. Without it the site reads the body once and says why it
    cannot (accounts/middleware.py). daphne is imported before the application it serves, so
    this runs at the application's import; under another server it does nothing."""
    http_protocol = sys.modules.get("daphne.http_protocol")
    if http_protocol is None or issubclass(http_protocol.WebRequest, _BodyLeftToTheApplication):
        return

    class WebRequest(_BodyLeftToTheApplication, http_protocol.WebRequest):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    # daphne's HTTP factory names the request class it builds by this module global.
    http_protocol.WebRequest = WebRequest


class _BodyLeftToTheApplication:
    """Marks the request class that leaves bodies to the application."""
