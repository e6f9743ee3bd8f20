"""Connected apps: what is listed, and Revoke disconnecting one app for me only, at once."""

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from accounts.connected_apps import list_connected_apps, revoke_app_access
from tests.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    RefreshTokenFactory,
)

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()


@pytest.fixture
def app(db):
    return ApplicationFactory(
        name="Claude Desktop", redirect_uris="http://127.0.0.1:33418/callback https://claude.ai/cb"
    )


def test_lists_each_connected_app_with_its_details_in_plain_words(client, tenant, app):
    RefreshTokenFactory(user=tenant, application=app, access_token__scope="memory:read")
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text
    assert "Claude Desktop" in page
    assert app.client_id in page
    assert "127.0.0.1:33418, claude.ai" in page
    assert "Read your memories" in page
    assert "Write, revise" not in page  # a scope it was not granted
    assert "connected <time" in page and "last got a token <time" in page
    assert "Last used" not in page and "never used" not in page


@pytest.mark.parametrize("connected", [False, True])
def test_the_page_names_the_address_an_app_connects_to(client, tenant, app, settings, connected):
    """With no app yet, or with one and a second to add: the address to give it is here."""
    settings.MCP_RESOURCE_URL = "https://memory.example.com/mcp"
    if connected:
        RefreshTokenFactory(user=tenant, application=app)
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text
    assert "give it this address: <code>https://memory.example.com/mcp</code>" in page
    assert ("Claude Desktop" in page) == connected


def test_the_page_says_how_to_leave_an_app_reading_only(client, tenant, app):
    """A person wanting an app to stop writing found Revoke alone, and no word of how to keep
    it reading."""
    RefreshTokenFactory(
        user=tenant, application=app, access_token__scope="memory:read memory:write"
    )
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text
    assert "to let one only read, revoke it, and when it asks again choose “Read only”" in page


def test_a_client_id_metadata_document_url_is_labelled_as_such(client, tenant):
    cimd = ApplicationFactory(client_id="https://agent.example/oauth/client.json")
    AccessTokenFactory(user=tenant, application=cimd)
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text
    assert "Metadata URL" in page and "https://agent.example/oauth/client.json" in page


def test_only_apps_with_a_live_credential_are_listed(tenant):
    expired_only = ApplicationFactory(name="stale")
    AccessTokenFactory(
        user=tenant, application=expired_only, expires=timezone.now() - timezone.timedelta(hours=1)
    )
    refreshable = ApplicationFactory(name="refreshable")
    RefreshTokenFactory(
        user=tenant,
        application=refreshable,
        access_token__expires=timezone.now() - timezone.timedelta(hours=1),
    )
    mid_consent = ApplicationFactory(name="mid-consent")
    GrantFactory(user=tenant, application=mid_consent)
    listed = {connected.application.name for connected in list_connected_apps(user=tenant)}
    assert listed == {"refreshable", "mid-consent"}


def _at(moment, *credentials) -> None:
    """Each credential created at `moment`."""
    for credential in credentials:
        type(credential).objects.filter(pk=credential.pk).update(created=moment)


def test_one_client_registered_several_times_shows_cards_told_apart(client, tenant):
    """Claude Code registers anew each time it connects: identical cards named alike, one of them
    a consent whose code was never exchanged, left no way to tell which was live."""
    now = timezone.now()
    live = ApplicationFactory(
        name="Claude Code (test)", redirect_uris="http://localhost:53122/callback"
    )
    abandoned = ApplicationFactory(
        name="Claude Code (test)", redirect_uris="http://localhost:61007/callback"
    )
    consent = RefreshTokenFactory(user=tenant, application=live, access_token__scope="memory:read")
    _at(now - timezone.timedelta(days=3), consent)
    _at(now - timezone.timedelta(minutes=5), consent.access_token)
    GrantFactory(user=tenant, application=abandoned, scope="memory:read memory:write")
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text

    cards = page.split('<li class="card">')[1:]
    assert len(cards) == 2
    used, unused = cards  # the one in use first
    when = (now - timezone.timedelta(days=3)).strftime("%-d %b %Y, %H:%M")
    assert "connected <time datetime=" in used and f">{when} UTC</time>" in used
    assert "last got a token <time" in used and "localhost:53122" in used
    assert "consent given, never used" in unused and "last got a token" not in unused
    assert "localhost:61007" in unused
    revoke_labels = re.findall(r'aria-label="(Revoke [^"]*)"', page)
    assert len(set(revoke_labels)) == 2
    assert revoke_labels[0] == f"Revoke Claude Code (test), connected {when} UTC…"
    assert "appears once per connection, under the same name" in page


def test_apps_are_listed_most_recently_used_first_then_the_never_used(tenant):
    now = timezone.now()
    ages = {"week": 7 * 24, "hour": 1, "day": 24}
    for name, hours in ages.items():
        token = AccessTokenFactory(user=tenant, application=ApplicationFactory(name=name))
        _at(now - timezone.timedelta(hours=hours), token)
    for name, minutes in (("first consent", 2), ("second consent", 0)):
        grant = GrantFactory(user=tenant, application=ApplicationFactory(name=name))
        _at(now - timezone.timedelta(minutes=minutes), grant)
    listed = [app.name for app in list_connected_apps(user=tenant)]
    assert listed == ["hour", "day", "week", "second consent", "first consent"]
    assert [app.never_used for app in list_connected_apps(user=tenant)] == [False] * 3 + [True] * 2


