"""Staff pages: OAuth credentials never rendered, the staff erasure action, no erased text."""

import re

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings

from accounts import erasure
from accounts.models import ErasureRecord
from memories.models import ERASED, Memory
from tests.accounts.conftest import a_memory_held_elsewhere
from tests.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    IDTokenFactory,
    MemoryFactory,
    RefreshTokenFactory,
    UserFactory,
)


@pytest.fixture
def superuser(db):
    return UserFactory(is_staff=True, is_superuser=True)


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def test_no_admin_page_renders_a_token_its_checksum_a_code_or_a_client_secret(admin_client, tenant):
    application = ApplicationFactory(client_type="confidential", client_secret="s3cret-" + "z" * 30)
    refresh = RefreshTokenFactory(user=tenant, application=application)
    access = refresh.access_token
    grant = GrantFactory(user=tenant, application=application)
    application.refresh_from_db()
    access.refresh_from_db()
    refresh.refresh_from_db()
    secrets = {
        access.token,
        access.token_checksum,
        refresh.token,
        refresh.token_checksum,
        grant.code,
        application.client_secret,  # the stored hash
        "s3cret-" + "z" * 30,
    }
    pages = []
    for model, obj in (
        ("application", application),
        ("accesstoken", access),
        ("refreshtoken", refresh),
        ("grant", grant),
    ):
        pages.append(admin_client.get(reverse(f"admin:oauth2_provider_{model}_changelist")))
        pages.append(
            admin_client.get(reverse(f"admin:oauth2_provider_{model}_change", args=[obj.pk]))
        )
    for response in pages:
        assert response.status_code == 200
        for secret in secrets:
            assert secret not in response.text
    # The masked form still lets staff tell rows apart.
    assert "…" + access.token[-4:] in pages[2].text


def test_staff_erase_an_account_after_a_confirmation_page(admin_client, superuser, tenant):
    MemoryFactory(owner=tenant, content="tenant text", topic="tenant topic")
    token = AccessTokenFactory(user=tenant)
    url = reverse("admin:accounts_user_changelist")
    selection = {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk]}

    confirm_page = admin_client.post(url, selection)
    assert confirm_page.status_code == 200
    assert "Erase accounts: are you sure?" in confirm_page.text
    assert tenant.username in confirm_page.text and "There is no undo" in confirm_page.text
    tenant.refresh_from_db()
    assert tenant.erased_at is None  # nothing happens before confirming

    done = admin_client.post(url, {**selection, "confirm": "yes"})
    assert done.status_code == 302
    record = ErasureRecord.objects.get(account=tenant)
    assert record.requested_by == "staff" and record.staff_member == superuser
    assert not get_access_token_model().objects.filter(pk=token.pk).exists()
    assert set(Memory.objects.filter(owner=tenant).values_list("content", flat=True)) == {ERASED}

    bystander = UserFactory(username="bystander-tenant")
    records = admin_client.get(reverse("admin:accounts_erasurerecord_changelist")).text
    assert superuser.username in records  # the requester, in the row and the filter
    assert bystander.username not in records  # the staff filter does not list every account


def test_a_batch_is_erased_in_key_order_whatever_order_the_list_shows(admin_client, monkeypatch):
    """Overlapping batches of two staff members lock their accounts in the same order."""
    erased_in_order = []
    real = erasure.erase_account

    def recording(*, user, requested_by_staff):
        erased_in_order.append(user.pk)
        return real(user=user, requested_by_staff=requested_by_staff)

    monkeypatch.setattr(erasure, "erase_account", recording)
    url = reverse("admin:accounts_user_changelist")
    for order in ("1", "-1"):  # by username, up and down
        names = [f"{name}-{order}" for name in ("carol", "bob", "alice")]
        selection = [UserFactory(username=name).pk for name in names]
        erased_in_order.clear()
        admin_client.post(
            f"{url}?o={order}",
            {"action": "erase_accounts", ACTION_CHECKBOX_NAME: selection, "confirm": "yes"},
        )
        assert erased_in_order == sorted(selection)


