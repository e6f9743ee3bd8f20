"""Revoking OAuth credentials (accounts/revocation.py), the one implementation behind
"disconnect this app" and account erasure: every kind of credential goes, nothing of another
app or user does, and the rows are locked in the order django-oauth-toolkit's refresh-token
rotation locks them."""

import threading
import typing

import pytest
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import (
    AbstractApplication,
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from accounts.connected_apps import revoke_app_access
from accounts.erasure import erase_account
from accounts.oauth_validators import McpOAuth2Validator
from accounts.revocation import revoke_oauth_credentials
from tests.accounts.oauth_helpers import REDIRECT_URI, exchange, get_code, pkce_pair, token_request
from tests.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    IDTokenFactory,
    RefreshTokenFactory,
)

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()
IDToken = get_id_token_model()


def credentials(user, application):
    """One of each kind: a refresh token with its access token, an access token carrying an ID
    token, an authorization code."""
    refresh = RefreshTokenFactory(user=user, application=application)
    id_token = IDTokenFactory(user=user, application=application)
    AccessTokenFactory(user=user, application=application, id_token=id_token)
    GrantFactory(user=user, application=application)
    return refresh


def assert_nothing_left(user, application=None):
    owned = {"user": user} if application is None else {"user": user, "application": application}
    assert not AccessToken.objects.filter(**owned).exists()
    assert not Grant.objects.filter(**owned).exists()
    assert not IDToken.objects.filter(**owned).exists()
    refresh_tokens = RefreshToken.objects.filter(**owned)
    assert refresh_tokens.exists()  # kept as tombstones for DOT's reuse detection
    assert all(t.revoked is not None and t.access_token is None for t in refresh_tokens)


CALLERS = {
    "disconnect the app": lambda user, application: revoke_app_access(
        user=user, application=application
    ),
    "erase the account": lambda user, application: erase_account(user=user).counts,
}


@pytest.mark.parametrize("caller", CALLERS.values(), ids=CALLERS.keys())
def test_both_callers_revoke_every_kind_of_credential(tenant, caller):
    application = ApplicationFactory()
    credentials(tenant, application)
    counts = caller(tenant, application)
    assert_nothing_left(tenant, application)
    assert {key: counts[key] for key in counts if key.startswith("oauth_")} == {
        "oauth_access_tokens": 2,
        "oauth_refresh_tokens": 1,
        "oauth_grants": 1,
        "oauth_id_tokens": 1,
    }


def test_one_application_leaves_the_users_other_apps_and_other_users_alone(tenant, other_tenant):
    application, other_application = ApplicationFactory(), ApplicationFactory()
    credentials(tenant, application)
    kept = credentials(tenant, other_application)
    theirs = credentials(other_tenant, application)
    revoke_oauth_credentials(user=tenant, application=application)
    assert_nothing_left(tenant, application)
    for refresh in (kept, theirs):
        refresh.refresh_from_db()
        assert refresh.revoked is None and refresh.access_token is not None
    assert IDToken.objects.filter(user=tenant, application=other_application).exists()
    assert Grant.objects.filter(user=other_tenant).exists()


def test_without_an_application_every_app_of_the_user_is_revoked(tenant):
    applications = [ApplicationFactory(), ApplicationFactory()]
    for application in applications:
        credentials(tenant, application)
    revoke_oauth_credentials(user=tenant)
    assert_nothing_left(tenant)


def test_refresh_tokens_are_locked_before_access_tokens(tenant):
    """DOT's rotation locks the refresh token, then its access token: revoking in the same
    order makes a concurrent refresh wait rather than deadlock."""
    credentials(tenant, ApplicationFactory())
    with CaptureQueriesContext(connection) as queries:
        revoke_oauth_credentials(user=tenant)
    statements = [query["sql"] for query in queries.captured_queries]
    refresh_table = RefreshToken._meta.db_table
    access_table = AccessToken._meta.db_table
    first_refresh_lock = next(
        i for i, sql in enumerate(statements) if refresh_table in sql and "FOR UPDATE" in sql
    )
    first_access_write = next(
        i
        for i, sql in enumerate(statements)
        if sql.startswith(("DELETE", "UPDATE")) and f'"{access_table}"' in sql.split("WHERE")[0]
    )
    assert first_refresh_lock < first_access_write


def test_revoking_twice_changes_nothing_the_second_time(tenant):
    application = ApplicationFactory()
    credentials(tenant, application)
    revoke_oauth_credentials(user=tenant, application=application)
    revoked_at = RefreshToken.objects.get(user=tenant).revoked
    assert revoke_oauth_credentials(user=tenant, application=application) == {
        "oauth_access_tokens": 0,
        "oauth_refresh_tokens": 0,
        "oauth_grants": 0,
        "oauth_id_tokens": 0,
    }
    assert RefreshToken.objects.get(user=tenant).revoked == revoked_at


@pytest.mark.django_db(transaction=True)
def test_a_refresh_validated_before_a_revocation_gets_no_tokens_after_it(tenant, monkeypatch):
    application = ApplicationFactory(redirect_uris=REDIRECT_URI)
    browser = Client()
    browser.force_login(tenant)
    verifier, challenge = pkce_pair()
    first = exchange(browser, application, get_code(browser, application, challenge), verifier)
    refresh_token = first.json()["refresh_token"]
    validated, revoked = threading.Event(), threading.Event()
    validate_refresh_token = McpOAuth2Validator.validate_refresh_token

    def validate_then_wait(self, *args, **kwargs):
        valid = validate_refresh_token(self, *args, **kwargs)
        validated.set()  # the refresh has checked its token...
        assert revoked.wait(10)  # ...and goes on only once the revocation has committed
        return valid

    monkeypatch.setattr(McpOAuth2Validator, "validate_refresh_token", validate_then_wait)
    answers = []

    def agent_refreshes():
        try:
            answers.append(
                token_request(
                    Client(),
                    application,
                    grant_type="refresh_token",
                    refresh_token=refresh_token,
                    resource=settings.MCP_RESOURCE_URL,
                )
            )
        finally:
            connection.close()

    agent = threading.Thread(target=agent_refreshes)
    agent.start()
    assert validated.wait(10)
    revoke_app_access(user=tenant, application=application)
    revoked.set()
    agent.join(30)
    [answer] = answers
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"
    assert answer["Cache-Control"] == "no-store"
    assert not AccessToken.objects.filter(user=tenant, application=application).exists()
    assert not RefreshToken.objects.filter(
        user=tenant, application=application, revoked__isnull=True
    ).exists()


def test_revocation_takes_a_user_and_an_application_or_none_for_every_one():
    hints = typing.get_type_hints(revoke_oauth_credentials)
    assert hints["user"] is AbstractBaseUser
    assert hints["application"] == AbstractApplication | None