def test_first_authorized_survives_refresh_token_rotation(tenant, app):
    family = "6f1c3f3e-2f7e-4f55-9c41-3c9a3f0b7a11"
    consent = RefreshTokenFactory(user=tenant, application=app, token_family=family)
    RefreshToken.objects.filter(pk=consent.pk).update(
        revoked=timezone.now(), created=timezone.now() - timezone.timedelta(days=9)
    )
    rotated = RefreshTokenFactory(user=tenant, application=app, token_family=family)
    (connected,) = list_connected_apps(user=tenant)
    consent.refresh_from_db()
    assert connected.first_authorized == consent.created
    assert connected.last_used == rotated.access_token.created


def test_never_lists_another_tenants_apps(client, tenant, other_tenant):
    theirs = ApplicationFactory(name="Their secret agent")
    AccessTokenFactory(user=other_tenant, application=theirs)
    client.force_login(tenant)
    page = client.get(reverse("accounts:connected_apps")).text
    assert "Their secret agent" not in page and theirs.client_id not in page
    assert "No app is connected" in page


def test_revoke_disconnects_the_app_for_me_only(client, tenant, other_tenant, app):
    mine = RefreshTokenFactory(user=tenant, application=app)
    my_second_token = AccessTokenFactory(user=tenant, application=app)
    GrantFactory(user=tenant, application=app)
    theirs = RefreshTokenFactory(user=other_tenant, application=app)
    other_app_token = AccessTokenFactory(user=tenant)
    client.force_login(tenant)

    response = client.post(reverse("accounts:revoke_app", args=[app.pk]))

    assert response.status_code == 302
    assert not AccessToken.objects.filter(user=tenant, application=app).exists()
    assert not get_grant_model().objects.filter(user=tenant, application=app).exists()
    mine.refresh_from_db()
    assert mine.revoked is not None and mine.access_token is None
    # DOT itself now refuses the revoked refresh token (no grace: its access token is gone).
    assert not OAuth2Validator().validate_refresh_token(mine.token, app, None, None)
    assert not AccessToken.objects.filter(pk=my_second_token.pk).exists()
    # Untouched: the same app for someone else, and my other apps.
    theirs.refresh_from_db()
    assert theirs.revoked is None and AccessToken.objects.filter(pk=theirs.access_token_id).exists()
    assert AccessToken.objects.filter(pk=other_app_token.pk).exists()
    page = client.get(reverse("accounts:connected_apps")).text
    assert "Claude Desktop is disconnected" in page
    assert "Revoke Claude Desktop" not in page


def test_revoke_needs_post_and_a_csrf_token(tenant, app):
    AccessTokenFactory(user=tenant, application=app)
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant)
    url = reverse("accounts:revoke_app", args=[app.pk])
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403
    assert AccessToken.objects.filter(user=tenant, application=app).exists()


def test_revoking_an_app_already_revoked_says_so_rather_than_not_found(client, tenant, app):
    """A second click on Revoke, or a Connected apps page left open in another tab."""
    AccessTokenFactory(user=tenant, application=app)
    client.force_login(tenant)
    url = reverse("accounts:revoke_app", args=[app.pk])
    client.post(url)
    response = client.post(url, follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [(reverse("accounts:connected_apps"), 302)]
    assert "That app is not connected to your account: nothing to revoke." in response.text


def test_revoking_an_app_that_is_not_mine_changes_nothing_and_tells_nothing(
    client, tenant, other_tenant, app
):
    theirs = AccessTokenFactory(user=other_tenant, application=app)
    client.force_login(tenant)
    answers = [
        client.post(reverse("accounts:revoke_app", args=[pk]), follow=True)
        for pk in (app.pk, 999999)
    ]
    assert [answer.redirect_chain for answer in answers] == [
        [(reverse("accounts:connected_apps"), 302)]
    ] * 2
    unmasked = [re.sub(r'name="csrfmiddlewaretoken" value="\w+"', "", a.text) for a in answers]
    assert unmasked[0] == unmasked[1]
    assert "nothing to revoke" in answers[0].text and "Claude Desktop" not in answers[0].text
    assert AccessToken.objects.filter(pk=theirs.pk).exists()


def test_revoke_service_reports_counts_and_is_idempotent(tenant, app):
    RefreshTokenFactory(user=tenant, application=app)
    AccessTokenFactory(user=tenant, application=app)
    first = revoke_app_access(user=tenant, application=app)
    assert first["oauth_access_tokens"] == 2 and first["oauth_refresh_tokens"] == 1
    again = revoke_app_access(user=tenant, application=app)
    assert again == {
        "oauth_access_tokens": 0,
        "oauth_refresh_tokens": 0,
        "oauth_grants": 0,
        "oauth_id_tokens": 0,
    }


def test_revoke_is_all_or_nothing(tenant, app, monkeypatch):
    refresh = RefreshTokenFactory(user=tenant, application=app)
    GrantFactory(user=tenant, application=app)
    Grant = get_grant_model()

    def fail(self, *args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(type(Grant.objects.all()), "delete", fail)
    with pytest.raises(RuntimeError):
        revoke_app_access(user=tenant, application=app)
    refresh.refresh_from_db()
    assert refresh.revoked is None
    assert AccessToken.objects.filter(pk=refresh.access_token_id).exists()