def test_an_account_in_use_is_left_out_of_a_batch_saying_so(
    transactional_db, admin_client, tenant, other_tenant
):
    MemoryFactory(owner=tenant)
    with a_memory_held_elsewhere(tenant):
        response = admin_client.post(
            reverse("admin:accounts_user_changelist"),
            {
                "action": "erase_accounts",
                ACTION_CHECKBOX_NAME: [tenant.pk, other_tenant.pk],
                "confirm": "yes",
            },
            follow=True,
        )
    assert response.status_code == 200
    assert "Erased 1 account(s)" in response.text
    assert f"Not erased, their data was in use: {tenant.username}." in response.text
    tenant.refresh_from_db()
    other_tenant.refresh_from_db()
    assert tenant.erased_at is None and other_tenant.erased_at is not None
    assert list(ErasureRecord.objects.values_list("account_id", flat=True)) == [other_tenant.pk]


def test_staff_cannot_erase_their_own_account_from_the_action(admin_client, superuser):
    url = reverse("admin:accounts_user_changelist")
    response = admin_client.post(
        url,
        {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [superuser.pk], "confirm": "yes"},
        follow=True,
    )
    assert "You cannot erase your own account" in response.text
    superuser.refresh_from_db()
    assert superuser.erased_at is None


def test_erasing_accounts_erased_already_says_there_is_nothing_to_do(admin_client, tenant):
    url = reverse("admin:accounts_user_changelist")
    selection = {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk], "confirm": "yes"}
    admin_client.post(url, selection)
    for confirmed in ({}, {"confirm": "yes"}):
        response = admin_client.post(url, {**selection, **confirmed}, follow=True)
        assert "Nothing to erase: the selected accounts are erased already." in response.text
    assert ErasureRecord.objects.filter(account=tenant).count() == 1


def test_admin_lists_show_no_erased_text(admin_client, tenant):
    MemoryFactory(owner=tenant, topic="diagnosis", content="private", tags=["health"])
    email = tenant.email
    username = tenant.username
    admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk], "confirm": "yes"},
    )
    for url in (
        reverse("admin:accounts_user_changelist"),
        reverse("admin:accounts_user_change", args=[tenant.pk]),
        reverse("admin:memories_memory_changelist"),
        reverse("admin:accounts_erasurerecord_changelist"),
    ):
        page = admin_client.get(url).text
        assert f">{username}<" not in page, url
        for erased in (email, "diagnosis", "health", "private"):
            assert erased not in page, (url, erased)


def test_erasure_records_read_in_utc_with_their_counts_in_words(admin_client, tenant):
    """Staff compare an erasure's instant with logs, all in UTC: the page says so; and the
    rows rewritten per table read as words, not as a JSON object."""
    MemoryFactory(owner=tenant)
    admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk], "confirm": "yes"},
    )
    record = ErasureRecord.objects.get(account=tenant)
    shown = f"{record.erased_at:%Y-%m-%d %H:%M:%S} UTC"
    listed = admin_client.get(reverse("admin:accounts_erasurerecord_changelist")).text
    detail = admin_client.get(reverse("admin:accounts_erasurerecord_change", args=[record.pk])).text
    for page in (listed, detail):
        assert shown in page and "memories 1" in page and "{&quot;" not in page
        # The site's icon: no request for /favicon.ico, a 404 logged on every visit.
        assert 'rel="icon" href="/static/favicon' in page


def test_a_batch_meeting_a_database_failure_answers_it_rather_than_calling_accounts_busy(
    admin_client, tenant, monkeypatch
):
    """Only a held row is "in use"; a lost connection is the retryable 503 of every page."""

    def connection_lost(*, user, requested_by_staff):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(erasure, "erase_account", connection_lost)
    admin_client.raise_request_exception = False
    response = admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk], "confirm": "yes"},
    )
    assert response.status_code == 503
    assert "in use" not in response.text


