"""System checks for the OAuth configuration that MCP clients depend on."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security)
def check_issuer_matches_public_origin(app_configs=None, **kwargs) -> list[Error]:
    """MCP clients compare the RFC 8414 `issuer` with the protected resource metadata's
    `authorization_servers` entry (PUBLIC_BASE_URL) as plain strings (RFC 8414 §3.3)."""
    issuer = settings.OAUTH2_PROVIDER.get("OIDC_ISS_ENDPOINT")
    if issuer != settings.PUBLIC_BASE_URL:
        return [
            Error(
                f"OAUTH2_PROVIDER['OIDC_ISS_ENDPOINT'] is {issuer!r}, not PUBLIC_BASE_URL "
                f"({settings.PUBLIC_BASE_URL!r}); MCP clients would refuse the metadata.",
                id="accounts.E101",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_issuer_is_https(app_configs=None, **kwargs) -> list[Error]:
    """MCP Authorization, "Communication Security": all authorization server endpoints MUST be
    served over HTTPS."""
    if urlsplit(settings.PUBLIC_BASE_URL).scheme != "https":
        return [
            Error(
                f"PUBLIC_BASE_URL ({settings.PUBLIC_BASE_URL!r}) must be https in production: "
                "it is the OAuth issuer and the base of every OAuth endpoint.",
                id="accounts.E102",
            )
        ]
    return []
