"""Connected apps: the OAuth clients that can currently reach my memories, and revoking one.

An app is *connected* when I hold, for it, an unexpired access token, an unrevoked refresh token
or an unexpired authorization code. DOT records no "last used" time, so the page shows the two
moments the tables do record:

- first authorized: the creation of the oldest credential in a still-live authorization. A
  refresh-token family (`token_family`, one per consent) keeps its first row as a revoked
  tombstone through every rotation, so the family's oldest row is the consent time; access tokens
  and codes outside any family count by their own creation time.
- last used: when the app last obtained an access token (by code exchange or refresh). With
  one-hour access tokens this is the app's activity to within an hour. None: the consent was
  given but the app never exchanged its code for a token (it failed, or gave up, midway).

A client that registers anew each time it connects (dynamic client registration) appears once
per registration, under one name: when each was connected, where it sends you back and whether
it was ever used tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Max, Min, Q
from django.utils import timezone
from oauth2_provider.models import (
    AbstractApplication,
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.scopes import get_scopes_backend

from accounts.revocation import revoke_oauth_credentials


@dataclass(frozen=True)
class ConnectedApp:
    application: AbstractApplication
    client_id: str
    client_id_is_metadata_url: bool
    redirect_hosts: list[str]
    scopes: list[str]  # plain-words descriptions
    first_authorized: datetime
    last_used: datetime | None

    @property
    def name(self) -> str:
        """What the app calls itself, else its client ID."""
        return self.application.name or self.client_id

    @property
    def never_used(self) -> bool:
        """Consent given, but no token ever obtained with it."""
        return self.last_used is None


def _live_credentials(user, now):
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    Grant = get_grant_model()
    return (
        AccessToken.objects.filter(user=user, expires__gt=now),
        RefreshToken.objects.filter(user=user, revoked__isnull=True),
        Grant.objects.filter(user=user, expires__gt=now),
    )


def list_connected_apps(*, user: AbstractBaseUser) -> list[ConnectedApp]:
    """Every app holding a live credential for `user`, most recently used first, then those never
    used, most recently connected first."""
    now = timezone.now()
    access, refresh, grants = _live_credentials(user, now)
    all_scopes = get_scopes_backend().get_all_scopes()
    with transaction.atomic():
        app_ids = (
            set(access.values_list("application_id", flat=True))
            | set(refresh.values_list("application_id", flat=True))
            | set(grants.values_list("application_id", flat=True))
        )
        app_ids.discard(None)
        applications = get_application_model().objects.filter(pk__in=app_ids).order_by("name")
        apps = [_describe(user, application, now, all_scopes) for application in applications]
    return sorted(
        apps,
        key=lambda app: (
            app.last_used is not None,
            app.last_used or now,
            app.first_authorized,
        ),
        reverse=True,
    )


def _describe(user, application, now, all_scopes: dict[str, str]) -> ConnectedApp:
    access, refresh, grants = (
        queryset.filter(application=application) for queryset in _live_credentials(user, now)
    )
    RefreshToken = get_refresh_token_model()
    live_families = refresh.exclude(token_family=None).values("token_family")
    first = [
        RefreshToken.objects.filter(user=user, token_family__in=live_families).aggregate(
            first=Min("created")
        )["first"],
        refresh.filter(token_family=None).aggregate(first=Min("created"))["first"],
        access.filter(Q(refresh_token__isnull=True)).aggregate(first=Min("created"))["first"],
        grants.aggregate(first=Min("created"))["first"],
    ]
    last_used = (
        get_access_token_model()
        .objects.filter(user=user, application=application)
        .aggregate(last=Max("created"))["last"]
    )
    granted: set[str] = set()
    for scope in access.values_list("scope", flat=True):
        granted.update(scope.split())
    for scope in refresh.exclude(access_token=None).values_list("access_token__scope", flat=True):
        granted.update(scope.split())
    for scope in grants.values_list("scope", flat=True):
        granted.update(scope.split())
    client_id = application.client_id
    return ConnectedApp(
        application=application,
        client_id=client_id,
        # Client ID Metadata Documents: the client_id is the HTTPS URL of the client's metadata.
        client_id_is_metadata_url=client_id.startswith("https://"),
        redirect_hosts=sorted(
            {urlsplit(uri).netloc for uri in application.redirect_uris.split() if uri}
        ),
        scopes=[all_scopes.get(name, name) for name in sorted(granted)],
        # Its registration when the credentials went meanwhile (revoked from another tab).
        first_authorized=min((moment for moment in first if moment), default=application.created),
        last_used=last_used,
    )


def revoke_app_access(
    *, user: AbstractBaseUser, application: AbstractApplication
) -> dict[str, int]:
    """Disconnect `application` from `user` at once (`revoke_oauth_credentials`), so the app is
    never half-connected."""
    return revoke_oauth_credentials(user=user, application=application)
