"""Revoking a user's OAuth credentials: one implementation for disconnecting one app
(accounts.connected_apps) and for erasing the account (accounts.erasure)."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    AbstractApplication,
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)


def revoke_oauth_credentials(
    *,
    user: AbstractBaseUser,
    application: AbstractApplication | None = None,
    at: datetime | None = None,
) -> dict[str, int]:
    """Revoke at once everything `user` holds for `application` (for every application when
    None): access tokens, authorization codes and ID tokens are deleted, refresh tokens marked
    revoked and kept (DOT's refresh-token reuse detection needs them). One transaction, so
    nothing is ever half revoked; the number of rows of each kind is returned. `at` is the
    revocation time (now by default; erasure passes its own, so its records agree).

    Lock order: the authorization codes first (see lock_codes), then the live refresh tokens (in
    primary-key order), then the access tokens.
    It is the order in which django-oauth-toolkit 3.4 takes them when it rotates a refresh token
    (`OAuth2Validator._save_bearer_token`: `select_for_update` of the refresh token, then of its
    access token) and in `RefreshToken.revoke()` and `revoke_family()`. A concurrent refresh
    therefore waits for this transaction instead of deadlocking with it, and then finds its
    refresh token revoked (`McpOAuth2Validator._save_bearer_token` reads it again under that
    lock, and answers invalid_grant)."""
    owned = {"user": user} if application is None else {"user": user, "application": application}
    with transaction.atomic():
        now = at or timezone.now()
        lock_codes(**owned)
        lock_refresh_tokens(**owned)
        live_refresh = get_refresh_token_model().objects.filter(**owned, revoked__isnull=True)
        # `updated` is auto_now, which a queryset update does not set.
        refresh_revoked = live_refresh.update(revoked=now, updated=now, access_token=None)
        access_deleted, _ = get_access_token_model().objects.filter(**owned).delete()
        grants_deleted, _ = get_grant_model().objects.filter(**owned).delete()
        id_tokens_deleted, _ = get_id_token_model().objects.filter(**owned).delete()
    return {
        "oauth_access_tokens": access_deleted,
        "oauth_refresh_tokens": refresh_revoked,
        "oauth_grants": grants_deleted,
        "oauth_id_tokens": id_tokens_deleted,
    }


def lock_codes(**owned) -> None:
    """Lock the authorization codes (grants) matching `owned`, in primary-key order. A code
    exchange holds its code's grant locked until the tokens it issues are committed: waiting for
    it here, before anything else is locked, lets a revocation's later statements (each with a
    fresh snapshot, at READ COMMITTED) see those tokens and revoke them, instead of missing them
    and then finding the code gone. A refresh never locks a grant, so its order is unchanged."""
    list(get_grant_model().objects.filter(**owned).order_by("pk").select_for_update().values("pk"))


def lock_refresh_tokens(**owned) -> None:
    """Lock the live refresh tokens matching `owned`, in primary-key order. A refresh holds its
    refresh token locked until the tokens it issues are committed (see revoke_oauth_credentials)
    and, like a code exchange, takes a key-share lock on the user row for their foreign keys
    only at that COMMIT: an erasure waits for it here, before it locks the user row."""
    live = get_refresh_token_model().objects.filter(**owned, revoked__isnull=True)
    list(live.order_by("pk").select_for_update().values_list("pk", flat=True))