def _token_rows(page: str) -> list[str]:
    """The access tokens list's rows, as text."""
    rows = re.findall(r'<tr>\s*<td class="action-checkbox">.*?</tr>', page, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


def test_the_access_tokens_list_says_which_are_registration_tokens(admin_client, tenant):
    """After an erasure the list still holds each registered app's registration access token
    (RFC 7592, no user): each row says its kind, so none reads as a person's surviving token."""
    registered = Client().post(  # as an MCP client registers: anonymously
        "/oauth/register/",
        {
            "client_name": "Claude",
            "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
            "token_endpoint_auth_method": "none",
        },
        content_type="application/json",
    )
    assert registered.status_code == 201, registered.content
    application = ApplicationFactory._meta.model.objects.get(
        client_id=registered.json()["client_id"]
    )
    AccessTokenFactory(user=tenant, application=application)
    kept = AccessTokenFactory(application=application)  # another person's
    url = reverse("admin:oauth2_provider_accesstoken_changelist")
    admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "erase_accounts", ACTION_CHECKBOX_NAME: [tenant.pk], "confirm": "yes"},
    )

    rows = _token_rows(admin_client.get(url).text)
    registration = [row for row in rows if kept.user.username not in row]
    person = [row for row in rows if kept.user.username in row]
    assert len(registration) == 1 and "registration (client management)" in registration[0]
    assert len(person) == 1 and f"user {kept.user.username}" in person[0]
    registration_only = _token_rows(admin_client.get(url, {"kind": "registration"}).text)
    assert (
        len(registration_only) == 1 and "registration (client management)" in registration_only[0]
    )
    people_only = _token_rows(admin_client.get(url, {"kind": "user"}).text)
    assert len(people_only) == 1 and kept.user.username in people_only[0]
    token = get_access_token_model().objects.get(user=None)
    change_page = admin_client.get(
        reverse("admin:oauth2_provider_accesstoken_change", args=[token.pk])
    )
    assert "registration (client management)" in change_page.text


def test_the_access_tokens_kind_filter_refuses_a_kind_it_does_not_know(admin_client, tenant):
    AccessTokenFactory(user=tenant)
    url = reverse("admin:oauth2_provider_accesstoken_changelist")
    refused = admin_client.get(url, {"kind": "registrations"})
    assert refused.status_code == 400
    assert "kind is “registration” or “user”, not “registrations”" in refused.text


# --- OAuth objects are shown, never edited -------------------------------------------------------


def _form_inputs(page: str) -> set[str]:
    """The names of a page's form fields (the log-out button's CSRF token aside)."""
    return set(re.findall(r'<(?:input|select|textarea)[^>]*\bname="([^"]+)"', page)) - {
        "csrfmiddlewaretoken"
    }


def test_staff_cannot_hand_an_access_token_to_another_account(admin_client, tenant, other_tenant):
    """Moving a token to another account would let its bearer read that account's memories
    through /mcp: the token's page shows it, offering nothing to change."""
    token = AccessTokenFactory(user=tenant, scope="memory:read")
    url = reverse("admin:oauth2_provider_accesstoken_change", args=[token.pk])
    shown = admin_client.get(url)
    assert shown.status_code == 200 and tenant.username in shown.text
    assert not {"user", "application", "scope", "expires_0", "resource"} & _form_inputs(shown.text)
    later = token.expires + timezone.timedelta(days=365)
    edited = admin_client.post(
        url,
        {"user": other_tenant.pk, "application": ApplicationFactory().pk,
         "scope": "memory:read memory:write", "resource": '["https://elsewhere.example/mcp"]',
         "expires_0": later.strftime("%Y-%m-%d"), "expires_1": later.strftime("%H:%M:%S"),
         "token": "chosen-by-staff-" + "x" * 30},
    )  # fmt: skip
    assert edited.status_code == 403
    unchanged = get_access_token_model().objects.get(pk=token.pk)
    assert (unchanged.user, unchanged.application, unchanged.scope, unchanged.expires) == (
        tenant, token.application, "memory:read", token.expires
    )  # fmt: skip
    assert admin_client.get(reverse("admin:oauth2_provider_accesstoken_add")).status_code == 403


