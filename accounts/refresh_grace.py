"""A short grace period for a rotated refresh token (RFC 9700 §4.14.2).

Two windows of one client that share a token store both refresh with the same refresh token,
moments apart; or a client retries a refresh whose response it never received. Rotation with
reuse detection would revoke the whole family on the second request and log the person out.
Within OAUTH_REFRESH_GRACE_SECONDS the second request gets the very response of the first
instead; after it, a reuse is a reuse and revokes the family, as DOT does.

DOT has such a grace period (REFRESH_TOKEN_GRACE_PERIOD_SECONDS), but it answers with the
previous tokens read from their table, where this server keeps only checksums
(COMPLIANT_BCP_RFC9700_TOKEN_STORAGE). So the first response is kept here instead, in the
Django cache, encrypted with a key derived from the old refresh token itself: only a holder of
that token can read it, which is exactly who may have it. It is given again only while the
tokens in it are still live (not revoked since, by a code replay, the person or an erasure).
Only a public client gets it: the replay authenticates no client, so a confidential client's
refresh always goes through DOT, which checks its secret (and revokes the family on a reuse).
Refreshes of one token are serialized (a PostgreSQL advisory lock held until the first one's
tokens are committed and kept), so a second request that arrives meanwhile waits for them
rather than racing them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpRequest
from oauth2_provider.models import get_application_model, get_refresh_token_model

from accounts.oauth_validators import basic_credentials


def _digest(purpose: bytes, refresh_token: str) -> bytes:
    return hashlib.sha256(b"threengram refresh grace " + purpose + refresh_token.encode()).digest()


def _cache_key(refresh_token: str) -> str:
    return "oauth-refresh-grace:" + _digest(b"key", refresh_token).hex()


def _cipher(refresh_token: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(_digest(b"cipher", refresh_token)))


@contextmanager
def one_at_a_time(refresh_token: str) -> Iterator[None]:
    """Serialize the refreshes of `refresh_token` until the block's transaction commits."""
    lock_id = int.from_bytes(_digest(b"lock", refresh_token)[:8], "big", signed=True)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_id])
        yield


def public_client_refreshing(request: HttpRequest) -> str | None:
    """The client_id of a public client's refresh, which the grace period may answer: named in
    the body or in HTTP Basic with an empty password (as accounts.oauth_validators reads it),
    the two agreeing, and no secret anywhere. None for any other request. A replay is given
    without authenticating the client, so a confidential client's refresh, with its secret in a
    header, in the body or left out, always goes to DOT."""
    if (
        request.POST.get("grant_type") != "refresh_token"
        or not request.POST.get("refresh_token")
        or request.POST.get("client_secret")
    ):
        return None
    client_id = request.POST.get("client_id")
    if "authorization" in request.headers:
        credentials = basic_credentials(request.headers["authorization"])
        if credentials is None or credentials[1] or client_id not in (None, "", credentials[0]):
            return None
        client_id = credentials[0]
    return client_id if client_id and is_public_client(client_id) else None


def is_public_client(client_id: str) -> bool:
    """Whether `client_id` names a stored public client: one that never authenticates, so a
    replay to it skips nothing. Any other client's refresh goes through DOT's authentication."""
    Application = get_application_model()
    return Application.objects.filter(
        client_id=client_id, client_type=Application.CLIENT_PUBLIC
    ).exists()


def remember(refresh_token: str, client_id: str, asked: list, body: bytes) -> None:
    """Keep the successful response `body` of refreshing `refresh_token` for the grace period,
    with what the request `asked` (its scope and resources)."""
    seconds = settings.OAUTH_REFRESH_GRACE_SECONDS
    if seconds <= 0:
        return
    payload = json.dumps({"client_id": client_id, "asked": asked, "body": body.decode()}).encode()
    cache.set(_cache_key(refresh_token), _cipher(refresh_token).encrypt(payload), seconds)


def replay(refresh_token: str, client_id: str, asked: list) -> bytes | None:
    """The response of the first refresh of `refresh_token` by the same client asking the same
    (scope, resources), if it was given within the grace period. A request asking anything else
    is no retry: it goes through every check, as it would after the grace period."""
    if settings.OAUTH_REFRESH_GRACE_SECONDS <= 0:
        return None
    kept = cache.get(_cache_key(refresh_token))
    if kept is None:
        return None
    try:
        payload = json.loads(
            _cipher(refresh_token).decrypt(kept, ttl=settings.OAUTH_REFRESH_GRACE_SECONDS)
        )
    except (InvalidToken, ValueError):
        return None
    if (payload["client_id"], payload.get("asked")) != (client_id, asked) or not _still_live(
        json.loads(payload["body"])
    ):
        return None
    return payload["body"].encode()


def _still_live(tokens: dict) -> bool:
    """Whether the tokens handed out then are still good: revoked since (a replayed code, the
    person's revocation, an erasure), or their user deactivated since, they must not come back
    by way of the grace period."""
    refresh_token = tokens.get("refresh_token")
    if not refresh_token:
        return False
    checksum = hashlib.sha256(refresh_token.encode()).hexdigest()
    return (
        get_refresh_token_model()
        .objects.filter(
            token_checksum=checksum,
            revoked__isnull=True,
            access_token__isnull=False,
            user__is_active=True,
        )
        .exists()
    )
