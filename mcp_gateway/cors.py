"""One CORS policy for browser-based MCP clients (the Fetch standard's CORS protocol), read from
django-cors-headers' settings: its middleware applies it to the Django endpoints an MCP client
calls (OAuth metadata, token, registration, revocation), and the /mcp router applies the same
to /mcp, which runs no Django middleware.

Only the origins of CORS_ALLOWED_ORIGINS / CORS_ALLOWED_ORIGIN_REGEXES (loopback by default)
get CORS headers; no credentials (cookies) are ever allowed cross-origin: MCP clients send a
bearer token, and the account pages are not covered (CORS_URLS_REGEX).
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from corsheaders.conf import conf
from corsheaders.middleware import CorsMiddleware as _CorsMiddleware
from django.http import HttpRequest
from django.http.response import HttpResponseBase


class CorsMiddleware(_CorsMiddleware):
    """django-cors-headers, answering a preflight 204 No Content (it answers 200)."""

    def check_preflight(self, request: HttpRequest) -> HttpResponseBase | None:
        response = super().check_preflight(request)
        if response is not None:
            response.status_code = 204
            # RFC 9110 §8.6: no Content-Length in a 204.
            del response["content-length"]
        return response


_policy = CorsMiddleware(get_response=lambda request: None)


def parsed_origin(origin: str | None) -> SplitResult | None:
    """`origin` split into its parts, or None when it is absent or not a URL (`http://[`)."""
    if not origin:
        return None
    try:
        return urlsplit(origin)
    except ValueError:
        return None


def allowed_origin(origin: str | None) -> bool:
    """Whether `origin` (an Origin header value) may call cross-origin (gets CORS headers)."""
    return parsed_origin(origin) is not None and (
        conf.CORS_ALLOW_ALL_ORIGINS or listed_origin(origin)
    )


def listed_origin(origin: str | None) -> bool:
    """Whether `origin` is named by CORS_ALLOWED_ORIGINS or matched by
    CORS_ALLOWED_ORIGIN_REGEXES: a choice of the operator's, origin by origin, unlike
    CORS_ALLOW_ALL_ORIGINS, which says nothing about any origin's being trusted."""
    url = parsed_origin(origin)
    return url is not None and _policy.origin_found_in_white_lists(origin, url)


def response_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """The CORS headers of an actual response to an allowed `origin`."""
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"vary", b"origin"),
    ]
    if conf.CORS_EXPOSE_HEADERS:
        headers.append(
            (b"access-control-expose-headers", ", ".join(conf.CORS_EXPOSE_HEADERS).encode())
        )
    return headers


def preflight_headers() -> list[tuple[bytes, bytes]]:
    """What a 204 answer to a preflight of /mcp adds to `response_headers` (the OAuth endpoints'
    preflights, django-cors-headers', name theirs). POST, the one method /mcp serves, and GET,
    which a browser-based client sends after initialize to open the server's stream (MCP
    Streamable HTTP): allowed by the preflight, it reaches the 405 that tells the client there
    is none, which clients take in their stride; refused there, it fails as a network error that
    they report."""
    return [
        (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
        (b"access-control-allow-headers", ", ".join(conf.CORS_ALLOW_HEADERS).encode()),
        (b"access-control-max-age", str(conf.CORS_PREFLIGHT_MAX_AGE).encode()),
    ]
