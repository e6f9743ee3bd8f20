"""System checks of the deployment configuration (`manage.py check --deploy`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.http.request import split_domain_port, validate_host


@register(Tags.security, deploy=True)
def check_database_is_configured(app_configs=None, **kwargs) -> list[Error]:
    """The embedded PostgreSQL (DATABASE_URL unset, DEBUG on) keeps its data in the checkout's
    .pgdata/ and stops with the last process using it: no deployment may run on it."""
    if getattr(settings, "EMBEDDED_DATABASE", False):
        return [
            Error(
                "DATABASE_URL is unset: this process runs on the embedded development "
                "PostgreSQL (.pgdata/ of the checkout).",
                hint="Set DATABASE_URL to the production database (see .env.example).",
                id="threengram.E001",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_cors_does_not_allow_every_origin(app_configs=None, **kwargs) -> list[Error]:
    """CORS_ALLOW_ALL_ORIGINS would let any web page read the answers of the OAuth endpoints a
    browser-based MCP client calls; such clients' origins are to be named one by one."""
    if getattr(settings, "CORS_ALLOW_ALL_ORIGINS", False) or getattr(
        settings, "CORS_ORIGIN_ALLOW_ALL", False
    ):
        return [
            Error(
                "CORS_ALLOW_ALL_ORIGINS is on: every web page may call the OAuth endpoints "
                "and /mcp cross-origin.",
                hint="Turn it off and name the browser-based clients' origins in "
                "CORS_ALLOWED_ORIGINS or CORS_ALLOWED_ORIGIN_REGEXES (see .env.example).",
                id="threengram.E002",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_public_host_is_allowed(app_configs=None, **kwargs) -> list[Error]:
    """PUBLIC_BASE_URL is the address clients use; a host ALLOWED_HOSTS does not name gets 400
    on every page and 421 on /mcp, so nothing works, yet each setting looks right alone."""
    # As Django reads the Host header of a request to it: an IPv6 literal keeps its brackets
    # (ALLOWED_HOSTS names it so), a trailing dot goes.
    authority = urlsplit(settings.PUBLIC_BASE_URL).netloc.rpartition("@")[2]
    host, _port = split_domain_port(authority)
    if validate_host(host, settings.ALLOWED_HOSTS):
        return []
    return [
        Error(
            f"PUBLIC_BASE_URL's host {host!r} is not in ALLOWED_HOSTS: every request to it "
            "would be refused.",
            hint="Add it to ALLOWED_HOSTS (see .env.example).",
            id="threengram.E003",
        )
    ]
