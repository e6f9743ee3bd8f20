"""Who may become an OAuth client: the metadata policy shared by Dynamic Client Registration
(RFC 7591) and Client ID Metadata Documents, and the per-IP registration rate.

MCP clients register anonymously, so the endpoint is open; what keeps it safe is that a client can
only ask for what an MCP client needs (authorization code + refresh, response type `code`) and can
only name redirect URIs that are `https`, or `http` on a loopback host (MCP "Communication
Security": redirect URIs MUST be localhost or HTTPS; RFC 8252 §7.3 and §8.3).
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher
from oauth2_provider.models import get_application_model

from accounts.rate_limit import FixedWindow

ALLOWED_GRANT_TYPES = {"authorization_code", "refresh_token"}
ALLOWED_RESPONSE_TYPES = {"code"}


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: Any) -> str | None:
    """Why `uri` may not be registered, or None if it may."""
    if not isinstance(uri, str):
        return "each redirect_uri must be a string"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return f"redirect_uri {uri!r} is not a valid URL"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and host and is_loopback_host(host):
        return None
    if parts.scheme == "http":
        return f"redirect_uri {uri!r}: http is allowed only for loopback hosts; use https"
    return f"redirect_uri {uri!r}: the scheme must be https (or http on a loopback host)"


def client_metadata_problem(metadata: dict[str, Any]) -> tuple[str, str] | None:
    """(RFC 7591 §3.2.2 error code, description) when the metadata asks for more than an MCP
    client may have, else None. DOT validates the shape and everything else."""
    redirect_uris = metadata.get("redirect_uris", [])
    if isinstance(redirect_uris, list):
        for uri in redirect_uris:
            problem = redirect_uri_problem(uri)
            if problem:
                return "invalid_redirect_uri", problem
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if isinstance(grant_types, list):
        refused = sorted({g for g in grant_types if isinstance(g, str)} - ALLOWED_GRANT_TYPES)
        if refused:
            return (
                "invalid_client_metadata",
                f"grant_types {refused} are not supported; only authorization_code and "
                "refresh_token are",
            )
    response_types = metadata.get("response_types", ["code"])
    if isinstance(response_types, list):
        refused = sorted({r for r in response_types if isinstance(r, str)} - ALLOWED_RESPONSE_TYPES)
        if refused:
            return (
                "invalid_client_metadata",
                f"response_types {refused} are not supported; only code is",
            )
    return None


def registration_window() -> FixedWindow:
    return FixedWindow(
        name="oauth-registration",
        limit=settings.OAUTH_REGISTRATION_RATE,
        window=settings.OAUTH_REGISTRATION_RATE_WINDOW,
    )


class PolicedMetadataFetcher(SafeMetadataFetcher):
    """DOT's SSRF-hardened CIMD fetcher (https only; every resolved address must be public and the
    connection goes to the checked address; no redirects; time and size caps), plus the same
    metadata policy as dynamic registration."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        metadata, max_age = super().fetch(client_id)
        problem = client_metadata_problem(metadata)
        if problem:
            raise CIMDError(problem[1])
        return metadata, max_age


def delete_stale_registered_clients(*, older_than: timedelta) -> int:
    """Delete dynamically registered clients older than `older_than` that nobody uses: no pending
    code, no access token of a user, no unrevoked refresh token. MCP clients such as Claude
    register anew on every fresh connection, so without this the table only grows. Returns the
    number of clients deleted (their registration tokens go with them)."""
    Application = get_application_model()
    cutoff = timezone.now() - older_than
    stale = (
        Application.objects.filter(
            registration_source=Application.RegistrationSource.DCR, created__lt=cutoff
        )
        .exclude(grant__isnull=False)
        .exclude(accesstoken__user__isnull=False)
        .exclude(refreshtoken__revoked__isnull=True, refreshtoken__isnull=False)
    )
    with transaction.atomic():
        ids = list(stale.select_for_update().values_list("pk", flat=True))
        Application.objects.filter(pk__in=ids).delete()
    return len(ids)