def test_staff_cannot_revive_a_revoked_refresh_token(admin_client, tenant):
    refresh = RefreshTokenFactory(user=tenant)
    revoked_at = timezone.now() - timezone.timedelta(hours=1)
    RefreshToken = get_refresh_token_model()
    RefreshToken.objects.filter(pk=refresh.pk).update(revoked=revoked_at, access_token=None)
    url = reverse("admin:oauth2_provider_refreshtoken_change", args=[refresh.pk])
    assert "revoked_0" not in _form_inputs(admin_client.get(url).text)
    edited = admin_client.post(
        url,
        {"user": tenant.pk, "application": refresh.application.pk, "resource": "[]",
         "revoked_0": "", "revoked_1": ""},
    )  # fmt: skip
    assert edited.status_code == 403
    assert RefreshToken.objects.get(pk=refresh.pk).revoked == revoked_at


def test_staff_cannot_reroute_an_application_or_add_one(admin_client, tenant):
    """A client's id, redirect URIs and consent are what stand between its codes and another
    site: none changes from the admin (clients register themselves)."""
    application = ApplicationFactory()
    url = reverse("admin:oauth2_provider_application_change", args=[application.pk])
    assert not {"client_id", "redirect_uris", "skip_authorization", "user"} & _form_inputs(
        admin_client.get(url).text
    )
    edited = admin_client.post(
        url,
        {"client_id": "chosen-by-staff", "redirect_uris": "https://attacker.example/cb",
         "client_type": "public", "authorization_grant_type": "authorization-code",
         "skip_authorization": "on", "user": tenant.pk, "name": "renamed",
         "algorithm": "", "post_logout_redirect_uris": "", "allowed_origins": ""},
    )  # fmt: skip
    assert edited.status_code == 403
    unchanged = type(application).objects.get(pk=application.pk)
    assert (unchanged.client_id, unchanged.redirect_uris, unchanged.skip_authorization) == (
        application.client_id, application.redirect_uris, False
    )  # fmt: skip
    assert unchanged.user is None and unchanged.name == application.name
    assert admin_client.get(reverse("admin:oauth2_provider_application_add")).status_code == 403


@pytest.mark.parametrize("model", ["grant", "idtoken"])
def test_codes_and_id_tokens_are_shown_never_edited_or_deleted(admin_client, tenant, model):
    made = {"grant": GrantFactory, "idtoken": IDTokenFactory}[model](user=tenant)
    change = reverse(f"admin:oauth2_provider_{model}_change", args=[made.pk])
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"user": UserFactory().pk}).status_code == 403
    delete = reverse(f"admin:oauth2_provider_{model}_delete", args=[made.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert type(made).objects.get(pk=made.pk).user == tenant


@pytest.mark.parametrize("model", ["accesstoken", "refreshtoken"])
def test_staff_end_an_apps_access_as_its_account_holder_would(admin_client, tenant, model):
    """The token lists' one action revokes what the account holder's own "revoke" does: every
    credential the person holds for that app, none of another app or person."""
    refresh = RefreshTokenFactory(user=tenant)
    application = refresh.application
    grant = GrantFactory(user=tenant, application=application)
    elsewhere = AccessTokenFactory(user=tenant)  # another app
    someone_elses = AccessTokenFactory(application=application)
    selected = refresh if model == "refreshtoken" else refresh.access_token
    listing = reverse(f"admin:oauth2_provider_{model}_changelist")
    assert "delete_selected" not in admin_client.get(listing).text
    response = admin_client.post(
        listing,
        {"action": "revoke_app_access", ACTION_CHECKBOX_NAME: [selected.pk]},
        follow=True,
    )
    assert "Revoked 1 app connection(s)" in response.text
    AccessToken = get_access_token_model()
    assert not AccessToken.objects.filter(user=tenant, application=application).exists()
    assert get_refresh_token_model().objects.get(pk=refresh.pk).revoked is not None
    assert not type(grant).objects.filter(pk=grant.pk).exists()
    assert AccessToken.objects.filter(pk__in=[elsewhere.pk, someone_elses.pk]).count() == 2


def test_revoking_app_access_leaves_a_registration_token_saying_so(admin_client):
    registration = AccessTokenFactory(user=None, scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    response = admin_client.post(
        reverse("admin:oauth2_provider_accesstoken_changelist"),
        {"action": "revoke_app_access", ACTION_CHECKBOX_NAME: [registration.pk]},
        follow=True,
    )
    assert "1 token(s) left as they are: they belong to an app, not a person" in response.text
    assert get_access_token_model().objects.filter(pk=registration.pk).exists()
